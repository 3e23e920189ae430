"""Thresholds for ``aegis-slurm check`` and the node_exporter textfile of the headline numbers.

A threshold is crossed only on evidence: r_f when the *lower* end of its 90% interval is above
the limit (a month with one unlucky failure does not page anyone; a rate that is certainly too
high does), crash loops and lemon nodes when their count is above the limit.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from aegis_slurm.sections import compute
from aegis_slurm.sections.inputs import Inputs, columns_for


@dataclass(frozen=True)
class Thresholds:
    max_rf_per_1000: float | None = None  # None: r_f is reported, never alerted on
    max_crash_loops: int = 0
    max_lemon_nodes: int = 0


#: The run columns :func:`evaluate` reads: its four sections'.
COLUMNS = columns_for(
    compute.failure_rate, compute.requeue_loops, compute.lemon_nodes, compute.goodput
)


def evaluate(inp: Inputs, th: Thresholds) -> dict[str, Any]:
    """The headline numbers of the period and which thresholds they cross."""
    fr = compute.failure_rate(inp)
    loops = compute.requeue_loops(inp)["loops"]
    lemons = compute.lemon_nodes(inp)["nodes"]
    gp = compute.goodput(inp)
    per1000 = None if fr["rf_per_node_day"] is None else fr["rf_per_node_day"] * 1000
    lo = None if fr["ci90_low"] is None else fr["ci90_low"] * 1000
    hi = None if fr["ci90_high"] is None else fr["ci90_high"] * 1000
    crossed = []
    if th.max_rf_per_1000 is not None and lo is not None and lo > th.max_rf_per_1000:
        crossed.append(
            f"r_f {per1000:.2f}/1000 node-days (90% interval {lo:.2f}-{hi:.2f}) is above "
            f"{th.max_rf_per_1000:g}"
        )
    if len(loops) > th.max_crash_loops:
        jobs = ", ".join(str(x["job_id"]) for x in loops[:5])
        crossed.append(f"{len(loops)} crash loops (limit {th.max_crash_loops}): jobs {jobs}")
    if len(lemons) > th.max_lemon_nodes:
        nodes = ", ".join(str(x["node"]) for x in lemons[:5])
        crossed.append(f"{len(lemons)} lemon nodes (limit {th.max_lemon_nodes}): {nodes}")
    return {
        "period": inp.period.public(),
        "runs": inp.runs.height,
        "rf_per_1000_node_days": per1000,
        "rf_ci90_per_1000": [lo, hi],
        "infra_failures": fr["failures"],
        "crash_loops": len(loops),
        "lemon_nodes": len(lemons),
        "goodput_lost_gpu_hours": gp["goodput_lost_total"],
        "thresholds": th.__dict__,
        "crossed": crossed,
        "ok": not crossed,
    }


def _num(v: float | int | None) -> str:
    return "NaN" if v is None or (isinstance(v, float) and not math.isfinite(v)) else repr(v)


def textfile(res: dict[str, Any], now: float | None = None) -> str:
    """Prometheus text exposition (node_exporter textfile collector) of ``evaluate``'s result."""
    lo, hi = res["rf_ci90_per_1000"]
    metrics = [
        (
            "aegis_slurm_rf_per_1000_node_days",
            "gauge",
            "r_f over the check period",
            [
                ("", res["rf_per_1000_node_days"]),
                ('{bound="ci90_low"}', lo),
                ('{bound="ci90_high"}', hi),
            ],
        ),
        (
            "aegis_slurm_infra_failures",
            "gauge",
            "infrastructure failures (runs > min_gpus)",
            [("", res["infra_failures"])],
        ),
        (
            "aegis_slurm_crash_loops",
            "gauge",
            "crash loops in the period",
            [("", res["crash_loops"])],
        ),
        (
            "aegis_slurm_lemon_nodes",
            "gauge",
            "lemon nodes at the period's end",
            [("", res["lemon_nodes"])],
        ),
        (
            "aegis_slurm_goodput_lost_gpu_hours",
            "gauge",
            "GPU-hours lost to infra failures",
            [("", res["goodput_lost_gpu_hours"])],
        ),
        ("aegis_slurm_runs", "gauge", "run records in the period", [("", res["runs"])]),
        (
            "aegis_slurm_check_failed",
            "gauge",
            "1 when a threshold is crossed",
            [("", 0 if res["ok"] else 1)],
        ),
        (
            "aegis_slurm_check_timestamp_seconds",
            "gauge",
            "when the check ran",
            [("", float(now if now is not None else time.time()))],
        ),
    ]
    lines = []
    for name, typ, help_, samples in metrics:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {typ}")
        lines += [f"{name}{labels} {_num(v)}" for labels, v in samples]
    return "\n".join(lines) + "\n"
