"""A multi-year, 20M-record store for the scale benchmark, built without the simulator's memory.

The simulator holds its whole history in memory (4M records peak at 5.7 GB), so a 20M-record
store cannot come from one simulation.  Here a modest history (``--base-days`` of ``--nodes``
nodes, ~1M records) is simulated once and *tiled*: copy k has every time shifted by k x the
base span and every job id by k x (the base's largest id + 1), so the copies follow each other
as one long history with the base's proportions (failure mix, requeued multi-run jobs, crash
loops, lemon nodes, node lists) and job ids that never collide.  Each copy goes through the
store's own writer (``RunWriter``: Parquet parts in ``runs/month=YYYY-MM``), as an ingest
would publish it; node events and signals are tiled the same way.

    .venv/bin/python benchmarks/tiled_store.py --records 20000000 [--out DIR]

Prints the store's path; ``bench_analytics.py --commands --tiled`` builds and uses it.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import polars as pl

from aegis_slurm.accounting.store import RunWriter
from aegis_slurm.simulate.history import SimConfig, simulate, write_events

_TIMES = ("submit_time", "eligible_time", "start_time", "end_time")
_IDS = ("job_id_raw", "array_job_id", "het_job_id")


def shift_runs(runs: pl.DataFrame, dt: timedelta, id_offset: int) -> pl.DataFrame:
    """One tile: times moved by ``dt``, job ids (raw, displayed, array and het parents) by
    ``id_offset`` (``"14_2"`` -> ``"<14+off>_2"``, ``"15+1"`` -> ``"<15+off>+1"``)."""
    lead = pl.col("job_id").str.extract(r"^(\d+)", 1).cast(pl.Int64)
    rest = pl.col("job_id").str.replace(r"^\d+", "")
    return runs.with_columns(
        *[pl.col(c) + dt for c in _TIMES if c in runs.columns],
        *[pl.col(c) + id_offset for c in _IDS if c in runs.columns],
        pl.when(lead.is_not_null())
        .then((lead + id_offset).cast(pl.String) + rest)
        .otherwise(pl.col("job_id"))
        .alias("job_id"),
    )


def build(out: Path, records: int, nodes: int, base_days: float, seed: int = 1) -> Path:
    """Write ``out/store``, ``out/events.txt`` and ``out/signals.parquet``; return ``out``."""
    if (out / "done").exists():
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cfg = SimConfig(nodes=nodes, days=base_days, seed=seed, crash_loops=6, lemons=4)
    t = time.perf_counter()
    sim = simulate(cfg)
    base = sim.runs
    print(
        f"base: {base.height:,} records, {nodes} nodes x {base_days:g} days, "
        f"simulated in {time.perf_counter() - t:.1f} s"
    )
    tiles = math.ceil(records / base.height)
    span = timedelta(days=base_days)
    id_step = int(base["job_id_raw"].max()) + 1  # type: ignore[arg-type]
    events, signals = [], []
    t = time.perf_counter()
    for k in range(tiles):
        writer = RunWriter(out / "store")
        try:
            writer.add(shift_runs(base, span * k, id_step * k))
        except BaseException:
            writer.abort()
            raise
        writer.commit()
        events.append(
            sim.events.with_columns(pl.col("time_start") + span * k, pl.col("time_end") + span * k)
        )
        signals.append(sim.signals.with_columns(pl.col("time") + span * k))
        print(f"  tile {k + 1}/{tiles} written ({time.perf_counter() - t:.1f} s)")
    write_events(pl.concat(events), out / "events.txt")
    pl.concat(signals).write_parquet(out / "signals.parquet")
    meta = {
        "records": base.height * tiles,
        "tiles": tiles,
        "base_records": base.height,
        "base_days": base_days,
        "nodes": nodes,
        "first": str(base["submit_time"].min()),
        "last_month_end": str(base["end_time"].max() + span * (tiles - 1)),
        "states": dict(base.group_by("state").len().iter_rows()),
        "multi_run_jobs_per_tile": int(
            base.group_by("cluster", "job_id").len().filter(pl.col("len") > 1).height
        ),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1, default=str))
    (out / "done").touch()
    return out


def default_dir(records: int, nodes: int) -> Path:
    return Path(tempfile.gettempdir()) / f"aegis-i13s-tiled-{records}-{nodes}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=20_000_000)
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--base-days", type=float, default=90.0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    out = args.out or default_dir(args.records, args.nodes)
    if args.fresh and out.exists():
        shutil.rmtree(out)
    build(out, args.records, args.nodes, args.base_days)
    print(out)
    print((out / "meta.json").read_text())


if __name__ == "__main__":
    main()
