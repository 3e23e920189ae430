"""Load a store's inputs once: runs (attributed), node events, node signals, for one period.

The period is the runs that *ended* in [start, end).  The frame kept in memory is wider (the
*context*, :data:`CONTEXT`, each side) so that what needs history beyond the period has it: a
crash loop that straddles a month boundary is seen whole, the rolling r_f and the lemon window
look back, and attribution of the period's runs sees the events and signals around them.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.accounting.frames import chunked_like, row_numbered
from aegis_slurm.analytics.common import AnalyticsError, impute_end_time
from aegis_slurm.sections.settings import DEFAULTS, Settings

#: History kept on each side of the period (≥ the 30-day r_f window and the 28-day lemon one).
CONTEXT = timedelta(days=35)
SIGNAL_COLUMNS = ("node", "time", "signal", "critical")
#: GPUs per node when neither the site config nor the data says (HPCA'25's 8-GPU servers).
FALLBACK_GPUS_PER_NODE = 8

#: Run columns (``accounting.schema.RUN_SCHEMA``) every loaded table holds, whatever the
#: sections: attribution (state, the allocated nodes and window times, the run's own Epilog
#: record by cluster/JobIDRaw/run_index, its aegis tag, FailedNode), the period filter and the
#: imputed End (ended, start + elapsed), GPU-hours and node-days (gpus, n_nodes).
INPUT_COLUMNS = frozenset(
    {
        "cluster",
        "job_id_raw",
        "run_index",
        "state",
        "ended",
        "start_time",
        "end_time",
        "elapsed_s",
        "gpus",
        "n_nodes",
        "nodes",
        "failed_node",
        "admin_comment",
    }
)
#: What job-run linkage (``analytics.job_runs.link_job_runs``) reads on top of them.
LINK_COLUMNS = frozenset({"user", "account", "job_name", "submit_time"})


def needs(*columns: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the run columns a section reads beyond :data:`INPUT_COLUMNS` (kept on the
    function as ``columns``, which :func:`columns_for` unites)."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.columns = INPUT_COLUMNS | frozenset(columns)  # type: ignore[attr-defined]
        return fn

    return mark


def columns_for(*sections: Callable[..., Any], extra: Iterable[str] = ()) -> frozenset[str]:
    """The run columns to load for ``sections`` (each declared with :func:`needs`) and
    ``extra`` (e.g. a --by column): the union, never less than :data:`INPUT_COLUMNS`."""
    out = set(INPUT_COLUMNS) | set(extra)
    for section in sections:
        out |= section.columns
    return frozenset(out)


@dataclass(frozen=True)
class Month:
    """A calendar month in UTC."""

    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        import re

        m = re.fullmatch(r"(\d{4})-(\d{2})", text.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise AnalyticsError(f"month must be YYYY-MM, got {text!r}")
        return cls(int(m.group(1)), int(m.group(2)))

    @property
    def start(self) -> datetime:
        return datetime(self.year, self.month, 1, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return self.next().start

    def next(self) -> Month:
        return Month(self.year + self.month // 12, self.month % 12 + 1)

    def prev(self) -> Month:
        return Month(self.year - (self.month == 1), (self.month - 2) % 12 + 1)

    @property
    def period(self) -> Period:
        return Period(self.start, self.end)

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


@dataclass(frozen=True)
class Period:
    """Runs that ended in [start, end); ``None`` ends are open (the whole store)."""

    start: datetime | None = None
    end: datetime | None = None

    @property
    def label(self) -> str:
        s = self.start.date().isoformat() if self.start else "…"
        e = self.end.date().isoformat() if self.end else "…"
        return f"{s} – {e}"

    def mask(self, col: str = "end_time") -> pl.Expr:
        m = pl.col(col).is_not_null()
        if self.start is not None:
            m &= pl.col(col) >= self.start
        if self.end is not None:
            m &= pl.col(col) < self.end
        return m

    def public(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end}


def read_signal_table(path: Path) -> pl.DataFrame:
    """A node-signal table for attribution, from Parquet or CSV with the columns node, time,
    signal, critical -- or the store's own ``signals/records.parquet`` (Epilog records, turned
    into one row per signal with the job they belong to)."""
    from aegis_slurm.accounting.signals import records_to_signals

    try:
        if path.suffix == ".parquet":
            raw = pl.read_parquet(path)
        else:
            raw = pl.read_csv(path, try_parse_dates=True)
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise AnalyticsError(f"{path}: cannot read the signal table: {exc}") from exc
    if "record" in raw.columns and "captured_at" in raw.columns:
        return records_to_signals(raw)
    missing = [c for c in SIGNAL_COLUMNS if c not in raw.columns]
    if missing:
        raise AnalyticsError(
            f"{path}: a signal table needs the columns {', '.join(SIGNAL_COLUMNS)} "
            f"(or be a store's signals/records.parquet); missing {', '.join(missing)}"
        )
    try:
        time = pl.col("time")
        if raw.schema["time"] == pl.String:
            time = time.str.to_datetime(time_zone="UTC")
        elif raw.schema["time"] != pl.Datetime("us", "UTC"):
            tz = getattr(raw.schema["time"], "time_zone", None)
            time = time.cast(pl.Datetime("us", tz))
            time = (
                time.dt.replace_time_zone("UTC") if tz is None else time.dt.convert_time_zone("UTC")
            )
        return raw.with_columns(time.alias("time"), pl.col("critical").cast(pl.Boolean))
    except pl.exceptions.PolarsError as exc:
        raise AnalyticsError(f"{path}: bad time or critical column: {exc}") from exc


def _signal_frame(parts: list[pl.DataFrame]) -> pl.DataFrame | None:
    """One signal frame: the four attribution columns plus job_id/run/cluster where known."""
    if not parts:
        return None
    cols = [*SIGNAL_COLUMNS, "job_id", "run", "cluster"]
    out = []
    for p in parts:
        out.append(
            p.select(
                pl.col("node").cast(pl.String),
                pl.col("time").cast(pl.Datetime("us", "UTC")),
                pl.col("signal").cast(pl.String),
                pl.col("critical").cast(pl.Boolean),
                *[
                    (pl.col(c) if c in p.columns else pl.lit(None))
                    .cast(pl.Int32 if c == "run" else pl.String)
                    .alias(c)
                    for c in cols[4:]
                ],
            )
        )
    return pl.concat(out)


def infer_gpus_per_node(runs: pl.DataFrame) -> tuple[int | None, str]:
    """GPUs per node from the data: the most common AllocTRES GPUs ÷ NNodes of multi-node runs
    (they hold whole nodes); else the largest ratio of one-node runs.  (None, why) if no GPU run."""
    gpu = runs.filter(
        (pl.col("gpus") > 0) & (pl.col("n_nodes") > 0) & (pl.col("gpus") % pl.col("n_nodes") == 0)
    ).select((pl.col("gpus") // pl.col("n_nodes")).alias("g"), "n_nodes")
    multi = gpu.filter(pl.col("n_nodes") > 1)
    if multi.height:
        g = multi.group_by("g").len().sort(["len", "g"], descending=True)["g"][0]
        return int(g), f"data: most common GPUs/NNodes of {multi.height} multi-node runs"
    if gpu.height:
        return int(gpu["g"].max()), f"data: largest GPUs per node of {gpu.height} one-node runs"
    return None, "no GPU run in the data"


@dataclass
class Inputs:
    """Everything a section needs, loaded once.  ``context`` holds the attributed runs of the
    period and :data:`CONTEXT` around it; :meth:`runs` is the period's (fresh ``row_id``)."""

    context: pl.DataFrame
    events: pl.DataFrame | None
    signals: pl.DataFrame | None
    period: Period
    settings: Settings = DEFAULTS
    store: Path | None = None
    sources: dict[str, Any] = field(default_factory=dict)
    imputed_end: int = 0
    no_end: int = 0
    #: Attributed runs from ``history_start`` on (the report's 12-month trend), read in the
    #: same pass as the context; None when not asked for.
    history: pl.DataFrame | None = None

    @functools.cached_property
    def runs(self) -> pl.DataFrame:
        return _renumbered(self.context, self.period)

    @functools.cached_property
    def linked_context(self) -> pl.DataFrame:
        from aegis_slurm.analytics.job_runs import link_job_runs

        return link_job_runs(self.context)

    @functools.cached_property
    def linked(self) -> pl.DataFrame:
        """Job-run linkage over the context (a job run may start before the period), kept for
        the period's runs with fresh row ids."""
        return _renumbered(self.linked_context, self.period)

    @functools.cached_property
    def gpus_per_node(self) -> tuple[int, str]:
        if self.settings.gpus_per_node:
            return self.settings.gpus_per_node, "site config"
        g, why = infer_gpus_per_node(self.runs)
        if g is None:
            g, why = infer_gpus_per_node(self.context)
        if g is None:
            return FALLBACK_GPUS_PER_NODE, f"assumed ({why})"
        return g, why


