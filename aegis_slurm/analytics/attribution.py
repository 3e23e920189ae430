"""Attribution of infrastructure failures: which runs failed because of the machine, and why.

HPCA'25 §IV ("Job failure characterisation", r_f definition in §V) counts a run as an
infrastructure failure when it ended NODE_FAIL, or ended FAILED and a critical health check fired
on one of its nodes in the last 10 minutes of the run or within 5 minutes after it ended
(analytics-spec §2.1).  Evidence is taken per run, first source that matches wins:

1. ``node_signal``   – a critical row of a node-signal frame (columns ``node``, ``time`` UTC,
   ``signal``, ``critical``) on any allocated node with time in [End − 10 min, End + 5 min];
2. ``admin_comment`` – an aegis tag ``aegis:v1;hw=<node>:<signal>[,<node>:<signal>...]`` in
   AdminComment (possibly after other text), written by the aegis epilog for this very job;
3. ``node_event``    – a DOWN/DRAIN event from ``sacctmgr show event`` starting on an allocated
   node inside the same window (see :func:`aegis_slurm.accounting.events.failure_events` for the
   excluded Prolog/Epilog-error and maintenance reasons);
4. ``node_fail``     – NODE_FAIL with none of the above: infrastructure, cause ``unattributed``.

A FAILED run without evidence is a user failure.  :func:`attribute_failures` adds the columns
``row_id``, ``infra_failure``, ``attribution_source``, ``cause`` and ``blamed_nodes``.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from aegis_slurm.accounting.events import DEFAULT_EXCLUDE_REASONS, failure_events

WINDOW_BEFORE = timedelta(minutes=10)
WINDOW_AFTER = timedelta(minutes=5)
CANDIDATE_STATES = ("FAILED", "NODE_FAIL")
SOURCES = ("node_signal", "admin_comment", "node_event", "node_fail")

_TAG = r"aegis:v1;hw=([^;\s]+)"


def _window_match(
    cand: pl.DataFrame,
    evidence: pl.DataFrame,
    time_col: str,
    label_col: str,
    before: timedelta,
    after: timedelta,
) -> pl.DataFrame:
    """Per candidate run, the earliest evidence row on an allocated node inside the window.

    Vectorized with an as-of join per node: for each (run, node) find the first evidence time
    ≥ End − before, within a tolerance of before + after.  Returns row_id, cause, blamed_nodes.
    """
    if cand.is_empty() or evidence.is_empty():
        return pl.DataFrame(
            schema={
                "row_id": pl.UInt32(),
                "cause": pl.String(),
                "blamed_nodes": pl.List(pl.String()),
            }
        )
    left = (
        cand.select("row_id", "nodes", "end_time")
        .explode("nodes")
        .rename({"nodes": "node"})
        .drop_nulls(["node", "end_time"])
        .with_columns((pl.col("end_time") - before).alias("_t"))
        .sort("_t")
    )
    right = (
        evidence.select(
            pl.col("node"),
            pl.col(time_col).alias("_t"),
            pl.col(time_col).alias("_et"),
            pl.col(label_col).alias("_label"),
        )
        .drop_nulls("_t")
        .sort("_t")
    )
    hits = left.join_asof(
        right,
        on="_t",
        by="node",
        strategy="forward",
        tolerance=before + after,
        suffix="_ev",
        check_sortedness=False,
    ).filter(pl.col("_label").is_not_null())
    # Earliest evidence first: that is the most likely cause.
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
    runs = runs.with_row_index("row_id") if "row_id" not in runs.columns else runs
    cand = runs.filter(pl.col("state").is_in(CANDIDATE_STATES))

    sig = pl.DataFrame(
        schema={"row_id": pl.UInt32(), "cause": pl.String(), "blamed_nodes": pl.List(pl.String())}
    )
    if signals is not None and not signals.is_empty():
        crit = signals.filter(pl.col("critical"))
        sig = _window_match(cand, crit, "time", "signal", before, after)

    tag_cause, tag_nodes = parse_aegis_tag(pl.col("admin_comment").fill_null(""))
    tag = cand.select("row_id", tag_cause.alias("cause"), tag_nodes.alias("blamed_nodes")).filter(
        pl.col("cause").is_not_null()
    )

    ev = sig.clear()
    if events is not None and not events.is_empty():
        fe = failure_events(events, exclude_event_reasons).with_columns(
            pl.concat_str([pl.col("state"), pl.col("reason").fill_null("")], separator=": ").alias(
                "_label"
            )
        )
        ev = _window_match(cand, fe, "time_start", "_label", before, after)

    def tagged(frame: pl.DataFrame, source: str) -> pl.DataFrame:
        return frame.select(
            "row_id",
            pl.col("cause").cast(pl.String),
            pl.col("blamed_nodes").cast(pl.List(pl.String())),
            pl.lit(source).alias("attribution_source"),
            pl.lit(SOURCES.index(source)).alias("_prio"),
        )

    evidence = (
        pl.concat(
            [tagged(sig, "node_signal"), tagged(tag, "admin_comment"), tagged(ev, "node_event")]
        )
        .sort("row_id", "_prio")
        .unique("row_id", keep="first", maintain_order=True)
        .drop("_prio")
    )
    out = runs.drop(
        [
            c
            for c in ("infra_failure", "attribution_source", "cause", "blamed_nodes")
            if c in runs.columns
        ]
    ).join(evidence, on="row_id", how="left")
    is_nf = pl.col("state") == "NODE_FAIL"
    is_cand = pl.col("state").is_in(CANDIDATE_STATES)
    single_node = pl.col("nodes").list.len() == 1
    if "failed_node" not in out.columns:
        out = out.with_columns(pl.lit("").alias("failed_node"))
    has_failed_node = pl.col("failed_node").fill_null("") != ""
    return out.with_columns(
        (is_nf | (is_cand & pl.col("attribution_source").is_not_null())).alias("infra_failure"),
        pl.when(is_cand)
        .then(pl.col("attribution_source").fill_null(pl.when(is_nf).then(pl.lit("node_fail"))))
        .alias("attribution_source"),
        pl.when(is_cand)
        .then(pl.col("cause").fill_null(pl.when(is_nf).then(pl.lit("unattributed"))))
        .alias("cause"),
        # Unattributed NODE_FAIL: FailedNode (23.02+) when printed; a one-node run's only node.
        pl.when(is_cand & pl.col("blamed_nodes").is_null() & is_nf & has_failed_node)
        .then(pl.concat_list(pl.col("failed_node")))
        .when(is_cand & pl.col("blamed_nodes").is_null() & is_nf & single_node)
        .then(pl.col("nodes"))
        .otherwise(pl.col("blamed_nodes"))
        .alias("blamed_nodes"),
    ).sort("row_id")


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
