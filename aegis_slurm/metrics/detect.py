"""Minder's detector (NSDI'25), step by step, each a small pure function over aligned arrays.

An array ``X`` is ``(nodes, times)`` for one metric, NaN where a node did not report.  The steps:
:func:`to_rates` (counters) → :func:`denoise` → :func:`normalise` → :func:`peer_deviation` →
:func:`window_distance` → :func:`candidates` → :func:`continuity`; :func:`detect` runs them over
the metrics in priority order.  Aegis' λ+2δ rule (NSDI'25 §5.1) is :func:`lambda_2delta`; the
per-window z-score baseline the issue compares against is :func:`zscore_baseline`.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.ndimage import median_filter
from scipy.stats import poisson

from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import (
    FLAP_WINDOW,
    HARDWARE_SCALES,
    HARDWARE_XIDS,
    caveat,
    is_hardware,
    job_can_cause,
    spec_for,
)


@dataclass(frozen=True)
class Params:
    """Detector settings; the defaults were chosen on the simulator's *tuning* split (seed 1) or
    from how exporters and synchronous jobs behave (docs/minder.md says which and why)."""

    window: float = 60.0  # seconds per distance window (Minder's w)
    continuity: float = 240.0  # seconds a node must stay the outlier (Minder: ~4 min)
    threshold: float = 0.12  # RMS normalised distance to the peers' median that makes a candidate
    max_share: float = 0.25  # more candidates than this share of nodes: a job-wide event
    # more nodes than this (0: no bound) found on one metric within one continuity period of
    # each other are a job-wide state, not faults: machines fail one or two at a time (Minder
    # flags the one farthest machine per window); dozens at once in a 512-node job do not
    max_nodes: int = 4
    denoise: str = "median"  # "median" | "none"
    # seconds in the running median: 5 samples at 15 s; at a 60 s scrape none (a 5-minute median
    # would erase a checkpoint on the nodes sampled twice in it and keep it on those sampled 3x)
    denoise_span: float = 75.0
    rate_window: float = 120.0  # seconds over which *error* counters become rates (rate(x[2m]))
    # seconds over which byte counters become rates: a dense counter needs no 2-minute window,
    # which would stretch a rank's 90 s-longer checkpoint write past the continuity threshold
    throughput_rate_window: float = 30.0
    warmup: float = 300.0  # seconds after the first sample in which nothing is flagged
    quorum: float = 0.5  # share of nodes that must report for a time step to be judged
    physical_range: bool = True  # Min-Max floor at the catalog's range (False: the data's only)
    scales: bool = True  # the catalog's per-metric scale ("job", "events"); False: all physical
    lag: int = 1  # steps a node's edge may trail or lead its peers' (scrape offsets, skew)
    # seconds after the warm-up whose median offset of each node from its peers is taken as that
    # node's normal (a constant hardware offset, an idle-by-design GPU); 0: off.
    baseline: float = 300.0
    # seconds after the window's first sample at which that span begins; negative (-1, the
    # default): at once when the window opens with the job already at its level
    # (:func:`opens_mid_job`), else after the warm-up.  A window that opens mid-job has no
    # warm-up to skip, and a fault 4 minutes in would be most of a span that began after a
    # 5-minute warm-up -- the node's "normal"
    # (corpus v5, seen: 14 of its 59 culprits began in its first 10 minutes); the span's
    # median keeps a fault that fills less than half of it out of the reference.  A launch
    # keeps the warm-up: nodes start and load at their own pace in its first minutes
    reference_start: float = -1.0
    gain: bool = True  # also read a node's reference offset as a gain (see :func:`corrected`)
    join: bool = True  # a late starter's reference and judging begin when it joined the job
    steady: bool = True  # the reference counts only steps with the job at its typical level
    # family-wise false-alarm rate per job of the error-counter burst test (:func:`burst_mask`):
    # 1 % -- an SRE tolerates about one needless look in a hundred healthy jobs; 0: off
    burst_alpha: float = 0.01
    # a node whose DCGM profiling fields blank out while its DEV fields report has no data on
    # those fields (a paused profiler), not an absence (:func:`profiler_blank`)
    profiler_pause: bool = True
    # a finding on a metric the job drives in lock-step (catalog ``evidence = "coupled"``) needs
    # a local metric of the same node to differ too, or its exporter to be gone
    # (:func:`corroborated`)
    corroborate: bool = True
    # the last Xid read as a hardware-fault indicator; the GPU and IB port counts (catalog
    # scales "xid" and "devices"); False: those metrics are not judged
    device_evidence: bool = True
    # an error counter's continuity counts from its first increment, not from its rate: the rate
    # over ``rate_window`` shows a burst of d seconds for d + rate_window, so a flap that stops
    # within the continuity would otherwise pass it (:func:`event_steps`); False: as before
    event_continuity: bool = True
    # local evidence for corroboration is *measured*: a local candidate window counts only where
    # the node has every sample of that metric in the window, and an exporter gone only once it
    # has been gone for the continuity (:func:`measured_support`); a lost scrape is neither
    measured_evidence: bool = True
    # an error counter's rate is never a node's normal: no reference offset on the events
    # scale (a link logging errors since before the window is a bad link, not a hardware
    # offset; the burst test already allows for the peers' background) -- a fault that began
    # in the first minutes of the window would otherwise be the node's reference
    event_reference: bool = False
    # a node whose GPUs all went idle while its peers' throughput stays at the job's level has
    # left the job (an elastic job released it): the job no longer waits for it, so it is not
    # the machine slowing it; its findings from then on, but for hardware evidence (Xid, a lost
    # device, an error-counter burst), are reported under ``departed`` (:func:`departed_at`)
    departure: bool = True
    # a lost scrape is missing data, not evidence: an absence counts (as far from the peers as
    # a node can be) only where the machine answers no exporter (:func:`machine_gone`) or the
    # series stopped for good -- silent from its last sample to the window's end
    # (:func:`ended`).  A run of lost scrapes that ends (a scrape timeout, an exporter
    # restarting) is neither near the peers nor far from them (:func:`peer_deviation`,
    # :func:`window_distance`); False: any absence is evidence
    machine_absence: bool = True
    # a run of candidate windows completes the continuity only at a step where the node itself
    # is measured and far from its peers (:func:`continuity`).  The trailing window keeps a
    # blip in its RMS for ``window`` seconds after it ended, so a 3.4-minute stall made 4.4
    # minutes of candidate windows and passed the 4-minute continuity (corpus v7, seen: a node
    # stalling for less than the continuity was called faulty); requiring *every* step far
    # instead lost a clock cycling every 30 s and let lost scrapes extend a stall (session-9
    # review).  Not on the events scale: an error rate is already a trailing window, which
    # ``event_continuity`` accounts for, and a flapping link's rate flickers step to step
    # (corpus v2, seen: a flapping AOC cable lost).  False: as before
    step_support: bool = True
    # an error rate under the catalog's floor (``lo``: NVIDIA DCGM's health limits, 9 PCIe
    # replays a minute and up, NVLink CRC errors from 100 a second) is no evidence
    # (:func:`event_scale`; corpus v7, seen: healthy nodes called faulty on three replays in
    # four minutes); False: any rate over the peers' background counts
    event_floors: bool = True
    # a site's own floors (metric -> floor, in the catalog ``lo``'s units) for metrics on the
    # events and decades scales: the PSI stall floors (a tenth of the time) are a GUESS, and a
    # site that knows its nodes' healthy stall share, or a vendor limit, sets its own there
    # (``[detector.floors]`` in minder.toml, validated by ``config.check_floors``)
    floors: Mapping[str, float] = field(default_factory=dict)
    # a counter of events each of which is a fault (catalog scale ``"latch"``: an uncorrectable
    # GPU or host memory error, an OOM kill) is read as "has it counted since the window
    # opened" -- one increment is the evidence, held, where the events scale asks for errors
    # still arriving a continuity later (:func:`latched`); False: read on the events scale
    latch: bool = True
    # when a node's hardware speaks (a port down, a hardware Xid, a device lost, an error
    # counter: catalog ``is_hardware``), a node whose GPUs merely went idle with it -- its ranks
    # aborted because their peer's did (NCCL's connections to the dead rank fail), with no
    # evidence of its own -- is reported under ``collateral``, not as a fault
    # (:func:`collateral_of`); False: every such node is faulty
    collateral: bool = True
    # a window that opens with the job's launch (in its warm-up) is judged from when the job
    # first ran at or above its level (:func:`first_run`), if that is later than the warm-up:
    # before the first training step, ranks that finished loading or compiling wait for the
    # others in a collective (GPU utilisation 100, NCCL spinning) and the ones still compiling
    # look idle next to them; nothing the job does before it has run says which machine is
    # slow.  A job that never runs at its level in the window keeps the plain warm-up; False:
    # the warm-up
    launch_wait: bool = True
    # a machine's hardware state (its device counts, last Xid, a port's state or rate, a PCIe
    # link, a clock-event indicator) that reads the same on both sides of a gap in its samples
    # held through the gap (:func:`held_across_gaps`): a GPU off the bus does not come back
    # between two scrapes that both miss it.  A dcgm-exporter crash-looping beside a lost GPU
    # answers a minute in every few, short of a GPU each time, and no run of its answers
    # reaches the continuity; a gap at the end stays a gap (:func:`ended` reads that).
    # Only states, never rates: a counter's rate across a gap is unknown.  False: gaps break
    held_state: bool = True
    # a failure state that recurs (catalog ``recurs``: a mount whose statfs fails, a port out
    # of Active) is a fault at its second episode within the flapping range, each at least a
    # window long, though none lasts the continuity (:func:`recurrence`); False: off
    recurrence: bool = True
    # what the job can cause (a rank's load, its memory) corroborates a coupled finding of its
    # node once it has lasted the flapping range (30 min) -- no checkpoint does, a process
    # the previous job left behind does -- dated then (:func:`detect`); False: never
    lasting_support: bool = True
    # a link event or state (catalog ``switch_side``) that starts on several nodes within a
    # window of each other is the switch's end of their links -- a leaf reloading, a firmware
    # upgrade, a management switch dropping a rack's frontend -- and evidence on none of them
    # (:func:`shared_onsets`; corpus v12, seen: a rack's frontend carrier changes after a
    # management-switch reload corroborated one of its nodes' IB-bytes dip); so are machines
    # that stop answering together and answer again (:func:`machine_gone`); False: off
    shared_links: bool = True
    # an error counter's continuity completes a continuity and a window after its first
    # increment, at a step where it rose again -- errors still arriving -- rather than once
    # its trailing rate has also outlasted ``rate_window`` (:func:`event_steps`): the same
    # test, answered a minute sooner (round 16, corpus v13, seen: error bursts found 5-6
    # minutes in); False: as before
    fresh_events: bool = True
    # a node that stopped reporting for good while another, silent until then, began after it
    # was *replaced* (:func:`replaced`): reported under ``departed``, not faulty.  Off by
    # default: a Slurm job's node list is fixed when it starts (a node failure ends or requeues
    # it), and a node first scraped late (Prometheus' file_sd refresh, an exporter restarted
    # by the next configuration run) would excuse a machine that died (session-14 review of
    # round 16).  On for jobs an elastic launcher runs, which swaps nodes (spot instances)
    replacements: bool = False
    # on the hardware-evidence scales (an error rate, a hardware Xid, a device count, a NIC's
    # pause share; catalog ``HARDWARE_SCALES``) only a node *above* its peers is far from them
    # (:func:`deviation`), as on the latch scale, and a reading with a catalog ``fault_side``
    # only on that side (round 18); False: two-sided
    one_sided_evidence: bool = True
    # a node's reference holds it below its peers by no more than the catalog's
    # ``offset_bound`` (busy clocks: beyond it a lock or a stuck P-state; a port's rate: a link
    # trained low; :func:`bounded_offsets`)
    bounded_offsets: bool = True
    # in a pair, hardware evidence judged one-sided (a counter, a Xid, a device or port state,
    # a ``pinned`` clock) is measured against the other node, not the pair's median -- their
    # mean, which puts the culprit half its gap away and the clean node (zeroed as the healthy
    # side) the other half (:func:`pair_gap`; round 20, corpora v16/v17, seen: a pair's
    # memory clock stuck 20 % low read 10 %); False: the median
    pair_distance: bool = True
    # a node whose GPUs work while its peers' idle (:func:`working_alone`) is no outlier above
    # them on what that work drives up (catalog ``load_driven``): rank 0 evaluating while the
    # others wait in a gloo barrier (round 20, corpus v16, seen); False: it is.  For at most
    # ``alone_span`` seconds of a run: a rank's evaluation, sample or save takes minutes; a
    # node busy for a quarter of an hour while its peers idle holds them up -- a GPU hung in a
    # kernel after the peers' watchdog killed them (second session-16 review)
    working_alone: bool = True
    alone_span: float = 900.0


@dataclass(frozen=True)
class Finding:
    node: str
    metric: str
    first_detected: float  # epoch seconds: when the continuity threshold was reached
    score: float  # the largest window distance in the run that triggered
    #: why the finding, the machine's own, is alerted and never drained (None: it may be):
    #: catalog ``caveat``, or the reference bound's (:data:`BOUND_CAVEAT`)
    caveat: str | None = None


@dataclass
class Result:
    faulty: list[Finding]
    windows: int
    per_metric: dict[str, list[Finding]] = field(default_factory=dict)
    #: node -> epoch seconds at which it left the job (:func:`departed_at`), not a fault
    departed: dict[str, float] = field(default_factory=dict)
    #: node -> (epoch seconds its GPUs went idle, the node whose hardware fault it went idle
    #: with) (:func:`collateral_of`), not a fault
    collateral: dict[str, tuple[float, str]] = field(default_factory=dict)


def _quiet(fn, X: np.ndarray) -> np.ndarray:
    """``fn(X, axis=0)`` for a nan-statistic, without the all-NaN-column warning (NaN is right)."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(X, axis=0)


