"""The scorer for the blind corpora (v2, v3): each job's raw per-device series as Prometheus holds
them are reduced per node the way ``minder --prometheus`` would fetch them, and the detectors run
with their shipped defaults.  Nothing here is tuned; it only reads a corpus and counts.

Per node: the catalog's metrics, each aggregated over its devices by the catalog's function (the
corpus's own ``aggregate``, a PromQL ``agg by (instance)`` over raw totals for counters); a
derived metric (the lowest per-port or per-GPU rate) computed from its exporter series as its
PromQL does (a device count: the series with a sample at that scrape; ``last_over_time``: each
device's value at its scrape, reduced by the spec's function).

Scoring: a culprit flagged at or after its onset is a true positive (one per culprit; a job may
have two); any other node flagged, or a culprit flagged before its onset, is a false positive.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl

from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import (
    CLOCKSOURCE_SLOW,
    DEFAULT_METRICS,
    HW_SLOWDOWN,
    HW_SLOWDOWN_BITS,
    NVLINK_RATE_FIELD,
    SLOW_CLOCKSOURCES,
    is_name_pattern,
    source_matches,
    spec_for,
)
from aegis_slurm.metrics.detect import Params, detect, lambda_2delta, zscore_baseline
from aegis_slurm.metrics.evaluate import Score
from aegis_slurm.metrics.priority import default_priority

DETECTORS = {
    "minder": lambda a, pri: detect(a, pri, Params()),
    "lambda2delta": lambda a, pri: lambda_2delta(a, pri),
    "zscore": lambda a, pri: zscore_baseline(a, pri),
}

Aggregate = Callable[[pl.DataFrame, Callable[[str], str]], pl.DataFrame]


@dataclass
class Tally(Score):
    """The scorer's counts plus how many healthy jobs raised any alarm."""

    fp_jobs: int = 0
    healthy_jobs: int = 0

    def summary(self) -> str:
        return (
            f"{self.line()}; healthy jobs with a false alarm {self.fp_jobs}/{self.healthy_jobs}"
            f"; missed {dict(Counter(self.misses))}; false {dict(Counter(self.false))}"
        )


def as_dcgm_publishes_it(raw: pl.DataFrame) -> pl.DataFrame:
    """DCGM's NVLink bandwidth field (449) as DCGM publishes it: a rate (MiB/s) that DCGM
    computes from NVML's cumulative counters (catalog ``NVLINK_RATE_FIELD``).  Corpora v2-v4
    modelled it as the cumulative counter dcgm-exporter's CSV calls it; where a job's series
    never fall (99 % of steps or more), each device's rate between its samples is what DCGM
    would have published.  A rate-valued series (v5) rises and falls and is left as it is."""
    field = raw.filter(pl.col("metric") == NVLINK_RATE_FIELD)
    if field.is_empty():
        return raw
    s = field.sort("node", "device", "time").with_columns(
        d=pl.col("value").diff().over("node", "device"),
        dt=pl.col("time").diff().over("node", "device").dt.total_seconds(fractional=True),
    )
    steps = s.filter(pl.col("d").is_not_null())
    if steps.is_empty() or (steps["d"] >= 0).mean() < 0.99:
        return raw
    rate = steps.filter(pl.col("dt") > 0).with_columns(
        value=pl.col("d").clip(lower_bound=0) / pl.col("dt") / 2**20
    )
    rest = raw.filter(pl.col("metric") != NVLINK_RATE_FIELD)
    return pl.concat([rest, rate.select(raw.columns).cast(raw.schema)])


