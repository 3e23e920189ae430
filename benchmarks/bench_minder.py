"""Benchmark: Minder's speed, and its accuracy on the simulator's held-out split.  Asserts nothing.

Speed (targets from the issue):

* ``live_1024_nodes_s``: one detection pass (align + all metrics) over a 1,024-node job's last
  10 minutes, 12 metrics, 15 s samples, from the long table a Prometheus fetch returns; <= 1 s;
* ``offline_256_nodes_6h_s``: read a 6-hour, 256-node Parquet file, align, detect; <= 20 s;
* ``per_node_ms``: the live pass at 128 .. 1,024 nodes, per node: flat means linear in nodes;
* ``watch_pass_prometheus_s``: a whole ``watch`` pass for one job of 128 .. 1,024 nodes against
  a real Prometheus on loopback (12 range queries + detection; needs Debian's ``prometheus``).

Accuracy: precision, recall, median detection delay of Minder (shipped; each piece off),
Aegis' λ+2δ and the per-step z-score + 4-minute continuity baseline, on the *evaluation* split
(seed 2); the detector's threshold was chosen on the tuning split (seed 1), shown for reference.
Simulated data: this proves the plumbing and the benign cases, not real-world accuracy.

Usage: ``.venv/bin/python benchmarks/bench_minder.py [--jobs-per-fault 4] [--skip-accuracy]``
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from aegis_slurm.metrics import analyse
from aegis_slurm.metrics.catalog import DEFAULT_METRICS
from aegis_slurm.metrics.detect import Params, detect, lambda_2delta, zscore_baseline
from aegis_slurm.metrics.evaluate import score
from aegis_slurm.metrics.priority import default_priority
from aegis_slurm.metrics.table import read_table
from aegis_slurm.simulate.metrics import corpus, simulate_job

METRICS = [m.name for m in DEFAULT_METRICS]
PRI = default_priority()


def last_minutes(df: pl.DataFrame, minutes: float) -> pl.DataFrame:
    end = df["time"].max()
    return df.filter(pl.col("time") > end - pl.duration(seconds=minutes * 60))


def live_pass(n: int, runs: int = 3) -> float:
    df, _ = simulate_job(n, 20, "slow_gpu", seed=n, start=datetime(2026, 1, 5, tzinfo=UTC))
    df = last_minutes(df, 10)
    p = replace(Params(), warmup=0.0)
    best = float("inf")
    for _ in range(runs):
        t = time.perf_counter()
        analyse(df, priority=default_priority(), params=p, step=15.0)
        best = min(best, time.perf_counter() - t)
    return best


def offline_6h() -> tuple[float, int]:
    df, _ = simulate_job(256, 360, "pcie", seed=7)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "job.parquet"
        df.write_parquet(path)
        t = time.perf_counter()
        analyse(read_table(path))
        return time.perf_counter() - t, df.height


def watch_pass_with_prometheus() -> dict[int, float]:
    """A whole ``watch`` pass (12 range queries to a real Prometheus + detection) per job size."""
    import shutil
    import subprocess
    import sys

    from aegis_slurm.metrics.config import MinderConfig
    from aegis_slurm.metrics.slurmjob import JobWindow
    from aegis_slurm.metrics.watch import run_pass

    if shutil.which("prometheus") is None:
        print("prometheus not installed: watch pass not measured")
        return {}
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from metrics.conftest import openmetrics, start_prometheus

    now = time.time()
    start = datetime.fromtimestamp(now - 15 * 60, UTC)
    df, _ = simulate_job(1024, 12, "slow_gpu", seed=3, start=start)
    out = {}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "job.om").write_text(openmetrics(df))
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "openmetrics",
                str(tmp / "job.om"),
                str(tmp / "data"),
            ],
            check=True,
            capture_output=True,
        )
        proc, url = start_prometheus(tmp / "data", tmp)
        try:
            end = float(df["time"].max().timestamp())
            nodes = sorted(df["node"].unique().to_list())
            cfg = MinderConfig(watch=replace(MinderConfig().watch, syslog=False))
            for n in (128, 256, 512, 1024):
                job = JobWindow("1", nodes[:n], end - 12 * 60, end)
                best = float("inf")
                for _ in range(3):
                    t = time.perf_counter()
                    run_pass(cfg, url, [job], end, {})
                    best = min(best, time.perf_counter() - t)
                out[n] = round(best, 3)
                print(f"watch pass with Prometheus, {n:5d} nodes: {best:.3f} s", flush=True)
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return out


def accuracy(jobs_per_fault: int) -> dict[str, dict[str, float]]:
    out = {}
    for split, seed in (("tuning", 1), ("evaluation", 2)):
        jobs = corpus(seed, jobs_per_fault, 2 * jobs_per_fault)
        runs = {
            "minder": lambda a: detect(a, PRI),
            "minder_no_reference": lambda a: detect(a, PRI, Params(baseline=0.0)),
            "minder_no_gain_reading": lambda a: detect(a, PRI, Params(gain=False)),
            "minder_no_join_rule": lambda a: detect(a, PRI, Params(join=False)),
            "minder_no_steady_gate": lambda a: detect(a, PRI, Params(steady=False)),
            "minder_all_physical_scales": lambda a: detect(a, PRI, Params(scales=False)),
            "minder_no_lag": lambda a: detect(a, PRI, Params(lag=0)),
            "minder_no_denoise": lambda a: detect(a, PRI, Params(denoise="none")),
            "minder_threshold_0.06": lambda a: detect(a, PRI, Params(threshold=0.06)),
            "minder_no_physical_range": lambda a: detect(a, PRI, Params(physical_range=False)),
            "minder_no_job_wide_cap": lambda a: detect(a, PRI, Params(max_share=1)),
            "minder_no_burst_test": lambda a: detect(a, PRI, Params(burst_alpha=0)),
            "minder_no_profiler_pause": lambda a: detect(a, PRI, Params(profiler_pause=False)),
            "minder_no_corroboration": lambda a: detect(a, PRI, Params(corroborate=False)),
            "minder_no_device_evidence": lambda a: detect(a, PRI, Params(device_evidence=False)),
            "minder_no_event_continuity": lambda a: detect(a, PRI, Params(event_continuity=False)),
            "lambda_2delta": lambda a: lambda_2delta(a, METRICS),
            "zscore_4min": lambda a: zscore_baseline(a, METRICS),
        }
        for name, run in runs.items():
            s = score(jobs, run)
            out[f"{split}/{name}"] = {
                "precision": round(s.precision, 3),
                "recall": round(s.recall, 3),
                "median_delay_min": round(s.median_delay / 60, 2),
                "tp": s.tp,
                "fp": s.fp,
                "fn": s.fn,
                "jobs": len(jobs),
            }
            print(f"{split:10s} {name:34s} {s.line()}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs-per-fault", type=int, default=4)
    ap.add_argument("--skip-accuracy", action="store_true")
    args = ap.parse_args()
    res: dict[str, object] = {}
    per_node = {}
    for n in (128, 256, 512, 1024):
        s = live_pass(n)
        per_node[n] = round(1000 * s / n, 3)
        print(f"live pass {n:5d} nodes: {s:.3f} s ({per_node[n]} ms/node)", flush=True)
        if n == 1024:
            res["live_1024_nodes_s"] = round(s, 3)
    res["per_node_ms"] = per_node
    s, rows = offline_6h()
    res["offline_256_nodes_6h_s"] = round(s, 2)
    res["offline_256_nodes_6h_rows"] = rows
    print(f"offline 256 nodes x 6 h ({rows:,} rows): {s:.2f} s", flush=True)
    res["watch_pass_prometheus_s"] = watch_pass_with_prometheus()
    if not args.skip_accuracy:
        res["accuracy"] = accuracy(args.jobs_per_fault)
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
