"""``minder watch`` passes over one job, for the reviews that check what watch would do."""

from __future__ import annotations

from collections.abc import Callable

from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.slurmjob import JobWindow
from aegis_slurm.metrics.watch import run_pass

MIN = 60.0


def watch_actions(
    url: str,
    nodes: list[str],
    start: float,
    passes: list[float],
    jid: str,
    cfg: MinderConfig | None = None,
) -> dict[str, list[str]]:
    """The real ``run_pass`` (``cfg``; by default drain = false, no syslog) over the job at
    each time of ``passes`` (minutes from ``start``), one state throughout: node -> the actions
    it got, in order (a finding watch *would* drain shows as the bare action ``"alert"``)."""
    cfg = cfg or MinderConfig(watch=WatchConfig(drain=False, syslog=False))
    state: dict = {}
    got: dict[str, list[str]] = {}
    for m in passes:
        now = start + m * MIN
        rep = run_pass(cfg, url, [JobWindow(jid, nodes, start, now)], now, state)
        assert rep.jobs_checked == 1 and rep.prometheus_ok, rep.errors
        for inc in rep.new:
            got.setdefault(inc["node"], []).append(inc["action"])
    return got


def job_actions(
    prom: tuple[str, dict[str, tuple[list[str], float, float]]],
    job: str,
    passes: list[float],
    jid: str,
) -> dict[str, list[str]]:
    """:func:`watch_actions` over one of a review's jobs: ``prom`` is (Prometheus URL, job
    name -> (nodes, start, end)), as the reviews' ``prom`` fixtures yield it."""
    url, jobs = prom
    nodes, start, _ = jobs[job]
    return watch_actions(url, nodes, start, passes, jid)


def scrapes(
    metric: str, labels: str, value: Callable[[float], float], start: float, end: float, step: float
) -> list[str]:
    """One OpenMetrics sample line of the series ``metric{labels}`` per ``step`` seconds from
    ``start`` to ``end`` (inclusive), at ``value(time)``."""
    out, s = [], start
    while s <= end:
        out.append(f"{metric}{{{labels}}} {value(s)!r} {s:.3f}")
        s += step
    return out
