"""Attribution of infrastructure failures: which runs failed because of the machine, and why.

HPCA'25 §IV ("Job failure characterisation", r_f definition in §V) counts a run as an
infrastructure failure when it ended NODE_FAIL, or ended FAILED and a critical health check fired
on one of its nodes in the last 10 minutes of the run or within 5 minutes after it ended
(analytics-spec §2.1).  Evidence is taken per run, first source that matches wins:

1. ``node_signal``   – a critical signal of this run's *own* Epilog record (signal rows that carry
   ``job_id``/``run``, collected by ``aegis-slurm signals collect``), whatever its time;
2. ``admin_comment`` – the aegis tag ``aegis:v1;hw=<node>:<signal>[,<node>:<signal>...]`` in
   AdminComment (possibly after other text), written by the aegis Epilog for this very job;
3. ``node_signal``   – a critical row of a node-signal table that names no job (a site's own
   health-check CSV) on an allocated node with time in [max(Start, End − 10 min), End + 5 min];
4. ``node_event``    – a DOWN/DRAIN event from ``sacctmgr show event`` starting on an allocated
   node inside the same window (see :func:`aegis_slurm.accounting.events.failure_events` for the
   excluded Prolog/Epilog-error and maintenance reasons);
5. ``node_fail``     – NODE_FAIL with none of the above: infrastructure, cause ``unattributed``.

Departures from spec §2.1, found on the real test cluster: (a) a signal row that belongs to
*another* job's Epilog record is never evidence for this run (the next job on a node records a
row-remap 22 s after a user's ``exit 3``; that is the next job's finding, not this one's);
(b) the window never starts before the run did (a 3-minute job must not inherit a signal from the
job before it); (c) the run's own record and tag come before windowed node evidence.

Causes are normalised to the check (:func:`normalise_cause`): ``aegis: <check>: <evidence>`` and
``DRAIN: aegis: <check>: ...`` both become ``<check>``, so one check is one cause.

A FAILED run without evidence is a user failure.  :func:`attribute_failures` adds the columns
``row_id``, ``infra_failure``, ``attribution_source``, ``cause`` and ``blamed_nodes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import polars as pl

from aegis_slurm.accounting.events import DEFAULT_EXCLUDE_REASONS, failure_events
from aegis_slurm.accounting.frames import chunked_like

WINDOW_BEFORE = timedelta(minutes=10)
WINDOW_AFTER = timedelta(minutes=5)
CANDIDATE_STATES = ("FAILED", "NODE_FAIL")
SOURCES = ("node_signal", "admin_comment", "node_event", "node_fail")

_TAG = r"aegis:v1;hw=([^;\s]+)"
#: Leading Slurm state labels ("DRAIN: ", "DOWN+DRAIN: ") in front of a reason.
_STATE_PREFIX = r"^(?:[A-Z_]+[*~#!%$@^-]?(?:\+[A-Z_]+[*~#!%$@^-]?)*:\s*)+"
_AEGIS_CHECK = r"^aegis:\s*([^:\s]+)"


def normalise_cause(label: pl.Expr) -> pl.Expr:
    """One name per check: ``aegis: <check>: <evidence>`` (with or without a leading state such
    as ``DRAIN:``) becomes ``<check>``; other reasons lose the state prefix and surrounding
    blanks (``DOWN: Not responding`` → ``Not responding``)."""
    bare = label.str.replace(_STATE_PREFIX, "").str.strip_chars()
    return (
        pl.when(bare.str.contains(_AEGIS_CHECK))
        .then(bare.str.extract(_AEGIS_CHECK, 1))
        .otherwise(bare)
    )


def _window_right(evidence: pl.DataFrame, time_col: str, label_col: str) -> pl.DataFrame:
    """Evidence rows as :func:`_window_match` joins them: node, time, label, sorted by time."""
    return (
        evidence.select(
            pl.col("node"),
            pl.col(time_col).alias("_t"),
            pl.col(time_col).alias("_et"),
            pl.col(label_col).alias("_label"),
        )
        .drop_nulls("_t")
        .sort("_t")
    )


def _window_left(cand: pl.DataFrame, before: timedelta, after: timedelta) -> pl.DataFrame:
    """One row per (candidate run, allocated node) with its window [``_t``, ``_until``],
    sorted by ``_t``: what :func:`_window_match` joins evidence to (built once per batch
    for both signals and events)."""
    return (
        cand.select("row_id", "nodes", "start_time", "end_time")
        .explode("nodes")
        .rename({"nodes": "node"})
        .drop_nulls(["node", "end_time"])
        # The window never opens before the run started: evidence from the previous job's
        # allocation of the node is that job's, not this one's.
        .with_columns(
            pl.max_horizontal(
                pl.col("end_time") - before, pl.col("start_time").fill_null(pl.col("end_time"))
            ).alias("_t"),
            (pl.col("end_time") + after).alias("_until"),
        )
        .sort("_t")
    )


def _window_match(
    left: pl.DataFrame, right: pl.DataFrame, before: timedelta, after: timedelta
) -> pl.DataFrame:
    """Per candidate run (``left``, :func:`_window_left`), the earliest evidence row
    (``right``, :func:`_window_right`) on an allocated node inside the window.

    Vectorized with an as-of join per node: for each (run, node) find the first evidence time
    ≥ max(Start, End − before) up to End + after.  Returns row_id, cause, blamed_nodes.
    """
    if left.is_empty() or right.is_empty():
        return pl.DataFrame(
            schema={
                "row_id": pl.UInt32(),
                "cause": pl.String(),
                "blamed_nodes": pl.List(pl.String()),
            }
        )
    hits = left.join_asof(
        right,
        on="_t",
        by="node",
        strategy="forward",
        tolerance=before + after,
        suffix="_ev",
        check_sortedness=False,
    ).filter(pl.col("_label").is_not_null() & (pl.col("_et") <= pl.col("_until")))
    # Earliest evidence first: that is the most likely cause.
    return (
        hits.sort("row_id", "_et")
        .group_by("row_id", maintain_order=True)
        .agg(pl.col("_label").first().alias("cause"), pl.col("node").unique().alias("blamed_nodes"))
    )


def _own_record_match(cand: pl.DataFrame, own: pl.DataFrame) -> pl.DataFrame:
    """Critical signals of the run's own Epilog record: same job id (JobIDRaw, what the Epilog
    sees as SLURM_JOB_ID), same run (SLURM_JOB_RESTART_COUNT = run_index), a node of the run,
    and the same cluster when both name one.  Earliest signal first."""
    if cand.is_empty() or own.is_empty():
        return pl.DataFrame(
            schema={
                "row_id": pl.UInt32(),
                "cause": pl.String(),
                "blamed_nodes": pl.List(pl.String()),
            }
        )
    right = own.select(
        pl.col("job_id").cast(pl.String).alias("_job"),
        pl.col("run").cast(pl.Int64).fill_null(0).alias("_run")
        if "run" in own.columns
        else pl.lit(0, pl.Int64).alias("_run"),
        pl.col("cluster").fill_null("").alias("_cl")
        if "cluster" in own.columns
        else pl.lit("").alias("_cl"),
        "node",
        pl.col("time").alias("_et"),
        pl.col("signal").alias("_label"),
    )
    left = (
        cand.select(
            "row_id",
            pl.col("job_id_raw").cast(pl.String).alias("_job"),
            pl.col("run_index").cast(pl.Int64).fill_null(0).alias("_run"),
            pl.col("cluster").fill_null("").alias("_rcl"),
            "nodes",
        )
        .explode("nodes")
        .rename({"nodes": "node"})
    )
    hits = left.join(right, on=["_job", "_run", "node"]).filter(
        (pl.col("_cl") == "") | (pl.col("_rcl") == "") | (pl.col("_cl") == pl.col("_rcl"))
    )
    return (
        hits.sort("row_id", "_et")
        .group_by("row_id", maintain_order=True)
        .agg(pl.col("_label").first().alias("cause"), pl.col("node").unique().alias("blamed_nodes"))
    )


def parse_aegis_tag(admin_comment: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(cause, blamed_nodes) expressions from an ``aegis:v1;hw=node:signal,...`` tag."""
    pairs = admin_comment.str.extract(_TAG, 1).str.split(",")
    nodes = pairs.list.eval(pl.element().str.extract(r"^([^:]+):", 1))
    cause = pairs.list.first().str.extract(r"^[^:]+:(.+)$", 1)
    return cause, nodes


