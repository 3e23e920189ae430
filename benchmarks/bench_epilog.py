"""Benchmark: what the aegis Epilog adds to job teardown.  Prints figures; asserts nothing.

The node is simulated with recorded real outputs (8xH100 ``nvidia-smi -q`` via ``cat``, a real
XID-119 ``dmesg -T``, a gcm sysfs dump of 8 HDR IB ports materialised as a real tree, a syslog
with link flaps); the spool and state live on this machine's /tmp.  Measured:

* ``epilog_process_s``: the whole node Epilog as slurmd runs it (``epilog/aegis-epilog``: sh,
  interpreter start, imports, probes in parallel, state, one fsynced spool record), target
  <= 1 s;
* ``capture_in_process_s``: :func:`aegis_slurm.node.epilog.capture` alone;
* ``hung_probe_process_s``: the same process when nvidia-smi and the kernel-log tool hang
  (``sleep 600``), with the documented default budget (probe_timeout_s 3 s, watchdog 4 s):
  bounded by the probe timeout, never by the hang;
* ``spool_append_ms``: one durable append (temp file + fsync + rename + dir fsync) into a
  node file already holding ~1 MiB (the rotation threshold), i.e. the worst case;
* ``ctld_success_process_s``: EpilogSlurmctld on a successful single-node job (nothing to
  do: no state write, no Slurm call; a clean multi-node end adds one ``scontrol show job``).
* ``big_kernel_log``: a 100 MB kernel log file (``kernel_log_path``) that grew by 1,000 lines
  since the previous Epilog: the Epilog's kernel-log cost (read from the saved offset + signal
  extraction) and the whole ``capture``, next to one full read of the file (what a re-read
  costs, the old design), target < 0.2 s (issue 10.5).

Usage: ``.venv/bin/python benchmarks/bench_epilog.py [--runs 15]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "hostsignals"
HOOK = REPO / "epilog" / "aegis-epilog"
sys.path.insert(0, str(REPO / "tests" / "cbd"))  # for _fixtures.materialize_sysfs


def build_site(tmp: Path, hang: bool = False) -> Path:
    from _fixtures import materialize_sysfs

    root = tmp / "root"
    if not root.exists():
        materialize_sysfs(FIX / "gcm" / "learn_ib_intf_operstate_down.json", root)
    smi = f'["cat", "{FIX}/gpud/nvidia-smi-query.535.161.08.out.0.valid"]'
    kmsg = f'["cat", "{FIX}/gpud/dmesg-with-xid-119.log"]'
    if hang:
        smi = kmsg = '["sleep", "600"]'
    cfg = tmp / ("hang.toml" if hang else "cbd.toml")
    cfg.write_text(f"""
