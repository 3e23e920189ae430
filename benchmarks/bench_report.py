"""Benchmark: the monthly report for one month of a ~4M-record store.

Target (issue 13): <= 60 s and <= 8 GB peak RSS for `aegis-slurm report` on a 20M-record store
(issue 6 asked <= 30 s on a 4M-record one; peak RSS is measured by ``bench_analytics.py
--commands``, one fresh process per command).  The store
is simulated once (4096 nodes x ~a year) and cached under the system temp dir, so a second run
times only the report.  Prints figures only; nothing here asserts on wall-clock time.

    .venv/bin/python benchmarks/bench_report.py [--records 4000000] [--month 2024-06] [--fresh]

With ``--tiled`` (issue 13, scale) the store is ``tiled_store.py``'s multi-year one, e.g.
``--tiled --records 20000000 --month 2028-12``; ``bench_analytics.py --commands --tiled`` times
every command and the report as the CLI runs them, with peak RSS.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import polars as pl

from aegis_slurm.accounting.store import write_runs
from aegis_slurm.report.builder import build_report, render_html
from aegis_slurm.report.compute import COLUMNS, compute_report
from aegis_slurm.report.figures import render_figures
from aegis_slurm.sections import Month, clean, load_inputs
from aegis_slurm.simulate.history import SimConfig, simulate, write_events


def cached_store(records: int, nodes: int, fresh: bool) -> Path:
    root = Path(tempfile.gettempdir()) / f"aegis-bench-report-{records}-{nodes}"
    if fresh and root.exists():
        shutil.rmtree(root)
    if (root / "done").exists():
        print(f"cached store: {root}")
        return root
    root.mkdir(parents=True, exist_ok=True)
    # ~1.3 records per job, 2 jobs per node-day: a little over ``records`` in the store.
    days = records / 1.3 / (2.0 * nodes)
    cfg = SimConfig(nodes=nodes, days=days, seed=1, crash_loops=24, lemons=8)
    print(f"simulating {nodes} nodes x {days:.0f} days into {root} (once)")
    t = time.perf_counter()
    sim = simulate(cfg)
    print(f"  simulate: {sim.runs.height:,} records in {time.perf_counter() - t:.1f} s")
    t = time.perf_counter()
    write_runs(root / "store", sim.runs)
    write_events(sim.events, root / "events.txt")
    sim.signals.write_parquet(root / "signals.parquet")
    print(f"  write store: {time.perf_counter() - t:.1f} s")
    (root / "done").touch()
    return root


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=4_000_000)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--month", default="2024-06")
    ap.add_argument("--fresh", action="store_true", help="rebuild the cached store")
    ap.add_argument(
        "--tiled", action="store_true", help="a tiled multi-year store (tiled_store.py)"
    )
    args = ap.parse_args()
    if args.tiled:
        from tiled_store import build, default_dir

        root = default_dir(args.records, args.nodes)
        if args.fresh and root.exists():
            shutil.rmtree(root)
        root = build(root, args.records, args.nodes, base_days=90.0)
    else:
        root = cached_store(args.records, args.nodes, args.fresh)
    store, events, signals = root / "store", root / "events.txt", root / "signals.parquet"
    month = Month.parse(args.month)

    stored = pl.scan_parquet(sorted(store.glob("runs/month=*/part-*.parquet"))).select(pl.len())
    print(f"report for {month} (store: {stored.collect().item():,} records)")
    # The same steps as build_report, timed one by one.
    t0 = time.perf_counter()
    inp = load_inputs(store, [events], [signals], month.period, columns=COLUMNS)
    runs = inp.context
    t1 = time.perf_counter()
    raw = compute_report(inp, month)
    t2 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        figs = render_figures(raw, Path(d) / "figures")
        t3 = time.perf_counter()
        rep = clean(raw)
        (Path(d) / "index.html").write_text(render_html(rep, figs))
        t4 = time.perf_counter()
        print(f"  load + attribute ({runs.height:,} records) {t1 - t0:6.2f} s")
        print(f"  compute (all sections, both months)     {t2 - t1:6.2f} s")
        print(f"  figures (PNG + SVG)                     {t3 - t2:6.2f} s")
        print(f"  html + json                             {t4 - t3:6.2f} s")
        print(f"  steps total                             {t4 - t0:6.2f} s")
        # End to end through the public entry point (what the CLI runs).
        t = time.perf_counter()
        full = build_report(store, month, Path(d) / "out", [events], [signals])
        total = time.perf_counter() - t
    s = full["summary"]
    print(f"  build_report end to end                 {total:6.2f} s   (target <= 60 s, <= 8 GB)")
    print(
        f"month: {s['jobs']:,} jobs, {s['runs']:,} runs, r_f {s['rf_per_1000_node_days']:.2f}"
        f"/1000 node-days, {len(full['requeue_loops']['loops'])} crash loops, "
        f"{len(full['lemon_nodes']['nodes'])} lemon nodes"
    )
    print(json.dumps({"records_in_month": s["runs"], "seconds": round(total, 2)}))


if __name__ == "__main__":
    main()
