"""Attribution as it was before session 8 (commit 5a20715), kept verbatim as the oracle of
``test_attribution_equal.py``: it prepared the evidence per call and computed the new columns
over every run; the shipped code prepares evidence once and touches candidates only."""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from aegis_slurm.accounting.events import DEFAULT_EXCLUDE_REASONS, failure_events
from aegis_slurm.accounting.frames import chunked_like
from aegis_slurm.analytics.attribution import (
    CANDIDATE_STATES,
    WINDOW_AFTER,
    WINDOW_BEFORE,
    _own_record_match,
    normalise_cause,
    parse_aegis_tag,
)


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
    ≥ max(Start, End − before) up to End + after.  Returns row_id, cause, blamed_nodes.
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
    ).filter(pl.col("_label").is_not_null() & (pl.col("_et") <= pl.col("_until")))
    # Earliest evidence first: that is the most likely cause.
    return (
        hits.sort("row_id", "_et")
        .group_by("row_id", maintain_order=True)
        .agg(pl.col("_label").first().alias("cause"), pl.col("node").unique().alias("blamed_nodes"))
    )


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

    empty = pl.DataFrame(
        schema={"row_id": pl.UInt32(), "cause": pl.String(), "blamed_nodes": pl.List(pl.String())}
    )
    own = sig = empty
    if signals is not None and not signals.is_empty():
        crit = signals.filter(pl.col("critical"))
        if "job_id" in crit.columns:
            own = _own_record_match(cand, crit.filter(pl.col("job_id").is_not_null()))
            crit = crit.filter(pl.col("job_id").is_null())  # another job's record: never
        sig = _window_match(cand, crit, "time", "signal", before, after)

    tag_cause, tag_nodes = parse_aegis_tag(pl.col("admin_comment").fill_null(""))
    tag = cand.select("row_id", tag_cause.alias("cause"), tag_nodes.alias("blamed_nodes")).filter(
        pl.col("cause").is_not_null()
    )

    ev = empty
    if events is not None and not events.is_empty():
        fe = failure_events(events, exclude_event_reasons).with_columns(
            pl.concat_str([pl.col("state"), pl.col("reason").fill_null("")], separator=": ").alias(
                "_label"
            )
        )
        ev = _window_match(cand, fe, "time_start", "_label", before, after)

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
    slim = base.select("row_id", "state", "nodes", failed_node).join(
        evidence, on="row_id", how="left", maintain_order="left"
    )
    is_nf = pl.col("state") == "NODE_FAIL"
    is_cand = pl.col("state").is_in(CANDIDATE_STATES)
    single_node = pl.col("nodes").list.len() == 1
    has_failed_node = pl.col("failed_node").fill_null("") != ""
    new = slim.select(
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
        pl.when(is_cand)
        .then(pl.col("attribution_source").fill_null(pl.when(is_nf).then(pl.lit("node_fail"))))
        .alias("attribution_source"),
        *([] if "failed_node" in base.columns else [pl.col("failed_node")]),
        (is_nf | (is_cand & pl.col("attribution_source").is_not_null())).alias("infra_failure"),
    )
    out = base.hstack([chunked_like(c, base) for c in new.get_columns()])
    return out if out.get_column("row_id").is_sorted() else out.sort("row_id")