[runtime]
root = "{root}"
state_dir = "{tmp}/state"
textfile_dir = ""
syslog = false
[expect]
gpus = 8
ib_ports = 7
ib_rate_gbps = 200
time_sync = "off"
disk_paths = []
[probes]
nvidia_smi_q = {smi}
kernel_log = {kmsg}
[epilog]
spool_dir = "{tmp}/spool"
syslog_path = "{FIX}/azurehpc-health-checks/1dev_6flap_syslog"
""")
    return cfg


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t0, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def hook_env(
    cfg: Path, job: int, context: str = "epilog_slurmd", nodelist: str = "gpu[001-004]"
) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "AEGIS_CBD_CONFIG": str(cfg),
        "AEGIS_PYTHON": sys.executable,
        "SLURM_SCRIPT_CONTEXT": context,
        "SLURMD_NODENAME": "gpu001",
        "SLURM_JOB_ID": str(job),
        "SLURM_JOB_EXIT_CODE2": "0:0",
        "SLURM_JOB_NODELIST": nodelist,
        "SLURM_CONF": "/nonexistent",
    }


LINE = "[{t:>12.6f}] NVRM: Xid (PCI:0000:1b:00): 31, pid={i}, Ch 00000010, MMU Fault ....\n"


def bench_big_kernel_log(tmp: Path, cfg_path: Path, runs: int) -> dict[str, object]:
    """100 MB kernel log, 1,000 new lines per Epilog: incremental cost vs one full read."""
    from aegis_slurm.node import epilog, klog
    from aegis_slurm.node import signals as sg

    log = tmp / "kern.log"
    block = "".join(LINE.format(t=i / 1000, i=i) for i in range(10000))
    with log.open("w") as f:
        while f.tell() < 100 * 10**6:
            f.write(block)
    size = log.stat().st_size
    cfg = epilog.load_config(str(cfg_path))
    cfg["epilog"]["kernel_log_path"] = str(log)
    cfg["epilog"]["syslog_path"] = ""
    state: dict = {}
    epilog.capture(cfg, "gpu001", state)  # the previous Epilog: position saved
    new = "".join(LINE.format(t=10**6 + i, i=i) for i in range(1000))
    inc, cap, n_sig = [], [], 0
    for _ in range(runs):
        with log.open("a") as f:
            f.write(new)
        pos = dict(state["kernel_file"])
        t0 = time.perf_counter()
        text, _, _ = klog.read_file_since(str(log), pos, 8 << 20)
        sigs = sg.kernel_signals(text.splitlines(), 0.0, time.time())
        inc.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = epilog.capture(cfg, "gpu001", state)
        cap.append(time.perf_counter() - t0)
        n_sig = next(s["count"] for s in got["signals"] if s["signal"] == "xid31")
        assert len(sigs) == 1000
    t0 = time.perf_counter()
    whole = log.read_text()
    lines = whole.splitlines()
    full = time.perf_counter() - t0
    med = statistics.median
    return {
        "log_mb": round(size / 1e6, 1),
        "new_lines": 1000,
        "xid31_counted_per_epilog": n_sig,
        "incremental_kernel_s": {"median": round(med(inc), 4), "max": round(max(inc), 4)},
        "capture_s": {"median": round(med(cap), 4), "max": round(max(cap), 4)},
        "one_full_read_and_split_s": round(full, 3),
        "full_read_lines": len(lines),
        "ratio_full_over_incremental": round(full / med(inc), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    from aegis_slurm.node import epilog, spool

    med = statistics.median
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cfg_path = build_site(tmp)
        proc = [
            timed(["/bin/sh", str(HOOK)], hook_env(cfg_path, 1000 + i)) for i in range(args.runs)
        ]
        n_records = len(list(spool.read_records([tmp / "spool"])))
        first = next(r for r in spool.read_records([tmp / "spool"]) if r["job_id"] == "1000")

        cfg = epilog.load_config(str(cfg_path))
        cap = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            epilog.capture(cfg, "gpu001", {})
            cap.append(time.perf_counter() - t0)

        hang_cfg = build_site(tmp, hang=True)
        hung = [timed(["/bin/sh", str(HOOK)], hook_env(hang_cfg, 5000 + i)) for i in range(3)]

        big = tmp / "big"
        pad = "x" * 900
        for i in range(1100):  # ~1 MiB: the next append rotates or rewrites the whole file
            spool.append(
                big, {"node": "n", "job_id": str(i), "run": 0, "pad": pad}, max_bytes=1 << 30
            )
        appends = []
        for i in range(args.runs * 4):
            t0 = time.perf_counter()
            spool.append(
                big, {"node": "n", "job_id": f"b{i}", "run": 0, "pad": pad}, max_bytes=1 << 30
            )
            appends.append((time.perf_counter() - t0) * 1000)
        size = (big / "n" / "signals.jsonl").stat().st_size

        ctld = [
            timed(
                ["/bin/sh", str(HOOK)], hook_env(cfg_path, 9000 + i, "epilog_slurmctld", "gpu001")
            )
            for i in range(args.runs)
        ]

        big_log = bench_big_kernel_log(tmp, cfg_path, max(3, args.runs // 3))

    walls = [w for w, _, _ in proc]
    out = {
        "runs": args.runs,
        "epilog_process_s": {"median": round(med(walls), 4), "max": round(max(walls), 4)},
        "epilog_process_max_rss_mib": round(max(r for _, r, _ in proc), 1),
        "epilog_exit_codes": sorted({rc for _, _, rc in proc}),
        "records_spooled": n_records,
        "signals_first_job": [s["signal"] for s in first["signals"]],
        "capture_in_process_s": {"median": round(med(cap), 4), "max": round(max(cap), 4)},
        "hung_probe_process_s": [round(w, 2) for w, _, _ in hung],
        "hung_probe_exit_codes": sorted({rc for _, _, rc in hung}),
        "spool_append_ms_at_1MiB": {
            "median": round(med(appends), 2),
            "max": round(max(appends), 2),
            "file_bytes": size,
        },
        "ctld_success_process_s": {
            "median": round(med(w for w, _, _ in ctld), 4),
            "max": round(max(w for w, _, _ in ctld), 4),
        },
        "big_kernel_log": big_log,
        "targets": {"epilog_process_s": 1.0, "big_kernel_log.incremental_kernel_s": 0.2},
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
