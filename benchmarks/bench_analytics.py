"""Benchmark: the simulator, every analytics metric on a ~4M-record table, and the Monte Carlo.

Targets (issue 3): all metrics on 4M records <= 20 s; 10,000 Monte Carlo replications of a
30-day 16k-GPU job <= 2 s; the simulator writes 4M records well under a minute.  Prints figures
only; nothing here asserts on wall-clock time.

    .venv/bin/python benchmarks/bench_analytics.py [--records 4000000] [--ingest]

``--commands`` times every analytics command and ``report`` as the CLI runs them, one fresh
process each, on a cached store of ``--records`` records, with ``--month`` and then with no
period at all (the whole history; ``--no-whole`` skips those), each under a watchdog that kills
it above ``--rss-limit`` GB (issue 13 target: a 20M-record store, each <= 60 s and <= 8 GB peak
RSS).  ``--tiled`` builds that store by tiling
a 90-day simulation over five years (``tiled_store.py``), as one simulation cannot hold it:

    .venv/bin/python benchmarks/bench_analytics.py --commands --tiled --records 20000000 \
        --month 2028-12
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.ettr import simulate_ettr
from aegis_slurm.analytics.failure_rate import failure_rate, rolling_failure_rate
from aegis_slurm.analytics.goodput import goodput_lost
from aegis_slurm.analytics.job_runs import (
    link_job_runs,
    measured_ettr,
    size_distribution,
)
from aegis_slurm.analytics.lemon import lemon_nodes
from aegis_slurm.analytics.loops import requeue_loops
from aegis_slurm.analytics.mttf import mttf_by_size
from aegis_slurm.analytics.taxonomy import failure_taxonomy
from aegis_slurm.simulate.history import SimConfig, simulate, write_history


def timed(label: str, fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t
    print(f"  {label:<28} {dt:7.2f} s")
    return out, dt


COMMANDS = [
    ["taxonomy"],
    ["failure-rate"],
    ["mttf"],
    ["goodput"],
    ["requeue-loops"],
    ["lemon-nodes"],
    ["measured-ettr"],
    ["availability"],
    ["check", "--max-crash-loops", "1000", "--max-lemon-nodes", "1000"],
]


# The command as admins run it, in a fresh Python whose VmHWM is its own peak (ru_maxrss of a
# child would also count this benchmark's parent, whose maximum survives fork + exec).
_CHILD = """
import sys, time, json, contextlib, io
t0 = time.perf_counter()
from aegis_slurm.cli import main
code = 0
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main(sys.argv[1:], standalone_mode=False)
    except SystemExit as e:
        code = e.code or 0
    except Exception as e:  # a crossed check (exit 3) is an exception here
        code = getattr(e, "exit_code", 1)
