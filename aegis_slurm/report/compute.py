"""Every number of the monthly reliability report, from the sections layer (no I/O).

The report for month M analyses the run records that *ended* in M with the very section
functions the ``aegis-slurm`` analytics commands print (``aegis_slurm.sections.compute``), so each
section equals the ``--json`` output of its command run with ``--month M`` on the same store and
evidence (collected Epilog records included):

=====================  ===========================================================
report.json key        command
=====================  ===========================================================
``taxonomy``           ``aegis-slurm taxonomy --month M --json``
``failure_rate``       ``aegis-slurm failure-rate --month M --json`` (``rolling`` included)
``mttf``               ``aegis-slurm mttf --month M --json``
``goodput``            ``aegis-slurm goodput --month M --json``
``requeue_loops``      ``aegis-slurm requeue-loops --month M --json``
``lemon_nodes``        ``aegis-slurm lemon-nodes --month M --json``
``measured_ettr``      ``aegis-slurm measured-ettr --month M --json``
=====================  ===========================================================
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import polars as pl
from scipy import stats

from aegis_slurm.analytics.checkpoint import checkpoint_plan, ettr_grid
from aegis_slurm.analytics.common import distinct_jobs
from aegis_slurm.analytics.ettr import ettr_renewal, ettr_renewal_array
from aegis_slurm.analytics.mttf import project_mttf, theory_mttf_hours
from aegis_slurm.sections import compute as sections
from aegis_slurm.sections.inputs import Inputs, Month, columns_for

__all__ = ["COLUMNS", "Month", "compute_report"]

#: The run columns the report reads: every section on the page and its two breakdowns.
COLUMNS = columns_for(
    sections.taxonomy,
    sections.failure_rate,
    sections.mttf,
    sections.goodput,
    sections.requeue_loops,
    sections.lemon_nodes,
    sections.measured_ettr,
    sections.drains,
    sections.data_quality,
    sections.trend,
    extra=(sections.BY_COLUMNS["partition"], sections.BY_COLUMNS["gpu_type"]),
)


def _cluster_nodes(runs: pl.DataFrame) -> int:
    if runs.is_empty():
        return 0
    return int(runs.select(pl.col("nodes").explode().drop_nulls().n_unique()).item())


def _common_size(mttf_buckets: list[dict[str, Any]], min_runs: int) -> dict[str, Any] | None:
    """ "The cluster's largest common job size": the largest power-of-two GPU bucket with at
    least ``min_runs`` run records in the month (a bucket with two runs says nothing)."""
    common = [b for b in mttf_buckets if b["runs"] >= min_runs]
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


def _analyse(inp: Inputs) -> dict[str, Any]:
    """The per-month sections, exactly as the CLI commands compute them (sections layer)."""
    return {
        "taxonomy": sections.taxonomy(inp),
        "failure_rate": sections.failure_rate(inp),
        "mttf": sections.mttf(inp),
        "goodput": sections.goodput(inp),
        "requeue_loops": sections.requeue_loops(inp),
        "lemon_nodes": sections.lemon_nodes(inp),
        "measured_ettr": sections.measured_ettr(inp),
        "drains": sections.drains(inp),
        "jobs": int(distinct_jobs(inp.runs).item()) if inp.runs.height else 0,
    }


def _ettr_planning(
    fr: dict[str, Any], common: dict[str, Any] | None, cluster_nodes: int, inp: Inputs
) -> dict[str, Any]:
    """E[ETTR] vs checkpoint interval at the measured r_f (three job sizes) and the r_f × Δt map
    for a large job (HPCA'25 Fig. 10), with the checkpoint plan at each size.  Every E[ETTR] is
    the exact renewal form: at 16k GPUs λΔt is not small and the linear form is far off.

    With no failure in the month r_f is 0 but not known to be 0: planning uses its 90% upper
    bound, and says so."""
    st = inp.settings
    gpn = inp.gpus_per_node[0]
    rf = fr["rf_per_node_day"]
    basis = "measured"
    if not rf:
        if fr["runs"] and fr["ci90_high"]:
            rf, basis = fr["ci90_high"], "upper_bound"
        else:
            return {
                "available": False,
                "reason": f"r_f could not be measured this month (no runs with more than "
                f"{st.min_gpus} GPUs)",
            }
    u0, w, q, dt_cp = st.restart_min, st.ckpt_write_min, st.queue_min, st.ckpt_interval_min
    sizes = sorted({*([common["gpus"]] if common else []), max(gpn, cluster_nodes * gpn), 16384})
    intervals = np.unique(np.round(np.geomspace(1.0, 240.0, 60), 2))
    curves = []
    for g in sizes:
        n = -(-g // gpn)
        plan = checkpoint_plan(n, rf, u0, w, q)
        curves.append(
            {
                "gpus": g,
                "n_nodes": n,
                "mttf_hours": theory_mttf_hours(n, rf),
                "ettr_at_interval": ettr_renewal(n, rf, u0, dt_cp, w, q),
                "ettr_at_optimal": plan["ettr_at_optimal"],
                "optimal_min": plan["optimal_min"],
                "interval_min": intervals.tolist(),
                "ettr": ettr_renewal_array(n, rf, u0, intervals, w, q).tolist(),
            }
        )
    # The paper's Fig. 10 asks what the *next* generation of runs needs: a job 8x this
    # cluster's GPU count, at least 16k GPUs.
    map_gpus = max(16384, 8 * cluster_nodes * gpn)
    rf_axis = np.geomspace(0.5e-3, 20e-3, 80)
    dt_axis = np.geomspace(1.0, 240.0, 96)
    grid = ettr_grid(-(-map_gpus // gpn), rf_axis, dt_axis, u0, w, q)
    return {
        "available": True,
        "form": "exact renewal",
        "rf_per_node_day": rf,
        "rf_basis": basis,
        "gpus_per_node": gpn,
        "u0_min": u0,
        "ckpt_write_min": w,
        "queue_min": q,
        "ckpt_interval_min": dt_cp,
        "curves": curves,
        "map": {
            "gpus": map_gpus,
            "rf_axis": rf_axis.tolist(),
            "interval_axis_min": dt_axis.tolist(),
            "ettr": grid["ettr"].to_numpy().reshape(len(rf_axis), len(dt_axis)).tolist(),
        },
    }


def rate_change_test(k1: int, t1: float, k0: int, t0: float) -> dict[str, Any]:
    """Exact conditional test of equal Poisson rates (this month k1 over exposure t1, previous
    k0 over t0): given k1 + k0, k1 ~ Binomial(k1 + k0, t1/(t1 + t0)) under equal rates
    (Przyborowski & Wilenski 1940); two-sided p from ``scipy.stats.binomtest``."""
    n = k1 + k0
    if n == 0 or t1 <= 0 or t0 <= 0:
        return {"test": "exact conditional (binomial)", "p_value": None, "significant": False}
    p = float(stats.binomtest(k1, n, t1 / (t1 + t0)).pvalue)
    return {"test": "exact conditional (binomial)", "p_value": p, "significant": p < 0.05}


def _nodes_to_watch(
    lemons: dict[str, Any], drains: dict[str, Any], drain_watch: int = 2
) -> list[dict[str, Any]]:
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
        if entry is None and row["drains"] < drain_watch:
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


def compute_report(inp: Inputs, month: Month) -> dict[str, Any]:
    """All numbers of the report for ``month``.  ``inp``: the sections' inputs loaded for the
    month (``load_inputs(..., Month.period)``); the previous month is read from its context."""
    st = inp.settings
    prev = month.prev()
    cur = _analyse(inp)
    prev_inp = dataclasses.replace(inp, period=prev.period)
    before = _analyse(prev_inp) if prev_inp.runs.height else None
    gpn, gpn_source = inp.gpus_per_node
    fr = cur["failure_rate"]
    rf = fr["rf_per_node_day"]
    common = _common_size(cur["mttf"]["buckets"], st.common_size_min_runs)
    nodes = _cluster_nodes(inp.runs)
    largest = max((b["gpus"] for b in cur["mttf"]["buckets"]), default=0)
    next_sizes = sorted({2 * largest, 4 * largest, max(gpn, nodes * gpn), *st.project_sizes} - {0})
    projection = project_mttf(next_sizes, rf, gpn) if rf else []

    def headline(c: dict[str, Any]) -> dict[str, Any]:
        return _headline(
            c["taxonomy"],
            c["failure_rate"],
            c["goodput"],
            c["requeue_loops"]["loops"],
            c["lemon_nodes"],
            c["drains"],
            c["jobs"],
        )

    head = headline(cur)
    prev_head = headline(before) if before else None
    rf_prev = before["failure_rate"]["rf_per_1000_node_days"] if before else None
    rf_now = fr["rf_per_1000_node_days"]
    rf_test = (
        rate_change_test(
            fr["failures"],
            fr["node_days"],
            before["failure_rate"]["failures"],
            before["failure_rate"]["node_days"],
        )
        if before
        else None
    )
    summary = {
        "jobs": head["jobs"],
        "runs": head["runs"],
        "gpu_hours": head["gpu_hours"],
        "rf_per_1000_node_days": rf_now,
        "rf_ci90_per_1000": [
            None if fr["ci90_low"] is None else fr["ci90_low"] * 1000,
            None if fr["ci90_high"] is None else fr["ci90_high"] * 1000,
        ],
        "rf_lower_bound_only": fr["lower_bound_only"],
        "rf_previous_per_1000_node_days": rf_prev,
        "rf_change_per_1000_node_days": None
        if rf_now is None or rf_prev is None
        else rf_now - rf_prev,
        "rf_change_test": rf_test,
        "common_size": None
        if common is None
        else {
            "gpus": common["gpus"],
            "runs": common["runs"],
            "failures": common["failures"],
            "mttf_hours": common["mttf_hours"],
            # k = 0: MTTF is only known to exceed the one-sided 90% bound ("> N h").
            "mttf_at_least_hours": common["ci90_low_hours"] if not common["failures"] else None,
            "ci90_low_hours": common["ci90_low_hours"],
            "ci90_high_hours": common["ci90_high_hours"],
            "theory_mttf_hours": common["theory_mttf_hours"],
        },
        "worst_crash_loops": cur["requeue_loops"]["loops"][:3],
        "nodes_to_watch": _nodes_to_watch(cur["lemon_nodes"], cur["drains"], st.drain_watch),
        "cluster_nodes_seen": nodes,
        "goodput_lost_gpu_hours": cur["goodput"]["goodput_lost_total"],
        "goodput_lost_share": (cur["goodput"]["goodput_lost_total"] / head["gpu_hours"])
        if head["gpu_hours"]
        else None,
    }
    mom = []
    if prev_head:
        for k in head:
            row = {"metric": k, **_delta(head[k], prev_head[k])}
            row["test"] = rf_test if k == "rf_per_1000_node_days" else None
            mom.append(row)
    notes = []
    if not any(b["gpus"] > st.min_gpus for b in cur["mttf"]["buckets"]):
        notes.append(
            f"No runs with more than {st.min_gpus} GPUs ended this month: r_f, the MTTF "
            "theory line and the ETTR planning need them."
        )
    elif not rf:
        notes.append(
            f"No infrastructure failure in runs with more than {st.min_gpus} GPUs this "
            "month: r_f is 0 here but only known to be below its 90% upper bound, which the "
            "ETTR planning uses."
        )
    if fr["lower_bound_only"]:
        notes.append(
            "No node events, node signals or aegis tags were available: FAILED runs could not "
            "be attributed, so r_f counts NODE_FAIL only and is a lower bound."
        )
    if inp.signals is None:
        notes.append(
            "No node-signal table given (--signals) and no Epilog records collected into the "
            "store: FAILED runs are attributed from AdminComment tags and node events only."
        )
    if inp.events is None:
        notes.append(
            "No node events given (--events): drains by check and out counts are unavailable."
        )
    if gpn_source.startswith("assumed"):
        notes.append(
            f"GPUs per node could not be read from the data: {gpn} assumed; set "
            "gpus_per_node in the site config."
        )
    if before is None:
        notes.append(f"No runs ended in {prev}: month-over-month deltas are unavailable.")

    return {
        "month": str(month),
        "period": {"start": month.start, "end": month.end},
        "parameters": {
            **st.public(),
            "gpus_per_node": gpn,
            "gpus_per_node_source": gpn_source,
        },
        "summary": summary,
        "data_quality": sections.data_quality(inp),
        # Where failures concentrate: the same r_f per partition and per GPU type.
        "breakdowns": {by: sections.breakdown(inp, by) for by in ("partition", "gpu_type")},
        "taxonomy": cur["taxonomy"],
        "failure_rate": fr,
        "mttf": cur["mttf"],
        "mttf_projection": projection,
        "ettr_planning": _ettr_planning(fr, common, nodes, inp),
        "goodput": cur["goodput"],
        "requeue_loops": cur["requeue_loops"],
        "lemon_nodes": cur["lemon_nodes"],
        "measured_ettr": cur["measured_ettr"],
        "drains": cur["drains"],
        "availability": sections.availability(inp),
        "trend": sections.trend(inp, 12),
        "previous_month": {"month": str(prev), "headline": prev_head},
        "month_over_month": mom,
        "notes": notes,
    }
