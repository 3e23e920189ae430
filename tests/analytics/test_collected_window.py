"""Collected Epilog records are read for the loaded runs' time only (issue 13, scale): a month
of a store with years of records attributes exactly as with every record, and decodes none of
the other years' records."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl

from aegis_slurm.accounting import ingest_files, load_runs
from aegis_slurm.accounting.signals import RECORDS, collect
from aegis_slurm.node import spool
from aegis_slurm.sections import Month, load_inputs
from aegis_slurm.sections.compute import trend

HEADER = (
    "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|AllocTRES"
)
FMT = "%Y-%m-%dT%H:%M:%S"


def _store(tmp_path: Path) -> tuple[Path, list[str]]:
    """A FAILED 16-node 256-GPU run in January of each of 2026, 2027 and 2028, plus completed
    ones; an XID 79 Epilog record of each failed run, captured at its end."""
    lines, failed = [], []
    raw = 100
    for year in (2026, 2027, 2028):
        for day in range(1, 28, 3):
            raw += 1
            start = datetime(year, 1, day, 2, tzinfo=UTC)
            end = start + timedelta(hours=10)
            state = "FAILED" if day == 10 else "COMPLETED"
            lines.append(
                f"{raw}|{raw}|c|{state}|{int(state == 'FAILED')}:0|{start.strftime(FMT)}|"
                f"{start.strftime(FMT)}|{end.strftime(FMT)}|36000|16|n[{day:02d}-{day + 15:02d}]|"
                "cpu=64,gres/gpu=256,node=16"
            )
            if state == "FAILED":
                failed.append((raw, f"n{day:02d}", end))
    path = tmp_path / "a.txt"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    store = tmp_path / "store"
    ingest_files([path], store)
    sp = tmp_path / "spool"
    for raw, node, end in failed:
        spool.append(
            sp,
            {
                "v": 1,
                "node": node,
                "job_id": str(raw),
                "run": 0,
                "cluster": "c",
                "captured_at": end.isoformat(),
                "signals": [{"signal": "xid79", "kind": "critical", "critical": True}],
            },
        )
    assert collect([sp], store)["added"] == 3
    return store, [str(r) for r, _, _ in failed]


COLS = ["job_id", "infra_failure", "attribution_source", "cause", "blamed_nodes"]


def test_a_month_reads_only_the_records_of_its_time_and_attributes_as_with_all(tmp_path):
    store, failed = _store(tmp_path)
    month = Month.parse("2028-01").period
    windowed = load_inputs(store, period=month)
    everything = load_inputs(store, signals_paths=[store / RECORDS], period=month)
    assert everything.signals is not None and everything.signals.height == 3
    assert windowed.signals is not None
    assert windowed.signals["job_id"].to_list() == [failed[2]]  # not 2026's, not 2027's
    assert windowed.runs.select(COLS).equals(everything.runs.select(COLS))
    mine = windowed.runs.filter(pl.col("job_id") == failed[2]).row(0, named=True)
    assert mine["infra_failure"] and mine["cause"] == "xid79"
    assert windowed.sources["collected_epilog_records"]


def test_the_trend_attributes_older_months_with_their_own_records(tmp_path):
    store, _ = _store(tmp_path)
    # Without history read in the same pass, the trend reads older months itself: their
    # records are read for them (the loaded ones cover only the period and its context).
    inp = load_inputs(store, period=Month.parse("2027-01").period)
    assert inp.history is None
    rows = {r["month"]: r for r in trend(inp, 13)}
    assert rows["2026-01"]["failures"] == rows["2027-01"]["failures"] == 1
    whole = load_runs(store)
    assert whole.height == 27
