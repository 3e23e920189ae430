"""Round 11 (designed from NVML's and dcgm-exporter's sources before corpus v9 was read; the
two v8 misses it answers are named in docs/minder.md): a hardware state read through the gaps
of an exporter that crash-loops, and the GPUs' hardware-slowdown reasons."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.metrics.align import Aligned, align
from aegis_slurm.metrics.catalog import GPU_COUNT, HW_SLOWDOWN, HW_SLOWDOWN_BITS, spec_for
from aegis_slurm.metrics.detect import (
    Params,
    detect,
    held_across_gaps,
    holds_state,
    series,
)

from .blind_eval import hw_slowdown_share
from .test_real_exposition import raw_frame, served_and_fetched

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(160)  # 40 min
NODES = [f"n{i}" for i in range(8)]
TEMP = "DCGM_FI_DEV_GPU_TEMP"
BLANK = 9223372036854775794.0  # DCGM's INT64 NOT_SUPPORTED, as dcgm-exporter's README shows it
FIX = Path(__file__).parents[1] / "fixtures" / "metrics"


def test_a_state_is_held_only_between_two_samples_that_agree() -> None:
    nan = np.nan
    X = np.array(
        [
            [8, nan, nan, 8, 7, nan, 7, nan],  # 8..8 and 7..7 held; the trailing gap stays
            [nan, 8, nan, 7, nan, nan, nan, 8],  # the leading gap and 8..7 and 7..8 stay gaps
        ]
    )
    got = held_across_gaps(X)
    want = np.array([[8, 8, 8, 8, 7, 7, 7, nan], [nan, 8, nan, 7, nan, nan, nan, 8]], dtype=float)
    np.testing.assert_array_equal(got, want)


def _crash_loop(lost_gpu: bool) -> Aligned:
    """n5's dcgm-exporter crash-loops from minute 15: it answers for 1 minute in every 4
    (its node_exporter answers throughout), each time one GPU short if ``lost_gpu``."""
    n, T = len(NODES), TIMES.size
    count = np.full((n, T), 8.0)
    temp = np.full((n, T), 65.0) + np.arange(n)[:, None] * 0.3
    load = np.full((n, T), 12.0)
    start = 60
    for k in range(start, T):
        if (k - start) % 16 >= 4:  # down 3 minutes of every 4
            count[5, k] = temp[5, k] = np.nan
        elif lost_gpu:
            count[5, k] = 7.0
    data = {GPU_COUNT: count, TEMP: temp, "node_load1": load}
    return Aligned(TIMES, NODES, data, STEP)


def test_a_crash_looping_exporter_short_of_a_gpu_is_a_lost_gpu() -> None:
    a = _crash_loop(lost_gpu=True)
    pri = [GPU_COUNT, TEMP, "node_load1"]
    r = detect(a, pri, Params())
    assert [(f.node, f.metric) for f in r.faulty] == [("n5", GPU_COUNT)]
    assert r.faulty[0].first_detected <= TIMES[60] + 8 * 60  # within its second answer
    # before round 11 the answers, a minute each, never made the 4-minute continuity
    assert detect(a, pri, Params(held_state=False)).faulty == []


def test_an_exporter_that_times_out_with_every_gpu_is_no_fault() -> None:
    # the same gaps with all eight GPUs in every answer (scrapes timing out, an exporter
    # restarting): nothing held is away from the peers
    r = detect(_crash_loop(lost_gpu=False), [GPU_COUNT, TEMP, "node_load1"], Params())
    assert r.faulty == []


def test_a_counter_is_never_held_across_a_gap() -> None:
    assert spec_for("DCGM_FI_DEV_PCIE_REPLAY_COUNTER").kind == "counter"
    p = Params()
    assert holds_state(GPU_COUNT, p) and holds_state(HW_SLOWDOWN, p)
    assert holds_state("node_infiniband_state_id", p)
    assert not holds_state("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", p)
    assert not holds_state("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", p)  # a latch counter
    assert not holds_state("DCGM_FI_DEV_SM_CLOCK", p)  # a reading, not a state
    assert not holds_state(GPU_COUNT, Params(held_state=False))


def _reasons(t0: float) -> tuple[list[str], pl.DataFrame]:
    """Clock-event reasons of four hosts, two GPUs each, every 15 s for 10 minutes, as
    OpenMetrics and as the raw long frame the corpora hold.

    hostA: SW power cap + idle (0x5) and SW thermal (0x20): the driver pacing, no hardware
    slowdown.  hostB: from minute 5 its GPU 0 power-brakes (0x80 | 0x8) two scrapes in four.
    hostC: GPU 0 reads DCGM's blank, GPU 1 idles (0x1).  hostD, on the name before DCGM's
    rename, CLOCK_THROTTLE_REASONS: from minute 5 its GPU 1 is in HW thermal slowdown (0x40).
    """
    new, old = "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"
    lines = [f"# TYPE {new} gauge", f"# TYPE {old} gauge"]
    rows = []
    for k in range(41):
        t = t0 + 15 * k
        late = k >= 20
        values = {
            "hostA": (new, 0x5, 0x20),
            "hostB": (new, 0x88 if late and k % 4 < 2 else 0x4, 0x4),
            "hostC": (new, BLANK, 0x1),
            "hostD": (old, 0x4, 0x44 if late else 0x4),
        }
        for host, (name, *per_gpu) in values.items():
            for gpu, v in enumerate(per_gpu):
                lab = f'gpu="{gpu}",Hostname="{host}",instance="{host}:9400"'
                lines.append(f"{name}{{{lab}}} {v:.0f} {t:.3f}")
                when = datetime.fromtimestamp(t, UTC)
                rows.append((when, host, name, str(gpu), float(v)))
    return lines, raw_frame(rows)


def test_hardware_slowdown_share_through_a_real_prometheus(tmp_path: Path) -> None:
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.skip("Debian's prometheus package is not installed (tools/install-test-deps.sh)")
    t0 = (time.time() // 3600 - 2) * 3600
    lines, raw = _reasons(t0)
    nodes = ["hostA", "hostB", "hostC", "hostD"]
    df = served_and_fetched(tmp_path, lines, nodes, t0, [spec_for(HW_SLOWDOWN)])
    al = align(df, step=15.0)
    share = al.data[HW_SLOWDOWN]
    a, b, c, d = (al.nodes.index(n) for n in nodes)
    before, after = al.times < t0 + 300, al.times >= t0 + 300 + 75
    assert np.all(share[a] == 0) and np.all(share[c] == 0)  # pacing, a blank: no slowdown
    assert np.all(share[b, before] == 0) and np.all(share[d, before] == 0)
    assert np.all((share[b, after] >= 0.3) & (share[b, after] <= 0.7))  # its duty, ~1/2
    assert np.all(share[d, after] == 1)
    # the corpora's scorer models the same PromQL (tests/metrics/blind_eval.py)
    off = hw_slowdown_share(raw, 60.0)
    for node, i in (("hostB", b), ("hostD", d), ("hostA", a), ("hostC", c)):
        mine = off.filter(pl.col("node") == node).sort("time")
        secs = mine["time"].dt.epoch("ms").to_numpy() / 1000
        at = np.searchsorted(secs, al.times)
        ok = (at < secs.size) & (secs[np.minimum(at, secs.size - 1)] == al.times)
        got = mine["value"].to_numpy()[at[ok]]
        assert np.all(np.abs(got - share[i, ok]) <= 0.25), node


def test_a_braking_gpu_is_found_on_its_slowdown_share() -> None:
    # the share the PromQL gives, on a job: n2's board brakes its GPUs from minute 15
    n, T = len(NODES), TIMES.size
    share = np.zeros((n, T))
    share[2, 60:] = np.where(np.arange(T - 60) % 8 < 3, 0.5, 0.25)
    share[6, 100] = 0.2  # one scrape's P-state change on another node: no fault
    r = detect(Aligned(TIMES, NODES, {HW_SLOWDOWN: share}, STEP), [HW_SLOWDOWN], Params())
    assert [f.node for f in r.faulty] == ["n2"]
    assert TIMES[60] < r.faulty[0].first_detected <= TIMES[60] + 5 * 60


def test_the_hardware_bits_are_dcgms_masks() -> None:
    # DCGM's API reference: the masks of DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (1:1 NVML's)
    masks = {}
    for line in (FIX / "dcgm-clock-throttle-reason-masks.txt").read_text().splitlines():
        name, value = line.split()
        masks[name.removeprefix("DCGM_CLOCKS_THROTTLE_REASON_")] = int(value.rstrip("L"), 16)
    hardware = ("HW_SLOWDOWN", "HW_THERMAL", "HW_POWER_BRAKE")
    assert tuple(masks[n] for n in hardware) == HW_SLOWDOWN_BITS
    pacing = (masks["SW_POWER_CAP"], masks["SW_THERMAL"], masks["GPU_IDLE"], masks["SYNC_BOOST"])
    assert not set(pacing) & set(HW_SLOWDOWN_BITS)


def test_a_machine_that_answered_nothing_is_not_held() -> None:
    # n5 reboots: neither exporter answers for 6 minutes, then it is back with all its GPUs.
    # Its absence is the evidence (a machine gone), not a count that held through it
    n, T = len(NODES), TIMES.size
    count = np.full((n, T), 8.0)
    load = np.full((n, T), 12.0)
    count[5, 80:104] = load[5, 80:104] = np.nan
    a = Aligned(TIMES, NODES, {GPU_COUNT: count, "node_load1": load}, STEP)
    held = series(a, GPU_COUNT, Params())
    assert np.isnan(held[5, 80:104]).all()
    r = detect(a, [GPU_COUNT, "node_load1"], Params())
    assert [f.node for f in r.faulty] == ["n5"]
    # the same gap with node_exporter answering: the dcgm-exporter alone is down, the count held
    load[5, 80:104] = 12.0
    assert not np.isnan(series(a, GPU_COUNT, Params())[5, 80:104]).any()