def per_node_table(job: Any, aggregate: Aggregate) -> pl.DataFrame:
    """The job's table as ``minder --prometheus`` would read it (module docstring)."""
    raw = as_dcgm_publishes_it(job.raw)
    for spec in DEFAULT_METRICS:  # the catalog's device!~ matcher (virtual interfaces)
        if spec.exclude_devices:
            virtual = pl.col("device").cast(pl.String).str.contains(f"^(?:{spec.exclude_devices})$")
            raw = raw.filter(~((pl.col("metric") == spec.name) & virtual))
    plain = [m.name for m in DEFAULT_METRICS if m.derived is None]
    frames = [aggregate(raw.filter(pl.col("metric").is_in(plain)), lambda m: spec_for(m).agg)]
    for spec in DEFAULT_METRICS:
        if spec.derived is None:
            continue
        source, expr = spec.derived
        names = raw.get_column("metric").cast(pl.String).unique().to_list()
        series = raw.filter(pl.col("metric").is_in([n for n in names if source_matches(source, n)]))
        if is_name_pattern(source):  # each matching series is its own (name, device) counter
            series = series.with_columns(device=pl.format("{}/{}", "metric", "device"))
        if spec.agg == "count" and expr == "{sel}":  # count by (node) (series): devices reporting
            frames.append(
                series.group_by("node", "time")
                .agg(pl.col("value").count().cast(pl.Float64))
                .with_columns(metric=pl.lit(spec.name))
            )
            continue
        if spec.name == CLOCKSOURCE_SLOW:  # 1 for a slow fallback clock source, else 0
            slow = pl.col("device").cast(pl.String).str.contains(f"^(?:{SLOW_CLOCKSOURCES})$")
            frames.append(
                series.group_by("node", "time")
                .agg(slow.cast(pl.Float64).max().alias("value"))
                .with_columns(metric=pl.lit(spec.name))
            )
            continue
        if spec.name == HW_SLOWDOWN:  # each GPU's share of time in a hardware slowdown
            interval = job.dcgm_interval
            frames.append(
                hw_slowdown_share(series, max(60.0, 4 * float(interval))).with_columns(
                    metric=pl.lit(spec.name)
                )
            )
            continue
        if expr.startswith("increase("):  # a port flapping: its counter up twice in a while
            window, above = re.fullmatch(
                r"increase\(\{sel\}\[(\d+)s\]\) > bool ([\d.]+)", expr
            ).groups()
            frames.append(
                flapping(series, float(window), float(above)).with_columns(metric=pl.lit(spec.name))
            )
            continue
        if expr.startswith("clamp_min(last_over_time("):  # each device's value, at least 0
            frames.append(
                series.group_by("node", "time")
                .agg(getattr(pl.col("value").clip(lower_bound=0.0), spec.agg)())
                .with_columns(metric=pl.lit(spec.name))
            )
            continue
        if expr.startswith("last_over_time("):  # agg by (node) of each device's value
            frames.append(
                series.group_by("node", "time")
                .agg(getattr(pl.col("value"), spec.agg)())
                .with_columns(metric=pl.lit(spec.name))
            )
            continue
        if not expr.startswith("rate("):  # a new derived shape needs its PromQL modelled here
            raise NotImplementedError(f"{spec.name}: {expr}")
        interval = job.dcgm_interval if spec.source == "dcgm" else job.node_interval
        # query_expr's range: at least four scrapes and at least a minute
        window = max(60.0, 4 * float(interval))
        frames.append(
            per_device_rate(series, window, spec.agg).with_columns(metric=pl.lit(spec.name))
        )
    cols = [pl.col("time"), pl.col("node", "metric").cast(pl.String), pl.col("value")]
    return pl.concat([f.select(cols) for f in frames])