def _renumbered(frame: pl.DataFrame, period: Period) -> pl.DataFrame:
    """The rows of ``frame`` that ended in ``period``, with fresh ``row_id`` 0, 1, ...  When
    that is every row, already so numbered (the whole store), ``frame`` itself: a copy of a
    20M-run table is gigabytes."""
    keep = frame.select(period.mask().all()).item()
    if keep and row_numbered(frame):
        return frame
    return frame.filter(period.mask()).drop("row_id").with_row_index("row_id")


#: Runs attributed at a time.  Attribution is a function of each run and the evidence alone,
#: so batches give the one-shot result; its transient frames (candidates, node lists exploded,
#: as-of joins) then scale with a batch, not with years of history.
ATTRIBUTE_BATCH = 1_000_000


def attribute(
    runs: pl.DataFrame,
    signals: pl.DataFrame | None,
    events: pl.DataFrame | None,
    batch: int = ATTRIBUTE_BATCH,
) -> pl.DataFrame:
    """``attribution.attribute_failures`` of ``runs`` with End imputed, ``batch`` rows at a
    time (``row_id`` numbers the whole table, as one call would)."""
    from aegis_slurm.analytics.attribution import attribute_prepared, prepare_evidence

    runs = runs.with_columns(impute_end_time())
    index = pl.int_range(runs.height, dtype=pl.UInt32, eager=True).alias("row_id")
    runs = runs.select(chunked_like(index, runs), pl.all())
    evidence = prepare_evidence(signals, events)
    if runs.height <= batch:
        return attribute_prepared(runs, evidence)
    parts = [
        attribute_prepared(runs.slice(offset, batch), evidence)
        for offset in range(0, runs.height, batch)
    ]
    return pl.concat(parts, rechunk=False)


