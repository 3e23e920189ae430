"""The Epilog hook end to end through its sh wrapper, probes fed recorded real output."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cbd._fixtures import FIX, H100_Q, drop_gpu, write_cbd_config

from aegis_slurm.node import epilog, spool

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "epilog" / "aegis-epilog"


def site(tmp: Path, *, smi: Path = H100_Q, kmsg: Path | None = None, extra: str = "") -> Path:
    kmsg = kmsg or FIX / "gpud" / "dmesg-with-xid-119.log"
    return write_cbd_config(
        tmp / "cbd.toml",
        state_dir=tmp / "state",
        probes={"nvidia_smi_q": ["cat", str(smi)], "kernel_log": ["cat", str(kmsg)]},
        extra=f"""[epilog]
spool_dir = "{tmp}/spool"
syslog_path = "{FIX}/azurehpc-health-checks/1dev_6flap_syslog"
{extra}
""",
    )


def run_hook(cfg: Path, job: int, node: str = "gpu01", **env: str):
    e = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
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
        ["/bin/sh", str(HOOK)], env=e, capture_output=True, text=True, check=False
    )


def test_epilog_spools_one_record_with_the_jobs_signals(tmp_path):
    cfg = site(tmp_path)
    r = run_hook(cfg, 101)
    assert r.returncode == 0, r.stderr
    (rec,) = spool.read_records([tmp_path / "spool"])
    assert (rec["node"], rec["job_id"], rec["run"], rec["cluster"]) == ("gpu01", "101", 0, "c")
    sig = {s["signal"]: s for s in rec["signals"]}
    assert sig["xid119"]["critical"] and sig["xid119"]["pci"] == "0000:9b:00"
    assert sig["link_flap"]["detail"] == "ib6 lost carrier 6x"
    assert rec["probe_errors"] == []
    # the next job on the node only sees what is new
    r = run_hook(cfg, 102)
    assert r.returncode == 0, r.stderr
    recs = {x["job_id"]: x for x in spool.read_records([tmp_path / "spool"])}
    assert recs["102"]["signals"] == []
    assert oct(os.stat(tmp_path / "state" / "gpu01" / "epilog.json").st_mode & 0o777) == "0o600"


def test_gpu_fallen_off_the_bus_at_job_end(tmp_path):
    broken = tmp_path / "smi7"
    broken.write_text(drop_gpu(H100_Q.read_text(), 4))
    cfg = site(tmp_path, smi=broken, kmsg=tmp_path / "empty")
    (tmp_path / "empty").write_text("")
    assert run_hook(cfg, 7).returncode == 0
    (rec,) = spool.read_records([tmp_path / "spool"])
    gpu = [s for s in rec["signals"] if s["signal"] == "gpu_lost"]
    assert gpu and gpu[0]["critical"] and "7 GPUs visible, 8 expected" in gpu[0]["detail"]
    assert [v["check"] for v in rec["verdicts"]] == ["gpu_count"]


def test_hung_probes_are_abandoned_and_reported_never_blocking(tmp_path):
    hang = tmp_path / "hang.sh"
    hang.write_text("#!/bin/sh\nsleep 600\n")
    hang.chmod(0o755)
    cfg = write_cbd_config(
        tmp_path / "cbd.toml",
        state_dir=tmp_path / "state",
        probes={"nvidia_smi_q": [str(hang)], "kernel_log": [str(hang)]},
        extra=f"""[epilog]
