"""A site's own evidence floors (``[detector.floors]`` in minder.toml): the PSI stall floors are
a guess (a tenth of the time fully stalled), and a site that knows its healthy share sets its
own, validated like every other setting, without touching the shipped defaults."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.errors import ConfigError
from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import BY_NAME
from aegis_slurm.metrics.config import load_config
from aegis_slurm.metrics.detect import Params, detect, evidence_floor

STEP = 15.0
TIMES = 1e9 + STEP * np.arange(240)  # 60 min
NODES = [f"n{i:02d}" for i in range(12)]
MEM = "node_pressure_memory_stalled_seconds_total"
PAUSE = "instance:node_ethtool_transmitted_pause_duration:rate_sum"


def _memory_stall(share: float) -> Aligned:
    """PSI full memory, seconds since boot: every node stalls 0.01 % of the time; n05 from
    minute 20 ``share`` of it (a fragmented host compacting for huge pages all job long)."""
    rate = np.full((len(NODES), TIMES.size), 1e-4)
    rate[5, 80:] = share
    return Aligned(TIMES, NODES, {MEM: 50.0 + np.cumsum(rate * STEP, axis=1)}, STEP)


def _toml(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "minder.toml"
    p.write_text(text)
    return p


def test_a_site_floor_finds_a_stall_under_the_shipped_one() -> None:
    a = _memory_stall(0.05)
    # 5 % of the time fully stalled: under the shipped floor (0.1), no evidence
    assert BY_NAME[MEM].lo == 0.1 and detect(a, [MEM], Params()).faulty == []
    site = Params(floors={MEM: 0.02})
    assert evidence_floor(MEM, site) == 0.02 and evidence_floor(MEM, Params()) == 0.1
    r = detect(a, [MEM], site)
    assert [(f.node, f.metric) for f in r.faulty] == [("n05", MEM)]
    # within the rate window (2 min), the continuity (4 min) and a window (1 min) of its onset
    assert TIMES[80] < r.faulty[0].first_detected <= TIMES[80] + 7 * 60
    # the floor is the site's for that metric only: the I/O stall keeps the shipped one
    assert evidence_floor("node_pressure_io_stalled_seconds_total", site) == 0.1


def test_a_site_floor_above_the_stall_keeps_it_quiet() -> None:
    # the other way: a site whose healthy nodes stall 15 % of the time raises its floor
    a = _memory_stall(0.15)
    assert [f.node for f in detect(a, [MEM], Params()).faulty] == ["n05"]
    assert detect(a, [MEM], Params(floors={MEM: 0.3})).faulty == []


def test_floors_load_from_minder_toml(tmp_path: Path) -> None:
    p = _toml(
        tmp_path,
        f'[detector]\nthreshold = 0.15\n[detector.floors]\n"{MEM}" = 0.02\n"{PAUSE}" = 1e-4\n',
    )
    d = load_config(p).detector
    assert d.threshold == 0.15 and d.floors == {MEM: 0.02, PAUSE: 1e-4}
    # an events-scale floor may be the scale's top where the shipped one is (NVLink CRC
    # errors count from 100 a second, their full scale), not above it
    crc = "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"
    assert BY_NAME[crc].lo == BY_NAME[crc].hi == 100
    p.write_text(f'[detector.floors]\n"{crc}" = 100\n')
    assert load_config(p).detector.floors == {crc: 100.0}
    p.write_text(f'[detector.floors]\n"{crc}" = 250\n')
    with pytest.raises(ConfigError, match="< 100"):
        load_config(p)
    assert load_config(_toml(tmp_path, "[detector]\nthreshold = 0.15\n")).detector.floors == {}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('"node_pressure_memry_stalled_seconds_total" = 0.02', "has no evidence floor"),
        # a physical-scale metric's lo is its Min-Max range, not an evidence floor
        ('"DCGM_FI_DEV_GPU_TEMP" = 30', "has no evidence floor"),
        (f'"{MEM}" = "0.02"', "must be a finite number >= 0 and < 1"),
        (f'"{MEM}" = -0.1', "must be a finite number >= 0 and < 1"),
        (f'"{MEM}" = nan', "must be a finite number >= 0 and < 1"),
        (f'"{MEM}" = inf', "must be a finite number >= 0 and < 1"),
        # the percent /proc/pressure prints is not the share (session-13 review)
        (f'"{MEM}" = 10', "must be a finite number >= 0 and < 1"),
        (f'"{MEM}" = true', "must be a finite number"),
        # a logarithmic scale's floor must be above 0 and under its top
        (f'"{PAUSE}" = 0', "must be a finite number > 0 and < 1e+06"),
        (f'"{PAUSE}" = 2e6', "must be a finite number > 0 and < 1e+06"),
    ],
)
def test_a_wrong_floor_is_a_config_error(tmp_path: Path, table: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"\[detector\.floors\]") as e:
        load_config(_toml(tmp_path, f"[detector.floors]\n{table}\n"))
    assert message in str(e.value)


def test_floors_must_be_a_table(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="must be a table"):
        load_config(_toml(tmp_path, "[detector]\nfloors = 0.02\n"))


def test_the_cli_reads_the_site_floor(tmp_path: Path) -> None:
    """End to end through ``aegis-slurm minder FILE --config``: the stall is found with the
    site's floor, and reported as something the job can cause, never as a machine verdict."""
    a = _memory_stall(0.05)
    times = [datetime.fromtimestamp(t, UTC) for t in a.times]
    frame = pl.DataFrame(
        {
            "time": [t for _ in NODES for t in times],
            "node": [n for n in NODES for _ in times],
            "metric": MEM,
            "value": a.data[MEM].ravel(),
        }
    )
    path = tmp_path / "job.parquet"
    frame.write_parquet(path)
    run = CliRunner().invoke
    shipped = run(main, ["minder", str(path), "--json"])
    assert shipped.exit_code == 0, shipped.output
    assert json.loads(shipped.stdout)["faulty"] == []
    cfg = _toml(tmp_path, f'[detector.floors]\n"{MEM}" = 0.02\n')
    site = run(main, ["minder", str(path), "--config", str(cfg), "--json"])
    assert site.exit_code == 0, site.output
    (f,) = json.loads(site.stdout)["faulty"]
    assert (f["node"], f["metric"]) == ("n05", MEM)
    assert "memory stall" in f["job_can_cause"]
    bad = run(
        main, ["minder", str(path), "--config", str(_toml(tmp_path, "[detector.floors]\nx = 1\n"))]
    )
    assert bad.exit_code == 1 and bad.stderr.startswith("aegis-slurm: error: ")
    assert "Traceback" not in bad.output and bad.stderr.count("\n") == 1


def test_the_documented_minder_toml_loads_with_a_floor(tmp_path: Path) -> None:
    """docs/minder.md's example minder.toml, its floor line uncommented, is a valid config."""
    doc = (Path(__file__).parents[2] / "docs" / "minder.md").read_text()
    start = doc.index("```toml\n[prometheus]") + len("```toml\n")
    example = doc[start : doc.index("```", start)]
    example = example.replace(f'# "{MEM}" = 0.03', f'"{MEM}" = 0.03')
    cfg = load_config(_toml(tmp_path, example))
    assert cfg.detector.floors == {MEM: 0.03} and cfg.watch.interval == 60.0
