"""Minder step 1: put every node's samples of every metric on one time grid.

Exporters are scraped at different offsets and miss samples, so node A's 12:00:03 and node B's
12:00:11 are the same instant of a synchronous job.  Each grid point takes the *nearest* sample of
that node within ``tolerance`` (Minder: "a missed sample is filled from the nearest one").  A gap
longer than the tolerance stays NaN on purpose: a node that stops reporting is evidence
(:mod:`aegis_slurm.metrics.detect` scores it as maximally far from its peers), not missing data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from aegis_slurm.errors import InputError, NoDataError
from aegis_slurm.metrics.catalog import DCGM_BLANK, spec_for

COLUMNS = ("time", "node", "metric", "value")
#: Grid points per metric above which a table is not one job's window (at 15 s: about 35 days);
#: a stray sample years away would otherwise make a grid of millions of points per node.
MAX_GRID = 200_000


@dataclass
class Aligned:
    """Samples on a common grid: ``data[metric]`` is a ``(len(nodes), len(times))`` float array."""

    times: np.ndarray  # epoch seconds (float64), the grid
    nodes: list[str]
    data: dict[str, np.ndarray]
    step: float
    dropped: Counter[str] = field(default_factory=Counter)  # malformed samples by reason


def clean(df: pl.DataFrame) -> tuple[pl.DataFrame, Counter[str]]:
    """Validate the long table; drop (and count, by reason) the samples that cannot be used.

    Returns columns ``t`` (epoch seconds, float), ``node``, ``metric``, ``value``.
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise InputError(
            f"metrics table lacks column(s) {', '.join(missing)}; "
            f"expected {', '.join(COLUMNS)} (time UTC, node, metric, value)"
        )
    for col in ("node", "metric", "value"):
        d = df.schema[col]
        if d.is_nested() or d == pl.Object:
            raise InputError(f"metrics table: column {col} is {d}, expected one scalar per row")
    dtype = df.schema["time"]
    if not isinstance(dtype, pl.Datetime):
        raise InputError(f"metrics table: column time is {dtype}, expected a UTC datetime")
    t = pl.col("time")
    if dtype.time_zone is not None:
        t = t.dt.convert_time_zone("UTC")
    out = df.select(
        t.dt.epoch("us").cast(pl.Float64).truediv(1e6).alias("t"),
        pl.col("node").cast(pl.Utf8),
        pl.col("metric").cast(pl.Utf8),
        pl.col("value").cast(pl.Float64, strict=False),
    )
    dropped: Counter[str] = Counter()
    reasons = {
        "null time, node or metric": pl.any_horizontal(
            pl.col("t").is_null(), pl.col("node").is_null(), pl.col("metric").is_null()
        ),
        "value not a finite number": pl.col("value").is_null() | ~pl.col("value").is_finite(),
    }
    for reason, bad in reasons.items():
        n = out.select(bad.sum()).item()
        if n:
            dropped[reason] += n
            out = out.filter(~bad)
    dcgm = [m for m in out["metric"].unique().to_list() if spec_for(m).source == "dcgm"]
    blank = pl.col("metric").is_in(dcgm) & (pl.col("value").abs() >= DCGM_BLANK)
    n = out.select(blank.sum()).item()
    if n:
        dropped["DCGM blank value (no reading)"] += n
        out = out.filter(~blank)
    return out, dropped


def infer_step(t: np.ndarray) -> float:
    """The scrape interval: the median gap between a series' consecutive samples, at least 1 s."""
    d = np.diff(np.sort(np.unique(t)))
    d = d[d > 0]
    return float(max(np.median(d), 1.0)) if d.size else 15.0


def align(
    df: pl.DataFrame,
    step: float | None = None,
    tolerance: float | None = None,
    nodes: list[str] | None = None,
    start: float | None = None,
    end: float | None = None,
) -> Aligned:
    """Align a long table (``time, node, metric, value``) onto a grid of ``step`` seconds.

    ``nodes`` (e.g. the job's node list) fixes the rows: a node of the job with no sample at all
    is kept, all NaN — evidence of an unreachable machine.  ``tolerance`` defaults to 1.5 steps
    (one missed scrape is filled, two in a row are not).
    """
    cleaned, dropped = clean(df)
    if cleaned.height == 0:
        raise NoDataError("no usable metric samples in the window")
    # no global sort: a string sort of millions of rows costs seconds; _nearest sorts numbers
    if step is None:
        first = cleaned.filter(
            (pl.col("metric") == cleaned["metric"][0]) & (pl.col("node") == cleaned["node"][0])
        )
        step = infer_step(first["t"].to_numpy())
    tol = 1.5 * step if tolerance is None else tolerance
    if start is not None or end is not None:  # the grid spans the window: samples outside go
        lo_t = -np.inf if start is None else start - tol
        hi_t = np.inf if end is None else end + tol
        cleaned = cleaned.filter((pl.col("t") >= lo_t) & (pl.col("t") <= hi_t))
        if cleaned.height == 0:
            raise NoDataError("no usable metric samples in the window")
    t_all = cleaned["t"].to_numpy()
    lo = np.floor((t_all.min() if start is None else start) / step) * step
    hi = t_all.max() if end is None else end
    points = int(np.floor((hi - lo) / step)) + 1
    if points > MAX_GRID:
        raise InputError(
            f"samples span {(hi - lo) / 86400:.1f} days at a {step:g} s step "
            f"({points} points, more than one job's window of at most {MAX_GRID}); "
            "give the job's window (--start/--end) or split the file"
        )
    if points < 1:
        raise NoDataError("the window is empty (end before start)")
    grid = lo + step * np.arange(points)
    names = sorted(cleaned["node"].unique().to_list()) if nodes is None else list(nodes)
    index = {n: i for i, n in enumerate(names)}
    data: dict[str, np.ndarray] = {}
    for part in cleaned.partition_by("metric", maintain_order=True):
        name = str(part["metric"][0])
        counter = spec_for(name).kind == "counter"
        data[name], dup = _nearest(part, index, grid, tol, interpolate=counter)
        if dup:  # the same sample twice (a re-ingested scrape): one is used, the rest counted
            dropped["duplicate (time, node, metric)"] += dup
    unknown = cleaned.filter(~pl.col("node").is_in(names)).height
    if unknown:
        dropped["node not in the job"] += unknown
    return Aligned(grid, names, data, float(step), dropped)


