"""Faulty-machine detection from monitoring metrics: Minder (NSDI'25) and Aegis' λ+2δ (NSDI'25).

Data flows one way: a long table (Parquet offline, Prometheus online) -> :func:`align.align` ->
:mod:`detect` -> a :class:`detect.Result` -> :func:`to_json` (the CLI's stable contract).  See
docs/minder.md.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import polars as pl

from aegis_slurm.errors import NoDataError
from aegis_slurm.metrics.align import Aligned, align
from aegis_slurm.metrics.catalog import job_can_cause, specs_for
from aegis_slurm.metrics.detect import Params, Result, detect, lambda_2delta
from aegis_slurm.metrics.priority import default_priority
from aegis_slurm.metrics.prometheus import PromConfig, fetch_job

__all__ = [
    "Aligned",
    "Params",
    "PromConfig",
    "Result",
    "analyse",
    "diagnose_job_metrics",
    "iso",
    "to_json",
]


def iso(epoch: float) -> str:
    """ISO-8601 UTC with a Z, to the second."""
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def analyse(
    df: pl.DataFrame,
    nodes: list[str] | None = None,
    start: float | None = None,
    end: float | None = None,
    priority: list[str] | None = None,
    params: Params | None = None,
    detector: str = "minder",
    step: float | None = None,
    offsets: dict[str, dict[str, float]] | None = None,
) -> tuple[Result, Aligned]:
    """Align a long table and run a detector (``minder`` or ``lambda2delta``) over it.

    ``offsets``: each node's reference offset per metric taken elsewhere (``watch``: from the
    job's start, :func:`aegis_slurm.metrics.detect.job_reference`); None: from the window's start.
    """
    aligned = align(df, step=step, nodes=nodes, start=start, end=end)
    if len(aligned.nodes) < 2:
        raise NoDataError(
            f"only {len(aligned.nodes)} node(s) in the table: the detectors compare a node "
            "with its peers, there is nothing to compare"
        )
    pri = priority or default_priority()
    if not any(m in aligned.data for m in pri):  # judged on nothing is not "nothing found"
        have = sorted(aligned.data)
        raise NoDataError(
            f"none of the table's {len(have)} metric(s) ({', '.join(have[:3])}"
            f"{', ...' if len(have) > 3 else ''}) is in the metric priority (e.g. {pri[0]}): "
            "nothing to judge"
        )
    if detector == "lambda2delta":
        return lambda_2delta(aligned, pri, p=params), aligned
    if detector != "minder":
        raise ValueError(f"unknown detector {detector!r}")
    return detect(aligned, pri, params, offsets), aligned


def to_json(result: Result) -> dict[str, Any]:
    """The stable ``--json`` contract.

    ``{"faulty": [{"node", "first_detected", "metric", "score", "job_can_cause", "caveat"},
    ...],
    "windows": int, "departed": [{"node", "at"}, ...], "collateral": [{"node", "at", "with"},
    ...]}``: ``job_can_cause`` is null, or why the job itself may have moved that metric (an
    OOM kill, an I/O stall: catalog ``job_can_cause``) -- a finding to read, not a machine
    verdict; ``caveat`` is null, or why the machine's own finding is still no reason to drain
    (corrected memory errors; a busy GPU's clock or a port's rate held far under the peers'
    from the first samples, which another GPU model or fabric in the job would show too);
    ``departed`` names the nodes that left the job while it ran on at its level (an elastic job
    releasing them), ``collateral`` those whose GPUs went idle together with another node's
    hardware fault (``with``) and show nothing of their own; neither are faults.
    """
    return {
        "faulty": [
            {
                "node": f.node,
                "first_detected": iso(f.first_detected),
                "metric": f.metric,
                "score": round(float(f.score), 4),
                "job_can_cause": job_can_cause(f.metric),
                "caveat": f.caveat,
            }
            for f in result.faulty
        ],
        "windows": int(result.windows),
        "departed": [
            {"node": node, "at": iso(t)}
            for node, t in sorted(result.departed.items(), key=lambda kv: (kv[1], kv[0]))
        ],
        "collateral": [
            {"node": node, "at": iso(t), "with": other}
            for node, (t, other) in sorted(result.collateral.items(), key=lambda kv: (kv[1], kv[0]))
        ],
    }


def diagnose_job_metrics(
    prometheus_url: str,
    nodes: list[str],
    start: float,
    end: float,
    config: PromConfig | None = None,
    priority: list[str] | None = None,
    params: Params | None = None,
    step: float = 15.0,
) -> dict[str, Any]:
    """The detector's verdict for one job's window, for ``aegis-slurm diagnose``.

    Returns the same dict as ``aegis-slurm minder --json``.  Raises
    :class:`aegis_slurm.errors.ServiceError` when Prometheus is down or slow (never "no fault")
    and :class:`aegis_slurm.errors.NoDataError` when it holds no sample for the job.
    """
    cfg = config or PromConfig(prometheus_url)
    pri = priority or default_priority()
    df = fetch_job(cfg, nodes, start, end, specs_for(pri), step)
    result, _ = analyse(
        df, nodes=nodes, start=start, end=end, priority=pri, params=params, step=step
    )
    return to_json(result)
