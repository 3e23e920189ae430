"""Minder's detector (NSDI'25), step by step, each a small pure function over aligned arrays.

An array ``X`` is ``(nodes, times)`` for one metric, NaN where a node did not report.  The steps:
:func:`to_rates` (counters) → :func:`denoise` → :func:`normalise` → :func:`peer_deviation` →
:func:`window_distance` → :func:`candidates` → :func:`continuity`; :func:`detect` runs them over
the metrics in priority order.  Aegis' λ+2δ rule (NSDI'25 §5.1) is :func:`lambda_2delta`; the
per-window z-score baseline the issue compares against is :func:`zscore_baseline`.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.ndimage import median_filter

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import spec_for


@dataclass(frozen=True)
class Params:
    """Detector settings; the defaults were chosen on the simulator's *tuning* split (seed 1)."""

    window: float = 60.0  # seconds per distance window (Minder's w)
    continuity: float = 240.0  # seconds a node must stay the outlier (Minder: ~4 min)
    threshold: float = 0.12  # RMS normalised distance to the peers' median that makes a candidate
    max_share: float = 0.25  # more candidates than this share of nodes: a job-wide event
    denoise: str = "median"  # "median" | "none"
    denoise_size: int = 5  # samples in the running median
    rate_window: float = 120.0  # seconds over which counters become rates (like rate(x[2m]))
    warmup: float = 300.0  # seconds after the first sample in which nothing is flagged
    quorum: float = 0.5  # share of nodes that must report for a time step to be judged
    physical_range: bool = True  # Min-Max floor at the catalog's range (False: the data's only)
    # seconds after the warm-up whose median offset of each node from its peers is taken as that
    # node's normal (a constant hardware offset); 0: off.  See docs/minder.md for the trade-off.
    baseline: float = 0.0


@dataclass(frozen=True)
class Finding:
    node: str
    metric: str
    first_detected: float  # epoch seconds: when the continuity threshold was reached
    score: float  # the largest window distance in the run that triggered


@dataclass
class Result:
    faulty: list[Finding]
    windows: int
    per_metric: dict[str, list[Finding]] = field(default_factory=dict)