def hw_slowdown_share(series: pl.DataFrame, window: float) -> pl.DataFrame:
    """The catalog's ``HW_SLOWDOWN`` PromQL: per device, 1 where any hardware-slowdown bit of
    the reasons bitmask is set (a DCGM blank dropped), averaged over its samples of the last
    ``window`` seconds; the node's largest share at each scrape."""
    s = series.filter(pl.col("value") < 1.4e14).with_columns(
        pl.col("node", "device").cast(pl.String), bits=pl.col("value").cast(pl.Int64)
    )
    hw = pl.lit(False)
    for bit in HW_SLOWDOWN_BITS:
        hw = hw | ((pl.col("bits") // bit) % 2 == 1)
    s = s.sort("node", "device", "time").with_columns(
        share=hw.cast(pl.Float64)
        .rolling_mean_by("time", window_size=f"{int(window)}s")
        .over("node", "device")
    )
    return s.group_by("node", "time").agg(pl.col("share").max().alias("value"))


def per_device_rate(series: pl.DataFrame, window: float, agg: str) -> pl.DataFrame:
    """``agg by (node) (rate(series[window]))`` evaluated at each scrape: each device's counter
    increase (a decrease is a reset) over the samples of the last ``window`` seconds, divided by
    their time span; no value until a device has two samples in the window."""
    inc = per_device_increase(series, window)
    span = (pl.col("time") - pl.col("t0")).dt.total_seconds(fractional=True)
    rated = inc.with_columns(value=pl.col("value") / span)
    return rated.group_by("node", "time").agg(getattr(pl.col("value"), agg)())


def flapping(series: pl.DataFrame, window: float, above: float) -> pl.DataFrame:
    """``max by (node) (increase(series[window]) > bool above)`` at each scrape: 1 where a
    device's counter rose by more than ``above`` over the last ``window`` seconds (PromQL's
    small extrapolation past whole events is not modelled: the catalog's thresholds sit
    halfway between counts), else 0."""
    inc = per_device_increase(series, window)
    flag = inc.with_columns(value=(pl.col("value") > above).cast(pl.Float64))
    return flag.group_by("node", "time").agg(pl.col("value").max())


def per_device_increase(series: pl.DataFrame, window: float) -> pl.DataFrame:
    """Each device's counter increase (a decrease is a reset) over its samples of the last
    ``window`` seconds, at each of its scrapes (``node, device, time, t0, value``: ``t0`` the
    window's first sample); no value until a device has two samples in the window."""
    series = series.with_columns(pl.col("node", "device").cast(pl.String))
    s = series.sort("node", "device", "time").with_columns(
        d=pl.col("value").diff().over("node", "device")
    )
    s = s.with_columns(
        inc=pl.when(pl.col("d") < 0).then(pl.col("value")).otherwise(pl.col("d")).fill_null(0.0)
    ).with_columns(c=pl.col("inc").cum_sum().over("node", "device"))
    starts = s.select(
        "node",
        "device",
        (pl.col("time") + pl.duration(seconds=window)).alias("t_end"),
        pl.col("time").alias("t0"),
        pl.col("c").alias("c0"),
    ).sort("t_end")
    joined = s.sort("time").join_asof(
        starts,
        left_on="time",
        right_on="t_end",
        by=["node", "device"],
        strategy="forward",
        check_sortedness=False,  # both sorted by their key above; the groups cannot be checked
    )
    return joined.filter(pl.col("t0") < pl.col("time")).with_columns(
        value=pl.col("c") - pl.col("c0")
    )


def evaluate_jobs(jobs: Iterable[Any], aggregate: Aggregate) -> dict[str, Tally]:
    """Every detector over every job; counts per detector."""
    pri = default_priority()
    out = {name: Tally() for name in DETECTORS}
    for job in jobs:
        aligned = align(per_node_table(job, aggregate), nodes=list(job.nodes))
        onsets = {node: t.timestamp() for node, t in job.culprits.items()}
        for name, run in DETECTORS.items():
            t = out[name]
            found: set[str] = set()
            false = 0
            for f in run(aligned, pri).faulty:
                onset = onsets.get(f.node)
                if onset is not None and f.first_detected >= onset and f.node not in found:
                    found.add(f.node)
                    t.delays.append(f.first_detected - onset)
                else:
                    false += 1
                    t.false.append(f"{job.kind}:{f.metric}")
            t.tp += len(found)
            t.fn += len(onsets) - len(found)
            t.misses += [job.kind] * (len(onsets) - len(found))
            t.fp += false
            if not onsets:
                t.healthy_jobs += 1
                t.fp_jobs += false > 0
    return out


def assert_minder_floor(tallies: dict[str, Tally], floor: tuple[float, float, float]) -> None:
    """Minder at or above its recorded floor: precision, recall, median delay (min)."""
    t = tallies["minder"]
    print("minder", t.summary())
    lo_p, lo_r, hi_d = floor
    assert t.precision >= lo_p and t.recall >= lo_r and t.median_delay / 60 <= hi_d


def assert_fewer_false_alarms_than_the_naive_rules(tallies: dict[str, Tally]) -> None:
    """What the similarity + continuity design is for: fewer false alarms than either naive
    rule (Aegis' λ+2δ, a per-step z-score with the same continuity)."""
    for name in ("lambda2delta", "zscore"):
        print(name, tallies[name].summary())
    m = tallies["minder"]
    assert m.fp < tallies["zscore"].fp and m.fp < tallies["lambda2delta"].fp