spool_dir = "{tmp_path}/spool"
probe_timeout_s = 0.5
watchdog_s = 1.0
""",
    )
    r = run_hook(cfg, 9)
    assert r.returncode == 0, r.stderr
    (rec,) = spool.read_records([tmp_path / "spool"])
    assert any("timed out" in e for e in rec["probe_errors"]), rec["probe_errors"]
    # nvidia-smi hanging after a job is itself the XID 79/119 symptom
    assert [s["signal"] for s in rec["signals"]] == ["gpu_unresponsive"]
    # the hung children were killed with their process group
    left = subprocess.run(["pgrep", "-f", str(hang)], capture_output=True, text=True)
    assert left.stdout.strip() == ""


def test_an_aegis_bug_never_fails_the_teardown(tmp_path):
    cfg = tmp_path / "cbd.toml"
    state = tmp_path / "state"
    # a config that fails to load still names where its counters go (not the system's)
    cfg.write_text(f"[runtime]\nstate_dir = '{state}'\n[policy.default]\nfail = 'explode'\n")
    r = run_hook(cfg, 5, AEGIS_MODE="node")
    assert r.returncode == 0
    assert "config error, ignored" in r.stderr and "policy.default.fail" in r.stderr
    assert [p.read_text() for p in state.glob("*/epilog_config_errors")] == ["1"]
    (tmp_path / "spool").write_text("")  # the spool "directory" is a file: an OSError inside
    r = run_hook(site(tmp_path), 5)
    assert r.returncode == 0
    assert "internal error, ignored" in r.stderr
    r = run_hook(tmp_path / "missing.toml", 5, SLURM_SCRIPT_CONTEXT="epilog_slurmctld")
    assert r.returncode == 0


def test_loop_guard_counts_failed_runs_in_the_window_per_partition():
    limits = {"enabled": True, "max_requeues": 2, "window_minutes": 10, "ignore_exit_signals": [15]}
    now = 10_000.0
    hist = [
        {"t": now - 30, "run": 0, "exit_code": "42:0"},
        {"t": now - 20, "run": 1, "exit_code": "42:0"},
    ]
    assert epilog.loop_decision(hist, limits, now)[0] is False  # 2 runs: at the limit
    # a run requeued off a broken node by a Prolog never started: it ends 0:0 and is no
    # failed run, nor is a clean final run (10.13)
    hist.append({"t": now - 10, "run": 2, "exit_code": "0:0", "failed": False})
    assert epilog.loop_decision(hist, limits, now)[:2] == (False, 2)
    hist.append({"t": now, "run": 3, "exit_code": "1:0", "failed": True})
    hold, n, why = epilog.loop_decision(hist, limits, now)
    assert hold and n == 3 and "limit 2" in why
    # preempted/scancelled runs (SIGTERM) and runs outside the window do not count
    old = [
        {"t": now - 3600, "run": 0, "exit_code": "42:0"},
        {"t": now - 5, "run": 1, "exit_code": "0:15"},
        {"t": now, "run": 2, "exit_code": "42:0"},
    ]
    assert epilog.loop_decision(old, limits, now)[:2] == (False, 1)
    assert epilog.loop_decision(hist, {**limits, "enabled": False}, now)[0] is False


def test_loop_guard_defaults_and_partition_overrides(tmp_path):
    cfg_path = tmp_path / "cbd.toml"
    cfg_path.write_text("[loop_guard.partition.big]\nmax_requeues = 1\n")
    cfg = epilog.load_config(str(cfg_path))
    assert epilog.loop_limits(cfg, "batch")["max_requeues"] == 5
    assert epilog.loop_limits(cfg, "big")["max_requeues"] == 1
    assert epilog.loop_limits(cfg, "big")["window_minutes"] == 60


@pytest.mark.parametrize("code", ["0:0", ""])
def test_ctld_leaves_successful_jobs_alone(tmp_path, monkeypatch, code):
    cfg = epilog.load_config(str(site(tmp_path)))
    cfg["runtime"]["state_dir"] = str(tmp_path / "state")
    monkeypatch.setenv("SLURM_JOB_ID", "55")
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", code)
    monkeypatch.setenv("SLURM_JOB_NODELIST", "gpu[01-02]")
    res = epilog.run_ctld(cfg, spawn=False)
    assert "records" not in res and "loop" not in res
    assert not (tmp_path / "state" / "ctld" / "loops.json").exists()  # no state write at all


def test_ctld_records_failed_runs_for_the_loop_guard(tmp_path, monkeypatch):
    cfg = epilog.load_config(str(site(tmp_path)))
    cfg["runtime"]["state_dir"] = str(tmp_path / "state")
    cfg["epilog"]["tag"] = False
    cfg["loop_guard"]["max_requeues"] = 1
    monkeypatch.setenv("SLURM_JOB_ID", "56")
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", "42:0")
    for run, hold in ((0, False), (1, True)):
        monkeypatch.setenv("SLURM_JOB_RESTART_COUNT", str(run))
        res = epilog.run_ctld(cfg, spawn=False)
        assert res["loop"]["hold"] is hold and res["loop"]["counted"] == run + 1
    state = json.loads((tmp_path / "state" / "ctld" / "loops.json").read_text())
    assert [h["run"] for h in state["jobs"]["56"]] == [0, 1]


def test_counter_growth_between_epilogs_through_the_real_runner(tmp_path):
    """IB counters (sysfs tree from a recorded gcm dump) and GPU ECC counters (recorded
    nvidia-smi -q) grow between two Epilogs: the second one reports the growth."""
    from cbd._fixtures import edit_gpu, materialize_sysfs

    root = materialize_sysfs(FIX / "gcm" / "learn_ib_intf_operstate_down.json", tmp_path / "root")
    ports = sorted((root / "sys" / "class" / "infiniband").glob("*/ports/1"))
    assert len(ports) == 8
    for p in ports:
        (p / "counters").mkdir(exist_ok=True)
        (p / "counters" / "link_downed").write_text("0\n")
        (p / "counters" / "symbol_error").write_text("0\n")
    smi = tmp_path / "smi"
    smi.write_text(H100_Q.read_text())
    cfg_path = site(tmp_path, smi=smi, kmsg=tmp_path / "empty")
    (tmp_path / "empty").write_text("")
    cfg = epilog.load_config(str(cfg_path))
    cfg["runtime"]["root"] = str(root)
    cfg["epilog"]["syslog_path"] = ""
    state: dict = {}
    assert epilog.capture(cfg, "gpu01", state)["signals"] == []  # first reading: baseline
    (ports[2] / "counters" / "link_downed").write_text("3\n")
    (ports[2] / "counters" / "symbol_error").write_text("57\n")
    smi.write_text(
        edit_gpu(H100_Q.read_text(), 5, r"DRAM Uncorrectable\s+: 0", "DRAM Uncorrectable : 1")
    )
    got = {s["signal"]: s for s in epilog.capture(cfg, "gpu01", state)["signals"]}
    dev = ports[2].parent.parent.name
    assert (
        got["ib_link_flap"]["port"] == f"{dev}/1" and got["ib_link_flap"]["kind"] == "distributed"
    )
    assert got["ib_errors"]["detail"] == f"{dev}/1: symbol_error +57"
    assert got["ecc_uncorrectable"]["critical"]