@dataclass(frozen=True)
class Evidence:
    """Signals and events as attribution reads them, prepared once for any number of batches
    of runs (preparing them per batch of years of history was seconds of repeated sorts)."""

    own: pl.DataFrame | None  # critical signals of Epilog records (carry job_id)
    signals: pl.DataFrame | None  # other critical signal rows, :func:`_window_right`
    events: pl.DataFrame | None  # failure events, :func:`_window_right`


def prepare_evidence(
    signals: pl.DataFrame | None,
    events: pl.DataFrame | None,
    exclude_event_reasons: str | None = DEFAULT_EXCLUDE_REASONS,
) -> Evidence:
    """The evidence :func:`attribute_prepared` matches runs against."""
    own = window_signals = window_events = None
    if signals is not None and not signals.is_empty():
        crit = signals.filter(pl.col("critical"))
        if "job_id" in crit.columns:
            own = crit.filter(pl.col("job_id").is_not_null())
            crit = crit.filter(pl.col("job_id").is_null())  # another job's record: never
        window_signals = _window_right(crit, "time", "signal")
    if events is not None and not events.is_empty():
        fe = failure_events(events, exclude_event_reasons).with_columns(
            pl.concat_str([pl.col("state"), pl.col("reason").fill_null("")], separator=": ").alias(
                "_label"
            )
        )
        window_events = _window_right(fe, "time_start", "_label")
    return Evidence(own, window_signals, window_events)


