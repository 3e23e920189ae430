"""Benchmark: light CBD profile on a healthy node, vs Meta gcm's ``health_checks`` in the same run.

Prints figures; asserts nothing.  The healthy node is simulated with recorded real outputs
(8xH100 ``nvidia-smi -q`` via ``cat``, A100 ``nvidia-smi nvlink -s``, a gcm sysfs dump of 8 HDR
IB ports materialised as a real directory tree, an app-XID dmesg); /tmp disk and /proc/meminfo
are this machine's.  Measured:

* in-process wall time of ``cbd.run`` (probes in parallel, one subprocess per tool),
* end-to-end wall time and max RSS of the Prolog process (``python -I -m
  aegis_slurm.node.prolog``: interpreter start, imports, checks, state, .prom),
* import time of the Prolog path (``python -X importtime``), targets: <= 0.5 s wall, <= 80 ms
  imports,
* gcm (PyPI package ``gpucm``, CLI ``health_checks``): ``health_checks check-storage disk-usage``
  wall time and RSS, one check only, and the ratio to our whole light profile.

gcm is looked up as $AEGIS_GCM_HEALTH_CHECKS, then ``health_checks`` on PATH, then the
repository's ``.venv-gcm/bin/health_checks`` (``make bench`` installs it there; kept out of the
project venv on purpose: it pulls pydantic, opentelemetry, omegaconf, pynvml).

``--burst`` (root, the real Slurm test cluster of ``tools/slurm-testbed.sh``, under its session
lock): 8 jobs submitted together onto one 8-CPU node, the Prolog installed as docs/cbd.md says
with an ``nvidia-smi -q`` that takes 1.5 s (recorded output behind ``sleep 1.5``, as on a real
8-GPU node); each Prolog's own wall time is logged by the site wrapper.  Reports one Prolog
alone vs the slowest of the 8 (target: <= 2x, issue 10.14; before, the per-node state lock was
held over the probes and the eighth Prolog waited 8x).

Usage: ``.venv/bin/python benchmarks/bench_cbd.py [--runs 15] [--burst]``
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIX = REPO / "tests" / "fixtures" / "hostsignals"
sys.path.insert(0, str(REPO / "tests" / "cbd"))  # for _fixtures.materialize_sysfs


def build_site(tmp: Path) -> Path:
    from _fixtures import materialize_sysfs  # gcm sysfs JSON -> real tree

    root = materialize_sysfs(FIX / "gcm" / "learn_ib_intf_operstate_down.json", tmp / "root")
    (root / "proc").mkdir(exist_ok=True)
    (root / "proc" / "meminfo").write_text(Path("/proc/meminfo").read_text())
    cfg = tmp / "cbd.toml"
    cfg.write_text(f"""