def _nearest(
    part: pl.DataFrame,
    index: dict[str, int],
    grid: np.ndarray,
    tol: float,
    interpolate: bool = False,
) -> tuple[np.ndarray, int]:
    """Nearest sample (within ``tol``) of each node at each grid point, in one searchsorted.

    ``interpolate`` (cumulative counters): the value at a grid point is interpolated linearly
    between the node's samples on either side when they are at most ``3 * tol`` apart (up to
    three lost scrapes).  A counter's copy from the nearest scrape would make a zero increment
    followed by a double one at every missed or jittered scrape — a rate dip on one node that is
    only the exporter's timing.  A decrease (a reset) between them falls back to the nearest
    sample; a longer gap stays absent (a node that stops reporting is evidence).

    Also returns how many samples repeat an earlier one's (node, time): duplicates, one used.
    """
    n, T = len(index), grid.size
    out = np.full((n, T), np.nan)
    code = part["node"].replace_strict(index, default=-1, return_dtype=pl.Int64).to_numpy()
    keep = code >= 0
    code, t, v = code[keep], part["t"].to_numpy()[keep], part["value"].to_numpy()[keep]
    if t.size == 0:
        return out, 0
    # a node scraped at a slower cadence than the grid is not "missing" between its own scrapes:
    # each node's tolerance is at least 1.5 of its own median interval for this metric
    tols = np.full(n, tol)
    o = np.lexsort((t, code))
    cs, ts = code[o], t[o]
    gap = np.diff(ts)
    ok = (cs[1:] == cs[:-1]) & (gap > 0)
    if ok.any():  # per-node median gap: sort gaps by (node, gap), take each node's middle one
        gc, gv = cs[1:][ok], gap[ok]
        o2 = np.lexsort((gv, gc))
        gc, gv = gc[o2], gv[o2]
        count = np.bincount(gc, minlength=n)
        first = np.concatenate([[0], np.cumsum(count)[:-1]])
        has = count > 0
        med = gv[first[has] + count[has] // 2]
        tols[has] = np.maximum(tol, 1.5 * med)
    dup = int(np.sum((cs[1:] == cs[:-1]) & (gap == 0)))
    # one sorted key per sample: node code * span + time offset; span leaves room for tol.
    # Samples beyond the window's reach would leak into a neighbour's key range: drop them.
    reach = float(tols.max())
    inside = (t >= grid[0] - reach) & (t <= grid[-1] + reach)
    code, t, v = code[inside], t[inside], v[inside]
    if t.size == 0:
        return out, dup
    t0 = grid[0] - reach - 1
    span = grid[-1] + reach + 1 - t0 + 1
    keys = code * span + (t - t0)
    order = np.argsort(keys, kind="stable")
    keys, vals, codes = keys[order], v[order], code[order]
    qn = np.repeat(np.arange(n), T)
    q = qn * span + (np.tile(grid, n) - t0)
    right = np.searchsorted(keys, q)
    left = np.clip(right - 1, 0, keys.size - 1)
    right = np.clip(right, 0, keys.size - 1)
    dl = np.where(codes[left] == qn, np.abs(q - keys[left]), np.inf)
    dr = np.where(codes[right] == qn, np.abs(keys[right] - q), np.inf)
    pick = np.where(dr < dl, right, left)
    best = np.minimum(dl, dr)
    ntol = np.repeat(tols, T)
    picked = vals[pick]
    keep = best <= ntol
    if interpolate:
        # scrapes on both sides at most 3 tolerances (4.5 scrape intervals) apart: up to three
        # lost scrapes in a row; a counter's value between them is known (monotonic), and a
        # copy of a scrape up to 1.5 intervals away would put a wrong increase on this step
        both = np.isfinite(dl) & np.isfinite(dr) & (dl + dr <= 3 * ntol) & (dl + dr > 0)
        both &= vals[right] >= vals[left]
        with np.errstate(all="ignore"):
            lin = vals[left] + (vals[right] - vals[left]) * dl / (dl + dr)
        picked = np.where(both, lin, picked)
        keep |= both
    flat = np.where(keep, picked, np.nan)
    return flat.reshape(n, T), dup