# ---- steps -----------------------------------------------------------------------------------


def to_rates(X: np.ndarray, step: float, window: float = 60.0) -> np.ndarray:
    """Per-second rate of a monotonic counter over ``window`` seconds (Prometheus' ``rate()``).

    A decrease is a counter reset: the post-reset value is the increase, as Prometheus assumes.
    Like ``rate()``, the increase is taken between the samples the window holds and divided by the
    time between them: a lost scrape neither zeroes the rate after it (the increase across the
    gap is not dropped) nor doubles it (it is spread over the gap).  Absent samples stay absent.
    """
    n, T = X.shape
    valid = ~np.isnan(X)
    # index of the last sample at or before each step (-1: none yet)
    last = np.maximum.accumulate(np.where(valid, np.arange(T)[None, :], -1), axis=1)
    rows = np.arange(n)[:, None]
    Xf = np.where(last >= 0, X[rows, np.maximum(last, 0)], np.nan)
    d = np.diff(Xf, axis=1, prepend=np.nan)
    d = np.nan_to_num(np.where(d < 0, Xf, d))
    c = np.cumsum(d, axis=1)
    k = max(round(window / step), 1)
    back = np.maximum(np.arange(T) - k, 0)
    elapsed = (last - last[:, back]) * step
    with np.errstate(all="ignore"):
        s = (c - c[:, back]) / elapsed
    s[(elapsed <= 0) | (last[:, back] < 0) | ~valid] = np.nan
    return s


