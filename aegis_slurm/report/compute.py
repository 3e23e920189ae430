"""Every number of the monthly reliability report, computed from the run table (no I/O).

The report for month M analyses the run records that *ended* in M (``end_time`` in [M, M+1)),
with the same functions and the same defaults as the ``aegis-slurm`` analytics commands, so on a
store that holds month M only, each section equals the ``--json`` output of its command:

=====================  ===========================================================
report.json key        command
=====================  ===========================================================
``taxonomy``           ``aegis-slurm taxonomy --json``
``failure_rate``       ``aegis-slurm failure-rate --json`` (``rolling`` included)
``mttf``               ``aegis-slurm mttf --json``
``goodput``            ``aegis-slurm goodput --json``
``requeue_loops``      ``aegis-slurm requeue-loops --json``
``lemon_nodes``        ``aegis-slurm lemon-nodes --json``
``measured_ettr``      ``aegis-slurm measured-ettr --json``
=====================  ===========================================================

The rolling r_f series also looks back into the previous month (a 30-day window needs 30 days).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.checkpoint import checkpoint_plan, ettr_grid
from aegis_slurm.analytics.ettr import ettr_longrun
from aegis_slurm.analytics.failure_rate import failure_rate, rolling_failure_rate
from aegis_slurm.analytics.goodput import goodput_lost
from aegis_slurm.analytics.job_runs import (
    link_job_runs,
    measured_ettr,
    measured_ettr_summary,
    size_distribution,
)
from aegis_slurm.analytics.lemon import lemon_nodes
from aegis_slurm.analytics.loops import requeue_loops
from aegis_slurm.analytics.mttf import mttf_by_size, project_mttf, theory_mttf_hours
from aegis_slurm.analytics.taxonomy import failure_taxonomy

#: The CLI defaults the report shares (see the table in the module docstring).
MIN_GPUS = 128
WINDOW_DAYS = 30
PROJECT_SIZES = (16384, 131072)
GPUS_PER_NODE = 8
#: ETTR planning assumptions (HPCA'25 §V: Δt_cp = 60 min, u0 = 5 min; non-blocking writes).
U0_MIN = 5.0
DT_CP_MIN = 60.0
#: "The cluster's largest common job size": the largest power-of-two GPU bucket with at least
#: this many run records in the month (a bucket with two runs says nothing about MTTF).
COMMON_SIZE_MIN_RUNS = 10
#: A node with this many aegis drains in the month is worth a look even if it is not a lemon.
DRAIN_WATCH = 2

_AEGIS_REASON = re.compile(r"^aegis:\s*([^:\s]+)")


@dataclass(frozen=True)
class Month:
    """A calendar month in UTC."""

    year: int
    month: int

    @classmethod
    def parse(cls, text: str) -> Month:
        m = re.fullmatch(r"(\d{4})-(\d{2})", text.strip())
        if not m or not 1 <= int(m.group(2)) <= 12:
            raise ValueError(f"month must be YYYY-MM, got {text!r}")
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

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"


def _in(frame: pl.DataFrame, col: str, month: Month) -> pl.DataFrame:
    return frame.filter(pl.col(col).is_between(month.start, month.end, closed="left"))


def drains_by_check(events: pl.DataFrame | None, month: Month) -> dict[str, Any]:
    """Drains the aegis Prolog made (Reason ``aegis: <check>: ...``) in ``month``, by check and by
    node, next to all other drain/down events (counted, not broken down)."""
    if events is None:
        return {
            "events_given": False,
            "aegis_drains": 0,
            "other_outs": 0,
            "by_check": [],
            "by_node": [],
        }
    ev = _in(events, "time_start", month).filter(
        pl.col("state").str.contains(r"^(DOWN|DRAIN|FAIL)")
    )
    ev = ev.with_columns(
        pl.col("reason").fill_null("").str.extract(_AEGIS_REASON.pattern, 1).alias("check")
    )
    ours = ev.filter(pl.col("check").is_not_null())
    by_check = (
        ours.group_by("check")
        .agg(pl.len().alias("drains"), pl.col("node").n_unique().alias("nodes"))
        .sort(["drains", "check"], descending=[True, False])
    )
    by_node = (
        ours.group_by("node")
        .agg(pl.len().alias("drains"), pl.col("check").unique().sort().alias("checks"))
        .sort(["drains", "node"], descending=[True, False])
    )
    return {
        "events_given": True,
        "aegis_drains": ours.height,
        "other_outs": ev.height - ours.height,
        "by_check": by_check.to_dicts(),
        "by_node": by_node.to_dicts(),
    }


def _cluster_nodes(runs: pl.DataFrame) -> int:
    if runs.is_empty():
        return 0
    return int(runs.select(pl.col("nodes").explode().drop_nulls().n_unique()).item())


def _common_size(mttf_buckets: list[dict[str, Any]]) -> dict[str, Any] | None:
    common = [b for b in mttf_buckets if b["runs"] >= COMMON_SIZE_MIN_RUNS]
    return max(common, key=lambda b: b["gpus"]) if common else None


def _headline(
    tax: dict[str, Any],
    fr: dict[str, Any],
    gp: dict[str, Any],
    loops: list[dict[str, Any]],
    lemons: dict[str, Any],
    drains: dict[str, Any],
    jobs: int,
) -> dict[str, Any]:
    by_state = {r["state"]: r["runs"] for r in tax["by_state"]}
    return {
        "jobs": jobs,
        "runs": tax["total_runs"],
        "gpu_hours": tax["total_gpu_hours"],
        "rf_per_1000_node_days": fr["rf_per_1000_node_days"],
        "infra_failures_gt128": fr["failures"],
        "node_fail_runs": by_state.get("NODE_FAIL", 0),
        "goodput_lost_gpu_hours": gp["goodput_lost_total"],
        "crash_loops": len(loops),
        "lemon_nodes": len(lemons["nodes"]),
        "aegis_drains": drains["aegis_drains"],
    }


def _analyse(runs: pl.DataFrame, events: pl.DataFrame | None, month: Month) -> dict[str, Any]:
    """The per-month sections, exactly as the CLI commands compute them."""
    linked = link_job_runs(runs)
    fr = failure_rate(runs, min_gpus=MIN_GPUS)
    rf = fr["rf_per_node_day"]
    loops = requeue_loops(linked, rf=rf)
    per = measured_ettr(linked, rf, u0_min=U0_MIN, dt_cp_min=DT_CP_MIN, min_training_hours=24.0)
    tax = failure_taxonomy(runs)
    return {
        "taxonomy": tax,
        "failure_rate": fr,
        "mttf": {
            "rf_per_node_day": rf,
            "method": "chi2",
            "buckets": mttf_by_size(runs, rf, method="chi2"),
            "projections": project_mttf(PROJECT_SIZES, rf, GPUS_PER_NODE) if rf else [],
        },
        "goodput": goodput_lost(linked),
        "requeue_loops": {"rf_per_node_day": rf, "loops": loops},
        "lemon_nodes": lemon_nodes(runs, events),
        "measured_ettr": {
            "rf_per_node_day": rf,
            "job_runs": per.height,
            "measured_ettr": measured_ettr_summary(per),
            "size_distribution": size_distribution(linked),
        },
        "drains": drains_by_check(events, month),
        "jobs": int(runs["job_id_raw"].n_unique()) if runs.height else 0,
    }


def _ettr_planning(
    rf: float | None, common: dict[str, Any] | None, cluster_nodes: int
) -> dict[str, Any]:
    """E[ETTR] vs checkpoint interval at the measured r_f (three job sizes) and the r_f × Δt map
    for a whole-cluster job (HPCA'25 Fig. 10), with the checkpoint plan at each size."""
    if not rf:
        return {
            "available": False,
            "reason": "r_f could not be measured this month "
            "(no infrastructure failure in runs with more than 128 GPUs, or no such runs)",
        }
    sizes = sorted(
        {
            *([common["gpus"]] if common else []),
            max(GPUS_PER_NODE, cluster_nodes * GPUS_PER_NODE),
            16384,
        }
    )
    intervals = np.unique(np.round(np.geomspace(1.0, 240.0, 60), 2))
    curves = []
    for g in sizes:
        n = -(-g // GPUS_PER_NODE)
        plan = checkpoint_plan(n, rf, U0_MIN, 0.0)
        curves.append(
            {
                "gpus": g,
                "n_nodes": n,
                "mttf_hours": theory_mttf_hours(n, rf),
                "ettr_at_60min": max(0.0, ettr_longrun(n, rf, U0_MIN, DT_CP_MIN, 0.0, 0.0)),
                "ettr_at_optimal": plan["ettr_at_optimal"],
                "interval_min": intervals.tolist(),
                "ettr": [
                    max(0.0, ettr_longrun(n, rf, U0_MIN, float(d), 0.0, 0.0)) for d in intervals
                ],
            }
        )
    # The paper's Fig. 10 asks what the *next* generation of runs needs: a job 8x this
    # cluster's GPU count, at least 16k GPUs.
    map_gpus = max(16384, 8 * cluster_nodes * GPUS_PER_NODE)
    rf_axis = np.geomspace(0.5e-3, 20e-3, 80)
    dt_axis = np.geomspace(1.0, 240.0, 96)
    grid = ettr_grid(-(-map_gpus // GPUS_PER_NODE), rf_axis, dt_axis, U0_MIN)
    return {
        "available": True,
        "rf_per_node_day": rf,
        "u0_min": U0_MIN,
        "ckpt_write_min": 0.0,
        "queue_min": 0.0,
        "curves": curves,
        "map": {
            "gpus": map_gpus,
            "rf_axis": rf_axis.tolist(),
            "interval_axis_min": dt_axis.tolist(),
            "ettr": grid["ettr"].to_numpy().reshape(len(rf_axis), len(dt_axis)).tolist(),
        },
    }


def _nodes_to_watch(lemons: dict[str, Any], drains: dict[str, Any]) -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in lemons["nodes"]:
        out[row["node"]] = {
            "node": row["node"],
            "lemon_rank": row["rank"],
            "blamed_failures": row["node_fails"],
            "aegis_drains": 0,
            "why": [f"lemon: {', '.join(row['reasons']) or 'blamed failures'}"],
        }
    for row in drains["by_node"]:
        entry = out.get(row["node"])
        if entry is None and row["drains"] < DRAIN_WATCH:
            continue
        if entry is None:
            entry = out.setdefault(
                row["node"],
                {
                    "node": row["node"],
                    "lemon_rank": None,
                    "blamed_failures": 0,
                    "aegis_drains": 0,
                    "why": [],
                },
            )
        entry["aegis_drains"] = row["drains"]
        entry["why"].append(f"{row['drains']} aegis drains ({', '.join(row['checks'])})")
    return sorted(
        out.values(),
        key=lambda e: (
            e["lemon_rank"] is None,
            e["lemon_rank"] or 0,
            -e["aegis_drains"],
            e["node"],
        ),
    )


def _delta(this: Any, prev: Any) -> dict[str, Any]:
    change = None
    rel = None
    if isinstance(this, int | float) and isinstance(prev, int | float):
        change = this - prev
        rel = change / prev if prev else None
    return {"this_month": this, "previous_month": prev, "change": change, "relative_change": rel}


def compute_report(
    runs: pl.DataFrame,
    month: Month,
    events: pl.DataFrame | None = None,
    signals: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """All numbers of the report for ``month``.  ``runs``: the job-run table (``load_runs``) of
    at least the month and the one before it; ``events``/``signals`` as for attribution."""
    prev = month.prev()
    window = runs.filter(pl.col("end_time").is_between(prev.start, month.end, closed="left"))
    attributed = attribute_failures(window, signals, events)
    # Fresh row ids per month: each month is analysed as a store of its own (CLI equality).
    this_runs = _in(attributed, "end_time", month).drop("row_id").with_row_index("row_id")
    prev_runs = _in(attributed, "end_time", prev).drop("row_id").with_row_index("row_id")
    cur = _analyse(this_runs, events, month)
    before = _analyse(prev_runs, events, prev) if prev_runs.height else None

    # `aegis-slurm failure-rate` gives the series over its whole store; here over the two months
    # (the month's 30-day windows reach back into the previous one).
    cur["failure_rate"]["rolling"] = rolling_failure_rate(
        attributed, MIN_GPUS, WINDOW_DAYS
    ).to_dicts()

    rf = cur["failure_rate"]["rf_per_node_day"]
    common = _common_size(cur["mttf"]["buckets"])
    nodes = _cluster_nodes(this_runs)
    largest = max((b["gpus"] for b in cur["mttf"]["buckets"]), default=0)
    next_sizes = sorted(
        {2 * largest, 4 * largest, max(GPUS_PER_NODE, nodes * GPUS_PER_NODE), *PROJECT_SIZES} - {0}
    )
    projection = project_mttf(next_sizes, rf, GPUS_PER_NODE) if rf else []

    head = _headline(
        cur["taxonomy"],
        cur["failure_rate"],
        cur["goodput"],
        cur["requeue_loops"]["loops"],
        cur["lemon_nodes"],
        cur["drains"],
        cur["jobs"],
    )
    prev_head = (
        _headline(
            before["taxonomy"],
            before["failure_rate"],
            before["goodput"],
            before["requeue_loops"]["loops"],
            before["lemon_nodes"],
            before["drains"],
            before["jobs"],
        )
        if before
        else None
    )
    rf_prev = before["failure_rate"]["rf_per_1000_node_days"] if before else None
    rf_now = cur["failure_rate"]["rf_per_1000_node_days"]
    summary = {
        "jobs": head["jobs"],
        "runs": head["runs"],
        "gpu_hours": head["gpu_hours"],
        "rf_per_1000_node_days": rf_now,
        "rf_ci90_per_1000": [
            None
            if cur["failure_rate"]["ci90_low"] is None
            else cur["failure_rate"]["ci90_low"] * 1000,
            None
            if cur["failure_rate"]["ci90_high"] is None
            else cur["failure_rate"]["ci90_high"] * 1000,
        ],
        "rf_lower_bound_only": cur["failure_rate"]["lower_bound_only"],
        "rf_previous_per_1000_node_days": rf_prev,
        "rf_change_per_1000_node_days": None
        if rf_now is None or rf_prev is None
        else rf_now - rf_prev,
        "common_size": None
        if common is None
        else {
            "gpus": common["gpus"],
            "runs": common["runs"],
            "failures": common["failures"],
            "mttf_hours": common["mttf_hours"],
            "ci90_low_hours": common["ci90_low_hours"],
            "ci90_high_hours": common["ci90_high_hours"],
            "theory_mttf_hours": common["theory_mttf_hours"],
        },
        "worst_crash_loops": cur["requeue_loops"]["loops"][:3],
        "nodes_to_watch": _nodes_to_watch(cur["lemon_nodes"], cur["drains"]),
        "cluster_nodes_seen": nodes,
        "goodput_lost_gpu_hours": cur["goodput"]["goodput_lost_total"],
        "goodput_lost_share": (cur["goodput"]["goodput_lost_total"] / head["gpu_hours"])
        if head["gpu_hours"]
        else None,
    }
    mom = [{"metric": k, **_delta(head[k], prev_head[k])} for k in head] if prev_head else []
    notes = []
    if not any(b["gpus"] > MIN_GPUS for b in cur["mttf"]["buckets"]):
        notes.append(
            f"No runs with more than {MIN_GPUS} GPUs ended this month: r_f, the MTTF "
            "theory line and the ETTR planning need them."
        )
    elif rf is None or rf == 0:
        notes.append(
            f"No infrastructure failure in runs with more than {MIN_GPUS} GPUs this "
            "month: r_f is 0 (its 90% upper bound is shown)."
        )
    if signals is None:
        notes.append(
            "No node-signal table given (--signals): FAILED runs are attributed from "
            "AdminComment tags and node events only."
        )
    if events is None:
        notes.append(
            "No node events given (--events): drains by check and out counts are unavailable."
        )
    if before is None:
        notes.append(f"No runs ended in {prev}: month-over-month deltas are unavailable.")

    return {
        "month": str(month),
        "period": {"start": month.start, "end": month.end},
        "parameters": {
            "min_gpus": MIN_GPUS,
            "window_days": WINDOW_DAYS,
            "gpus_per_node": GPUS_PER_NODE,
            "u0_min": U0_MIN,
            "ckpt_interval_min": DT_CP_MIN,
            "common_size_min_runs": COMMON_SIZE_MIN_RUNS,
        },
        "summary": summary,
        "taxonomy": cur["taxonomy"],
        "failure_rate": cur["failure_rate"],
        "mttf": cur["mttf"],
        "mttf_projection": projection,
        "ettr_planning": _ettr_planning(rf, common, nodes),
        "goodput": cur["goodput"],
        "requeue_loops": cur["requeue_loops"],
        "lemon_nodes": cur["lemon_nodes"],
        "measured_ettr": cur["measured_ettr"],
        "drains": cur["drains"],
        "previous_month": {"month": str(prev), "headline": prev_head},
        "month_over_month": mom,
        "notes": notes,
    }