def _quiet(fn, X: np.ndarray) -> np.ndarray:
    """``fn(X, axis=0)`` for a nan-statistic, without the all-NaN-column warning (NaN is right)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(X, axis=0)


# ---- steps -----------------------------------------------------------------------------------


def to_rates(X: np.ndarray, step: float, window: float = 60.0) -> np.ndarray:
    """Per-second rate of a monotonic counter over ``window`` seconds (Prometheus' ``rate()``).

    A decrease is a counter reset: the post-reset value is the increase, as Prometheus assumes.
    """
    d = np.diff(X, axis=1, prepend=np.nan)
    d = np.where(d < 0, X, d)
    k = max(round(window / step), 1)
    c = np.nancumsum(np.nan_to_num(d), axis=1)
    s = c - np.concatenate([np.zeros((X.shape[0], k)), c[:, :-k]], axis=1)[:, : X.shape[1]]
    s = s / (k * step)
    s[np.isnan(X)] = np.nan
    s[:, :1] = np.nan
    return s


def peer_median(X: np.ndarray) -> np.ndarray:
    """Median over the nodes that reported, per time step."""
    if not np.isnan(X).any():
        return np.median(X, axis=0)
    return _quiet(np.nanmedian, X)


def denoise(X: np.ndarray, size: int = 5, method: str = "median") -> np.ndarray:
    """Running median of ``size`` samples along time, per node; NaN (absence) is kept as NaN.

    Stands in for Minder's per-metric LSTM-VAE reconstruction on a CPU-only admin host: it removes
    one- and two-sample spikes (a scrape landing mid-iteration, a checkpoint edge seen 10 s late
    on one node) and keeps any level change longer than ``size // 2`` samples.
    """
    if method == "none" or size <= 1:
        return X
    if method != "median":
        raise ValueError(f"unknown denoise method {method!r}")
    gaps = np.isnan(X)
    filled = np.where(gaps, peer_median(X)[None, :], X) if gaps.any() else X
    filled = np.nan_to_num(filled)
    out = median_filter(filled, size=(1, size), mode="nearest")
    out[gaps] = np.nan
    return out


def normalise(X: np.ndarray, lo: float | None = None, hi: float | None = None) -> np.ndarray:
    """Min-Max normalisation to [0, 1]; the range is the wider of the data's and ``lo..hi``."""
    with np.errstate(all="ignore"):
        dmin, dmax = np.nanmin(X), np.nanmax(X)
    if not np.isfinite(dmin):
        return X
    a = dmin if lo is None else min(dmin, lo)
    b = dmax if hi is None else max(dmax, hi)
    if b <= a:
        return np.zeros_like(X)
    return (X - a) / (b - a)


def peer_deviation(
    N: np.ndarray, quorum: float = 0.5, ignore: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Squared distance of each node to its peers' median, per time step; and the judged steps.

    A node with no value while a quorum of its peers report is as far as it can be (1.0): it
    stopped reporting.  Time steps without a quorum are not judged at all (before or after the job).
    ``ignore`` marks the nodes that never export this metric at all (while exporting others): a
    configuration difference, not an absence; they are neither judged nor counted in the quorum.
    """
    present = ~np.isnan(N)
    keep = np.ones(N.shape[0], bool) if ignore is None else ~ignore
    judged = present[keep].mean(axis=0) >= quorum if keep.any() else np.zeros(N.shape[1], bool)
    dev = (N - peer_median(N)[None, :]) ** 2
    dev = np.where(present, dev, 1.0)
    dev[~keep, :] = 0.0
    dev[:, ~judged] = 0.0
    return dev, judged


def never_exported(aligned: Aligned) -> dict[str, np.ndarray]:
    """Per metric, the nodes with no sample of it while the *same exporter* gave them others.

    A node that merely lacks one exporter field (another GPU model, another dcgm-exporter
    profile) must not look like one that stopped reporting.  A node absent from every metric of
    an exporter (or of all) stays judged: an unreachable machine, or a dcgm-exporter gone with
    its GPU, is evidence (``watch`` alerts on absence-only evidence but never drains on it).
    """
    has = {m: ~np.isnan(X).all(axis=1) for m, X in aligned.data.items()}
    out = {}
    for m, h in has.items():
        src = spec_for(m).source
        same = [has[o] for o in has if spec_for(o).source == src]
        out[m] = np.logical_or.reduce(same) & ~h
    return out


def remove_offsets(N: np.ndarray, times: np.ndarray, start: float, span: float) -> np.ndarray:
    """Subtract each node's median offset from its peers' median over ``[start, start + span)``.

    A node that runs 10 °C hotter from the job's first minute is different, not faulty; a fault
    is a *change* of a node relative to its peers.  The price: a fault already present during the
    reference span is taken for the node's normal (the Prolog's health checks are for those).
    """
    ref = (times >= start) & (times < start + span)
    if not ref.any():
        return N
    D = N[:, ref] - peer_median(N)[None, ref]
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        off = np.nanmedian(D, axis=1)
    return N - np.nan_to_num(off)[:, None]


def window_distance(dev: np.ndarray, w: int) -> np.ndarray:
    """RMS of the deviation over the trailing ``w`` steps (a Euclidean distance per window)."""
    if w <= 1:
        return np.sqrt(dev)
    c = np.cumsum(dev, axis=1)
    s = c.copy()
    s[:, w:] = c[:, w:] - c[:, :-w]
    s[:, : w - 1] = np.nan  # incomplete windows
    return np.sqrt(s / w)


def candidates(dist: np.ndarray, threshold: float, max_share: float) -> np.ndarray:
    """Nodes farther than ``threshold`` from their peers, in windows where they are a minority."""
    c = np.nan_to_num(dist) > threshold
    allowed = max(1, int(max_share * dist.shape[0]))
    c[:, c.sum(axis=0) > allowed] = False
    return c


def continuity(c: np.ndarray, k: int) -> np.ndarray:
    """Index of the first window where each node has been a candidate ``k`` windows in a row, or -1.

    Minder's continuity threshold: faults persist and worsen, a blip does not.
    """
    n, T = c.shape
    out = np.full(n, -1)
    if T == 0:
        return out
    # run length ending at each window, vectorised: position minus position of last False
    idx = np.arange(T)[None, :].repeat(n, axis=0)
    last_false = np.maximum.accumulate(np.where(~c, idx, -1), axis=1)
    run = idx - last_false
    hit = run >= k
    anyhit = hit.any(axis=1)
    out[anyhit] = hit[anyhit].argmax(axis=1)
    return out


# ---- one metric, all metrics ------------------------------------------------------------------


def prepare(aligned: Aligned, metric: str, p: Params) -> np.ndarray:
    """Rates for counters, denoised, Min-Max normalised: the array the distances are taken on."""
    spec = spec_for(metric)
    X = aligned.data[metric]
    if spec.kind == "counter":
        X = to_rates(X, aligned.step, p.rate_window)
    X = denoise(X, p.denoise_size, p.denoise)
    if not p.physical_range:
        return normalise(X)
    return normalise(X, spec.lo, spec.hi)


def detect_metric(
    aligned: Aligned, metric: str, p: Params, ignore: np.ndarray | None = None
) -> tuple[list[Finding], int]:
    """Minder on one metric: the nodes that stay far from their peers for ``p.continuity``."""
    N = prepare(aligned, metric, p)
    if p.baseline > 0:
        N = remove_offsets(N, aligned.times, aligned.times[0] + p.warmup, p.baseline)
    dev, judged = peer_deviation(N, p.quorum, ignore)
    step = aligned.step
    w = max(round(p.window / step), 1)
    dist = window_distance(dev, w)
    warm = aligned.times < aligned.times[0] + p.warmup
    dist[:, warm] = np.nan
    ok = judged & ~warm & ~np.isnan(dist).all(axis=0)
    dist[:, ~ok] = np.nan
    c = candidates(dist, p.threshold, p.max_share)
    k = max(round(p.continuity / step), 1)
    first = continuity(c, k)
    out = []
    for i in np.flatnonzero(first >= 0):
        j = int(first[i])
        run = dist[i, j - k + 1 : j + 1]
        out.append(
            Finding(aligned.nodes[i], metric, float(aligned.times[j]), float(np.nanmax(run)))
        )
    return out, int(ok.sum())


def detect(aligned: Aligned, priority: list[str], p: Params | None = None) -> Result:
    """Run Minder over the metrics in ``priority`` order that the data has.

    Each node is reported once: at its earliest detection; on a tie, the higher-priority metric.
    """
    p = p or Params()
    metrics = [m for m in priority if m in aligned.data]
    best: dict[str, Finding] = {}
    per_metric: dict[str, list[Finding]] = {}
    windows = 0
    never = never_exported(aligned)
    for m in metrics:
        found, n = detect_metric(aligned, m, p, never.get(m))
        windows = max(windows, n)
        per_metric[m] = found
        for f in found:
            if f.node not in best or f.first_detected < best[f.node].first_detected:
                best[f.node] = f
    faulty = sorted(best.values(), key=lambda f: (f.first_detected, f.node))
    return Result(faulty, windows, per_metric)


# ---- the other detectors over the same windows ------------------------------------------------


def lambda_2delta(
    aligned: Aligned, metrics: list[str], period: float = 600.0, p: Params | None = None
) -> Result:
    """Aegis §5.1: a host whose metric lies beyond λ+2δ of all hosts' values for the lasting T.

    λ and δ are the mean and standard deviation over the hosts at each step; "beyond" is above
    for metrics where high is bad and below for those aggregated with ``min`` (clock, power,
    utilisation: low is bad).  Same rates, same warm-up as :func:`detect`; no denoising.
    """
    p = p or Params()
    best: dict[str, Finding] = {}
    windows = 0
    k = max(round(period / aligned.step), 1)
    warm = aligned.times < aligned.times[0] + p.warmup
    never = never_exported(aligned)
    for m in metrics:
        if m not in aligned.data:
            continue
        spec = spec_for(m)
        X = aligned.data[m]
        if spec.kind == "counter":
            X = to_rates(X, aligned.step, p.rate_window)
        present = ~np.isnan(X)
        keep = ~never[m]
        judged = (present[keep].mean(axis=0) >= p.quorum) & ~warm
        lam, delta = _quiet(np.nanmean, X), _quiet(np.nanstd, X)
        low, high = lam - 2 * delta, lam + 2 * delta
        out = np.less(X, low) if spec.agg == "min" else np.greater(X, high)
        out = (out | ~present) & judged[None, :] & keep[:, None]
        windows = max(windows, int(judged.sum()))
        first = continuity(out, k)
        for i in np.flatnonzero(first >= 0):
            t = float(aligned.times[first[i]])
            if aligned.nodes[i] not in best or t < best[aligned.nodes[i]].first_detected:
                best[aligned.nodes[i]] = Finding(aligned.nodes[i], m, t, 2.0)
    return Result(sorted(best.values(), key=lambda f: (f.first_detected, f.node)), windows)


def zscore_baseline(
    aligned: Aligned, metrics: list[str], z: float = 3.0, p: Params | None = None
) -> Result:
    """The naive baseline: per-step |z-score| across nodes above ``z`` for the continuity time."""
    p = p or Params()
    best: dict[str, Finding] = {}
    windows = 0
    k = max(round(p.continuity / aligned.step), 1)
    warm = aligned.times < aligned.times[0] + p.warmup
    for m in metrics:
        if m not in aligned.data:
            continue
        X = aligned.data[m]
        if spec_for(m).kind == "counter":
            X = to_rates(X, aligned.step, p.rate_window)
        judged = ~warm & (~np.isnan(X)).any(axis=0)
        with np.errstate(all="ignore"):
            Z = (X - _quiet(np.nanmean, X)) / _quiet(np.nanstd, X)
        out = (np.nan_to_num(np.abs(Z)) > z) & judged[None, :]
        windows = max(windows, int(judged.sum()))
        first = continuity(out, k)
        for i in np.flatnonzero(first >= 0):
            t = float(aligned.times[first[i]])
            if aligned.nodes[i] not in best or t < best[aligned.nodes[i]].first_detected:
                best[aligned.nodes[i]] = Finding(aligned.nodes[i], m, t, float(z))
    return Result(sorted(best.values(), key=lambda f: (f.first_detected, f.node)), windows)
