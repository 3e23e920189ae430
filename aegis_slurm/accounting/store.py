"""The analytics store: the job-run table as Parquet partitioned by month, plus ingest state.

Layout of a store directory::

    meta.json                        {"schema_version": 1}
    runs/month=YYYY-MM/runs.parquet  job runs whose Submit falls in that month (UTC)
    sacct_windows.json               live-ingest windows already fetched completely
    ingest_log.jsonl                 one report per ingest
    rejected/<stamp>.jsonl           every rejected record with its line number and reason

A run's month comes from its Submit time, which never changes for a given run, so re-ingesting a
run always lands in the same partition and de-duplication stays local to one file.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.accounting.schema import RUN_SCHEMA, SCHEMA_VERSION, empty_runs

KEY = ("cluster", "job_id", "submit_time")
_INGESTED = "_ingested_at"
_STORED_SCHEMA = {k: v for k, v in RUN_SCHEMA.items() if k != "run_index"} | {
    _INGESTED: pl.Datetime("us", "UTC")
}


class StoreError(RuntimeError):
    """The store is unusable (unknown schema version, unreadable)."""


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def open_store(store: Path) -> Path:
    """Create the store if needed and check its schema version."""
    store = Path(store)
    meta_path = store / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise StoreError(
                f"{store}: schema version {meta.get('schema_version')} is not "
                f"{SCHEMA_VERSION}; re-ingest into a new store"
            )
    else:
        store.mkdir(parents=True, exist_ok=True)
        _atomic_write_bytes(meta_path, json.dumps({"schema_version": SCHEMA_VERSION}).encode())
    return store


def _month_of(frame: pl.DataFrame) -> pl.Expr:
    when = pl.coalesce("submit_time", "eligible_time", "start_time", "end_time")
    return when.dt.strftime("%Y-%m").fill_null("unknown")


class RunWriter:
    """Stage typed runs piece by piece on disk, then merge them into the store per month.

    Only one piece and, at merge time, the key columns are held in memory, so a 4M-record
    export ingests in bounded memory.  Nothing is visible in the store until ``commit``, which
    replaces each month's file atomically.  On a repeated key the ended record beats an open one
    (a RUNNING copy from an old export must never hide the final state), and otherwise the
    newest ingest wins.
    """

    def __init__(self, store: Path) -> None:
        self.store = open_store(store)
        self.now = datetime.now(UTC)
        self.staging = Path(tempfile.mkdtemp(dir=self.store, prefix=".staging-"))
        self.staged: dict[str, list[Path]] = {}
        self.rows_new = 0
        self.rows_updated = 0

    def add(self, runs: pl.DataFrame) -> None:
        if runs.height == 0:
            return
        incoming = runs.drop("run_index", strict=False).with_columns(
            pl.lit(self.now, dtype=pl.Datetime("us", "UTC")).alias(_INGESTED)
        )
        incoming = incoming.with_columns(_month_of(incoming).alias("_month"))
        months = incoming.get_column("_month").unique().to_list()
        parts = (
            {(months[0],): incoming}
            if len(months) == 1
            else incoming.partition_by("_month", as_dict=True)
        )
        for (month,), part in parts.items():
            files = self.staged.setdefault(str(month), [])
            path = self.staging / f"{month}-{len(files):05d}.arrow"
            # Arrow IPC, uncompressed: staging is written and read once, so encoding is waste.
            part.drop("_month").select(list(_STORED_SCHEMA)).cast(
                _STORED_SCHEMA  # type: ignore[arg-type]
            ).write_ipc(path, compression="uncompressed")
            files.append(path)

    def commit(self) -> dict[str, int]:
        """Merge every staged month into the store; returns rows per touched month."""
        touched: dict[str, int] = {}
        try:
            for month, files in sorted(self.staged.items()):
                touched[month] = self._merge_month(month, files)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
        return touched

    def abort(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)

    def _merge_month(self, month: str, files: list[Path]) -> int:
        path = self.store / "runs" / f"month={month}" / "runs.parquet"
        staged = pl.scan_ipc(files)
        n_existing = 0
        if path.exists():
            n_existing = pl.scan_parquet(path).select(pl.len()).collect().item()
            staged = pl.concat([pl.scan_parquet(path), staged], how="vertical_relaxed")
        keys = (
            staged
            .select(*KEY, "ended", _INGESTED)
            .with_row_index("_row")
            .collect()
        )
        keep = None
        if keys.select(KEY).n_unique() != keys.height:
            keep = (
                keys.sort(["ended", _INGESTED, "_row"], nulls_last=False)
                .unique(subset=list(KEY), keep="last")
                .select("_row")
            )
        self.rows_new += (keys.height if keep is None else keep.height) - n_existing
        self.rows_updated += keys.height - n_existing - (
            (keys.height if keep is None else keep.height) - n_existing
        )
        del keys
        merged = staged.with_row_index("_row")
        if keep is not None:
            merged = merged.join(keep.lazy(), on="_row", how="semi")
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".runs.", suffix=".parquet")
        os.close(fd)
        try:
            merged.drop("_row").sink_parquet(
                tmp, compression="zstd", compression_level=1, statistics=True
            )
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return pl.scan_parquet(path).select(pl.len()).collect().item()


def write_runs(store: Path, runs: pl.DataFrame) -> dict[str, int]:
    """Merge one in-memory table into the store (see RunWriter for the rules)."""
    writer = RunWriter(store)
    try:
        writer.add(runs)
    except BaseException:
        writer.abort()
        raise
    return writer.commit()


def load_runs(
    store: Path | str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
) -> pl.DataFrame:
    """The job-run table (``RUN_SCHEMA``), optionally limited to runs ending in [start, end).

    ``run_index`` numbers the runs of each job in Submit order across the whole store.
    """
    store = Path(store)
    files = sorted((store / "runs").glob("month=*/runs.parquet"))
    if not (store / "meta.json").exists() and not files:
        raise StoreError(f"{store}: not an aegis-slurm store (no meta.json); run ingest first")
    open_store(store)
    if not files:
        return empty_runs()
    runs = pl.read_parquet(files).drop(_INGESTED)
    runs = runs.with_columns(
        pl.int_range(pl.len(), dtype=pl.Int32)
        .over(["cluster", "job_id"], order_by=["submit_time", "start_time"])
        .alias("run_index")
    )
    if start is not None:
        runs = runs.filter(pl.col("end_time") >= start)
    if end is not None:
        runs = runs.filter(pl.col("end_time") < end)
    return runs.select(list(RUN_SCHEMA)).cast(RUN_SCHEMA)  # type: ignore[arg-type]


def append_log(store: Path, report: dict[str, Any]) -> None:
    """Append one ingest report to ``ingest_log.jsonl``."""
    with open(Path(store) / "ingest_log.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(report, default=str) + "\n")


def write_rejected(store: Path, stamp: str, rows: Iterable[dict[str, Any]]) -> Path | None:
    """Keep every rejected record (line number, reason, text) for the admin to inspect."""
    rows = list(rows)
    if not rows:
        return None
    path = Path(store) / "rejected" / f"{stamp}.jsonl"
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _atomic_write_bytes(path, payload.encode("utf-8", errors="replace"))
    return path


def fetched_windows(store: Path) -> set[str]:
    """Days (``YYYY-MM-DD``) whose live sacct window was fetched after it had closed."""
    path = Path(store) / "sacct_windows.json"
    if not path.exists():
        return set()
    return set(json.loads(path.read_text()).get("complete_days", []))


def mark_windows(store: Path, days: Iterable[str]) -> None:
    days_done = fetched_windows(store) | set(days)
    _atomic_write_bytes(
        Path(store) / "sacct_windows.json",
        json.dumps({"complete_days": sorted(days_done)}, indent=0).encode(),
    )
