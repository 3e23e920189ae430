"""Drain/resume decisions (pure), the Prolog entry point's fail-open behaviour, the watchdog,
the metrics file, and the stdlib-only import rule for the Prolog path."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
from datetime import datetime
from pathlib import Path

from aegis_slurm.node import probes, prolog, slurm
from aegis_slurm.node.verdict import Verdict

from ._fixtures import H100_Q, drop_gpu

NOW = datetime(2026, 11, 21, 18, 30, 0)
LINE = (
    "NodeName={n} Arch=x86_64 CoresPerSocket=8 CPUAlloc=0 CPUTot=8 CPULoad=0.12 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8 NodeAddr=127.0.0.1 "
    "NodeHostName=localhost Port=17001 Version=22.05.8 OS=Linux 6.1.0 RealMemory=2048 "
    "AllocMem=0 FreeMem=N/A Sockets=1 Boards=1 State={s} ThreadsPerCore=1 TmpDisk=0 "
    "Weight=1 Owner=N/A MCS_label=N/A Partitions=batch,scavenger "
    "BootTime=2026-11-21T17:00:00 SlurmdStartTime=2026-11-21T18:00:00 "
    "LastBusyTime=2026-11-21T18:01:00 CfgTRES=cpu=8,mem=2G,billing=8,gres/gpu=8 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s{r}"
)


def nodes_text(spec: list[tuple[str, str, str, str]]) -> str:
    lines = []
    for n, s, reason, when in spec:
        r = f" Reason={reason} [root@{when}]" if reason else ""
        lines.append(LINE.format(n=n, s=s, r=r))
    return "\n".join(lines) + "\n"


FAIL_GPU = Verdict("gpu_count", "fail", "7 GPUs visible, 8 expected")
GUARD = {"max_drained_share": 0.25, "max_drained_nodes": 10, "window_minutes": 60}


def test_parse_scontrol_nodes_reason_and_time():
    text = nodes_text(
        [
            (
                "node1",
                "IDLE+DRAIN",
                "aegis: gpu_count: 7 GPUs visible, 8 expected",
                "2026-11-21T18:20:00",
            ),
            ("node2", "IDLE", "", ""),
            ("node3", "IDLE+DRAIN", "Prolog error", "2026-11-21T18:21:00"),
        ]
    )
    n1, n2, n3 = slurm.parse_scontrol_nodes(text)
    assert n1.drained and n1.ours and n1.aegis_check() == "gpu_count"
    assert n1.reason == "aegis: gpu_count: 7 GPUs visible, 8 expected"
    assert n1.reason_time == datetime(2026, 11, 21, 18, 20)
    assert not n2.drained and n2.reason == ""
    assert n3.drained and not n3.ours and n3.aegis_check() is None


def test_reason_is_one_bounded_line():
    r = slurm.make_reason(Verdict("xid", "fail", "Xid 79\non  0000:1b:00 " + "x" * 300))
    assert r.startswith("aegis: xid: Xid 79 on 0000:1b:00") and "\n" not in r
    assert len(r) <= slurm.MAX_REASON


def test_plan_drain_respects_foreign_reason_and_keeps_ours():
    admin = slurm.parse_scontrol_nodes(
        nodes_text([("node1", "IDLE+DRAIN", "disk swap scheduled", "2026-11-21T10:00:00")])
    )
    plan = slurm.plan_drain([FAIL_GPU], "node1", admin, GUARD, NOW)
    assert plan.action == "keep" and "someone else" in plan.detail
    ours = slurm.parse_scontrol_nodes(
        nodes_text([("node1", "MIXED+DRAIN", "aegis: xid: Xid 79", "2026-11-21T10:00:00")])
    )
    assert slurm.plan_drain([FAIL_GPU], "node1", ours, GUARD, NOW).action == "keep"


def test_plan_drain_and_storm_guard():
    healthy = [(f"node{i}", "IDLE", "", "") for i in range(1, 9)]
    nodes = slurm.parse_scontrol_nodes(nodes_text(healthy))
    plan = slurm.plan_drain([FAIL_GPU], "node1", nodes, GUARD, NOW)
    assert (plan.action, plan.reason) == ("drain", "aegis: gpu_count: 7 GPUs visible, 8 expected")
    # 1 node already drained for gpu_count: 2/8 = 25% allowed; 2 drained: 3/8 > 25% -> storm
    one = [
        healthy[0],
        ("node2", "IDLE+DRAIN", "aegis: gpu_count: x", "2026-11-21T18:25:00"),
        *healthy[2:],
    ]
    two = [
        *one[:2],
        ("node3", "IDLE+DRAIN", "aegis: gpu_count: x", "2026-11-21T18:26:00"),
        *healthy[3:],
    ]
    assert (
        slurm.plan_drain(
            [FAIL_GPU], "node1", slurm.parse_scontrol_nodes(nodes_text(one)), GUARD, NOW
        ).action
        == "drain"
    )
    plan = slurm.plan_drain(
        [FAIL_GPU], "node1", slurm.parse_scontrol_nodes(nodes_text(two)), GUARD, NOW
    )
    assert plan.action == "storm" and "3/8 nodes would be drained for gpu_count" in plan.detail
    # another check is not blocked by gpu_count's storm
    xid = Verdict("xid", "fail", "Xid 79")
    plan = slurm.plan_drain(
        [FAIL_GPU, xid], "node1", slurm.parse_scontrol_nodes(nodes_text(two)), GUARD, NOW
    )
    assert (plan.action, plan.check) == ("drain", "xid")
    # admin drains never count
    assert (
        slurm.plan_drain(
            [FAIL_GPU],
            "node1",
            slurm.parse_scontrol_nodes(
                nodes_text(
                    [
                        ("node2", "IDLE+DRAIN", "bad cable", "2026-11-21T18:25:00"),
                        ("node3", "IDLE+DRAIN", "bad cable", "2026-11-21T18:25:00"),
                        healthy[0],
                        *healthy[3:],
                    ]
                )
            ),
            GUARD,
            NOW,
        ).action
        == "drain"
    )


def test_share_cap_counts_old_aegis_drains_slow_storm():
    # a slow storm: two nodes drained for gpu_count hours ago are still drained; a third would
    # be 3/8 > 25%, whatever their age (the window only applies to the absolute rate cap)
    slow = [(f"node{i}", "IDLE", "", "") for i in range(1, 9)]
    slow[1] = ("node2", "IDLE+DRAIN", "aegis: gpu_count: x", "2026-11-20T10:00:00")
    slow[2] = ("node3", "IDLE+DRAIN", "aegis: gpu_count: x", "2026-11-21T10:00:00")
    plan = slurm.plan_drain(
        [FAIL_GPU], "node1", slurm.parse_scontrol_nodes(nodes_text(slow)), GUARD, NOW
    )
    assert plan.action == "storm" and "3/8 nodes would be drained" in plan.detail
    # rate cap: at most 2 per hour (share not limiting); old drains do not count for it
    rate = {"max_drained_share": 1.0, "max_drained_nodes": 2, "window_minutes": 60}
    nodes = slurm.parse_scontrol_nodes(nodes_text(slow))
    assert slurm.plan_drain([FAIL_GPU], "node1", nodes, rate, NOW).action == "drain"
    recent = [(n, s, r, "2026-11-21T18:10:00" if r else "") for n, s, r, _ in slow]
    plan = slurm.plan_drain(
        [FAIL_GPU], "node1", slurm.parse_scontrol_nodes(nodes_text(recent)), rate, NOW
    )
    assert plan.action == "storm" and "3 nodes drained for gpu_count within 60 min" in plan.detail


def test_storm_overshoot_ranks_by_reason_time_then_name():
    # three Prologs passed the guard at the same instant and all drained: 3/8 > 25%.
    # Everyone re-reads the same states and ranks (reason time, name): node5 is third.
    spec = [(f"node{i}", "IDLE", "", "") for i in range(1, 9)]
    for n in ("node7", "node5"):
        spec[int(n[-1]) - 1] = (n, "MIXED+DRAIN", "aegis: gpu_count: y", "2026-11-21T18:29:59")
    spec[1] = ("node2", "IDLE+DRAIN", "aegis: gpu_count: x", "2026-11-21T18:29:58")
    spec[2] = ("node3", "IDLE+DRAIN", "admin: not ours", "2026-11-21T18:29:00")
    nodes = slurm.parse_scontrol_nodes(nodes_text(spec))
    assert slurm.storm_overshoot("gpu_count", "node2", nodes, GUARD, NOW) == (False, "")
    assert slurm.storm_overshoot("gpu_count", "node5", nodes, GUARD, NOW)[0] is False
    over, why = slurm.storm_overshoot("gpu_count", "node7", nodes, GUARD, NOW)
    assert over and "node7 is #3 of 3/8" in why
    # a node no longer drained by aegis for that check has nothing to undo
    assert not slurm.storm_overshoot("xid", "node7", nodes, GUARD, NOW)[0]
    assert not slurm.storm_overshoot("gpu_count", "node3", nodes, GUARD, NOW)[0]


def test_should_resume_hysteresis_and_ownership():
    ours = slurm.NodeInfo("node1", "IDLE+DRAIN", "aegis: gpu_count: 7 GPUs", NOW)
    assert not slurm.should_resume(ours, {"gpu_count": 2}, True, 3)
    assert slurm.should_resume(ours, {"gpu_count": 3}, True, 3)
    assert not slurm.should_resume(ours, {"gpu_count": 3}, False, 3)  # e.g. xid policy
    admin = slurm.NodeInfo("node1", "IDLE+DRAIN", "RMA gpu3", NOW)
    assert not slurm.should_resume(admin, {"gpu_count": 9}, True, 3)
    assert not slurm.should_resume(slurm.NodeInfo("node1", "IDLE", "", None), {}, True, 0)


def test_update_passes_resets_on_non_pass():
    st: dict = {}
    prolog.update_passes(st, [Verdict("gpu_count", "pass", "")])
    prolog.update_passes(st, [Verdict("gpu_count", "pass", "")])
    assert st["passes"]["gpu_count"] == 2
    prolog.update_passes(st, [Verdict("gpu_count", "probe_error", "")])
    assert st["passes"]["gpu_count"] == 0


def test_run_hook_without_slurm_fails_open_and_alerts(cfg, tmp_path, monkeypatch):
    # no scontrol reachable: the drain-storm guard cannot be evaluated -> do not drain, exit 0
    # (Slurm would otherwise drain "Prolog error", bypassing the guard), alert metric written
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    cfg["expect"]["gpus"] = 8
    broken = drop_gpu(H100_Q.read_text(), 2)
    rc = prolog.run_hook("prolog", cfg, "node7", overrides={"nvidia_smi_q": lambda c: broken})
    assert rc == 0
    st = json.loads((tmp_path / "state" / "node7" / "state.json").read_text())
    assert {
        "check": "gpu_count",
        "state": "fail",
        "evidence": "7 GPUs visible, 8 expected",
        "internal": False,
    } in st["last"]["verdicts"]
    assert st["counters"]["guard_unavailable"] == 1 and "drains" not in st["counters"]
    prom = (tmp_path / "prom" / "aegis_cbd_node7.prom").read_text()
    assert 'aegis_cbd_verdict{check="gpu_count",state="fail",profile="light"} 1' in prom
    assert 'aegis_cbd_drain_guard_unavailable{check="gpu_count"} 1' in prom
    assert "aegis_cbd_guard_unavailable_total 1" in prom
    # healthy run -> 0, and HCP mode never returns non-zero
    ok = H100_Q.read_text()
    assert prolog.run_hook("prolog", cfg, "node7", {"nvidia_smi_q": lambda c: ok}) == 0
    assert prolog.run_hook("healthcheck", cfg, "node7", {"nvidia_smi_q": lambda c: broken}) == 0


def test_xid_stays_new_until_its_drain_happened(cfg, tmp_path, monkeypatch):
    # slurmctld unreachable: the critical XID was not acted on, so the next run judges it again
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    line = "4,3990,306764307,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus."
    ov = {"kernel_log": lambda c: line + "\n"}
    for _ in range(2):
        prolog.run_hook("healthcheck", cfg, "node8", overrides=ov)
        st = json.loads((tmp_path / "state" / "node8" / "state.json").read_text())
        xid = next(v for v in st["last"]["verdicts"] if v["check"] == "xid")
        assert xid["state"] == "fail" and "Xid 79" in xid["evidence"]
        assert "xid_pos" not in st and st["xid_pending"] == {"seq": 3990}
    # a run whose kernel-log read fails must not mark the earlier pending lines seen

    def unreadable(ctx):
        raise probes.ProbeFailed("kmsg: EPERM")

    prolog.run_hook("healthcheck", cfg, "node8", overrides={"kernel_log": unreadable})
    prolog.run_hook("healthcheck", cfg, "node8", overrides=ov)
    st = json.loads((tmp_path / "state" / "node8" / "state.json").read_text())
    assert next(v for v in st["last"]["verdicts"] if v["check"] == "xid")["state"] == "fail"
    # an XID whose policy does not drain is acted on by logging it: seen, not repeated
    cfg["policy"]["xid"] = {"fail": "alert", "resume": False}
    prolog.run_hook("healthcheck", cfg, "node8", overrides=ov)
    prolog.run_hook("healthcheck", cfg, "node8", overrides=ov)
    st = json.loads((tmp_path / "state" / "node8" / "state.json").read_text())
    assert next(v for v in st["last"]["verdicts"] if v["check"] == "xid")["state"] == "pass"
    assert st["xid_pos"] == {"seq": 3990}


WRAPPER = Path(__file__).resolve().parents[2] / "prolog" / "aegis-prolog"


def _run_prolog(
    cfg_text: str, tmp_path: Path, timeout: float = 60, wrapper: Path = WRAPPER, **extra: str
) -> subprocess.CompletedProcess:
    conf = tmp_path / "cbd.toml"
    conf.write_text(cfg_text)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AEGIS_")},
        "AEGIS_CBD_CONFIG": str(conf),
        "SLURMD_NODENAME": "node5",
        "SLURM_JOB_ID": "42",
        "SLURM_SCRIPT_CONTEXT": "prolog_slurmd",
        # never reach the live test cluster from a unit test
        "SLURM_CONF": str(tmp_path / "no-slurm.conf"),
        "PATH": "/usr/bin:/bin",
        **extra,
    }
    return subprocess.run(
        ["/bin/sh", str(wrapper)],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_wrapper_fails_open_when_python_fails_before_main(tmp_path):
    # Slurm drains on ANY non-zero Prolog exit: an interpreter that cannot import aegis (here
    # the system python3, which has no aegis_slurm), or no interpreter at all, must exit 0
    state = tmp_path / "state"
    cfgtext = f'[runtime]\nstate_dir = "{state}"\ntextfile_dir = ""\nsyslog = false\n'
    for py, code in (("/usr/bin/python3", 1), (str(tmp_path / "no-such-python"), 127)):
        r = _run_prolog(cfgtext, tmp_path, AEGIS_PYTHON=py)
        assert r.returncode == 0, r.stderr
        assert f"aegis-prolog: {py} exited {code} (aegis failure, not a node fault)" in r.stderr
    assert (
        "No module named 'aegis_slurm'"
        in _run_prolog(cfgtext, tmp_path, AEGIS_PYTHON="/usr/bin/python3").stderr
    )
    assert not state.exists()  # nothing ran


def test_bad_mode_is_an_internal_error_not_a_drain(tmp_path):
    state = tmp_path / "state"
    r = _run_prolog(
        f'[runtime]\nstate_dir = "{state}"\nsyslog = false\n', tmp_path, AEGIS_MODE="healthchek"
    )
    assert r.returncode == 0, r.stderr
    assert "internal error" in r.stderr and "invalid choice" in r.stderr
    assert (state / "node5" / "internal_errors").read_text() == "1"


def test_symlinked_wrapper_finds_the_install_venv(tmp_path):
    # /usr/local/sbin/aegis-prolog -> <install>/prolog/aegis-prolog: dirname "$0" alone would
    # miss <install>/.venv and fall back to python3 on PATH (no aegis_slurm there)
    link = tmp_path / "sbin" / "aegis-prolog"
    link.parent.mkdir()
    link.symlink_to(WRAPPER)
    state = tmp_path / "state"
    r = _run_prolog(
        f'[runtime]\nstate_dir = "{state}"\ntextfile_dir = ""\nsyslog = false\n',
        tmp_path,
        wrapper=link,
    )
    assert r.returncode == 0, r.stderr
    assert "exited" not in r.stderr
    last = json.loads((state / "node5" / "state.json").read_text())["last"]
    assert last["mode"] == "prolog" and last["rc"] == 0


def test_gpu_scope_from_the_prolog_environment(cfg, tmp_path, monkeypatch):
    # job B's Prolog on a shared node: job A's process on GPU0 is not B's business
    from ._fixtures import edit_gpu

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    cfg["expect"]["gpus"] = 8
    proc = (
        "Processes\n"
        "        GPU instance ID                   : N/A\n"
        "        Compute instance ID               : N/A\n"
        "        Process ID                        : 31337\n"
        "        Type                              : C\n"
        "        Name                              : python\n"
        "        Used GPU Memory                   : 30000 MiB"
    )
    busy = edit_gpu(H100_Q.read_text(), 0, "Processes                             : None", proc)
    ov = {"nvidia_smi_q": lambda c: busy}

    def verdict(mode: str) -> dict:
        prolog.run_hook(mode, cfg, "node9", overrides=ov)
        st = json.loads((tmp_path / "state" / "node9" / "state.json").read_text())
        return next(v for v in st["last"]["verdicts"] if v["check"] == "gpu_processes")

    monkeypatch.setenv("SLURM_JOB_GPUS", "2,3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")  # SLURM_JOB_GPUS wins
    assert verdict("prolog")["state"] == "pass"
    monkeypatch.delenv("SLURM_JOB_GPUS")
    v = verdict("prolog")
    assert v["state"] == "fail" and "GPU0 pids 31337" in v["evidence"]
    # HealthCheckProgram with Slurm's default HealthCheckNodeState=ANY: node may be busy
    conf = tmp_path / "slurm.conf"
    conf.write_text("HealthCheckProgram=/opt/aegis-slurm/prolog/aegis-prolog\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))
    assert verdict("healthcheck")["state"] == "skip"
    conf.write_text("HealthCheckNodeState=IDLE,CYCLE\n")
    assert verdict("healthcheck")["state"] == "fail"
    # and by default a leftover process alerts, it does not drain
    fail = prolog.Verdict("gpu_processes", "fail", "leftover GPU0 pids 31337")
    acts = prolog.actions_for([fail], cfg)
    assert not acts["drain"] and acts["alert"] == [fail]


def test_internal_error_exits_zero_and_is_counted(tmp_path):
    state = tmp_path / "state"
    bad = (
        f'[runtime]\nstate_dir = "{state}"\nsyslog = false\n'
        '[policy.gpu_count]\nfail = "reboot-the-cluster"\n'
    )
    r = _run_prolog(bad, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "config error" in r.stderr and "policy.gpu_count.fail must be one of" in r.stderr
    assert (state / "node5" / "internal_errors").read_text() == "1"


def test_process_watchdog_fires_on_a_hang_outside_probes(tmp_path):
    # hold the node-state lock: the Prolog blocks before any probe, the watchdog must end it
    state = tmp_path / "state"
    (state / "node5").mkdir(parents=True)
    cfgtext = (
        f'[runtime]\nstate_dir = "{state}"\ntextfile_dir = ""\nsyslog = false\n'
        "watchdog_s = 0.3\nwatchdog_grace_s = 0.3\n"
    )
    with (state / "node5" / "state.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        r = _run_prolog(cfgtext, tmp_path)
    assert r.returncode == 0
    assert (state / "node5" / "internal_errors").read_text() == "1"


def test_prolog_wrapper_drains_nothing_on_healthy_unconfigured_node(tmp_path):
    state = tmp_path / "state"
    r = _run_prolog(
        f'[runtime]\nstate_dir = "{state}"\ntextfile_dir = "{tmp_path}/p"\nsyslog = false\n',
        tmp_path,
    )
    assert r.returncode == 0, r.stderr
    last = json.loads((state / "node5" / "state.json").read_text())["last"]
    assert last["mode"] == "prolog" and last["rc"] == 0


def test_crash_count_reaches_the_metrics_file(cfg, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    node = tmp_path / "state" / "node6"
    node.mkdir(parents=True)
    (node / "internal_errors").write_text("2")
    assert prolog.run_hook("healthcheck", cfg, "node6") == 0
    prom = (tmp_path / "prom" / "aegis_cbd_node6.prom").read_text()
    assert "aegis_cbd_internal_crashes_total 2" in prom
    assert "aegis_cbd_runs_total 1" in prom