def load_inputs(
    store: Path,
    events_paths: list[Path] | tuple[Path, ...] = (),
    signals_paths: list[Path] | tuple[Path, ...] = (),
    period: Period | None = None,
    settings: Settings = DEFAULTS,
    history_start: datetime | None = None,
    columns: Iterable[str] | None = None,
) -> Inputs:
    """Runs of ``period`` ± :data:`CONTEXT`, attributed with the given event exports, signal
    tables and the Epilog records collected into the store (``aegis-slurm signals collect``).
    With ``history_start`` the runs from then on are read and attributed in the same pass and
    kept as ``history`` (the context is the same slice of them, so every section is unchanged).
    ``columns``: the run columns to read (:func:`columns_for` the sections to compute, never
    less than :data:`INPUT_COLUMNS`); None reads every column."""
    from aegis_slurm.accounting import load_runs
    from aegis_slurm.accounting.events import load_events
    from aegis_slurm.accounting.signals import RECORDS

    period = period or Period()
    start = period.start - CONTEXT if period.start else None
    end = period.end + CONTEXT if period.end else None
    wide = history_start is not None and start is not None and history_start < start
    cols = None if columns is None else INPUT_COLUMNS | set(columns)
    runs = load_runs(store, start=history_start if wide else start, end=end, columns=cols)
    events = load_events(list(events_paths)) if events_paths else None
    parts = [read_signal_table(Path(p)) for p in signals_paths]
    # Epilog records collected into the store are always used, as by every command; a path
    # naming that very file is not read twice.
    own = (Path(store) / RECORDS).resolve()
    given_store_records = any(Path(p).resolve() == own for p in signals_paths)
    collected = None if given_store_records else collected_signals(store, runs)
    if collected is not None and not collected.is_empty():
        parts.append(collected)
    signals = _signal_frame(parts)
    # Counted, not filtered: a filter of the wide table materialises it again.
    imputed = int(
        runs.select(
            (
                pl.col("end_time").is_null()
                & pl.col("ended").fill_null(False)
                & pl.col("start_time").is_not_null()
                & pl.col("elapsed_s").is_not_null()
            ).sum()
        ).item()
    )
    attributed = attribute(runs, signals, events)
    history = None
    if wide:
        history = attributed
        attributed = attributed.filter(pl.col("end_time") >= start)
    no_end = int(attributed.select((pl.col("end_time").is_null() & pl.col("ended")).sum()).item())
    return Inputs(
        context=attributed,
        events=events,
        signals=signals,
        period=period,
        settings=settings,
        store=Path(store),
        sources={
            "events": [str(p) for p in events_paths],
            "signals": [str(p) for p in signals_paths],
            "collected_epilog_records": bool(
                given_store_records or (collected is not None and not collected.is_empty())
            ),
        },
        imputed_end=imputed,
        no_end=no_end,
        history=history,
    )