wall = time.perf_counter() - t0
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 2**20
print(json.dumps({"wall_s": wall, "peak_rss_gb": rss, "exit": code}))
"""


#: A child above this RSS is killed (the machine is shared; the old period-less path peaked at
#: ~24 GB on the 20M store).  Its row then reads "killed".
RSS_LIMIT_GB = 10.0


def _rss_gb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS")) / 2**20
    except (OSError, StopIteration):
        return 0.0


def run_measured(
    args: list[str], limit_gb: float = RSS_LIMIT_GB, code_dir: Path | None = None
) -> tuple[float, float, int]:
    """(wall seconds, own peak RSS GB, exit code) of one command in a fresh process, killed
    (exit "killed", NaN figures) as soon as its RSS passes ``limit_gb``.  ``code_dir``: a
    checkout whose ``aegis_slurm`` the command runs instead of this one's (the child's working
    directory comes first on its path)."""
    import json
    import os
    import subprocess
    import sys

    env = None if code_dir is None else {**os.environ, "PYTHONPATH": str(code_dir)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=code_dir,
        env=env,
    )
    killed = False
    while proc.poll() is None:
        if _rss_gb(proc.pid) > limit_gb:
            proc.kill()
            killed = True
            break
        time.sleep(0.1)
    stdout, stderr = proc.communicate()
    if killed:
        print(f"  killed: RSS above {limit_gb:g} GB")
        return math.nan, math.nan, -9
    if proc.returncode != 0 or not stdout.strip():
        print(stderr[-2000:])
        return math.nan, math.nan, proc.returncode
    res = json.loads(stdout.strip().splitlines()[-1])
    return res["wall_s"], res["peak_rss_gb"], res["exit"]


def bench_commands(
    records: int,
    nodes: int,
    month: str,
    fresh: bool,
    tiled: bool,
    whole: bool = True,
    limit_gb: float = RSS_LIMIT_GB,
    baseline: Path | None = None,
) -> None:
    import os

    if tiled:  # years of history without the simulator's memory (benchmarks/tiled_store.py)
        import shutil

        from tiled_store import build, default_dir

        root = default_dir(records, nodes)
        if fresh and root.exists():
            shutil.rmtree(root)
        root = build(root, records, nodes, base_days=90.0)
    else:
        from bench_report import cached_store

        root = cached_store(records, nodes, fresh)
    store, events, signals = root / "store", root / "events.txt", root / "signals.parquet"
    common = ["--store", str(store), "--events", str(events), "--signals", str(signals)]
    parts = list(store.glob("runs/month=*/part-*.parquet"))
    size = sum(p.stat().st_size for p in parts) / 2**20
    print(f"store {store}: {len(parts)} parts, {size:,.0f} MiB")
    print(f"every command for {month} (fresh process each); load average {os.getloadavg()}")
    import polars as pl

    # A requeued job of the month's partition: the one-job lookups (diagnose, logs --job and
    # minder --job share load_job_runs) must not read the store.
    job = (
        pl.scan_parquet(sorted(store.glob(f"runs/month={month}/part-*.parquet")))
        .group_by("job_id")
        .len()
        .filter(pl.col("len") > 1)
        .select(pl.col("job_id").min())
        .collect()
        .item()
    )
    worst_t = worst_m = 0.0
    with tempfile.TemporaryDirectory() as d:
        runs = [[*cmd, *common, "--month", month, "--json"] for cmd in COMMANDS]
        runs.append(["report", "--out", str(Path(d) / "r"), *common, "--month", month, "--json"])
        runs.append(["report", "--out", str(Path(d) / "latest"), *common, "--json"])
        runs.append(["diagnose", str(job), "--store", str(store), "--json"])
        if whole:
            # --start/--end over the month's calendar year (a quarter of the 20M store), then
            # no period: the whole history (check has none: it defaults to the last 30 days).
            year = int(month[:4])
            span = ["--start", f"{year}-01-01", "--end", f"{year + 1}-01-01"]
            runs += [[*cmd, *common, *span, "--json"] for cmd in COMMANDS if cmd[0] != "check"]
            runs += [[*cmd, *common, "--json"] for cmd in COMMANDS if cmd[0] != "check"]
        for argv in runs:
            wall, gb, rc = run_measured(argv, limit_gb)
            if math.isnan(wall):
                worst_t = worst_m = math.inf
            else:
                worst_t, worst_m = max(worst_t, wall), max(worst_m, gb)
            load = os.getloadavg()[0]
            period = "--month" in argv or argv[0] == "diagnose"
            latest = argv[0] == "report" and not period
            kind = " (year)" if "--start" in argv else "" if period else " (whole)"
            label = argv[0] + (" (latest)" if latest else kind)
            print(f"  {label:<22} {wall:7.2f} s  {gb:6.2f} GB peak RSS  exit {rc}  load {load:.1f}")
            if baseline is not None:  # the same command right after on the baseline's code
                b_wall, b_gb, b_rc = run_measured(argv, limit_gb, baseline)
                print(
                    f"  {'  baseline':<22} {b_wall:7.2f} s  {b_gb:6.2f} GB peak RSS  exit {b_rc}"
                    f"  ({b_wall / wall:.2f}x the time, {b_gb - gb:+.2f} GB)"
                )
    print(f"  {'WORST':<22} {worst_t:7.2f} s  {worst_m:6.2f} GB   (target <= 60 s, <= 8 GB)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--ingest", action="store_true", help="also time write + real ingest")
    ap.add_argument("--commands", action="store_true", help="time the CLI commands on a store")
    ap.add_argument("--month", default="2024-06", help="--month for --commands")
    ap.add_argument("--fresh", action="store_true", help="rebuild the cached store")
    ap.add_argument("--tiled", action="store_true", help="--commands on a tiled_store.py store")
    ap.add_argument("--no-whole", action="store_true", help="--commands: skip the no-period runs")
    ap.add_argument("--rss-limit", type=float, default=RSS_LIMIT_GB, help="kill a command above")
    ap.add_argument(
        "--baseline",
        type=Path,
        help="--commands: also run each command on this checkout's code (git worktree add DIR REV)",
    )
    args = ap.parse_args()
    if args.commands:
        bench_commands(
            args.records,
            args.nodes,
            args.month,
            args.fresh,
            args.tiled,
            not args.no_whole,
            args.rss_limit,
            args.baseline,
        )
        return
    days = args.records / 1.33 / (2.0 * args.nodes)  # ~1.33 records per job, 2 jobs/node-day
    cfg = SimConfig(nodes=args.nodes, days=days, seed=1, crash_loops=5, lemons=8)
    print(f"simulate: {args.nodes} nodes x {days:.0f} days")
    sim, t_sim = timed("simulate", lambda: simulate(cfg))
    runs = sim.runs
    print(f"  records: {runs.height:,}")
    with tempfile.TemporaryDirectory() as d:
        _, t_w = timed("write sacct export", lambda: write_history(sim, Path(d) / "h.txt"))
        size = (Path(d) / "h.txt").stat().st_size
        print(f"  export size: {size / 1e6:,.0f} MB")
        if args.ingest:
            from aegis_slurm.accounting import ingest_files, load_runs

            timed("ingest (real parser)", lambda: ingest_files([Path(d) / "h.txt"], Path(d) / "s"))
            runs, _ = timed("load_runs", lambda: load_runs(Path(d) / "s"))

    print("metrics:")
    total = 0.0
    att, t = timed("attribution", lambda: attribute_failures(runs, sim.signals, sim.events))
    total += t
    linked, t = timed("job-run linkage", lambda: link_job_runs(att))
    total += t
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("taxonomy", lambda: failure_taxonomy(att)),
        ("failure rate", lambda: failure_rate(att)),
        ("rolling r_f (30 d)", lambda: rolling_failure_rate(att)),
        ("mttf by size", lambda: mttf_by_size(att, 0.0065)),
        ("goodput (1st + 2nd order)", lambda: goodput_lost(linked)),
        ("crash loops", lambda: requeue_loops(linked, rf=0.0065)),
        ("lemon nodes", lambda: lemon_nodes(att, sim.events)),
        ("measured ETTR", lambda: measured_ettr(linked, 0.0065, qos="high")),
        ("size distribution", lambda: size_distribution(att)),
    ]
    results = {}
    for label, fn in steps:
        results[label], t = timed(label, fn)
        total += t
    print(f"  {'ALL METRICS':<28} {total:7.2f} s   (target <= 20 s)")
    fr = results["failure rate"]
    print(
        f"  r_f = {fr['rf_per_node_day'] * 1000:.2f}/1000 node-days "
        f"(planted incl. lemons {sim.truth['expected_rf_gt128'] * 1000:.2f}); "
        f"loops found {len(results['crash loops'])}/{len(sim.truth['crash_loops'])}"
    )

    print("Monte Carlo: 10,000 replications, 16,384 GPUs, 30 days, dt=60, u0=5, q=10:")
    mc, t_mc = timed(
        "simulate_ettr", lambda: simulate_ettr(2048, 0.0065, 5, 60, 0, 10, 43200, 10_000)
    )
    print(f"  mean {mc.mean:.4f} ± {mc.stderr:.5f}; {mc.mean_failures:.0f} failures per run")
    print(f"  {'MONTE CARLO':<28} {t_mc:7.2f} s   (target <= 2 s)")
    print(f"  {'SIMULATOR':<28} {t_sim:7.2f} s + write {t_w:.2f} s")


if __name__ == "__main__":
    main()
