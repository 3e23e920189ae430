"""minder.toml validation, Slurm job windows, and the simulator's modelling promises."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from aegis_slurm.errors import ConfigError, InputError, NoDataError
from aegis_slurm.metrics.config import load_config
from aegis_slurm.metrics.slurmjob import from_args, parse_sacct_line, pick_sacct_line
from aegis_slurm.simulate.metrics import simulate_job


def test_config_types_and_unknown_keys(tmp_path: Path) -> None:
    p = tmp_path / "m.toml"
    p.write_text(
        '[prometheus]\nnode_value = "{node}.ib:9100"\ntimeout = 5\n'
        "[detector]\nthreshold = 0.2\n[watch]\ndrain = true\n[watch.guard]\nmax_drained_nodes = 2\n"
    )
    cfg = load_config(p)
    assert cfg.prom("http://p:9090").node_value == "{node}.ib:9100"
    assert cfg.prom("http://p:9090").timeout == 5.0
    assert cfg.detector.threshold == 0.2 and cfg.watch.drain is True
    assert cfg.watch.guard["max_drained_nodes"] == 2 and cfg.watch.guard["window_minutes"] == 60
    # the evidence mechanisms are [detector] keys like any other (docs/minder.md, "Evidence")
    p.write_text(
        "[detector]\nburst_alpha = 0\nprofiler_pause = false\ncorroborate = false\n"
        "device_evidence = false\nevent_continuity = false\nmeasured_evidence = false\n"
    )
    d = load_config(p).detector
    assert d.burst_alpha == 0.0 and not (d.profiler_pause or d.corroborate or d.device_evidence)
    assert not (d.event_continuity or d.measured_evidence)
    for text, msg in (
        ("[detector]\nthreshold = 'high'\n", "threshold must be float"),
        ("[watch]\ndrain = 1\n", "drain must be bool"),
        ("[prometheus]\nnode_value = 'x:9100'\n", "must contain {node}"),
        ("[alerts]\n", "unknown section"),
        ("[watch.guard]\nmax = 1\n", "watch.guard"),
        ("[detector]\ncorroborate = 0\n", "corroborate must be bool"),
        ("[detector]\nburst = 0.01\n", "unknown key 'burst'"),
        ("[watch]\ninterval = 0\n", "interval must be > 0"),
        ("[watch]\nlookback = -60\n", "lookback must be > 0"),
        ("[watch]\nmin_nodes = 1\n", "min_nodes must be >= 2"),
    ):
        p.write_text(text)
        with pytest.raises(ConfigError, match=msg):
            load_config(p)


def test_job_windows() -> None:
    w = parse_sacct_line("7", "node[1-3]|2026-01-05T08:00:00|Unknown", now=2e9)
    assert w.nodes == ["node1", "node2", "node3"] and w.end == 2e9
    with pytest.raises(NoDataError, match="has not started"):
        parse_sacct_line("7", "None assigned|Unknown|Unknown", now=2e9)
    w = from_args("7", "gpu[01-02]", "2026-01-05T08:00:00Z", "2026-01-05T09:00:00Z")
    assert w.end - w.start == 3600 and w.nodes == ["gpu01", "gpu02"]
    with pytest.raises(InputError, match="after"):
        from_args("7", "gpu01", "2026-01-05T09:00:00Z", "2026-01-05T08:00:00Z")


def test_the_job_window_is_the_allocation_named() -> None:
    # recorded on the testbed: an array (49) and a het job (50), tests/fixtures/sacct/README.md
    recorded = Path(__file__).parents[1] / "fixtures" / "sacct"
    out = (recorded / "sacct-22.05.8_array_het_window.txt").read_text()
    assert pick_sacct_line("49_1", out).startswith("node1|")
    assert pick_sacct_line("52", out).startswith("node1|")  # task 49_1 by its own id
    assert pick_sacct_line("50+1", out).startswith("node[2-3]|")
    for whole, first in (("49", "49_1"), ("50", "50+0")):  # not the line whose JobIDRaw it is
        with pytest.raises(InputError, match=r"of 2 allocations .* name one of them") as e:
            pick_sacct_line(whole, out)
        assert first in str(e.value)
    with pytest.raises(NoDataError, match="knows no job 77"):
        pick_sacct_line("77", out)
    single = "60|60_3|node4|2026-11-27T12:00:00|Unknown\n"  # sacct -j 60: one task left
    assert pick_sacct_line("60", single).startswith("node4|")


def wide(df: pl.DataFrame, metric: str) -> pl.DataFrame:
    return df.filter(pl.col("metric") == metric)


def test_simulator_is_deterministic_and_shaped_like_exporters() -> None:
    a, ta = simulate_job(8, 30, "nvlink", seed=4)
    b, tb = simulate_job(8, 30, "nvlink", seed=4)
    assert a.equals(b) and ta == tb
    assert a.columns == ["time", "node", "metric", "value"]
    assert a.schema["time"] == pl.Datetime("us", "UTC")
    # counters are cumulative, as exporters ship them
    ib = wide(a, "node_infiniband_port_data_received_bytes_total").filter(
        pl.col("node") == "gpu0000"
    )
    assert (np.diff(ib.sort("time")["value"].to_numpy()) >= 0).all()
    # scrapes at different offsets per node
    firsts = wide(a, "node_load1").group_by("node").agg(pl.col("time").min())["time"]
    assert firsts.n_unique() > 1


def test_a_dead_rank_hangs_its_peers_until_the_nccl_timeout() -> None:
    df, truth = simulate_job(8, 90, "cuda", seed=9)
    util = wide(df, "DCGM_FI_DEV_GPU_UTIL")
    after = util.filter(pl.col("time") > datetime.fromtimestamp(truth.onset + 60, UTC))
    peers = after.filter(pl.col("node") != truth.node)["value"]
    assert peers.min() > 98  # NCCL spin: busy at idle power
    power = wide(df, "DCGM_FI_DEV_POWER_USAGE").filter(
        (pl.col("time") > datetime.fromtimestamp(truth.onset + 60, UTC))
        & (pl.col("node") != truth.node)
    )["value"]
    assert power.mean() < 100
    assert after.filter(pl.col("node") == truth.node)["value"].max() == 0
    # the job ends at the NCCL timeout, before its planned 90 minutes
    assert df["time"].max() < datetime.fromtimestamp(truth.onset + 21 * 60, UTC)


def test_unreachable_machine_stops_reporting() -> None:
    df, truth = simulate_job(8, 60, "unreachable", seed=3)
    last = df.filter(pl.col("node") == truth.node)["time"].max()
    assert last < datetime.fromtimestamp(truth.onset + 16, UTC)
