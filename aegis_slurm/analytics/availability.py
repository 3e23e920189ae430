"""Node availability, downtime and MTTR from ``sacctmgr show event`` node events.

A node is *out* while it has a DOWN/DRAIN/FAIL event (maintenance included: the node is out
either way; ``failures_only`` keeps only :func:`aegis_slurm.accounting.events.failure_events`).
Overlapping events of one node (DRAIN, then DOWN while drained) are merged into one outage, so
downtime is never counted twice.  Over the period [start, end) (Slurm accounting, event
intervals clipped to the period; an event still open counts until ``end``):

* downtime_h(node) = Σ merged outage hours inside the period;
* availability = 1 − Σ downtime / (nodes × period hours), ``nodes`` the cluster's node count;
* MTTR = mean length of the merged outages that *ended* inside the period (whole length, not
  clipped: a repair that started last month still took that long).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from aegis_slurm.accounting.events import failure_events

_OUT_STATE = r"^(DOWN|DRAIN|FAIL)"


def outages(events: pl.DataFrame, failures_only: bool = False) -> pl.DataFrame:
    """Merged outage intervals per node: node, start, end (null while still out), reasons."""
    ev = failure_events(events) if failures_only else events
    ev = ev.filter(pl.col("state").str.contains(_OUT_STATE)).select(
        "node", pl.col("time_start").alias("s"), pl.col("time_end").alias("e"), "reason"
    )
    if ev.is_empty():
        return pl.DataFrame(
            schema={
                "node": pl.String(),
                "start": pl.Datetime("us", "UTC"),
                "end": pl.Datetime("us", "UTC"),
                "reasons": pl.List(pl.String()),
            }
        )
    far = datetime(9999, 1, 1, tzinfo=UTC)  # an open event: out until further notice
    ev = ev.sort("node", "s").with_columns(
        pl.col("e").fill_null(pl.lit(far, pl.Datetime("us", "UTC"))).alias("_e")
    )
    # A new outage starts where the event begins after every earlier event of the node ended.
    prev_end = pl.col("_e").cum_max().shift(1).over("node")
    ev = ev.with_columns((prev_end.is_null() | (pl.col("s") > prev_end)).cum_sum().alias("_k"))
    return (
        ev.group_by("_k", maintain_order=True)
        .agg(
            pl.col("node").first(),
            pl.col("s").min().alias("start"),
            pl.col("_e").max().alias("end"),
            pl.col("reason").unique(maintain_order=True).alias("reasons"),
        )
        .with_columns(
            pl.when(pl.col("end").dt.year() == 9999)
            .then(None)
            .otherwise(pl.col("end"))
            .alias("end")
        )
        .drop("_k")
    )


def node_availability(
    events: pl.DataFrame,
    start: datetime,
    end: datetime,
    n_nodes: int,
    failures_only: bool = False,
    top: int = 10,
) -> dict[str, Any]:
    """Cluster availability, downtime per node (the ``top`` worst) and MTTR over [start, end)."""
    out = outages(events, failures_only)
    hours = (end - start).total_seconds() / 3600.0
    clipped = out.with_columns(
        pl.max_horizontal(pl.col("start"), pl.lit(start)).alias("_s"),
        pl.min_horizontal(pl.col("end").fill_null(pl.lit(end)), pl.lit(end)).alias("_e"),
    ).filter(pl.col("_e") > pl.col("_s"))
    per_node = (
        clipped.group_by("node")
        .agg(
            ((pl.col("_e") - pl.col("_s")).dt.total_seconds().sum() / 3600.0).alias("downtime_h"),
            pl.len().alias("outages"),
            pl.col("reasons").list.explode().unique().sort().alias("reasons"),
        )
        .sort(["downtime_h", "node"], descending=[True, False])
    )
    repaired = out.filter(
        pl.col("end").is_not_null() & (pl.col("end") >= start) & (pl.col("end") < end)
    ).with_columns(((pl.col("end") - pl.col("start")).dt.total_seconds() / 3600.0).alias("_h"))
    down = float(per_node["downtime_h"].sum()) if per_node.height else 0.0
    nodes = max(n_nodes, per_node.height)
    return {
        "nodes": nodes,
        "period_hours": hours,
        "node_hours": nodes * hours,
        "downtime_node_hours": down,
        "availability": 1.0 - down / (nodes * hours) if nodes and hours > 0 else None,
        "outages": clipped.height,
        "repaired_outages": repaired.height,
        "mttr_hours": float(repaired["_h"].mean()) if repaired.height else None,  # type: ignore[arg-type]
        "still_out_at_end": int(clipped.filter(pl.col("end").is_null()).height),
        "failures_only": failures_only,
        "worst_nodes": per_node.head(top).to_dicts(),
    }