def attribute_failures(
    runs: pl.DataFrame,
    signals: pl.DataFrame | None = None,
    events: pl.DataFrame | None = None,
    *,
    before: timedelta = WINDOW_BEFORE,
    after: timedelta = WINDOW_AFTER,
    exclude_event_reasons: str | None = DEFAULT_EXCLUDE_REASONS,
) -> pl.DataFrame:
    """Add ``row_id``, ``infra_failure``, ``attribution_source``, ``cause``, ``blamed_nodes``.

    Rule: HPCA'25 §V r_f numerator and analytics-spec §2.1, evidence order in the module docstring.
    """
    evidence = prepare_evidence(signals, events, exclude_event_reasons)
    return attribute_prepared(runs, evidence, before=before, after=after)


def attribute_prepared(
    runs: pl.DataFrame,
    prepared: Evidence,
    *,
    before: timedelta = WINDOW_BEFORE,
    after: timedelta = WINDOW_AFTER,
) -> pl.DataFrame:
    """:func:`attribute_failures` with the evidence already prepared."""
    runs = runs.with_row_index("row_id") if "row_id" not in runs.columns else runs
    # The candidates, once, on the columns evidence is matched on and the new columns are
    # computed from (a filter of the wide table copies every column of it).  A column the
    # caller's table lacks is missed only where the evidence needs it.
    used = ("row_id", "state", "nodes", "start_time", "end_time", "admin_comment", "failed_node")
    used += ("job_id_raw", "run_index", "cluster")
    is_cand = pl.col("state").is_in(CANDIDATE_STATES)
    cand = runs.select(c for c in used if c in runs.columns).filter(is_cand)

    empty = pl.DataFrame(
        schema={"row_id": pl.UInt32(), "cause": pl.String(), "blamed_nodes": pl.List(pl.String())}
    )
    own = sig = ev = empty
    if prepared.own is not None:
        own = _own_record_match(cand, prepared.own)
    if prepared.signals is not None or prepared.events is not None:
        left = _window_left(cand, before, after)
        if prepared.signals is not None:
            sig = _window_match(left, prepared.signals, before, after)
        if prepared.events is not None:
            ev = _window_match(left, prepared.events, before, after)

    tag_cause, tag_nodes = parse_aegis_tag(pl.col("admin_comment").fill_null(""))
    tag = cand.select("row_id", tag_cause.alias("cause"), tag_nodes.alias("blamed_nodes")).filter(
        pl.col("cause").is_not_null()
    )

    def tagged(frame: pl.DataFrame, source: str, prio: int) -> pl.DataFrame:
        return frame.select(
            "row_id",
            normalise_cause(pl.col("cause").cast(pl.String)).alias("cause"),
            pl.col("blamed_nodes").cast(pl.List(pl.String())),
            pl.lit(source).alias("attribution_source"),
            pl.lit(prio).alias("_prio"),
        )

    evidence = (
        pl.concat(
            [
                # The run's own evidence first (its Epilog record, then its tag), then windows.
                tagged(own, "node_signal", 0),
                tagged(tag, "admin_comment", 1),
                tagged(sig, "node_signal", 2),
                tagged(ev, "node_event", 3),
            ]
        )
        .sort("row_id", "_prio")
        .unique("row_id", keep="first", maintain_order=True)
        .drop("_prio")
    )
    # The wide table is never joined or sorted (each would copy every column, node lists
    # included, of a multi-million-run table): the four new columns are computed on a slim
    # projection in the table's own row order and set beside the untouched columns.
    base = runs.drop(
        [
            c
            for c in ("infra_failure", "attribution_source", "cause", "blamed_nodes")
            if c in runs.columns
        ]
    )
    failed_node = (
        pl.col("failed_node") if "failed_node" in base.columns else pl.lit("").alias("failed_node")
    )
    # Only candidates can change: the columns are computed for them alone and set in place
    # by one gather (null elsewhere), not by conditions over every run of years of history.
    slim = cand.select("row_id", "state", "nodes", failed_node).join(
        evidence, on="row_id", how="left", maintain_order="left"
    )
    is_nf = pl.col("state") == "NODE_FAIL"
    single_node = pl.col("nodes").list.len() == 1
    has_failed_node = pl.col("failed_node").fill_null("") != ""
    unblamed_nf = pl.col("blamed_nodes").is_null() & is_nf
    changed = slim.select(
        pl.col("cause").fill_null(pl.when(is_nf).then(pl.lit("unattributed"))),
        # Unattributed NODE_FAIL: FailedNode (23.02+) when printed; a one-node run's only node.
        pl.when(unblamed_nf & has_failed_node)
        .then(pl.concat_list(pl.col("failed_node")))
        .when(unblamed_nf & single_node)
        .then(pl.col("nodes"))
        .otherwise(pl.col("blamed_nodes"))
        .alias("blamed_nodes"),
        pl.col("attribution_source").fill_null(pl.when(is_nf).then(pl.lit("node_fail"))),
        (is_nf | pl.col("attribution_source").is_not_null()).alias("infra_failure"),
    )
    at = base.select(
        pl.when(is_cand).then(is_cand.cum_sum() - 1).cast(pl.UInt32).alias("_at")
    ).to_series()
    new = changed.select(pl.all().gather(at)).with_columns(pl.col("infra_failure").fill_null(False))
    if "failed_node" not in base.columns:  # the table gains it, "" (as before the gather)
        new = new.select(pl.exclude("infra_failure"), failed_node, "infra_failure")
    out = base.hstack([chunked_like(c, base) for c in new.get_columns()])
    return out if out.get_column("row_id").is_sorted() else out.sort("row_id")


def attribution_summary(attributed: pl.DataFrame) -> dict[str, dict[str, int]]:
    """Which source attributed how many infrastructure failures, per end state."""
    df = (
        attributed.filter(pl.col("infra_failure"))
        .group_by("attribution_source", "state")
        .len()
        .sort("attribution_source", "state")
    )
    out: dict[str, dict[str, int]] = {}
    for src, state, n in df.iter_rows():
        out.setdefault(src, {})[state] = int(n)
    return out
