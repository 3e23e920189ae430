"""Test helpers: a one-month simulated store, written as a sacct export and read back through
the real ingest, with a planted crash loop renamed ``<script>alert(1)</script>``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from aegis_slurm.accounting import ingest_files
from aegis_slurm.simulate.history import SimConfig, simulate, write_history

SCRIPT_NAME = "<script>alert(1)</script>"
MONTH = "2024-01"


@dataclass
class Built:
    store: Path
    events: Path
    signals: Path
    out: Path
    report: dict
    loop_job: int  # JobIDRaw of the crash loop renamed SCRIPT_NAME


def make_store(root: Path, cfg: SimConfig, month_end: str | None = "2024-02-01") -> Built:
    sim = simulate(cfg)
    runs = sim.runs
    if month_end is not None:  # keep only runs ending in January: a store of one month
        runs = runs.filter(pl.col("end_time") < pl.lit(month_end).str.to_datetime(time_zone="UTC"))
    loops = [int(x["job_id_raw"]) for x in sim.truth["crash_loops"]]
    loop_job = loops[0] if loops else -1
    runs = runs.with_columns(
        pl.when(pl.col("job_id_raw") == loop_job)
        .then(pl.lit(SCRIPT_NAME))
        .otherwise(pl.col("job_name"))
        .alias("job_name")
    )
    sim.runs = runs
    (root / "history").mkdir(parents=True, exist_ok=True)
    paths = write_history(sim, root / "history" / "sacct.txt")
    ingest_files([paths["sacct"]], root / "store")
    return Built(
        root / "store", Path(paths["events"]), Path(paths["signals"]), root / "report", {}, loop_job
    )