[runtime]
root = "{root}"
state_dir = "{tmp}/state"
textfile_dir = "{tmp}/prom"
syslog = false
[expect]
gpus = 8
nvlink_links = 12
ib_ports = 7
ib_rate_gbps = 200
disk_paths = ["/tmp"]
time_sync = "warn"
[probes]
nvidia_smi_q = ["cat", "{FIX}/gpud/nvidia-smi-query.535.161.08.out.0.valid"]
nvlink_status = ["cat", "{FIX}/gpud/nvidia-smi.nvlink.status.a100"]
kernel_log = ["cat", "{FIX}/gpud/dmesg.decode.iso.log"]
""")
    return cfg


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, max RSS MiB, rc) of one child process, measured with wait4."""
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    return wall, ru.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def import_ms(env: dict[str, str]) -> tuple[float, float, list[tuple[float, str]]]:
    """Import time (ms): whole process incl. startup, the aegis_slurm subtree, 5 slowest."""
    r = subprocess.run(
        [
            sys.executable,
            "-I",
            "-X",
            "importtime",
            "-c",
            "import aegis_slurm.node.prolog, aegis_slurm.node.cbd",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    total, ours, rows = 0.0, 0.0, []
    for line in r.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)", line)
        if not m:
            continue
        self_us, cum_us, indent, name = int(m[1]), int(m[2]), len(m[3]), m[4]
        rows.append((self_us / 1000, name))
        if indent == 1:  # top-level: interpreter startup (site, encodings) + our import
            total += cum_us / 1000
            if name.startswith("aegis_slurm"):
                ours += cum_us / 1000
    return total, ours, sorted(rows, reverse=True)[:5]


def find_gcm() -> str | None:
    for cand in (
        os.environ.get("AEGIS_GCM_HEALTH_CHECKS"),
        shutil.which("health_checks"),
        str(REPO / ".venv-gcm" / "bin" / "health_checks"),
    ):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def burst(n_jobs: int = 8, node: str = "node1") -> dict[str, object]:
    """Prolog burst on the real test cluster (see the module docstring)."""
    import fcntl

    sys.path.insert(0, str(REPO / "tests"))
    from slurm.conftest import LOCK_PATH, SCRIPT, TESTBED_DIR, SlurmCluster

    with tempfile.TemporaryDirectory() as d, open(LOCK_PATH, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the test cluster is shared: one driver at a time
        tmp = Path(d)
        tmp.chmod(0o755)
        subprocess.run(["bash", str(SCRIPT), "start"], check=True, capture_output=True)
        conf = TESTBED_DIR / "etc" / "slurm.conf"
        c = SlurmCluster(TESTBED_DIR, dict(os.environ, SLURM_CONF=str(conf)), conf, [], False)
        c.reset()
        smi = FIX / "gpud" / "nvidia-smi-query.535.161.08.out.0.valid"
        (tmp / "kmsg").write_text("")
        cfg = tmp / "cbd.toml"
        cfg.write_text(f"""[runtime]
state_dir = "{tmp}/state"
textfile_dir = ""
[expect]
gpus = "slurm"
time_sync = "off"
[probes]
nvidia_smi_q = ["sh", "-c", "sleep 1.5; cat {smi}"]
kernel_log = ["cat", "{tmp}/kmsg"]
""")
        log = tmp / "times.log"
        hook = tmp / "aegis-prolog-site"
        hook.write_text(
            f"#!/bin/sh\nt0=$(date +%s.%N)\nAEGIS_CBD_CONFIG={cfg}\nexport AEGIS_CBD_CONFIG\n"
            f'/bin/sh {REPO}/prolog/aegis-prolog "$@"\nrc=$?\n'
            f'echo "$SLURM_JOB_ID $t0 $(date +%s.%N)" >> {log}\nexit $rc\n'
        )
        hook.chmod(0o755)
        try:
            c.set_hooks(prolog=hook)

            def run(k: int) -> list[float]:
                log.write_text("")
                jobs = [c.submit(["-w", node, "-n1", "--wrap", "sleep 3"]) for _ in range(k)]
                for j in jobs:
                    c.wait_state(j, "COMPLETED", timeout=180)
                rows = [ln.split() for ln in log.read_text().splitlines()]
                return sorted(float(b) - float(a) for _, a, b in rows)

            alone = [run(1)[0] for _ in range(3)]
            together = run(n_jobs)
        finally:
            c.reset()
    one = statistics.median(alone)
    return {
        "node": node,
        "one_prolog_s": [round(x, 2) for x in alone],
        "burst_prolog_s": [round(x, 2) for x in together],
        "slowest_over_one": round(max(together) / one, 2),
        "target_slowest_over_one": 2.0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--burst", action="store_true", help="Prolog burst on the test cluster")
    args = ap.parse_args()
    if args.burst:
        print(json.dumps(burst(), indent=2))
        return
    from aegis_slurm.node import cbd, config

    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        cfg_path = build_site(tmp)
        cfg = config.load(cfg_path)
        root = tmp / "root"
        # in-process
        walls, verdicts = [], []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            verdicts = cbd.run(cfg, "gpu001", root=root)
            walls.append(time.perf_counter() - t0)
        states = {}
        for v in verdicts:
            states[v.state] = states.get(v.state, 0) + 1
        # whole Prolog process (healthcheck mode: identical work, exit code always 0)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "AEGIS_CBD_CONFIG": str(cfg_path),
            "SLURMD_NODENAME": "gpu001",
            "SLURM_CONF": str(tmp / "none"),
        }
        proc = [
            timed([sys.executable, "-I", "-m", "aegis_slurm.node.prolog", "--mode", "prolog"], env)
            for _ in range(args.runs)
        ]
        imps = [import_ms(env) for _ in range(5)]
        imp = statistics.median(i[0] for i in imps)
        imp_ours = statistics.median(i[1] for i in imps)
        slow = imps[-1][2]
        gcm = find_gcm()
        gcm_runs = []
        if gcm:
            gcm_runs = [
                timed(
                    [
                        gcm,
                        "check-storage",
                        "disk-usage",
                        "bench",
                        "prolog",
                        "-v",
                        "/tmp",
                        "--log-folder",
                        str(tmp / "gcm-logs"),
                    ],
                    {"PATH": env["PATH"], "HOME": str(tmp)},
                )
                for _ in range(max(3, args.runs // 3))
            ]

    med = statistics.median
    p_wall = [w for w, _, _ in proc]
    out = {
        "runs": args.runs,
        "checks": len(verdicts),
        "verdict_counts": states,
        "cbd_run_in_process_s": {"median": round(med(walls), 4), "max": round(max(walls), 4)},
        "prolog_process_s": {"median": round(med(p_wall), 4), "max": round(max(p_wall), 4)},
        "prolog_process_max_rss_mib": round(max(r for _, r, _ in proc), 1),
        "prolog_exit_codes": sorted({rc for _, _, rc in proc}),
        "imports_ms_whole_process": round(imp, 1),
        "imports_ms_aegis_slurm_subtree": round(imp_ours, 1),
        "slowest_imports_ms": [(round(ms, 2), n) for ms, n in slow],
        "targets": {"wall_s": 0.5, "import_ms": 80},
    }
    if gcm_runs:
        g_wall = med([w for w, _, _ in gcm_runs])
        out["gcm_disk_usage_s"] = {
            "median": round(g_wall, 4),
            "max": round(max(w for w, _, _ in gcm_runs), 4),
        }
        out["gcm_max_rss_mib"] = round(max(r for _, r, _ in gcm_runs), 1)
        out["gcm_exit_codes"] = sorted({rc for _, _, rc in gcm_runs})
        out["ratio_gcm_one_check_over_aegis_full_light_profile"] = round(g_wall / med(p_wall), 2)
        out["ratio_rss_gcm_over_aegis"] = round(
            out["gcm_max_rss_mib"] / out["prolog_process_max_rss_mib"], 2
        )
    else:
        out["gcm"] = "not installed (make bench installs gpucm into .venv-gcm)"
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