def collected_signals(store: Path, runs: pl.DataFrame) -> pl.DataFrame | None:
    """The store's collected Epilog signals that can concern ``runs``: records captured from
    the earliest start among them to :data:`CONTEXT` after the latest end (a record is captured
    at its run's end), read with that filter pushed down; None when nothing was collected.

    Attribution uses a signal only inside a run's own allocation window, so the records of
    other years are never needed, and decoding them (one JSON document each) was the cost."""
    from aegis_slurm.accounting.signals import RECORDS, records_to_signals

    path = Path(store) / RECORDS
    if not path.exists():
        return None
    scan = pl.scan_parquet(path).filter(pl.col("n_signals").fill_null(1) > 0)
    lo = runs.select(pl.min_horizontal(pl.col("start_time").min(), pl.col("end_time").min()))
    hi = runs.select(pl.max_horizontal(pl.col("start_time").max(), pl.col("end_time").max()))
    if lo.item() is not None:
        scan = scan.filter(pl.col("captured_at") >= lo.item())
    if hi.item() is not None:
        scan = scan.filter(pl.col("captured_at") < hi.item() + CONTEXT)
    try:
        records = scan.collect()
    except (OSError, pl.exceptions.PolarsError) as exc:
        raise AnalyticsError(f"{path}: cannot read the collected records: {exc}") from exc
    return records_to_signals(records)


def rejected_counts(store: Path | None) -> dict[str, Any]:
    """Records the ingest rejected (``store/rejected/*.jsonl``), by reason."""
    import json

    by: Counter[str] = Counter()
    if store is None:
        return {"rows_rejected": 0, "by_reason": {}}
    for f in sorted((Path(store) / "rejected").glob("*.jsonl")):
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                by[str(json.loads(line).get("reason", "unknown"))] += 1
            except (ValueError, AttributeError):
                by["unreadable rejected-record line"] += 1
    return {"rows_rejected": sum(by.values()), "by_reason": dict(by.most_common())}


def utc(d: datetime) -> datetime:
    return d if d.tzinfo else d.replace(tzinfo=UTC)
