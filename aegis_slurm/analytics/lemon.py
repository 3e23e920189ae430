"""Lemon-node detection over a trailing window (HPCA'25 §V-C Table II; spec §4).

Per node, over ``window_days`` (default 28) ending at ``as_of`` (default: the latest End):

* ``multi_node_node_fails`` / ``single_node_node_fails`` – infrastructure failures of multi-node /
  one-node runs blamed on the node (attribution's ``blamed_nodes``: the signal, tag or event
  node, FailedNode, or the only node of a one-node NODE_FAIL);
* ``single_node_jobs`` and ``single_node_failure_rate`` – FAILED or NODE_FAIL one-node runs over
  all one-node runs on the node (any cause: a lemon fails jobs *without* tripping checks);
* ``out_count`` – DOWN/DRAIN events from ``sacctmgr show event`` (failure events only);
* any numeric columns of an optional ``extra`` frame keyed by ``node`` (``xid_cnt``, ``tickets``,
  ``excl_jobid_count``…).

The paper publishes no thresholds (set by hand from Fig. 11 CDFs), so :class:`LemonThresholds`
holds documented defaults, chosen so a healthy node at RSC-1's r_f (≈0.15 expected blamed
failures per 28 days) is flagged with probability < 10⁻³: a node is flagged when its blamed
failures reach ``min_node_fails`` or when at least ``min_signals`` signals cross their
thresholds.  Nodes are ranked by signals crossed, then blamed failures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from aegis_slurm.accounting.events import failure_events


@dataclass(frozen=True)
class LemonThresholds:
    window_days: int = 28
    min_node_fails: int = 3  # single + multi blamed failures in the window: flag on its own
    multi_node_node_fails: int = 2
    single_node_node_fails: int = 2
    out_count: int = 3
    single_node_failure_rate: float = 0.6
    min_single_node_jobs: int = 10  # the rate signal needs this many one-node runs
    min_signals: int = 2
    extra: dict[str, float] = field(default_factory=lambda: {"xid_cnt": 5, "tickets": 2})


def lemon_nodes(
    attributed: pl.DataFrame,
    events: pl.DataFrame | None = None,
    extra: pl.DataFrame | None = None,
    thresholds: LemonThresholds | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Per-node lemon signals, flags and ranking (spec §4).  Returns {"nodes": ranked flagged
    rows, "window_start", "window_end", "thresholds", "candidates": nodes with any signal}."""
    th = thresholds or LemonThresholds()
    end = as_of or attributed["end_time"].max()
    if end is None:
        return {"nodes": [], "window_start": None, "window_end": None, "thresholds": th.__dict__}
    start = end - timedelta(days=th.window_days)
    win = attributed.filter(pl.col("end_time").is_between(start, end))
    multi = pl.col("n_nodes") > 1
    blamed = (
        win.filter(pl.col("infra_failure") & pl.col("blamed_nodes").is_not_null())
        .select(multi.alias("_multi"), pl.col("blamed_nodes").alias("node"))
        .explode("node")
        .drop_nulls("node")
        .group_by("node")
        .agg(
            (pl.col("_multi")).sum().alias("multi_node_node_fails"),
            (~pl.col("_multi")).sum().alias("single_node_node_fails"),
        )
    )
    single = (
        win.filter(pl.col("n_nodes") == 1)
        .select(
            pl.col("nodes").list.first().alias("node"),
            pl.col("state").is_in(["FAILED", "NODE_FAIL"]).alias("_f"),
        )
        .group_by("node")
        .agg(pl.len().alias("single_node_jobs"), pl.col("_f").sum().alias("single_node_failed"))
    )
    df = single.join(blamed, on="node", how="full", coalesce=True)
    if events is not None and not events.is_empty():
        outs = (
            failure_events(events)
            .filter(pl.col("time_start").is_between(start, end))
            .group_by("node")
            .agg(pl.len().alias("out_count"))
        )
        df = df.join(outs, on="node", how="full", coalesce=True)
    else:
        df = df.with_columns(pl.lit(0, pl.UInt32).alias("out_count"))
    extra_cols: list[str] = []
    if extra is not None and not extra.is_empty():
        extra_cols = [c for c in extra.columns if c != "node"]
        df = df.join(extra, on="node", how="full", coalesce=True)
    counts = [
        "single_node_jobs",
        "single_node_failed",
        "multi_node_node_fails",
        "single_node_node_fails",
        "out_count",
    ]
    df = df.with_columns(pl.col(counts).fill_null(0).cast(pl.Int64)).with_columns(
        (pl.col("single_node_failed") / pl.col("single_node_jobs"))
        .fill_nan(0.0)
        .fill_null(0.0)
        .alias("single_node_failure_rate"),
        (pl.col("multi_node_node_fails") + pl.col("single_node_node_fails")).alias("node_fails"),
    )
    crossed = [
        (pl.col("multi_node_node_fails") >= th.multi_node_node_fails).alias("x_multi"),
        (pl.col("single_node_node_fails") >= th.single_node_node_fails).alias("x_single"),
        (pl.col("out_count") >= th.out_count).alias("x_out"),
        (
            (pl.col("single_node_failure_rate") >= th.single_node_failure_rate)
            & (pl.col("single_node_jobs") >= th.min_single_node_jobs)
        ).alias("x_rate"),
    ] + [
        (pl.col(c).fill_null(0) >= th.extra[c]).alias(f"x_{c}") for c in extra_cols if c in th.extra
    ]
    df = df.with_columns(crossed)
    xcols = [e.meta.output_name() for e in crossed]
    df = df.with_columns(
        pl.sum_horizontal(xcols).alias("signals_crossed"),
        pl.concat_list([pl.when(pl.col(c)).then(pl.lit(c[2:])) for c in xcols])
        .list.drop_nulls()
        .alias("reasons"),
    ).with_columns(
        (
            (pl.col("node_fails") >= th.min_node_fails)
            | (pl.col("signals_crossed") >= th.min_signals)
        ).alias("flagged")
    )
    ranked = (
        df.filter(pl.col("flagged"))
        .sort(
            ["signals_crossed", "node_fails", "out_count", "single_node_failure_rate"],
            descending=True,
        )
        .with_row_index("rank", offset=1)
        .drop(xcols)
    )
    return {
        "window_start": start,
        "window_end": end,
        "thresholds": th.__dict__,
        "nodes": ranked.to_dicts(),
        "nodes_with_blamed_failures": int((df["node_fails"] > 0).sum()),
    }
