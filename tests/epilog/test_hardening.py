"""Issue 10 (and 11.2/11.3) regressions on the Epilog side, through the real
``epilog/aegis-epilog`` wrapper; a fake scontrol/sacct/sacctmgr records what Slurm would do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hostlist
import pytest
from cbd._fake_slurm import FakeSlurm
from cbd._fixtures import H100_Q, write_cbd_config
from hypothesis import given, settings
from hypothesis import strategies as st

from aegis_slurm.node import config, klog, spool
from aegis_slurm.node import signals as sg

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "epilog" / "aegis-epilog"
NOW = 1_763_900_000.0
CLI = str(REPO / ".venv" / "bin" / "aegis-slurm")


def site(tmp: Path, *, kmsg: Path | None = None, extra: str = "", syslog: str = "") -> Path:
    if kmsg is None:
        kmsg = tmp / "kmsg"
        kmsg.touch()
    return write_cbd_config(
        tmp / "cbd.toml",
        state_dir=tmp / "state",
        probes={"nvidia_smi_q": ["cat", str(H100_Q)], "kernel_log": ["cat", str(kmsg)]},
        extra=f"""[epilog]
spool_dir = "{tmp}/spool"
syslog_path = "{syslog}"
ctld_wait_s = 1.0
{extra}
""",
    )


def hook(cfg: Path, job: int, node: str = "gpu01", path: str = "/usr/bin:/bin", **env: str):
    e = {
        "PATH": path,
        "AEGIS_CBD_CONFIG": str(cfg),
        "AEGIS_PYTHON": str(REPO / ".venv" / "bin" / "python3"),
        "SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
        "SLURMD_NODENAME": node,
        "SLURM_JOB_ID": str(job),
        "SLURM_JOB_EXIT_CODE2": "1:0",
        "SLURM_CLUSTER_NAME": "c",
        "SLURM_CONF": "/nonexistent/slurm.conf",
        **env,
    }
    return subprocess.run(
        ["/bin/sh", str(env.pop("_hook", HOOK))],
        env=e,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def records(tmp: Path) -> dict[str, dict]:
    return {r["job_id"]: r for r in spool.read_records([tmp / "spool"])}


def signals(rec: dict) -> dict[str, dict]:
    return {s["signal"]: s for s in rec["signals"]}


# ---- 10.1 / 11.2 / 11.3: only the kernel's own messages become signals ----------------------

#: what an unprivileged user makes the kernel print with a process name of their choice (comm,
#: 15 chars): a segfault, a general protection fault, the OOM killer's report
USER_MADE = [
    "[ 4001.100001] EXT4-fs error[4242]: segfault at 0 ip 000055d5c1a0b139 sp 00007ffc2a1c1e40 "
    "error 6 in a.out[55d5c1a0b000+1000] likely on CPU 3 (core 3, socket 0)",
    "[ 4001.200002] Out of memory: Killed process 4243 (link degraded) total-vm:9123456kB, "
    "anon-rss:8000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:16000kB oom_score_adj:0",
    "[ 4001.300003] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,"
    "global_oom,task_memcg=/user.slice,task=link degraded,pid=4243,uid=1000",
    "[ 4001.400004] traps: PCIe link is d[4244] general protection fault ip:401136 "
    "sp:7ffd8d1c9e30 error:0 in a.out[401000+1000]",
    "[ 4001.500005] Buffer I/O error[4245]: segfault at 8 ip 0000000000401136 sp 00007ffd error 4",
    "[ 4001.600006] nfs: server evil[4246]: segfault at 8 ip 0000000000401136 sp 00007ffd error 4",
    "[ 4001.700007] mce: [Hardwa[4247]: segfault at 8 ip 0000000000401136 sp 00007ffd error 4",
    "4,9001,4001800008,-;NVRM: GPU has f[4248]: segfault at 8 ip 0000000000401136 error 4",
]
#: the kernel's own messages for the same faults (positive controls)
KERNEL_MADE = {
    "fs_error": "[ 5000.1] EXT4-fs error (device nvme0n1p2): ext4_find_entry:1455: inode #2: "
    "comm ls: reading directory lblock 0",
    "pcie_link_degraded": "[ 5000.2] nvidia 0000:3b:00.0: 8.000 Gb/s available PCIe bandwidth, "
    "limited by 2.5 GT/s PCIe x4 link at 0000:00:1c.0 (capable of 252.048 Gb/s with 16.0 GT/s "
    "PCIe x16 link)",
    "nfs_timeout": "[ 5000.3] nfs: server storage01 not responding, still trying",
}


def test_10_1_user_process_names_never_become_signals(tmp_path):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("\n".join(USER_MADE) + "\n")
    cfg = site(tmp_path, kmsg=kmsg)
    assert hook(cfg, 1).returncode == 0
    assert records(tmp_path)["1"]["signals"] == []
    with kmsg.open("a") as f:
        f.write("\n".join(KERNEL_MADE.values()) + "\n")
    assert hook(cfg, 2).returncode == 0
    got = signals(records(tmp_path)["2"])
    assert set(got) == set(KERNEL_MADE)
    assert got["fs_error"]["critical"] and got["pcie_link_degraded"]["critical"]


@pytest.mark.parametrize(
    "text",
    [
        # dmesg: the driver's continuation line, indented, no stamp of its own
        "[ 6000.000001] NVRM: Xid (PCI:0000:01:00): 79, pid=811977, name=nvidia-smi,\n"
        "               GPU has fallen off the bus.\n",
        # two records: the second one carries only the end of the message
        "[ 6000.000001] NVRM: GPU at PCI:0000:01:00: GPU-509665ad-b600-ac93-3616-d754b23d636d\n"
        "[ 6000.000002] GPU has fallen off the bus.\n",
        # /dev/kmsg: one record, newlines escaped as \x0a, then the dictionary lines
        "4,9100,6000000001,-;NVRM: GPU at PCI:0000:01:00: GPU-509665ad\\x0aNVRM: GPU Board "
        "Serial Number: 1650124014249\\x0aNVRM: GPU has fallen off the bus.\n"
        " SUBSYSTEM=pci\n DEVICE=+pci:0000:01:00.0\n",
        "4,9101,6000000002,-;NVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n",
        "4,9102,6000000003,-;NVRM: Xid (PCI:0000:01:00): 79, pid=811977, name=nvidia-smi,"
        "\\x0aGPU has fallen off the bus.\n",
        "Feb 23 16:24:18 gpu01 kernel: NVRM: GPU has fallen off the bus.\n",
    ],
)
def test_11_2_gpu_fallen_off_the_bus_split_over_lines(tmp_path, text):
    kmsg = tmp_path / "kmsg"
    kmsg.write_text(text)
    assert hook(site(tmp_path, kmsg=kmsg), 3).returncode == 0
    got = signals(records(tmp_path)["3"])
    assert got["gpu_lost"]["critical"], got


def test_10_2_and_11_3_syslog_link_flaps_trust_only_the_daemons_own_format(tmp_path):
    log = tmp_path / "syslog"
    fake_user = "Nov 23 10:00:0{} gpu01 alice: ib0: lost carrier\n"  # logger "ib0: lost carrier"
    real = "Nov 23 10:00:1{} gpu01 systemd-networkd[812]: ib1: Lost carrier\n"  # capital L
    log.write_text("".join(fake_user.format(i) for i in range(5)))
    cfg = site(tmp_path, syslog=str(log))
    assert hook(cfg, 4).returncode == 0
    assert records(tmp_path)["4"]["signals"] == []
    with log.open("a") as f:
        f.write("".join(real.format(i) for i in range(3)))
    assert hook(cfg, 5).returncode == 0
    flap = signals(records(tmp_path)["5"])["link_flap"]
    assert flap["detail"] == "ib1 lost carrier 3x" and flap["source"] == "syslog"
    assert not flap["critical"]


# ---- 10.3 / 10.5: positions, not re-reads ---------------------------------------------------

XID79 = "NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has fallen off the bus."
FILLER = "NVRM: Xid (PCI:0000:1b:00): 31, pid={i}, Ch 00000010, intr 10000000. MMU Fault"


@pytest.mark.parametrize("source", ["kmsg", "dmesg", "file"])
def test_10_3_an_old_fault_is_never_blamed_on_a_later_job(tmp_path, source):
    log = tmp_path / "kernel.log"
    seq = iter(range(1, 10**7))

    def line(msg: str) -> str:
        n = next(seq)
        return f"4,{n},{n * 1000},-;{msg}\n" if source == "kmsg" else f"[{n:>6}.000000] {msg}\n"

    log.write_text(line(XID79))
    extra = f'kernel_log_path = "{log}"' if source == "file" else ""
    cfg = site(tmp_path, kmsg=log, extra=extra)
    assert hook(cfg, 100).returncode == 0
    for job in range(101, 107):  # 10,000 harmless lines per job: 60,000 > any "seen" list
        with log.open("a") as f:
            f.write("".join(line(FILLER.format(i=i)) for i in range(10000)))
        assert hook(cfg, job).returncode == 0
    recs = records(tmp_path)
    assert "xid79" in signals(recs["100"])
    for job in range(101, 107):
        assert "xid79" not in signals(recs[str(job)]), job
        assert signals(recs[str(job)])["xid31"]["count"] == 10000


def test_10_5_file_position_survives_rotation_and_skips_nothing(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("a\nb\n")
    text, pos, note = klog.read_file_since(str(log), None, 1 << 20)
    assert text == "a\nb\n" and note == ""
    with log.open("a") as f:
        f.write("c\npartial")
    text, pos, _ = klog.read_file_since(str(log), pos, 1 << 20)
    assert text == "c\n"  # the partial line waits for its end
    with log.open("a") as f:
        f.write(" line\n")
    os.replace(log, tmp_path / "kern.log.1")  # logrotate
    log.write_text("d\n")
    text, pos, _ = klog.read_file_since(str(log), pos, 1 << 20)
    assert text == "partial line\nd\n"
    text, pos, _ = klog.read_file_since(str(log), pos, 1 << 20)
    assert text == ""
    with log.open("a") as f:
        f.write("x" * 100 + "\n" + "y\n")
    text, pos, note = klog.read_file_since(str(log), pos, 10)
    assert text == "y\n" and "skipped" in note


# ---- 10.11: the AdminComment is never clobbered ---------------------------------------------


@pytest.mark.parametrize(
    "old",
    ["ticket 4711\nsecond   line  kept", "x" * 1000, "  spaced   out  ", ""],
)
def test_10_11_admin_comment_kept_byte_for_byte(tmp_path, old):
    fake = FakeSlurm(tmp_path, ["gpu01", "gpu02"], admin_comment=old)
    cfg = site(tmp_path)
    # a node record with a critical signal, as the node Epilog would have written it
    spool.append(
        tmp_path / "spool",
        {
            "node": "gpu02",
            "job_id": "77",
            "run": 0,
            "cluster": "c",
            "captured_at": "2026-11-23T10:00:00+00:00",
            "signals": [{"signal": "xid79", "kind": "critical", "critical": True}],
        },
    )
    r = hook(
        cfg,
        77,
        path=fake.path,
        SLURM_SCRIPT_CONTEXT="epilog_slurmctld",
        SLURM_JOB_NODELIST="gpu[01-02]",
    )
    assert r.returncode == 0, r.stderr
    (call,) = fake.calls("sacctmgr")
    new = next(a for a in call if a.startswith("AdminComment=")).split("=", 1)[1]
    assert new.startswith(old) and new.endswith("aegis:v1;hw=gpu02:xid79")
    assert len(new) <= len(old) + 1 + len("aegis:v1;hw=gpu02:xid79")
    # re-tagging replaces only our own tag
    assert sg.merge_comment(new, "aegis:v1;hw=gpu01:gpu_lost") == sg.merge_comment(
        old, "aegis:v1;hw=gpu01:gpu_lost"
    )


# ---- 10.12: bad records never break collect or the analytics --------------------------------


def test_10_12_hostile_environment_gives_a_clean_record(tmp_path):
    cfg = site(tmp_path)
    env = {
        "SLURM_JOB_RESTART_COUNT": "99999999999",
        "SLURM_JOB_PARTITION": os.fsdecode(b"gpu\xff\xfe"),
    }
    assert hook(cfg, 8, **env).returncode == 0
    rec = records(tmp_path)["8"]
    assert rec["run"] == 0 and rec["partition"] == "gpu\ufffd\ufffd"


def test_10_12_collect_quarantines_and_counts_bad_records(tmp_path):
    d = tmp_path / "spool" / "gpu01"
    d.mkdir(parents=True)
    good = {
        "node": "gpu01",
        "job_id": "1",
        "run": 0,
        "cluster": "c",
        "captured_at": "2026-11-23T10:00:00+00:00",
        "signals": [{"signal": "xid79", "kind": "critical", "critical": True}],
    }
    bad = [
        {**good, "job_id": "2", "run": 99999999999},
        {**good, "job_id": "3", "partition": "gpu\udcff"},
        {**good, "job_id": "4", "signals": {"xid79": 1}},
        {**good, "job_id": "5", "signals": ["xid79"]},
        {**good, "job_id": "6", "captured_at": "yesterday"},
    ]
    (d / "signals.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [good, *bad]))
    store = tmp_path / "store"
    for _ in range(2):  # every run, not only the first
        r = subprocess.run(
            [
                CLI,
                "signals",
                "collect",
                "--json",
                "--spool",
                str(tmp_path / "spool"),
                "--store",
                str(store),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        assert r.returncode == 0, r.stderr
        rep = json.loads(r.stdout)
        assert rep["quarantined"] == 5 and rep["records_in_store"] == 1
    q = (store / "signals" / "quarantine.jsonl").read_text().splitlines()
    assert len(q) == 5 and all(json.loads(x)["reason"] for x in q)
    from aegis_slurm.accounting.signals import load_signals

    assert load_signals(store)["job_id"].to_list() == ["1"]


# ---- 10.15: the Epilog wrapper through a symlink ---------------------------------------------


def test_10_15_symlinked_epilog_finds_the_install_and_logs_failures(tmp_path):
    link = tmp_path / "sbin" / "aegis-epilog"
    link.parent.mkdir()
    link.symlink_to(HOOK)
    cfg = site(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AEGIS_")}
    e = {
        **env,
        "PATH": "/usr/bin:/bin",
        "AEGIS_CBD_CONFIG": str(cfg),
        "SLURM_SCRIPT_CONTEXT": "epilog_slurmd",
        "SLURMD_NODENAME": "gpu01",
        "SLURM_JOB_ID": "15",
        "SLURM_CONF": "/nonexistent",
    }
    r = subprocess.run([str(link)], env=e, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    assert "15" in records(tmp_path)  # the install's venv was found through the link
    r = subprocess.run(
        [str(link)],
        env={**e, "AEGIS_PYTHON": "/usr/bin/python3", "SLURM_JOB_ID": "16"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert r.returncode == 0 and "aegis failure, no record written" in r.stderr


# ---- 10.16: NODE_FAIL is never an application failure ----------------------------------------


def test_10_16_node_fail_with_a_record_but_no_signal(tmp_path):
    from aegis_slurm.node.diagnose import diagnose

    recs = [
        {"node": n, "job_id": "9", "run": 0, "signals": []} for n in ("node7", "node8")
    ]  # node8's restarted slurmd ran its Epilog: a record, no signal
    d = diagnose(["node7", "node8"], recs, job_state="NODE_FAIL", tagged={"node8": "node_fail"})
    assert d.verdict == "critical" and d.nodes == ["node8"]
    d = diagnose(["node7", "node8"], recs, job_state="NODE_FAIL")
    assert d.verdict == "node-fail" and "not an application failure" in d.action
    assert diagnose(["node7", "node8"], recs, job_state="FAILED").verdict == "no-signals"
    for r in recs:
        spool.append(tmp_path / "spool", {**r, "cluster": "c", "captured_at": "2026-11-23T10:00"})
    out = subprocess.run(
        [
            CLI,
            "diagnose",
            "9",
            "--json",
            "--spool",
            str(tmp_path / "spool"),
            "--state",
            "NODE_FAIL",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert json.loads(out.stdout)["verdict"] == "node-fail", out.stderr


# ---- 10.18: host lists as python-hostlist expands them ---------------------------------------

_word = st.text("abcxyz-", min_size=1, max_size=4).filter(lambda w: not w.startswith("-"))


@st.composite
def _hostlists(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        name = draw(_word)
        for _ in range(draw(st.integers(0, 2))):
            ranges = []
            for _ in range(draw(st.integers(1, 3))):
                lo = draw(st.integers(0, 30))
                width = draw(st.integers(1, 3))
                if draw(st.booleans()):
                    hi = draw(st.integers(lo, lo + 12))
                    ranges.append(f"{lo:0{width}d}-{hi}")
                else:
                    ranges.append(f"{lo:0{width}d}")
            name += "[" + ",".join(ranges) + "]" + draw(st.sampled_from(["", "-ib", ".x"]))
        parts.append(name)
    return ",".join(parts)


@settings(max_examples=300, deadline=None)
@given(_hostlists())
def test_10_18_expand_hostlist_matches_python_hostlist(expr):
    assert config.expand_hostlist(expr) == hostlist.expand_hostlist(expr)


def test_10_18_examples():
    assert config.expand_hostlist("gpu[01-02]-ib[1-2]") == [
        "gpu01-ib1",
        "gpu01-ib2",
        "gpu02-ib1",
        "gpu02-ib2",
    ]
    for bad in ("n[1-", "n[3-1]", "n[a-b]", "n]1["):
        with pytest.raises(ValueError):
            config.expand_hostlist(bad)


# ---- 10.19 / 10.2: the Epilog's auto-drain is the one guarded drain ---------------------------


def _ctld(tmp_path: Path, fake: FakeSlurm, recs: list[dict], job: int) -> dict:
    cfg = site(tmp_path, extra="auto_drain = true\ntag = false")
    for r in recs:
        spool.append(
            tmp_path / "spool",
            {"job_id": str(job), "run": 0, "cluster": "c", "captured_at": "2026-11-23T10:00", **r},
        )
    r = hook(
        cfg,
        job,
        path=fake.path,
        SLURM_SCRIPT_CONTEXT="epilog_slurmctld",
        SLURM_JOB_NODELIST="node[1-10]",
    )
    assert r.returncode == 0, r.stderr
    return {"stderr": r.stderr}


def test_10_19_epilog_auto_drain_takes_the_second_look(tmp_path):
    nodes = [f"node{i}" for i in range(1, 11)]
    fake = FakeSlurm(tmp_path, nodes, also_drain={"node5": ["node1"]})
    fake.set_node(
        "node2", state="IDLE+DRAIN", reason="aegis: diagnose: x", time="2026-01-01T00:00:00"
    )
    crit = [{"signal": "xid79", "kind": "critical", "critical": True}]
    out = _ctld(tmp_path, fake, [{"node": "node5", "signals": crit}], 21)
    assert fake.drains() == ["node5"]
    assert fake.nodes()["node5"]["state"] == "IDLE"  # ranked beyond the guard: undone
    assert "undrained again" in fake.nodes()["node5"]["comment"]
    assert "not draining node5: undrained" in out["stderr"]


def test_10_2_syslog_signals_never_drain(tmp_path):
    fake = FakeSlurm(tmp_path, [f"node{i}" for i in range(1, 11)])
    flap = {"signal": "link_flap", "kind": "distributed", "source": "syslog", "iface": "ib0"}
    _ctld(tmp_path, fake, [{"node": "node3", "signals": [flap]}], 22)
    assert fake.drains() == []


def test_auto_drain_never_starts_a_drain_it_cannot_finish_before_the_watchdog(
    tmp_path, monkeypatch
):
    """A drain cut off by the watchdog before its second look could overshoot the storm
    guard: with less time left than four command timeouts, no drain starts at all."""
    import time

    from aegis_slurm.node import epilog_ctld

    nodes = [f"node{i}" for i in range(1, 11)]
    fake = FakeSlurm(tmp_path, nodes)
    monkeypatch.setenv("PATH", fake.path)
    cfg = config.load(site(tmp_path))
    d = {"verdict": "critical", "nodes": ["node5"], "evidence": ["node5: xid79"]}
    budget = epilog_ctld.GUARDED_DRAIN_COMMANDS * cfg["epilog"]["command_timeout_s"]
    soon = time.monotonic() + budget - 1.0
    assert epilog_ctld.auto_drain(cfg, "31", d, False, deadline=soon) == []
    assert fake.calls() == []
    later = time.monotonic() + budget + 60.0
    assert epilog_ctld.auto_drain(cfg, "31", d, False, deadline=later) == ["node5"]
    assert fake.drains() == ["node5"]


# ---- 10.20: the whole node package is standard library only ----------------------------------


def test_10_20_every_node_module_imports_stdlib_only():
    node_dir = REPO / "aegis_slurm" / "node"
    mods = [f"aegis_slurm.node.{p.stem}" for p in sorted(node_dir.glob("*.py"))]
    assert "aegis_slurm.node.epilog_ctld" in mods and len(mods) > 15
    code = (
        "import sys, importlib\n"
        f"for m in {mods!r}: importlib.import_module(m)\n"
        "ok = set(sys.stdlib_module_names) | {'aegis_slurm', '__main__', 'sitecustomize'}\n"
        "bad = sorted({m.split('.')[0] for m in sys.modules} - ok)\n"
        "extra = sorted(m for m in sys.modules if m.startswith('aegis_slurm.')"
        " and not m.startswith('aegis_slurm.node') and m != 'aegis_slurm.errors')\n"
        "print(bad, extra)\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-S",
            "-E",
            "-c",
            f"import sys; sys.path.insert(0, {str(REPO)!r})\n" + code,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout.strip()
    assert out == "[] []"


# ---- 10.8: a config read that blocks is bounded by the watchdog armed first -----------------


def test_10_8_hung_config_read_never_hangs_the_teardown(tmp_path):
    import time

    fifo = tmp_path / "cbd.toml"
    os.mkfifo(fifo)  # open() blocks like a site file on a hung NFS mount
    ep = config.defaults()["epilog"]
    t0 = time.monotonic()
    r = hook(fifo, 31)
    assert r.returncode == 0 and "watchdog fired" in r.stderr, r.stderr
    assert time.monotonic() - t0 < ep["watchdog_s"] + ep["watchdog_grace_s"] + 10
    assert (config.defaults()["runtime"]["state_dir"] != str(tmp_path)) and not list(
        tmp_path.rglob("*.jsonl")
    )


def test_10_1_audit_records_and_driver_version_strings_are_user_text():
    lines = [
        "[ 7000.1] audit: type=1326 audit(1700000000.123:45): auid=1000 uid=1000 pid=4250 "
        'comm="x" exe="/home/alice/nfs: server evil not responding Connection reset by peer"',
        "[ 7000.2] NVRM: API mismatch: the client has the version GPU has fallen off the bus, "
        "but this kernel module has the version 535.129.03.",
    ]
    assert sg.kernel_signals(lines, 0.0, NOW) == []


# ---- 10.7: state files of the wrong shape are repaired, never fatal ---------------------------


@pytest.mark.parametrize("content", ['{"gpu": []}', '{"kernel": "x", "ib": [1]}', "[]", "{bad"])
def test_10_7_epilog_state_of_the_wrong_shape_is_repaired(tmp_path, content):
    cfg = site(tmp_path)
    d = tmp_path / "state" / "gpu01"
    d.mkdir(parents=True)
    (d / "epilog.json").write_text(content)
    for job in (41, 42):
        r = hook(cfg, job)
        assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    assert set(records(tmp_path)) == {"41", "42"}  # spooling goes on
    st = json.loads((d / "epilog.json").read_text())
    assert isinstance(st["gpu"], dict) and len(st["gpu"]) == 8
    repairs = 2 if "kernel" in content else 1  # one per dropped key, or the file quarantined
    assert (d / "epilog_state_repaired").read_text() == str(repairs)


def test_10_7_loop_guard_state_of_the_wrong_shape_is_repaired(tmp_path):
    cfg = site(tmp_path)
    loops = tmp_path / "state" / "ctld" / "loops.json"
    loops.parent.mkdir(parents=True)
    loops.write_text('{"jobs": [], "held": {"1": 5}}')
    fake = FakeSlurm(tmp_path, ["gpu01"])
    r = hook(cfg, 43, path=fake.path, SLURM_SCRIPT_CONTEXT="epilog_slurmctld")
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    st = json.loads(loops.read_text())
    assert [h["run"] for h in st["jobs"]["43"]] == [0] and st["held"] == {}