def peer_median(X: np.ndarray) -> np.ndarray:
    """Median over the nodes that reported, per time step (NaN where none did).

    ``np.nanmedian`` along the node axis: one sort of the whole array (NaN sorts last) and the
    middle of each column's reported values, instead of numpy's column-by-column fallback once
    a NaN is present (half of a 1,024-node pass)."""
    if not np.isnan(X).any():
        return np.median(X, axis=0)
    S = np.sort(X, axis=0)
    n = np.count_nonzero(~np.isnan(X), axis=0)
    out = np.full(X.shape[1], np.nan)
    ok = n > 0
    cols = np.flatnonzero(ok)
    lo, hi = S[(n[ok] - 1) // 2, cols], S[n[ok] // 2, cols]
    out[ok] = (lo + hi) / 2.0
    return out


def upper_median(X: np.ndarray) -> np.ndarray:
    """The upper of the two middle values over the nodes that reported, per time step (the
    median for an odd count; NaN where none reported): a count most of the nodes reach.

    Two nodes' median is their mean, which a node one GPU short is never half a GPU under;
    what it lacks is against the other node's count (round 15, corpus v12, seen)."""
    S = np.sort(X, axis=0)  # NaN sorts last
    n = np.count_nonzero(~np.isnan(X), axis=0)
    out = np.full(X.shape[1], np.nan)
    ok = n > 0
    out[ok] = S[n[ok] // 2, np.flatnonzero(ok)]
    return out


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


def denoise_size(step: float, span: float) -> int:
    """Samples in a running median spanning at most ``span`` seconds at ``step``: odd, >= 1."""
    n = int(span // step) if step > 0 else 1
    return max(1, n if n % 2 else n - 1)


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
    N: np.ndarray,
    quorum: float = 0.5,
    ignore: np.ndarray | None = None,
    lag: int = 0,
    gone: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Squared distance of each node to its peers' median, per time step; and the judged steps.

    ``lag``: the distance is to the nearest of the peers' medians within ``lag`` steps — exporters
    are scraped at their own offsets, so a job-wide edge (a checkpoint starting) shows on one node
    up to a scrape interval before or after the median; that is not the node moving away.

    A node with no value while a quorum of its peers report is as far as it can be (1.0) where
    ``gone`` (nodes x steps, :func:`absence_evidence`: the machine answers no exporter, or the
    series stopped for good) holds; elsewhere (``gone`` given) its absence is missing data,
    NaN: a lost scrape says nothing about the machine.  Without ``gone`` every absence is 1.0.
    Time steps without a quorum are not judged
    at all (before or after the job).
    ``ignore`` marks the nodes that never export this metric at all (while exporting others): a
    configuration difference, not an absence; they are neither judged nor counted in the quorum.
    """
    present = ~np.isnan(N)
    keep = np.ones(N.shape[0], bool) if ignore is None else ~ignore
    judged = present[keep].mean(axis=0) >= quorum if keep.any() else np.zeros(N.shape[1], bool)
    med = peer_median(N)
    dev = (N - med[None, :]) ** 2
    for k in range(1, min(lag, N.shape[1] - 1) + 1):
        for shifted in (
            np.concatenate([med[k:], np.full(k, np.nan)]),
            np.concatenate([np.full(k, np.nan), med[:-k]]),
        ):
            dev = np.fmin(dev, (N - shifted[None, :]) ** 2)
    absent = 1.0 if gone is None else np.where(gone, 1.0, np.nan)
    dev = np.where(present, dev, absent)
    dev[~keep, :] = 0.0
    dev[:, ~judged] = 0.0
    return dev, judged


def ended(X: np.ndarray) -> np.ndarray:
    """Nodes x steps after each node's last sample of ``X`` (all steps without one): a series
    that stopped and did not come back in the window -- a GPU off the bus, a NIC the OS lost,
    a dcgm-exporter hung on a GSP that no longer answers.  Live (``watch``), the window ends
    now: a silence still going on."""
    T = X.shape[1]
    valid = ~np.isnan(X)
    last = np.where(valid.any(axis=1), T - 1 - np.argmax(valid[:, ::-1], axis=1), -1)
    return np.arange(T)[None, :] > last[:, None]


def absence_evidence(aligned: Aligned, metric: str, machine: np.ndarray) -> np.ndarray:
    """Where an absence of ``metric`` is evidence (:class:`Params` ``machine_absence``): the
    machine is gone (``machine``, :func:`machine_gone`) or the series :func:`ended`."""
    return machine | ended(aligned.data[metric])


def machine_gone(aligned: Aligned, quorum: float = 0.5) -> np.ndarray:
    """Nodes x steps at which a node has no sample of *any* metric (of any exporter) while a
    quorum of the nodes have one: the machine stopped reporting -- evidence, unlike a lost
    scrape (:class:`Params` ``machine_absence``).

    A scrape that times out (dcgm-exporter issue #607: a third of its targets down for
    minutes, scrape_duration at the timeout), an exporter restarting or a Prometheus missing
    scrapes blank one exporter's series on that node for a while, and the exporter answers
    again; a machine that is down, hung or cut off answers no exporter.

    Not before the node's first sample (round 16, corpus v13, seen): a target Prometheus has
    not discovered yet (a fresh cloud instance, a node its service discovery adds at its next
    refresh) is unknown, not gone.  A node with no sample at all in the window stays gone.
    """
    n, T = len(aligned.nodes), aligned.times.size
    if not aligned.data:
        return np.zeros((n, T), bool)
    present = reporting(aligned)
    known = np.maximum.accumulate(present, axis=1) | ~present.any(axis=1)[:, None]
    return ~present & known & (present.mean(axis=0) >= quorum)[None, :]


def reporting(aligned: Aligned) -> np.ndarray:
    """Nodes x steps at which a node has a sample of any metric."""
    return np.logical_or.reduce([~np.isnan(X) for X in aligned.data.values()])


def replaced(aligned: Aligned, k: int) -> dict[int, float]:
    """Row -> its last sample, for each node that stopped reporting for good at least ``k``
    steps before the window's end while another node, silent until then, began reporting
    after it: the job took a replacement (a spot instance reclaimed and a fresh one joined, an
    elastic job swapping a node) -- the job no longer waits on the node that left, whatever
    became of it (round 16, corpus v13, seen).  Only with :attr:`Params.replacements`: under
    Slurm a node first scraped late looks the same, and a machine that died must stay
    evidence."""
    if not aligned.data:
        return {}
    present = reporting(aligned)
    T = present.shape[1]
    anyp = present.any(axis=1)
    first = np.where(anyp, present.argmax(axis=1), T)
    last = np.where(anyp, T - 1 - present[:, ::-1].argmax(axis=1), -1)
    joined = first[(first >= k) & anyp]  # began reporting a while into the window
    if joined.size == 0:
        return {}
    left = np.flatnonzero(anyp & (last <= T - 1 - k))
    return {int(i): float(aligned.times[last[i]]) for i in left if (joined > last[i]).any()}


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


def reference_offsets(
    X: np.ndarray,
    times: np.ndarray,
    start: float,
    span: float,
    since: np.ndarray | None = None,
    steady: np.ndarray | None = None,
    best: str | None = None,
) -> tuple[np.ndarray, float]:
    """Each node's median offset from its peers' median over ``[start, start + span)``; and the
    peers' level there (the median of their median), which :func:`corrected` needs for gains.

    ``best`` (``"max"`` | ``"min"``): the node's *best* offset in the span instead of its
    median, for a state that only a fault moves, one way (:func:`reference_statistic`).

    ``steady`` (per time step, :func:`steady_steps`): only steps at which the job runs at its
    typical level count — the tail of a warm-up (everyone waiting in NCCL for a late starter)
    or a checkpoint inside the span would make an idle offset the node's "normal" under load.

    ``since`` (per node, from :func:`joined_at`): a node's span starts when it joined the job,
    not before (a late starter's idle minutes are not its normal); ``inf``: never joined, no
    reference.  NaN for a node without a sample in its span (a gap, a late exporter, never
    joined): it is then judged without a correction, i.e. more strictly, never silently passed.
    """
    t0 = np.full(X.shape[0], start) if since is None else np.maximum(since, start)
    ref = (times[None, :] >= t0[:, None]) & (times[None, :] < t0[:, None] + span)
    if steady is not None:
        ref &= steady[None, :]
    off = np.full(X.shape[0], np.nan)
    cols = ref.any(axis=0)
    if not cols.any():
        return off, float("nan")
    med = peer_median(X[:, cols])
    D = np.where(ref[:, cols], X[:, cols] - med[None, :], np.nan)
    stat = np.nanmedian
    if best in ("max", "min") and D.shape[1] > 1:
        # a value counts once held for two samples running: one scrape that saw a device
        # twice is not the node's normal (NaN propagates: a pair with a gap is no pair)
        pair = np.minimum if best == "max" else np.maximum
        D = pair(D[:, :-1], D[:, 1:])
        stat = np.nanmax if best == "max" else np.nanmin
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return stat(D, axis=1), float(np.nanmedian(med))


#: why a node judged without its reference offset by the bound (:func:`bounded_offsets`) is
#: alerted, never drained: a GPU model slower than its peers' reads the same as a lock
BOUND_CAVEAT = (
    "held under its peers' from its first samples beyond hardware variation: locked clocks, a "
    "stuck P-state, a link trained low -- or another GPU model or fabric in the job"
)
NO_REFERENCE_CAVEAT = (
    "judged without a reference of its own (it reported only after the job's reference span): "
    "the gap may be its GPU model's or fabric's"
)


def bounded_offsets(
    off: np.ndarray, level: float, bound: float, eligible: np.ndarray | None
) -> np.ndarray:
    """``off`` (:func:`reference_offsets`) where a node's offset is a hardware offset; NaN (judged
    uncorrected, :func:`corrected`) where it holds an ``eligible`` node (per node; None: none
    can be told, every offset stands) more than ``bound`` of the peers' ``level`` below them.
    For the clocks the eligible are the nodes whose GPUs work as hard as their peers'
    (:func:`busy_nodes`): a GPU idle by design clocks at its floor, its own normal; a busy one
    whose clock sits that far under its peers' from its first sample had its clocks locked or
    a P-state stuck before the job (corpus v14, seen: SM clocks locked at 53-70 % of the
    peers' by an ``nvidia-smi -lgc`` left behind, the node's "normal").  For a port's rate,
    the nodes with as many ports as their peers (:func:`alike_nodes`)."""
    if eligible is None or not np.isfinite(level) or level <= 0:
        return off
    with np.errstate(invalid="ignore"):
        beyond = eligible & (off < -bound * level)
    return np.where(beyond, np.nan, off)


def alike_nodes(aligned: Aligned, metric: str, start: float, span: float) -> np.ndarray:
    """Per node, whether its reading of ``metric`` (its median over ``[start, start + span)``)
    is its peers' (their median of those); all False without the metric: unknown is no
    likeness (catalog ``bound_alike``)."""
    X = aligned.data.get(metric)
    if X is None:
        return np.zeros(len(aligned.nodes), bool)
    inside = (aligned.times >= start) & (aligned.times < start + span)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        own = np.nanmedian(X[:, inside], axis=1) if inside.any() else np.full(X.shape[0], np.nan)
        peers = np.nanmedian(own)
    return np.isfinite(own) & (own == peers)


def busy_nodes(
    aligned: Aligned,
    p: Params,
    share: float,
    start: float,
    span: float,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
    join_until: float | None = None,
) -> np.ndarray | None:
    """Per node, whether its least busy GPU worked within ``share`` of its peers' level over the
    reference span (:func:`node_reference` of :data:`UTILISATION`); None without utilisation."""
    if UTILISATION not in aligned.data:
        return None
    U = series(aligned, UTILISATION, p)
    (off, level), _ = node_reference(
        U, aligned.times, UTILISATION, p, start, span, ignore, late, join_until
    )
    with np.errstate(invalid="ignore"):
        return np.isfinite(off) & (off >= -share * level)


def reference_statistic(metric: str, p: Params) -> str | None:
    """How a node's normal is read from its reference span: its median offset (None), or, for
    a state only a fault moves and only one way, its best -- the most devices it reported
    (``"devices"``: a GPU off the bus does not come back) and the least hardware Xid
    (``"xid"``).  A GPU lost three minutes into a five-minute span would otherwise be most of
    the span and the node's "normal" (corpus v6, seen: a GPU lost 2 minutes after the
    warm-up); a node already short of a device, or holding a stale hardware Xid, when the span
    opens is still its own normal.

    The catalog's hardware state gauges (``MetricSpec.hardware``: a port's state and rate, a
    PCIe link's width and generation, a failed row remap, a hung mount, a slow clock source)
    are such states too (round 10): their best is the highest where the catalog takes the
    node's lowest (``agg`` "min": a port down, a link narrower) or says so (``healthy_high``:
    the NICs' summed speed), else the lowest (corpus v8, seen: a clock source that fell back
    1.6 minutes into the span was the node's normal)."""
    if not p.scales:
        return None
    spec = spec_for(metric)
    if spec.hardware:
        high = spec.agg == "min" if spec.healthy_high is None else spec.healthy_high
        return "max" if high else "min"
    return {"devices": "max", "xid": "min"}.get(spec.scale)


def steady_steps(X: np.ndarray, lo: float | None, at_least: bool = False) -> np.ndarray:
    """Time steps at which the peers' median is near the job's typical level (:func:`job_level`):
    within a quarter of that level's distance from the floor ``lo`` (0 without one); with
    ``at_least``, anywhere above that band's lower edge too."""
    med = peer_median(X)
    level = job_level(X)
    base = 0.0 if lo is None else lo
    if not np.isfinite(level) or level == base:
        return np.ones(X.shape[1], bool)
    with np.errstate(invalid="ignore"):
        if at_least:
            return (med - level) * np.sign(level - base) >= -0.25 * abs(level - base)
        return np.abs(med - level) <= 0.25 * abs(level - base)


def joined_at(
    dev: np.ndarray, judged: np.ndarray, times: np.ndarray, threshold: float
) -> np.ndarray:
    """When each node joined the job: the first judged step at which it was within ``threshold``
    of its peers (``inf``: never).  Nodes finish loading at their own pace; a late starter idles
    (or its peers wait for it in NCCL) for minutes before it does what they do."""
    ok = (dev <= threshold**2) & judged[None, :]
    first = ok.argmax(axis=1)
    return np.where(ok.any(axis=1), times[first], np.inf)


def corrected(X: np.ndarray, off: np.ndarray, level: float, lo: float | None) -> list[np.ndarray]:
    """``X`` less each node's reference offset, read two ways: as a constant offset, and as a
    gain ``g`` over the metric's floor ``lo`` — the node's normal is ``lo + g (median - lo)``, so
    its offset follows the job's level: a node 12 °C hotter under load is as cool as its peers at
    idle, and a GPU idle by design (``g`` = 0) stays at the floor through a slowdown while its
    peers slow down.  A node is judged by the reading that puts it *closer* to its peers
    (:func:`deviation` takes the smaller distance): an outlier under both is not a hardware
    offset.  Without a floor (``lo`` None) only the offset reading.
    """
    off0 = np.nan_to_num(off)
    out = [X - off0[:, None]]
    if lo is not None and np.isfinite(level) and level - lo > 0:
        gain = np.clip(1.0 + off0 / (level - lo), 0.0, 2.0)
        # X - (g - 1)(median - lo): compared with the median, that is X - lo - g (median - lo)
        out.append(X - (gain - 1.0)[:, None] * (peer_median(X) - lo)[None, :])
    return out


def job_level(X: np.ndarray) -> float:
    """The job's typical level of a throughput: the 90th percentile over time of the peers'
    median (the busy level; checkpoints and warm-up sit below it).  NaN when nothing reported."""
    med = peer_median(X)
    med = med[np.isfinite(med)]
    return float(np.percentile(med, 90)) if med.size else float("nan")


def peers_now(X: np.ndarray) -> np.ndarray:
    """Nodes x steps: the peers' typical value at each step -- their median (the node's own
    among them: one value of three or more moves a median little), the other's in a pair
    (whose median would be half the node's own), 0 alone; NaN read as 0."""
    n = X.shape[0]
    if n == 1:
        return np.zeros_like(X)
    if n == 2:
        return np.nan_to_num(X[::-1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.broadcast_to(np.nan_to_num(np.nanmedian(X, axis=0))[None, :], X.shape)


def background_events(R: np.ndarray, window: float, p: float = 0.99) -> np.ndarray:
    """Nodes x steps: the events in one rate window that the peers' background explains: the
    ``p`` quantile of a Poisson count at the peers' median long-run rate, or at their rate at
    that step (:func:`peers_now`) where it is higher (0 where the peers have no errors).

    Some hardware ticks an error counter on every node (a few replays an hour); one such node
    catching three ticks in a row by chance is not a fault -- the long-run rate, over which
    such ticks are seen at all.  Some counters tick with the traffic on every node (a few
    out-of-sequence packets a second while the job trains, none while it idles): a node that
    reported only while the job trained -- a replacement that joined, a node that left -- is
    held to the peers' rate of its time, not to a long-run one their idle minutes diluted
    (round 16, corpus v13, seen).
    """
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        lam = float(np.nanmedian(np.nanmean(R, axis=1)))
    lam = lam if np.isfinite(lam) and lam > 0 else 0.0
    rate = np.maximum(peers_now(R), lam)
    return np.where(rate > 0, _by_value(lambda x: poisson.ppf(p, x), rate * window), 0.0)


def _by_value(fn, X: np.ndarray) -> np.ndarray:
    """``fn`` (elementwise) over ``X``, computed once per distinct value: a Poisson quantile
    over nodes x steps costs a thousand times one over the few hundred rates it holds."""
    values, inverse = np.unique(X, return_inverse=True)
    return fn(values)[inverse].reshape(X.shape)


def event_scale(R: np.ndarray, window: float, hi: float, floor: float = 0.0) -> np.ndarray:
    """An error counter's rate on an absolute, logarithmic scale in [0, 1].

    0 without more events in the rate window than the peers' background explains
    (:func:`background_events`); 0.5 at one event per ``window`` seconds (the smallest rate a
    counter can show), rising by decades to 1.0 at ``hi`` per second.  Against error-free peers
    any sustained rate is then an outlier (0.5 is far above the threshold), a single benign
    increment lasts only ``window`` (under the continuity), and a node with 100x its peers' error
    rate stands out where a Min-Max scale over 0..``hi`` would squash both near 0.

    ``floor``: a rate under it is one the hardware's maker calls harmless, no evidence
    whatever the peers (catalog ``lo``: NVIDIA's DCGM health limits -- 9 PCIe replays a minute
    and up, i.e. more than 8; NVLink CRC errors from 100 a second).
    """
    r0 = 1.0 / window
    top = max(np.log10(max(hi, r0 * 10) / r0), 1.0)
    k = background_events(R, window)
    with np.errstate(all="ignore"):
        lv = 0.5 + 0.5 * np.clip(np.log10(np.maximum(R, r0) / r0) / top, 0, 1)
        out = np.where(np.greater(R * window, k + 0.5) & ~np.less(R, floor), lv, 0.0)
    out[np.isnan(R)] = np.nan
    return out


def decades(X: np.ndarray, floor: float, top: float) -> np.ndarray:
    """A share on a logarithmic scale in [0, 1]: 0 at or below ``floor``, 1 at ``top``, equal
    steps per decade between (catalog scale ``"decades"``).

    A NIC pausing its link spans decades between healthy and broken (microseconds a second
    on a quiet fabric, a few percent on a busy one, the whole second in a storm); how many
    *times* a node's share is its peers' is the comparison that holds across fabrics, where a
    linear range would squash every healthy level to 0.  NaN stays NaN.
    """
    with np.errstate(all="ignore"):
        return np.clip(np.log10(np.maximum(X, floor) / floor) / np.log10(top / floor), 0.0, 1.0)


#: the scales whose ``lo`` is an evidence floor a site may set (:attr:`Params.floors`)
FLOOR_SCALES = ("events", "decades")


def evidence_floor(metric: str, p: Params) -> float | None:
    """The floor of a metric's raw reading: the site's (:attr:`Params.floors`), else the
    catalog's ``lo``."""
    return p.floors.get(metric, spec_for(metric).lo)


def floor_of(metric: str, p: Params) -> float | None:
    """The metric's floor in the units :func:`series` returns (0 on the ``"decades"`` scale,
    where the floor is that of the raw share)."""
    spec = spec_for(metric)
    return 0.0 if p.scales and spec.scale == "decades" else evidence_floor(metric, p)


def burst_mask(counts: np.ndarray, span: float, alpha: float, step: float) -> np.ndarray:
    """Where a node's error count over the trailing ``span`` seconds is a burst: more than a
    Poisson count at its *peers'* background rate explains, family-wise at ``alpha`` per job.

    The background of node ``i`` is the pooled rate of the others (leave-one-out, so a culprit's
    own burst does not raise its bar): their mean count per ``span`` over the job, or their
    count at the step (:func:`peers_now`) where that is higher.  The bar is
    the Poisson ``1 - alpha / m`` quantile, ``m`` = nodes x spans in the job (Bonferroni over
    every node and every span the job has).  With error-free peers any event passes (the bar is
    0, as before); with sparse benign increments everywhere (~1 per node-hour: a 256-node job
    then holds a node with three in four minutes by chance) the bar rises to 3-5 events, while
    a degraded link's 0.2-5 replays per second clears it a hundredfold.
    """
    n, T = counts.shape
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        per = np.nanmean(counts, axis=1)  # each node's mean count per span
    per = np.nan_to_num(per)
    lam = (per.sum() - per) / (n - 1) if n > 1 else per
    # or the peers' count at that very step where it is higher: a counter that ticks with the
    # traffic on every node is no burst on a node that reported only while the job trained
    # (round 16, corpus v13, seen)
    lam = np.maximum(lam[:, None], peers_now(counts))
    spans = max(T * step / span, 1.0)
    q = alpha / (n * spans)
    # the largest count the background explains
    bar = _by_value(lambda x: poisson.isf(q, x), np.maximum(lam, 0.0))
    bar = np.where(lam > 0, bar, 0.0)
    return np.nan_to_num(counts) > bar


def hardware_xid(X: np.ndarray) -> np.ndarray:
    """1 where the last Xid is a hardware fault's (catalog :data:`HARDWARE_XIDS`), else 0.

    ``DCGM_FI_DEV_XID_ERRORS`` holds the *last* Xid since the host engine started, so a stale
    code from an earlier job stays; the node's reference offset (its value at the job's start)
    absorbs it, and only a new hardware Xid during the job moves the node from its peers.
    """
    codes = np.array(sorted(HARDWARE_XIDS), dtype=float)
    out = np.isin(np.nan_to_num(X, nan=-1.0), codes).astype(float)
    out[np.isnan(X)] = np.nan
    return out


def last_seen(X: np.ndarray) -> np.ndarray:
    """Each node's last sample up to each step (nodes x steps); NaN before its first."""
    idx = np.where(~np.isnan(X), np.arange(X.shape[1])[None, :], 0)
    return np.take_along_axis(X, np.maximum.accumulate(idx, axis=1), axis=1)


def latched(X: np.ndarray, events: int = 1) -> np.ndarray:
    """1 from the step a counter counted its ``events``-th time since the window's first
    sample (a step that counted is one time, however many it counted), else 0.

    For counters whose every increment is a fault (catalog scale ``"latch"``): a GPU's
    double-bit ECC error or a row remapped for one, a page retired, the host's uncorrectable
    memory error, the OOM killer.  Only increases count (a counter that restarts from 0, a
    driver reload clearing the volatile ECC count, is no event); a lost scrape stays NaN, and
    the count carries across it.
    """
    n, T = X.shape
    out = np.full((n, T), np.nan)
    if T == 0:
        return out
    held = last_seen(X)
    # an increase undone at the next scrape is no event: for one step after a relabelling
    # (dcgm-exporter adding its hpc_job label when a job starts) ``sum by`` counts a GPU's old
    # and new series both, and the node's count doubles and falls back (session-10 review)
    held[:, :-1] = np.minimum(held[:, :-1], held[:, 1:])
    rise = np.diff(held, axis=1, prepend=held[:, :1]) > 0
    counted = (np.cumsum(rise, axis=1) >= events).astype(float)
    return np.where(np.isnan(X), np.nan, counted)


def device_loss(X: np.ndarray) -> np.ndarray:
    """1 where a node reports fewer devices (GPUs, IB ports) than its peers' median, else 0.

    A device whose series vanish (a GPU off the bus, a NIC the OS lost) is the strongest local
    evidence there is: the node stops reporting *part* of itself while its peers carry on.  A
    node that always had fewer (a GPU out for repair) is corrected by its reference offset first.
    """
    med = upper_median(X)
    with np.errstate(invalid="ignore"):
        out = np.less(X, med[None, :] - 0.5).astype(float)
    out[np.isnan(X)] = np.nan
    return out


def profiler_blank(aligned: Aligned, metric: str) -> np.ndarray | None:
    """For a DCGM profiling field: where a node has no value while its DEV fields do.

    ``dcgmi profile --pause`` (a user running Nsight, say) stops the profiling module only; the
    node's ``DCGM_FI_PROF_*`` then read DCGM's blank (dropped by :mod:`align`) while clock,
    power and utilisation carry on.  That is no data on those fields, not a node that stopped
    reporting.  None for other metrics or without a DEV field to compare with.
    """
    if not metric.startswith("DCGM_FI_PROF_"):
        return None
    dev = [X for m, X in aligned.data.items() if m.startswith("DCGM_FI_DEV_")]
    if not dev:
        return None
    alive = np.logical_or.reduce([~np.isnan(X) for X in dev])
    return np.isnan(aligned.data[metric]) & alive


def window_distance(dev: np.ndarray, w: int) -> np.ndarray:
    """RMS of the deviation over the trailing ``w`` steps (a Euclidean distance per window).

    NaN steps (missing data, :func:`peer_deviation`) are left out of the mean: the window is
    judged on the samples it has, and a window without one has no distance (NaN)."""
    missing = np.isnan(dev)
    if w <= 1:
        return np.sqrt(dev)
    d = np.where(missing, 0.0, dev)
    c = np.cumsum(d, axis=1)
    s = c.copy()
    s[:, w:] = c[:, w:] - c[:, :-w]
    if missing.any():
        h = np.cumsum(~missing, axis=1)
        k = h.copy()
        k[:, w:] = h[:, w:] - h[:, :-w]
    else:
        k = np.full(dev.shape, w)
    with np.errstate(all="ignore"):
        out = np.sqrt(s / k)
    out[k == 0] = np.nan
    out[:, : w - 1] = np.nan  # incomplete windows
    return out


def candidates(dist: np.ndarray, threshold: float, max_share: float) -> np.ndarray:
    """Nodes farther than ``threshold`` from their peers, in windows where they are a minority."""
    c = np.nan_to_num(dist) > threshold
    allowed = max(1, int(max_share * dist.shape[0]))
    c[:, c.sum(axis=0) > allowed] = False
    return c


def simultaneous_bound(
    first: np.ndarray, times: np.ndarray, period: float, max_nodes: int
) -> np.ndarray:
    """The nodes with a finding (``first`` >= 0), less those found together with more than
    ``max_nodes`` others within ``period`` seconds: a whole group at once is a job-wide state.

    On findings rather than on each window's candidates: in a noisy 512-node job a handful of
    nodes cross the threshold by chance in any window, and bounding those would hide the one
    node that stays across it.
    """
    hits = np.flatnonzero(first >= 0)
    if max_nodes <= 0 or hits.size <= max_nodes:
        return hits
    t = times[first[hits]]
    s = np.sort(t)
    near = np.searchsorted(s, t + period, "right") - np.searchsorted(s, t - period, "left")
    return hits[near <= max_nodes]


def on_events_scale(metric: str, p: Params) -> bool:
    """Whether the metric is read as an error *rate* (:func:`event_scale`): catalog scale
    ``"events"``, and ``"latch"`` with ``p.latch`` off."""
    sc = spec_for(metric).scale
    return p.scales and (sc == "events" or (sc == "latch" and not p.latch))


def on_latch_scale(metric: str, p: Params) -> bool:
    """Whether the metric is read as "has it counted in the window" (:func:`latched`)."""
    return p.scales and p.latch and spec_for(metric).scale == "latch"


#: the scales of counters (a rate of errors, a fault counted): never a node's normal
COUNTING_SCALES = ("events", "latch")

#: the scales whose reference takes every step of its span, not only those with the job at
#: its typical level (:func:`steady_steps`): counters, and the device and Xid states the job's
#: pace does not move -- a pair's median Xid indicator is 1 once one node takes a new Xid, no
#: step is then "typical", and a stale code on the other would lose its reference (session-14
#: review)
UNSTEADY_SCALES = (*COUNTING_SCALES, "xid", "devices")


def event_steps(metric: str, p: Params, step: float) -> int:
    """Windows in a row that make a finding: ``continuity / step``, plus ``rate_window / step`` on
    an error counter (catalog scale ``events``) with ``p.event_continuity``.

    Minder's continuity asks that a fault *last* about 4 minutes.  A counter's rate over the
    trailing ``rate_window`` (Prometheus ``rate(x[2m])``) stays above zero for ``rate_window``
    after the last increment, so a 2-minute burst of link errors looks 4 minutes long; adding the
    window back measures the burst itself: errors must still be arriving a continuity after
    they began.
    """
    k = p.continuity
    if fresh_events(metric, p):
        # a rise seen at a step says errors arrived since the node's previous sample, up to a
        # scrape interval earlier: a window more (a minute, at least most sites' interval)
        # keeps a 3-minute burst a blip (v5, v8: an IB error burst, a host's I/O hiccup)
        k += p.window
    elif p.event_continuity and on_events_scale(metric, p):
        k += p.rate_window
    return max(round(k / step), 1)


def fresh_events(metric: str, p: Params) -> bool:
    """Whether an error counter's continuity completes at a step where it rose
    (:attr:`Params.fresh_events`) rather than ``rate_window`` later (:func:`event_steps`)."""
    return p.fresh_events and p.event_continuity and on_events_scale(metric, p)


def continuity(c: np.ndarray, k: int, support: np.ndarray | None = None) -> np.ndarray:
    """Index of the first window where each node has been a candidate ``k`` windows in a row, or -1.

    Minder's continuity threshold: faults persist and worsen, a blip does not.

    ``support`` (nodes x steps, ``Params.step_support``): the run must reach ``k`` *at* a step
    where the node itself is measured and far.  A trailing window holds a blip for a window
    after it ended (that echo cannot complete a run) and a lost scrape cannot either; a fault
    whose steps flicker (a clock cycling every 30 s) keeps its window run and completes it at
    its next far step.
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
    if support is not None:
        hit &= support
    anyhit = hit.any(axis=1)
    out[anyhit] = hit[anyhit].argmax(axis=1)
    return out


def recurrence(far: np.ndarray, least: int, span: int) -> np.ndarray:
    """Per node, the step at which an episode of ``far`` (nodes x steps: measured and far from
    the peers) that began within ``span`` steps of the previous episode's start has lasted
    ``least`` steps -- a second episode confirmed -- or -1.  An episode is a run of at least
    ``least`` steps; a shorter one (a scrape's glitch) counts for nothing.

    A failure state that keeps coming back for less than the continuity each time (a client
    the filesystem evicts and lets back, a port bouncing out of Active) is hidden by Minder's
    continuity, which is there for blips; twice within the range is the fault's pattern, as
    Azure's checks read repeated link flaps (NHC2005)."""
    out = np.full(far.shape[0], -1)
    for i in np.flatnonzero(far.sum(axis=1) >= 2 * least):
        edges = np.diff(np.concatenate([[0], far[i].astype(np.int8), [0]]))
        starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
        keep = ends - starts >= least
        starts = starts[keep]
        again = np.flatnonzero(np.diff(starts) <= span)
        if again.size:
            out[i] = starts[again[0] + 1] + least - 1
    return out


def shared_onsets(far: np.ndarray, tol: int) -> np.ndarray:
    """Nodes x steps: the runs of ``far`` (nodes x steps) whose first step lies within ``tol``
    steps of another node's run's first step, and that ended -- one event seen by several
    machines at once, and over.

    A switch that reloads takes every link it carries down and up together; a machine's own
    cable or transceiver fails alone.  Scrape offsets put the same event a step or so apart
    on different nodes: ``tol`` is a window plus the lag allowed.  A run still going at the
    window's end is kept whoever else's began with it: a port that stays down is unusable,
    whatever broke it, and the job waits on it."""
    n, T = far.shape
    out = np.zeros((n, T), bool)
    if n < 2 or T == 0:
        return out
    f = far.astype(np.int8)
    starts = np.diff(np.concatenate([np.zeros((n, 1), np.int8), f], axis=1), axis=1) == 1
    if starts.sum() < 2:
        return out
    # a run reaching the last step is no passing event: it counts as another's company, but
    # stays evidence itself
    passing = starts.copy()
    ongoing = far[:, -1]
    last = np.maximum.accumulate(np.where(starts, np.arange(T)[None, :], -1), axis=1)[:, -1]
    passing[np.flatnonzero(ongoing), last[ongoing]] = False
    # each node's starts widened to +-tol steps; a start is shared where another node's is near
    cs = np.cumsum(np.pad(starts.astype(np.int32), ((0, 0), (1, 0))), axis=1)
    lo = np.clip(np.arange(T) - tol, 0, T)
    hi = np.clip(np.arange(T) + tol + 1, 0, T)
    near = (cs[:, hi] - cs[:, lo]) > 0
    others = near.sum(axis=0)[None, :] - near
    shared_start = passing & (others >= 1)
    for i in np.flatnonzero(shared_start.any(axis=1)):
        run = np.cumsum(starts[i])  # run id at each step (0 before the first start)
        ids = np.unique(run[shared_start[i]])
        out[i] = far[i] & np.isin(run, ids)
    return out


# ---- one metric, all metrics ------------------------------------------------------------------


def series(aligned: Aligned, metric: str, p: Params) -> np.ndarray:
    """Rates for counters, denoised: the metric in its own units, before any scaling.

    An error counter's rate is kept only where its burst is more than the peers' background
    explains (:func:`burst_mask`); the last Xid becomes a hardware-fault indicator
    (:func:`hardware_xid`)."""
    spec = spec_for(metric)
    X = aligned.data[metric]
    if spec.scale == "xid" and p.scales:
        X = hardware_xid(X)
    if spec.agg == "count" and p.machine_absence:
        X = zero_count(aligned, metric)
    if holds_state(metric, p) and np.isnan(X).any():
        X = held_across_gaps(X, machine_gone(aligned, p.quorum) if p.machine_absence else None)
    if on_latch_scale(metric, p):
        X = latched(X, spec.latch_events)
    elif spec.kind == "counter":
        events = on_events_scale(metric, p)
        raw = X
        X = to_rates(X, aligned.step, p.rate_window if events else p.throughput_rate_window)
        if events and p.burst_alpha > 0:
            span = max(p.continuity, p.rate_window)
            counts = to_rates(raw, aligned.step, span) * span
            burst = burst_mask(counts, span, p.burst_alpha, aligned.step)
            X = np.where(burst | np.isnan(X), X, 0.0)  # an absence stays an absence
    if p.scales and spec.counted_in_window and spec.derived:
        source = aligned.data.get(spec.derived[0])
        if source is not None:  # events before the window are not the window's
            span = max(round(spec.counted_in_window / aligned.step), 1)
            X = np.where(rose_within(source, span) | np.isnan(X), X, 0.0)
    X = denoise(X, denoise_size(aligned.step, p.denoise_span), p.denoise)
    floor = evidence_floor(metric, p)
    if p.scales and spec.scale == "decades" and floor and spec.hi:
        X = decades(X, floor, spec.hi)
    return X


def rose_within(C: np.ndarray, span: int) -> np.ndarray:
    """Nodes x steps: whether the counter ``C`` rose within the trailing ``span`` steps,
    counting only from each node's first sample in the window (its value then is what it
    counted before).  A gap's increase shows at the sample after it; a fall (a counter
    cleared) is no rise."""
    filled = last_seen(C)
    rise = np.diff(filled, axis=1, prepend=filled[:, :1])
    rise = np.where(np.isnan(rise) | (rise < 0), 0.0, rise)
    total = np.cumsum(rise, axis=1)
    before = np.concatenate([np.zeros((C.shape[0], span)), total[:, :-span]], axis=1)
    return (total - before[:, : C.shape[1]]) > 0


def held_across_gaps(X: np.ndarray, gone: np.ndarray | None = None) -> np.ndarray:
    """``X`` with each gap (NaN run) between two samples that read the same filled with that
    reading; a gap before a node's first sample, after its last, or between two different
    readings stays NaN (:class:`Params` ``held_state``), and so do the steps of ``gone``
    (nodes x steps, :func:`machine_gone`): a machine that answered no exporter is evidence
    by its absence, not a state that held."""
    valid = ~np.isnan(X)
    if valid.all() or not valid.any():
        return X
    T = X.shape[1]
    idx = np.arange(T)[None, :]
    last = np.maximum.accumulate(np.where(valid, idx, -1), axis=1)
    nxt = np.minimum.accumulate(np.where(valid, idx, T)[:, ::-1], axis=1)[:, ::-1]
    rows = np.arange(X.shape[0])[:, None]
    before = np.where(last >= 0, X[rows, np.clip(last, 0, T - 1)], np.nan)
    after = np.where(nxt < T, X[rows, np.clip(nxt, 0, T - 1)], np.nan)
    fill = ~valid & (before == after)
    if gone is not None:
        fill &= ~gone
    return np.where(fill, before, X)


def holds_state(metric: str, p: Params) -> bool:
    """Whether the metric is a hardware state read through gaps (``Params.held_state``): the
    indicator and device-count scales and the catalog's hardware gauges, never a counter."""
    spec = spec_for(metric)
    if not (p.held_state and p.scales) or spec.kind == "counter":
        return False
    return spec.hardware or spec.scale in ("xid", "devices")


def zero_count(aligned: Aligned, metric: str) -> np.ndarray:
    """A device count (``count by (node)``) read as 0 where the node's exporter reports other
    series but none of the counted ones: PromQL's ``count`` of nothing is no series, not 0, and
    the node's last IB port (or its only GPU's temperature) gone is a loss, not a lost scrape."""
    X = aligned.data[metric]
    src = spec_for(metric).source
    same = [Y for m, Y in aligned.data.items() if m != metric and spec_for(m).source == src]
    if not same:
        return X
    alive = np.logical_or.reduce([~np.isnan(Y) for Y in same])
    return np.where(np.isnan(X) & alive, 0.0, X)


def scale(X: np.ndarray, metric: str, p: Params) -> np.ndarray:
    """Min-Max normalisation on the metric's scale (catalog ``scale``; docs/minder.md)."""
    spec = spec_for(metric)
    if p.scales and spec.scale == "devices":
        return device_loss(X)
    if p.scales and spec.scale == "decades":  # already in [0, 1] (:func:`series`)
        return normalise(X, 0.0, 1.0)
    if not p.physical_range:
        return normalise(X)
    if on_latch_scale(metric, p):  # already 0/1 (:func:`series`)
        return normalise(X, 0.0, 1.0)
    if on_events_scale(metric, p) and spec.hi is not None:
        floor = evidence_floor(metric, p) if p.event_floors else 0.0
        return event_scale(X, p.rate_window, spec.hi, floor or 0.0)
    hi = spec.hi
    if p.scales and spec.scale == "job" and hi is not None:
        level = job_level(X)
        if np.isfinite(level) and level > 0:
            # [lo, 2 x the job's level], at most the physical range and at least 5 % of it
            # (a window in which the whole job idles must not blow noise up to full scale)
            hi = min(hi, max(2.0 * level, 0.05 * hi))
    return normalise(X, spec.lo, hi)


def node_reference(
    X: np.ndarray,
    times: np.ndarray,
    metric: str,
    p: Params,
    start: float,
    span: float,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
    join_until: float | None = None,
) -> tuple[tuple[np.ndarray, float], np.ndarray]:
    """Each node's reference (offsets, peers' level) over ``[start, start + span)`` of the
    :func:`series` ``X``, and when each node joined (from when it is judged).

    ``late`` (per node, :func:`late_joins`; ``inf``: none): a node that waited outside the job
    while it ran and joined it later is judged from the end of its own warm-up after that,
    against a span from then -- its idle minutes are not its normal under load.

    Only steps with the job at its typical level count (:func:`steady_steps`); a late starter's
    span begins when it first matched its peers within the span (:func:`joined_at`); a node that
    did not is its own normal from ``start`` (a GPU idle by design; the Prolog's checks are for
    a node broken from the start; a node "joining" later, e.g. when all idle at a checkpoint,
    would take that pause for its normal).
    """
    # no lag here: a late starter at its idle level matches the peers' median of one step
    # earlier, from before they loaded -- and would "join" at the span's first step (v5, seen)
    dev0, judged0 = peer_deviation(scale(X, metric, p), p.quorum, ignore, 0)
    steady = None
    if p.steady and not (p.scales and spec_for(metric).scale in UNSTEADY_SCALES):
        steady = steady_steps(X, floor_of(metric, p))
    # a late starter may match its peers only after the span: it joins up to ``join_until``
    until = start + span if join_until is None else max(start + span, join_until)
    inside = (times >= start) & (times < until)
    if steady is not None:
        inside &= steady
    joined = joined_at(dev0, judged0 & inside & p.join, times, p.threshold)
    joined[~np.isfinite(joined)] = start
    if late is not None:  # its own warm-up: it loads, then the job re-forms around it
        joined = np.where(np.isfinite(late), np.maximum(joined, late + p.warmup), joined)
    best = reference_statistic(metric, p)
    return reference_offsets(X, times, start, span, joined, steady, best), joined


def bounded_reference(
    aligned: Aligned,
    X: np.ndarray,
    metric: str,
    p: Params,
    start: float,
    span: float,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
    join_until: float | None = None,
) -> tuple[tuple[np.ndarray, float], np.ndarray, np.ndarray]:
    """:func:`node_reference` over ``[start, start + span)``, bounded where the catalog says
    (:func:`bounded_offsets`): ((offsets, peers' level), when each node joined, which nodes the
    bound left without an offset)."""
    ref, since = node_reference(X, aligned.times, metric, p, start, span, ignore, late, join_until)
    off, beyond = ref[0], np.zeros(len(aligned.nodes), bool)
    spec = spec_for(metric)
    bound = spec.offset_bound
    if p.bounded_offsets and p.scales and bound is not None:
        eligible = (
            busy_nodes(aligned, p, bound, start, span, ignore, late, join_until)
            if spec.busy_only
            else np.ones(len(aligned.nodes), bool)
        )
        if spec.bound_alike is not None and eligible is not None:
            eligible = eligible & alike_nodes(aligned, spec.bound_alike, start, span)
        off = bounded_offsets(ref[0], ref[1], bound, eligible)
        beyond = np.isnan(off) & ~np.isnan(ref[0])
    return (off, ref[1]), since, beyond


def window_reference(
    aligned: Aligned,
    X: np.ndarray,
    metric: str,
    p: Params,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
) -> tuple[tuple[np.ndarray, float], np.ndarray, np.ndarray]:
    """:func:`bounded_reference` taken from the window itself: ``p.baseline`` seconds after the
    warm-up (or ``p.reference_start``)."""
    start = aligned.times[0] + (p.warmup if p.reference_start < 0 else p.reference_start)
    until = aligned.times[0] + p.warmup + p.baseline
    return bounded_reference(aligned, X, metric, p, start, p.baseline, ignore, late, until)


def prepare(
    aligned: Aligned,
    metric: str,
    p: Params,
    ref: tuple[np.ndarray, float] | None = None,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
) -> tuple[list[np.ndarray], np.ndarray | None]:
    """The arrays the distances are taken on, and from when each node is judged (None: from
    the warm-up's end).

    :func:`series`, read against each node's reference (``p.baseline`` seconds after the
    warm-up, :func:`node_reference`; or ``ref`` = (offsets, level) taken elsewhere, e.g. at the
    job's start), each reading (:func:`corrected`) scaled (:func:`scale`).
    """
    X = series(aligned, metric, p)
    since = None
    spec = spec_for(metric)
    if ref is None and p.baseline > 0:
        ref, since, _ = window_reference(aligned, X, metric, p, ignore, late)
    # an error counter's rate is never a node's normal (``event_reference``), nor a counter's
    # counted by decades (a retransmit storm from the job's first minutes: the second review of
    # session 15); a latch counts from the window's first sample, so it has none to remove --
    # an event inside the reference span would otherwise be taken for the node's normal
    counts = spec.scale in COUNTING_SCALES or (spec.scale == "decades" and spec.kind == "counter")
    # nor is an indicator that counts only the window's events (a port already bouncing when
    # the window opens is no one's normal)
    own = p.scales and spec.counted_in_window is not None
    if ref is None or own or (p.scales and counts and not p.event_reference):
        return [scale(X, metric, p)], since
    lo = floor_of(metric, p) if p.gain and (not counts or not p.scales) else None
    return [scale(Y, metric, p) for Y in corrected(X, ref[0], ref[1], lo)], since


def judged_side(
    aligned: Aligned, metric: str, p: Params
) -> tuple[str | None, np.ndarray | bool, np.ndarray | bool]:
    """The side of its peers a fault puts a node on (catalog ``fault_side``; None: both, or
    ``one_sided_evidence`` off); where the node's reading is no evidence whatever its side
    (nodes x steps): for a ``busy_only`` metric, where its GPUs idle (:data:`IDLE_UTIL`) *or
    its utilisation is unknown* (a blank, a node without the series: it may be idle); and
    where the side is judged at all: nowhere in a job without utilisation, or with a node that
    has none in the window (another counters CSV) -- two-sided, as before round 18.

    The third review of session 15 found a released node with a blank utilisation its pair's
    only "candidate"; steps with any blank were judged two-sided then.  That made the pair's
    healthy node, blank one step in four, as far as the culprit at those steps on the SKU's
    own memory-clock scale -- both candidates, both dropped (session-16 review): a node's
    reading on the healthy side is no evidence whatever its utilisation, and on the fault
    side only where its GPUs are known to work.  A node without the series at all could be
    idle throughout; its peers' side zeroed would leave it its pair's only candidate."""
    spec = spec_for(metric)
    if not (p.one_sided_evidence and p.scales and spec.fault_side):
        return None, False, False
    if not spec.busy_only:
        return spec.fault_side, False, True
    if UTILISATION not in aligned.data:
        return None, False, False
    U = series(aligned, UTILISATION, p)
    with np.errstate(invalid="ignore"):
        if np.isnan(U).all(axis=1).any():
            return spec.fault_side, U <= IDLE_UTIL, False
        return spec.fault_side, ~(U > IDLE_UTIL), True


def _shifted(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``X`` (nodes x steps) moved ``k`` steps later and earlier, NaN where nothing moved in."""
    pad = np.full((X.shape[0], k), np.nan)
    return (
        np.concatenate([X[:, k:], pad], axis=1),
        np.concatenate([pad, X[:, :-k]], axis=1),
    )


def pair_gap(N: np.ndarray, lag: int = 0) -> np.ndarray:
    """A pair's squared distances each to the *other* node (the nearest of its readings within
    ``lag`` steps, as :func:`peer_deviation` allows for scrape offsets), not to the pair's
    median -- their mean, half the gap away.  NaN where the node has no reading or the other
    none within the lag: the pair's one peer unknown, neither near nor far (a median of the
    node's own reading alone read it as 0 -- session-16 review).  Only for a pair."""
    other = N[::-1]
    out = (N - other) ** 2
    for k in range(1, min(lag, N.shape[1] - 1) + 1):
        for shifted in _shifted(other, k):
            out = np.fmin(out, (N - shifted) ** 2)
    return np.minimum(out, 1.0)


def pair_other(N: np.ndarray, lag: int = 0) -> np.ndarray:
    """Per node of a pair, the other's reading at each step -- where it has none, its nearest
    within ``lag`` steps (NaN: none): the pair's one peer, for the side a node is on."""
    other = N[::-1].copy()
    for k in range(1, min(lag, N.shape[1] - 1) + 1):
        for shifted in _shifted(N[::-1], k):
            other = np.where(np.isnan(other), shifted, other)
    return other


def working_alone(aligned: Aligned, p: Params) -> np.ndarray | bool:
    """Nodes x steps: the node's GPUs work (utilisation above :data:`IDLE_UTIL`) while its
    peers' idle -- their median at or under it, in a pair the other node's; unknown (a blank)
    is neither -- for the first ``p.alone_span`` seconds of each such run seen to begin in
    the window (a blank does not end a run).  False without utilisation.

    In synchronous training the ranks wait for each other *on the GPU*: a peer blocked in a
    collective spins at full utilisation.  Peers whose GPUs idle are waiting elsewhere -- in
    a CPU barrier while rank 0 evaluates, samples or writes alone -- and the one node at work
    then is doing its role, not failing.  A node idle too (a fan failing through a job-wide
    pause) is not working alone: its heat stays evidence.  Nor is one busy past the span: a
    GPU hung in a kernel, the peers gone idle when their watchdog killed them.
    """
    if UTILISATION not in aligned.data:
        return False
    U = series(aligned, UTILISATION, p)
    if U.shape[0] < 2:
        return False
    peers = U[::-1] if U.shape[0] == 2 else peer_median(U)[None, :]
    with np.errstate(invalid="ignore"):
        alone = (U > IDLE_UTIL) & (peers <= IDLE_UTIL)
        broken = (U <= IDLE_UTIL) | (peers > IDLE_UTIL)  # known not alone: a run ends
    t = aligned.times
    for i in np.flatnonzero(alone.any(axis=1)):
        # each run's first alone step: the first after the last step known not alone; a run
        # the window opens on began before it, for how long is unknown (``watch`` reads ten
        # minutes): no excuse
        run = np.cumsum(broken[i])
        first = {}
        for j in np.flatnonzero(alone[i]):
            first.setdefault(run[j], t[j])
            if run[j] == 0 or t[j] - first[run[j]] >= p.alone_span:
                alone[i, j] = False
    return alone


def deviation(
    aligned: Aligned,
    metric: str,
    p: Params,
    ignore: np.ndarray | None = None,
    ref: tuple[np.ndarray, float] | None = None,
    late: np.ndarray | None = None,
    gone: np.ndarray | None = None,
    left: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """:func:`peer_deviation` of the metric, the smaller over the readings of :func:`prepare`;
    the judged steps; and from when each node is judged (None: all from the warm-up's end).

    ``gone``: :func:`machine_gone`, computed here when not given (``p.machine_absence``); an
    absence is evidence there and where the series :func:`ended` -- but where ``left`` (nodes
    x steps: the node is out of the job, :func:`replaced`)."""
    if p.machine_absence:
        machine = machine_gone(aligned, p.quorum) if gone is None else gone
        gone = absence_evidence(aligned, metric, machine)
        if left is not None:
            gone = gone & ~left
    else:
        gone = None
    dev, judged = None, None
    arrays, since = prepare(aligned, metric, p, ref, ignore, late)
    healthy = reference_statistic(metric, p) if spec_for(metric).hardware else None
    sided, idle, known = judged_side(aligned, metric, p)
    alone = p.working_alone and spec_for(metric).load_driven and working_alone(aligned, p)
    pair = p.pair_distance and len(aligned.nodes) == 2
    if pair:  # the node's own readings, uncorrected, against the other's nearest
        R = scale(series(aligned, metric, p), metric, p)
        raw_gap = R - pair_other(R, p.lag)
    for N in arrays:
        d, judged = peer_deviation(N, p.quorum, ignore, p.lag, gone)
        # the one side of its peers that is no fault (None: both may be), the side a fault
        # puts a node on (+1 above, -1 below) and the steps a pair is measured node to node
        benign, fault, versus = None, 1, True
        # the peers' typical reading: a pair's is the other node's (its median would be the
        # node's own reading wherever the other lost a scrape)
        gap = N - (pair_other(N, p.lag) if pair else peer_median(N)[None, :])
        if on_latch_scale(metric, p):
            # one-sided: a node that counted no event is never evidence, however many of its
            # peers did (a job-wide OOM leaves the spared nodes far from the median)
            benign = ~(np.nan_to_num(N) > 0.5)
        elif healthy is not None:
            # one-sided too: a hardware state on the healthy side of the peers' is no fault --
            # a port that came up mid-job, the one node a switch upgrade left at full speed,
            # a flapping indicator that fell back to 0 (session-13 review)
            benign = gap >= 0 if healthy == "max" else gap <= 0
            fault = -1 if healthy == "max" else 1
        elif sided is not None:
            # a physical reading whose other side is no machine's fault (catalog
            # ``fault_side``: rank 0 evaluating alone frees host memory its peers hold)
            benign = ((gap >= 0 if sided == "low" else gap <= 0) & known) | idle
            fault = -1 if sided == "low" else 1
            # node to node only on a pinned reading, and where the side is judged at all
            versus = known if spec_for(metric).pinned else False
        elif p.one_sided_evidence and p.scales and spec_for(metric).scale in HARDWARE_SCALES:
            # one-sided: on these scales high is the fault (an error rate, a hardware Xid, a
            # device lost, a NIC pausing); a node at or under its peers' median is none.  In a
            # two-node job the median is the pair's mean, and the clean node sits as far from
            # it as the culprit: both "candidates" of two, a job-wide state (corpus v12, seen:
            # a Xid 119 and a Xid 74 in two-node jobs missed)
            benign = gap <= 0
        if pair and benign is not None and versus is not False:
            # a pair's one peer is the other machine (:attr:`Params.pair_distance`) -- where
            # the node's own readings, uncorrected, put it on the fault's side of the other's:
            # a reference taken while the *other* was low would otherwise put the one that
            # never moved there once the other recovers (session-16 review)
            moved = fault * raw_gap > 0
            d = np.where(versus & moved & ~np.isnan(N), pair_gap(N, p.lag), d)
        if benign is not None:
            d = np.where(benign & ~np.isnan(d), 0.0, d)
        if alone is not False:
            # the node at work, above its peers; in a pair also the other, below the pair's
            # mean by as much (its one peer's phase, not its fault)
            excused = (gap > 0) & alone
            if N.shape[0] == 2:
                excused |= (gap < 0) & alone[::-1]
            d = np.where(excused & ~np.isnan(d), 0.0, d)
        dev = d if dev is None else np.minimum(dev, d)
    return dev, judged, since


def detect_metric(
    aligned: Aligned,
    metric: str,
    p: Params,
    ignore: np.ndarray | None = None,
    ref: tuple[np.ndarray, float] | None = None,
) -> tuple[list[Finding], int]:
    """Minder on one metric: the nodes that stay far from their peers for ``p.continuity``."""
    found, n, _ = _detect_metric(aligned, metric, p, ignore, ref)
    return found, n


def _detect_metric(
    aligned: Aligned,
    metric: str,
    p: Params,
    ignore: np.ndarray | None = None,
    ref: tuple[np.ndarray, float] | None = None,
    late: np.ndarray | None = None,
    gone: np.ndarray | None = None,
    left: np.ndarray | None = None,
) -> tuple[list[Finding], int, np.ndarray]:
    """:func:`detect_metric`, and its candidate windows (nodes x steps) for corroboration."""
    dev, judged, since = deviation(aligned, metric, p, ignore, ref, late, gone, left)
    if p.profiler_pause:
        blank = profiler_blank(aligned, metric)
        if blank is not None:
            dev = np.where(blank, 0.0, dev)
    step = aligned.step
    w = max(round(p.window / step), 1)
    if p.shared_links and spec_for(metric).switch_side:
        dev = np.where(shared_onsets(dev > p.threshold**2, w + p.lag), 0.0, dev)
    far_now = dev > p.threshold**2  # measured and far at the step: a lost scrape is not (NaN)
    dist = window_distance(dev, w)
    warm = aligned.times < aligned.times[0] + p.warmup
    dist[:, warm] = np.nan
    if since is not None:  # a late starter is judged once it joined (or the reference ended)
        dist[aligned.times[None, :] < since[:, None]] = np.nan
    ok = judged & ~warm & ~np.isnan(dist).all(axis=0)
    dist[:, ~ok] = np.nan
    c = candidates(dist, p.threshold, p.max_share)
    k = event_steps(metric, p, step)
    support = None
    if p.step_support and not on_events_scale(metric, p):
        support = far_now
    elif fresh_events(metric, p):
        # errors still arriving: the counter rose at this step (:attr:`Params.fresh_events`),
        # or its absence is the evidence (the series ended, the machine gone)
        C = aligned.data[metric]
        support = far_now & (rose_within(C, 1) | np.isnan(C))
    first = continuity(c, k, support)
    if p.recurrence and p.scales and spec_for(metric).recurs:
        far = far_now & ok[None, :] & ~np.isnan(dist)
        floor = spec_for(metric).episode_floor
        if floor is not None:
            with np.errstate(invalid="ignore"):
                far &= aligned.data[metric] >= floor
        again = recurrence(far, w, max(round(FLAP_WINDOW / step), 1))
        # a share of the job failing in episodes is a shared server timing its clients out in
        # turn (an NFS server overloaded), not each machine (session-13 review)
        failing = sustained(far, w).any(axis=1)  # nodes with an episode in the window
        recurring = np.full(again.shape, -1)
        if failing.sum() <= max(1, int(p.max_share * again.size)):
            # and two nodes recurring within the range are one cause (a rack on half its
            # power braking node after node at their load peaks; a server timing out a few
            # clients), never each machine: one node per range (session-14 review)
            kept = simultaneous_bound(again, aligned.times, FLAP_WINDOW, 1)
            recurring[kept] = again[kept]
        first = np.where((recurring >= 0) & ((first < 0) | (recurring < first)), recurring, first)
    out = []
    for i in simultaneous_bound(first, aligned.times, p.continuity, p.max_nodes):
        j = int(first[i])
        run = dist[i, j - k + 1 : j + 1]
        out.append(
            Finding(aligned.nodes[i], metric, float(aligned.times[j]), float(np.nanmax(run)))
        )
    return out, int(ok.sum()), c


def exporter_gone(aligned: Aligned, source: str) -> np.ndarray:
    """Nodes x steps where a node has no sample of any metric of ``source``'s exporter while a
    quorum of nodes has: the machine (or its exporter) stopped reporting -- local evidence."""
    same = [X for m, X in aligned.data.items() if spec_for(m).source == source]
    if not same:
        return np.zeros((len(aligned.nodes), aligned.times.size), bool)
    present = np.logical_or.reduce([~np.isnan(X) for X in same])
    return ~present & (present.mean(axis=0) >= 0.5)[None, :]


def sustained(mask: np.ndarray, k: int) -> np.ndarray:
    """Where ``mask`` has held for at least ``k`` steps in a row (nodes x steps)."""
    n, T = mask.shape
    idx = np.arange(T)[None, :].repeat(n, axis=0)
    last_false = np.maximum.accumulate(np.where(~mask, idx, -1), axis=1)
    return (idx - last_false) >= k


def measured_support(c: np.ndarray, X: np.ndarray, w: int) -> np.ndarray:
    """A local metric's candidate windows (``c``) in which the node has every sample of ``X``
    over the window's ``w`` steps: a measured difference, not a gap.

    A lost scrape blanks *every* series of that exporter on that node for a step; the distance
    then reads the absence as far from the peers on all of them at once, and one such window
    was corroborating coupled dips (v3, seen: IB bytes in checkpoint pauses, power and PCIe TX
    beside another node's fault).  A machine that really stopped reporting is
    :func:`exporter_gone` for the continuity instead.
    """
    gap = np.isnan(X).astype(float)
    if w > 1:
        cs = np.cumsum(np.pad(gap, ((0, 0), (1, 0))), axis=1)
        lo = np.maximum(np.arange(1, X.shape[1] + 1) - w, 0)
        gap = cs[:, 1:] - cs[:, lo]
    return c & (gap == 0)


def corroborated(
    finding: Finding,
    row: int,
    support: np.ndarray,
    times: np.ndarray,
    period: float,
    after: bool = False,
) -> Finding | None:
    """A finding on a *coupled* metric, kept if the node's local evidence (``support``: its
    windows as a candidate on a local metric, or with its exporter gone) shows within ``period``
    of it, before or after -- one fault's symptoms are concurrent, a local blip half an hour
    later is another matter; dated when both hold (None: not corroborated).

    A synchronous job's throughputs (power, tensor duty, PCIe/NVLink/IB bytes) move together on
    every node: a late starter's peers wait for it, a job-wide slowdown, a profiler pause, one
    rack's cooling all move them on some node without a fault of that node's.  Minder's premise
    is that a faulty machine's *own* metrics differ; a throughput alone says the job is slower,
    not where.  A slow GPU also runs hot or clocks down, a dying link logs errors, a lost
    machine stops reporting: a real fault shows on a local series too.
    """
    if after:  # evidence that stands only from some time on: then, or any time later
        near = times >= finding.first_detected - period
    else:
        near = np.abs(times - finding.first_detected) <= period
    at = np.flatnonzero(support[row] & near)
    if at.size == 0:
        return None
    t = max(finding.first_detected, float(times[at[0]]))
    return replace(finding, first_detected=t)


#: The utilisation series that says a node's GPUs are working, and the level (percent) at or
#: under which the busiest-lowest GPU of a node counts as idle (DCGM's GPU_UTIL is the share of
#: time a kernel ran; an idle GPU reads 0, a monitoring poll a few percent).
UTILISATION = "DCGM_FI_DEV_GPU_UTIL"
IDLE_UTIL = 5.0


def job_running(aligned: Aligned, p: Params, at_least: bool = False) -> np.ndarray:
    """Per step: the job runs at its typical level -- most of the coupled throughputs (power,
    tensor duty, link bytes) with a peers' median at that step are :func:`steady_steps` (one
    may be bursty by nature: PCIe bytes of a job that stages data in spurts).  False where none
    has data: a step nobody measured is not evidence that the job ran."""
    T = aligned.times.size
    steady = np.zeros(T)
    seen = np.zeros(T)
    for m in aligned.data:
        spec = spec_for(m)
        if spec.evidence != "coupled":
            continue
        X = series(aligned, m, p)
        has = ~np.isnan(peer_median(X))
        steady += steady_steps(X, spec.lo, at_least) & has
        seen += has
    return (seen > 0) & (steady > seen / 2)


def first_run(running: np.ndarray, k: int) -> int | None:
    """The first step at which the job runs at its level (:func:`job_running`) and does so for
    at least half of the ``k`` steps from there on; None if it never does."""
    T = running.size
    if k > T or k < 1:
        return None
    share = np.convolve(running.astype(float), np.ones(k), "valid") / k  # over [s, s + k)
    ok = running[: share.size] & (share >= 0.5)
    return int(ok.argmax()) if ok.any() else None


def opens_mid_job(running: np.ndarray, times: np.ndarray, span: float) -> bool:
    """Whether the window opens with the job already at its level: it runs (:func:`job_running`)
    at most of the steps of the window's first ``span`` seconds."""
    first = times < times[0] + span
    return bool(first.any() and running[first].mean() > 0.5)


def utilisation(aligned: Aligned, p: Params) -> np.ndarray | None:
    """The nodes' lowest GPU utilisation (:func:`series` of :data:`UTILISATION`), which the
    membership rules read (:func:`late_joins`, :func:`departure_mask`); None when they are off
    or the table has no utilisation."""
    if not p.departure or UTILISATION not in aligned.data:
        return None
    return series(aligned, UTILISATION, p)


def late_joins(
    util: np.ndarray | None, running: np.ndarray, times: np.ndarray, k: int
) -> np.ndarray | None:
    """Per node, when it joined the job after waiting outside it (``inf``: it did not): its
    GPUs idle (:data:`IDLE_UTIL`) for ``k`` steps (a continuity period) while the job ran at
    its level (``running``, :func:`job_running`), before they first worked -- an elastic job
    taking a node in mid-run, or a node that started long after its peers.  (A node the job
    waits for holds everybody up: the job does not run at its level meanwhile.)  ``util``:
    :func:`utilisation` (None: so is the answer)."""
    if util is None:
        return None
    out = np.full(util.shape[0], np.inf)
    with np.errstate(invalid="ignore"):
        busy = util > IDLE_UTIL
        waiting = (util <= IDLE_UTIL) & ~np.maximum.accumulate(busy, axis=1) & running[None, :]
    for i in np.flatnonzero(sustained(waiting, k).any(axis=1) & busy.any(axis=1)):
        out[i] = times[int(busy[i].argmax())]
    return out


def departure_mask(util: np.ndarray | None, running: np.ndarray, n: int) -> np.ndarray:
    """Nodes x steps at which a node is out of the job: its lowest GPU utilisation
    (:func:`utilisation`) is idle (:data:`IDLE_UTIL`) while the job runs at its level
    (``running``, :func:`job_running`), after the node had worked (a GPU idle by design or a
    late starter never left anything); none of ``n`` nodes without ``util``.

    In a synchronous job a node that stops working stops everybody: the peers wait in NCCL and
    the job's throughput collapses.  A job that goes on at its level without the node no longer
    needs it -- an elastic job released it (or restarted without it); whatever slows the job,
    it is not that node.
    """
    if util is None:
        return np.zeros((n, running.size), bool)
    with np.errstate(invalid="ignore"):
        idle = util <= IDLE_UTIL
        worked = np.maximum.accumulate(util > IDLE_UTIL, axis=1)
    return idle & worked & running[None, :]


def departed_at(mask: np.ndarray, times: np.ndarray, k: int) -> dict[int, float]:
    """Row -> when the node left: the start of its first :func:`departure_mask` run that lasts
    ``k`` steps (the continuity) -- a blip of idleness is not leaving."""
    out: dict[int, float] = {}
    held = sustained(mask, k)
    for i in np.flatnonzero(held.any(axis=1)):
        j = int(held[i].argmax())
        start = j
        while start > 0 and mask[i, start - 1]:
            start -= 1
        out[int(i)] = float(times[start])
    return out


def explained_by_departure(f: Finding, row: int, held: np.ndarray, times: np.ndarray) -> bool:
    """A finding on a level metric (not an Xid, a lost device or an error burst, which stay
    hardware evidence; one the job can cause is not) made while its node was out of the job
    (``held``: the :func:`departure_mask` held for the whole window before the step)."""
    counted = spec_for(f.metric).scale in ("xid", "devices", *COUNTING_SCALES)
    if counted and not job_can_cause(f.metric):
        return False
    j = int(np.searchsorted(times, f.first_detected))
    return j < times.size and bool(held[row, j])


def idle_since(util: np.ndarray, times: np.ndarray, k: int) -> np.ndarray:
    """Per node, when its GPUs went idle for good after having worked (epoch seconds; ``inf``:
    they did not): the first step of the last run of idle steps (:data:`IDLE_UTIL`) that
    lasts ``k`` steps and reaches the window's end, lost scrapes carried over."""
    n, T = util.shape
    out = np.full(n, np.inf)
    with np.errstate(invalid="ignore"):
        idle = np.where(np.isnan(util), True, util <= IDLE_UTIL)
        worked = np.maximum.accumulate(util > IDLE_UTIL, axis=1)
    for i in range(n):
        if not worked[i].any() or not idle[i, -1]:
            continue
        busy = np.flatnonzero(~idle[i])
        start = int(busy[-1]) + 1 if busy.size else 0
        if T - start >= k and not np.isnan(util[i, start:]).all():
            out[i] = times[start]
    return out


def collateral_of(
    best: dict[str, Finding],
    per_metric: dict[str, list[Finding]],
    idle_at: dict[str, float],
    p: Params,
) -> dict[str, tuple[float, str]]:
    """The nodes whose findings only say that their GPUs went idle together with another
    node's *hardware* fault: node -> (when it went idle, that node).

    When one rank dies, the ranks connected to it directly error out at once (NCCL's
    connections to it fail) while the rest hang until the watchdog: several nodes' GPUs go
    idle at nearly the same time, and only the one whose hardware speaks (a port down, a
    hardware Xid, a lost GPU, an error counter; catalog ``is_hardware``) is the fault.  A node
    is collateral when it has no hardware finding, its first finding comes once its GPUs went
    idle for good (``idle_at``, :func:`idle_since`), and that happened between a window before
    the other node's fault began (its hardware finding less the continuity and the rate
    window) and a continuity after that finding.  A node that slowed before it stopped, or
    that carries evidence of its own, stays faulty.
    """
    hardware: dict[str, float] = {}
    for m, found in per_metric.items():
        if is_hardware(spec_for(m)):
            for f in found:
                hardware[f.node] = min(hardware.get(f.node, np.inf), f.first_detected)
    out: dict[str, tuple[float, str]] = {}
    for node, f in best.items():
        t = idle_at.get(node, np.inf)
        if node in hardware or not np.isfinite(t) or f.first_detected < t:
            continue
        for other, h in sorted(hardware.items(), key=lambda kv: kv[1]):
            began = h - p.continuity - p.rate_window
            if other != node and began - p.window <= t <= h + p.continuity:
                out[node] = (float(t), other)
                break
    return out


def _reported_before(f: Finding, other: Finding) -> bool:
    """Whether ``f`` is the node's finding to report rather than ``other``: the earlier, but
    any finding the job cannot cause before one it can (a disk found stalling, then failing,
    is reported -- and drained -- on its failure), and a verdict before a finding with a
    caveat (corrected errors, then a double-bit error: the second review of session 15)."""

    def rank(g: Finding) -> tuple[bool, bool, float]:
        return bool(job_can_cause(g.metric)), g.caveat is not None, g.first_detected

    return rank(f) < rank(other)


def detect(
    aligned: Aligned,
    priority: list[str],
    p: Params | None = None,
    offsets: dict[str, dict] | None = None,
) -> Result:
    """Run Minder over the metrics in ``priority`` order that the data has.

    Each node is reported once: at its earliest detection; on a tie, the higher-priority metric;
    a finding the job can cause (catalog ``job_can_cause``) only when the node has no other.
    ``offsets`` (metric -> ``{"level", "offsets": {node: offset}}``, from :func:`job_reference`)
    replaces the per-node reference taken from the window's own start, for a window that no
    longer holds the job's.  With ``p.corroborate``, a finding on a coupled metric stands only
    with local evidence of the same node (:func:`corroborated`).
    """
    p = p or Params()
    metrics = [m for m in priority if m in aligned.data]
    if not p.device_evidence:
        metrics = [m for m in metrics if spec_for(m).scale not in ("xid", "devices")]
    per_metric: dict[str, list[Finding]] = {}
    windows = 0
    never = never_exported(aligned)
    local = np.zeros((len(aligned.nodes), aligned.times.size), bool)
    lasting = np.zeros_like(local)
    T = aligned.times.size
    # steps in a continuity and in a window (the warm-up may change below, these do not)
    k_cont = max(round(p.continuity / aligned.step), 1)
    w_steps = max(round(p.window / aligned.step), 1)
    util = utilisation(aligned, p)
    # whether the job runs at its level, per step: only what the membership rules and the
    # automatic reference start read
    needed = util is not None or p.reference_start < 0
    running = job_running(aligned, p) if needed else np.zeros(T, bool)
    late = late_joins(util, running, aligned.times, k_cont)
    if p.reference_start < 0:
        mid = opens_mid_job(running, aligned.times, 2 * p.window)
        p = replace(p, reference_start=0.0 if mid else p.warmup)
        # a launch: the window opens in the job's warm-up (``watch`` sets it to 0 for a window
        # past it); the job first runs at its level where it does so for most of the next
        # continuity (a checkpoint pause is no stop, a single steady step no start)
        # (at or *above* its typical level: a fault that slowed the job early makes the slowed
        # level the typical one, and the job ran faster before it)
        first = None
        if not mid and p.launch_wait and p.warmup > 0:
            first = first_run(job_running(aligned, p, at_least=True), k_cont)
        if first is not None:
            ran = float(aligned.times[first] - aligned.times[0])
            if ran > p.warmup:
                p = replace(p, warmup=ran, reference_start=ran)
    machine = machine_gone(aligned, p.quorum) if p.machine_absence else None
    swapped = replaced(aligned, k_cont) if p.departure and p.replacements else {}
    left = None
    if swapped:  # a node replaced is out of the job from its last sample, not gone
        left = np.zeros((len(aligned.nodes), aligned.times.size), bool)
        for i, t in swapped.items():
            left[i, aligned.times > t] = True
        if machine is not None:
            machine &= ~left
        # and the nodes that began reporting mid-window are judged from then, as late joiners
        first = reporting(aligned).argmax(axis=1)
        newcomers = first >= k_cont
        late = np.full(len(aligned.nodes), np.inf) if late is None else late.copy()
        late[newcomers] = np.minimum(late[newcomers], aligned.times[first[newcomers]])
    if machine is not None and p.shared_links:
        # several machines silent from the same minute, and back, are the path between them
        # and Prometheus (a management switch reloading), not each machine
        machine &= ~shared_onsets(machine, w_steps + p.lag)
    for m in metrics:
        ref = None
        if offsets is not None and p.baseline > 0:
            r = offsets.get(m) or {}
            node_off = r.get("offsets", {})
            ref = (
                np.array([node_off.get(n, np.nan) for n in aligned.nodes], dtype=float),
                float(r.get("level", np.nan)),
            )
        found, n, c = _detect_metric(aligned, m, p, never.get(m), ref, late, machine, left)
        found = with_caveats(found, aligned, m, p, offsets, never.get(m), late)
        windows = max(windows, n)
        per_metric[m] = found
        # what the job can cause on its node by itself (a checkpoint writer's I/O stall) says
        # nothing of the node's own state while it lasts as a job's phase would: it
        # corroborates another finding only once it has lasted the flapping range, which no
        # save does -- a process the previous job left behind does (session-13 review)
        if spec_for(m).evidence == "local":
            if p.measured_evidence:
                c = measured_support(c, aligned.data[m], w_steps)
            if not job_can_cause(m):
                local |= c
            elif p.lasting_support:
                lasting |= sustained(c, max(round(FLAP_WINDOW / aligned.step), 1))
    if p.corroborate:
        row = {node: i for i, node in enumerate(aligned.nodes)}
        gone = {src: exporter_gone(aligned, src) for src in {spec_for(m).source for m in metrics}}
        if machine is not None:  # an exporter that answers again: lost scrapes, no evidence
            gone = {src: g & (machine | ended(np.where(g, np.nan, 1.0))) for src, g in gone.items()}
        for g in gone.values():  # nor is a node the job replaced
            g[list(swapped)] = False
        if p.measured_evidence:
            gone = {src: sustained(g, k_cont) for src, g in gone.items()}
        for m in metrics:
            spec = spec_for(m)
            if spec.evidence != "coupled":
                continue
            support = local | gone[spec.source]
            kept = [
                corroborated(f, row[f.node], support, aligned.times, p.continuity)
                or corroborated(f, row[f.node], lasting, aligned.times, p.continuity, after=True)
                for f in per_metric[m]
            ]
            per_metric[m] = [f for f in kept if f is not None]
    row = {node: i for i, node in enumerate(aligned.nodes)}
    out_of_job = departure_mask(util, running, len(aligned.nodes))
    departed = {
        aligned.nodes[i]: t
        for i, t in (departed_at(out_of_job, aligned.times, k_cont) | swapped).items()
    }
    if left is not None:  # from its last sample a replaced node is out of the job
        out_of_job |= left
    held = sustained(out_of_job, w_steps)
    best: dict[str, Finding] = {}
    for m in metrics:
        per_metric[m] = [
            f
            for f in per_metric[m]
            if not explained_by_departure(f, row[f.node], held, aligned.times)
        ]
        for f in per_metric[m]:
            if f.node not in best or _reported_before(f, best[f.node]):
                best[f.node] = f
    coll: dict[str, tuple[float, str]] = {}
    if p.collateral and util is not None:
        idle = idle_since(util, aligned.times, w_steps)
        idle_at = {aligned.nodes[i]: float(t) for i, t in enumerate(idle) if np.isfinite(t)}
        coll = collateral_of(best, per_metric, idle_at, p)
    faulty = sorted(
        (f for f in best.values() if f.node not in coll), key=lambda f: (f.first_detected, f.node)
    )
    return Result(faulty, windows, per_metric, departed, coll)


def with_caveats(
    found: list[Finding],
    aligned: Aligned,
    metric: str,
    p: Params,
    offsets: dict[str, dict] | None,
    ignore: np.ndarray | None = None,
    late: np.ndarray | None = None,
) -> list[Finding]:
    """The metric's findings with their caveats (:attr:`Finding.caveat`): the catalog's, and
    the bound's for a node judged without its offset because of it -- read from the stored
    reference (``offsets``, its ``"beyond"``) or taken as :func:`prepare` took it."""
    if not found:
        return found
    why = caveat(metric)
    spec = spec_for(metric)
    if why is None and p.bounded_offsets and p.scales and (spec.offset_bound or spec.pinned):
        if offsets is not None and p.baseline > 0:
            # watch: a node missing from the stored offsets is alerted by watch itself
            beyond = set((offsets.get(metric) or {}).get("beyond", []))
            unreferenced: set[str] = set()
        elif p.baseline > 0:
            X = series(aligned, metric, p)
            (off, _), _, mask = window_reference(aligned, X, metric, p, ignore, late)
            beyond = {n for n, b in zip(aligned.nodes, mask, strict=True) if b}
            # a reading that depends on the GPU model or the fabric, judged without the
            # node's own reference (it reported only after the reference span): another
            # model's clock reads like a fault (session-16 review: an A100 40GB's memory
            # clock 24 % under its A100 80GB peers')
            none = np.isnan(off) & ~mask
            unreferenced = {n for n, b in zip(aligned.nodes, none, strict=True) if b}
        else:
            beyond, unreferenced = set(), set()
        return [
            replace(f, caveat=BOUND_CAVEAT)
            if f.node in beyond
            else replace(f, caveat=NO_REFERENCE_CAVEAT)
            if f.node in unreferenced
            else f
            for f in found
        ]
    return [replace(f, caveat=why) for f in found] if why else found


def job_reference(aligned: Aligned, metrics: list[str], p: Params) -> dict[str, dict]:
    """Each node's reference per metric, from a window that *is* the reference span (``watch``
    queries the job's ``[start + warmup, start + warmup + baseline]`` once per job):
    ``{metric: {"level": peers' level, "offsets": {node: offset}, "beyond": [node, ...]}}``,
    JSON-ready (``beyond``, where any: the nodes the bound left without an offset,
    :func:`bounded_offsets`).

    Nodes without a sample in it are left out (judged uncorrected).
    """
    out: dict[str, dict] = {}
    for m in metrics:
        if m not in aligned.data:
            continue
        X = series(aligned, m, p)
        (off, level), _, dropped = bounded_reference(aligned, X, m, p, aligned.times[0], np.inf)
        beyond = [n for n, b in zip(aligned.nodes, dropped, strict=True) if b]
        out[m] = {
            "level": float(f"{level:.6g}") if np.isfinite(level) else None,
            # 6 significant digits: a 1,024-node job's reference stays ~300 kB in the state file
            "offsets": {
                n: float(f"{v:.6g}")
                for n, v in zip(aligned.nodes, off, strict=True)
                if np.isfinite(v)
            },
        }
        if beyond:
            out[m]["beyond"] = beyond
    return out


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
                best[aligned.nodes[i]] = Finding(aligned.nodes[i], m, t, 2.0, caveat(m))
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
                best[aligned.nodes[i]] = Finding(aligned.nodes[i], m, t, float(z), caveat(m))
    return Result(sorted(best.values(), key=lambda f: (f.first_detected, f.node)), windows)
