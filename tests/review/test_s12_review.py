"""Hostile review of session 12 (``git diff 47a05bd..137eb3e``: ae67083, 99dff61, c4f5976, 137eb3e).

Each test is one finding and fails on 137eb3e for the reason in its docstring.  The detector
cases are small synthetic jobs (16 nodes, 60 minutes at a 15 s scrape) run through the public
``detect`` entry point or the ``minder`` CLI; the ``watch`` case runs one ``drain = true`` pass
of :func:`run_pass` over a simulated job's table (Prometheus and ``scontrol`` stubbed).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.metrics.align import Aligned
from aegis_slurm.metrics.catalog import job_can_cause
from aegis_slurm.metrics.detect import Params, detect

STEP = 15.0
T = 240
TIMES = 1.0e9 + STEP * np.arange(T)  # 60 minutes
NODES = [f"n{i:02d}" for i in range(16)]
PSI = "node_pressure_io_stalled_seconds_total"
UTIL = "DCGM_FI_DEV_GPU_UTIL"


def _psi(episodes: list[tuple[int, int, float]], node: int = 0) -> np.ndarray:
    """PSI full io, seconds since boot: every node stalls 0.2 % of the time; ``node`` also
    stalls ``share`` of the time in each (first step, steps, share) episode."""
    rate = np.full((len(NODES), T), 0.002)
    for first, steps, share in episodes:
        rate[node, first : first + steps] = share
    return 1000.0 + np.cumsum(rate * STEP, axis=1)


def _long_table(data: dict[str, np.ndarray]) -> pl.DataFrame:
    rows = []
    for metric, X in data.items():
        for i, node in enumerate(NODES):
            for j, t in enumerate(TIMES):
                rows.append((datetime.fromtimestamp(float(t), UTC), node, metric, float(X[i, j])))
    return pl.DataFrame(
        rows,
        schema={
            "time": pl.Datetime("us", "UTC"),
            "node": pl.Utf8,
            "metric": pl.Utf8,
            "value": pl.Float64,
        },
        orient="row",
    )


# ---- PSI full io (round 12) -------------------------------------------------------------------


def test_rank0_checkpoint_writer_is_not_reported_as_a_plain_fault(tmp_path: Path) -> None:
    """catalog.py round 12 PSI entry + cli/minder_cmd.py: ``job_can_cause`` is read by
    ``watch`` only.  ``aegis-slurm minder --json`` (what the admin paged for the job reads)
    lists the node whose rank 0 writes the job's checkpoints as plain ``faulty``, with no word
    that the job itself causes it.

    Scenario: a 13B model's full state (weights + Adam, ~210 GB) saved by rank 0 with
    ``torch.save`` to NFS at ~0.7 GB/s: 5 minutes every 20 minutes, during which n00's writer
    sits in ``balance_dirty_pages`` and its non-idle tasks are all stalled 30 % of the time
    (PSI full io 0.3 s/s).  docs/minder.md (round 12) says "a checkpoint's write stalls for
    seconds"; a rank-0 checkpoint of a mid-size model stalls for minutes, past the 6-minute
    events continuity (4 min + the 2-min rate window).  Today: ``FAULTY n00 ...
    node_pressure_io_stalled_seconds_total`` and a bare ``faulty`` entry in ``--json``.
    Expected: the finding, if reported, says it may be the job's own writes (the reason
    ``job_can_cause`` already holds), as ``watch``'s alert does."""
    X = _psi([(s, 20, 0.3) for s in range(40, T, 80)])
    path = tmp_path / "job.parquet"
    _long_table({PSI: X}).write_parquet(path)
    res = CliRunner().invoke(main, ["minder", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    bare = [
        f for f in doc["faulty"] if f["metric"] == PSI and job_can_cause(PSI) not in json.dumps(f)
    ]
    assert bare == [], bare


def test_a_job_caused_io_stall_does_not_make_a_dead_rank_collateral() -> None:
    """detect.py ``collateral_of`` (is_hardware, detect.py:1218) + catalog.py
    ``HARDWARE_SCALES`` ("events"): PSI full io is on the events scale, so a stall *the job
    may cause* counts as "the node whose hardware speaks", and a node whose GPUs went idle for
    good near it is filed under ``collateral`` -- removed from ``faulty``.

    Scenario: rank 0 (n00) writes a 6-minute checkpoint from minute 27 (PSI full 0.3, as
    above).  At minute 30 the rank on n09 dies (a segfault: no Xid, no error counter) and its
    GPUs go idle for good; the other ranks wait for it in NCCL (their GPUs spin at 100 %) until
    the watchdog.  Today ``faulty`` is [n00] (the I/O stall, which ``watch`` will never drain)
    and n09 is "WITH n09 ... its ranks stopped with n00's fault": the dead node is hidden
    behind the checkpoint writer.  Expected: n09 is faulty; a metric in ``job_can_cause`` is no
    hardware evidence for the collateral rule."""
    util = np.full((len(NODES), T), 100.0)
    util[9, 120:] = 0.0  # minute 30
    data = {PSI: _psi([(108, 24, 0.3)]), UTIL: util}
    r = detect(Aligned(TIMES, NODES, data, STEP), [UTIL, PSI], Params())
    assert "n09" in [f.node for f in r.faulty], (r.faulty, r.collateral)


def test_a_node_first_found_on_an_io_stall_is_still_drained_on_its_dead_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """watch.py ``run_pass`` (watch.py:245-274) acts on ``result.faulty``, one finding per node
    -- its *earliest* -- and records one incident per node per job.  Round 12 made that
    earliest finding often the I/O stall (``job_can_cause``: alert, not drained), so hardware
    evidence found later on the same node is never acted on.

    Scenario (30-minute simulated job, 8 nodes): gpu0003's local NVMe controller starts
    timing out and resetting 8 minutes in (PSI full io 0.9 s/s), and at minute 17 the
    controller drops off the bus: the scratch mount's ``statfs`` fails
    (``node_filesystem_device_error`` 1, a hardware gauge ``watch`` drains on when it is a
    node's only finding).  Today the pass alerts "an I/O stall may be the job's own writes: not
    drained" and never drains the node with a dead disk.  Expected: gpu0003 is drained (the
    hardware finding decides; the job cannot unplug an NVMe controller)."""
    from aegis_slurm.metrics import watch
    from aegis_slurm.metrics.config import MinderConfig, WatchConfig
    from aegis_slurm.metrics.slurmjob import JobWindow
    from aegis_slurm.simulate.metrics import simulate_job

    df, _ = simulate_job(8, 30, None, seed=44)
    base = df.filter(pl.col("metric") == "node_load1")
    t0 = base["time"].min()
    node = pl.col("node") == "gpu0003"
    secs = (pl.col("time") - t0).dt.total_seconds()
    psi = base.with_columns(
        metric=pl.lit(PSI),
        value=pl.when(node & (secs > 8 * 60))
        .then(0.9 * (secs - 8 * 60))
        .otherwise(0.0)
        .cast(pl.Float64)
        + 500.0
        + 0.002 * secs,
    )
    dev_err = base.with_columns(
        metric=pl.lit("node_filesystem_device_error"),
        value=pl.when(node & (secs > 17 * 60)).then(1.0).otherwise(0.0),
    )
    table = pl.concat([df, psi, dev_err])

    def fetch(cfg, nodes, start, end, specs, step=15.0):  # what Prometheus holds then
        t = pl.col("time").dt.epoch("s")
        return table.filter((t >= start) & (t <= end))

    monkeypatch.setattr(watch, "fetch_job", fetch)
    drained: list[str] = []
    monkeypatch.setattr(watch, "_drain", lambda cfg, n, *a: drained.append(n) or "drains")
    nodes = sorted(table["node"].unique().to_list())
    t = table["time"].dt.epoch("s")
    w = WatchConfig(
        textfile_dir=str(tmp_path / "textfile"),
        state_file=str(tmp_path / "state.json"),
        syslog=False,
        slurm_timeout=5.0,
        drain=True,
    )
    cfg = MinderConfig(watch=w)
    state: dict = {}
    start = float(t.min())
    found = {}
    for minute in range(15, 31, 5):  # a pass every 5 minutes (the default interval is 60 s)
        job = JobWindow("93", nodes, start, start + 60 * minute)
        rep = watch.run_pass(cfg, "http://127.0.0.1:9", [job], job.end, state)
        found.update({i["node"]: (minute, i["metric"], i["action"]) for i in rep.new})
    assert "gpu0003" in found, found
    assert drained == ["gpu0003"], found


POWER = "DCGM_FI_DEV_POWER_USAGE"
TENSOR = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"


def _async_checkpoint_job() -> dict[str, np.ndarray]:
    """16 nodes, 60 minutes, data-parallel: every 20 minutes from minute 15, rank 0's
    background thread (Lightning's ``AsyncCheckpointIO`` under DDP: ``torch.save`` on global
    rank 0 in a thread) writes the checkpoint to NFS for 6 minutes.  The pickling holds rank 0's
    GIL, so n00 is the straggler meanwhile: its GPUs still compute (560 W, tensor 0.40) while
    its 15 peers wait for it in NCCL (330 W, 0.20); n00's writer stalls its I/O (PSI full io
    0.15 s/s: the writer thread alone on its CPU, the ranks busy on theirs)."""
    rng = np.random.default_rng(0)
    n = len(NODES)
    power = 620.0 + rng.normal(0.0, 8.0, (n, T))
    tensor = 0.45 + rng.normal(0.0, 0.01, (n, T))
    episodes = []
    for s in range(60, T - 24, 80):
        e = s + 24
        episodes.append((s, 24, 0.15))
        power[1:, s:e] = 330.0 + rng.normal(0.0, 8.0, (n - 1, 24))
        tensor[1:, s:e] = 0.20
        power[0, s:e] = 560.0
        tensor[0, s:e] = 0.40
    return {
        POWER: power,
        TENSOR: tensor,
        UTIL: np.full((n, T), 100.0),
        PSI: _psi(episodes),
    }


def test_a_job_caused_io_stall_does_not_corroborate_a_coupled_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """detect.py ``detect`` (the ``local |= c`` loop, detect.py:1289-1294, read by
    ``corroborated``): PSI full io is a *local* metric, so its candidate windows corroborate a
    coupled finding (power, tensor activity) on the same node -- though the round-12 catalog
    itself says the job's own writes move it.  A finding on power is not in ``job_can_cause``,
    so ``watch`` drains on it.

    Scenario: :func:`_async_checkpoint_job`.  Without the PSI series nothing is reported (a
    straggler's throughput alone says the job waits, not which machine is broken: the
    corroboration rule's own premise).  With it, n00 -- a healthy machine running the job's
    rank 0 -- is ``faulty`` on DCGM_FI_DEV_POWER_USAGE at minute 19 and ``watch`` (``drain =
    true``) drains it.  Expected: no drain; a metric the job can cause is no corroboration
    (and no finding outside ``job_can_cause`` stands on it)."""
    data = _async_checkpoint_job()
    without = {m: X for m, X in data.items() if m != PSI}
    pri = [POWER, TENSOR, UTIL, PSI]
    assert detect(Aligned(TIMES, NODES, without, STEP), pri, Params()).faulty == []

    from aegis_slurm.metrics import watch
    from aegis_slurm.metrics.config import MinderConfig, WatchConfig
    from aegis_slurm.metrics.slurmjob import JobWindow

    table = _long_table(data)
    monkeypatch.setattr(watch, "fetch_job", lambda *a, **k: table)
    drained: list[str] = []
    monkeypatch.setattr(watch, "_drain", lambda cfg, n, *a: drained.append(n) or "drains")
    w = WatchConfig(
        textfile_dir=str(tmp_path / "textfile"),
        state_file=str(tmp_path / "state.json"),
        syslog=False,
        slurm_timeout=5.0,
        drain=True,
        lookback=3600.0,
    )
    job = JobWindow("94", NODES, float(TIMES[0]), float(TIMES[-1]))
    rep = watch.run_pass(MinderConfig(watch=w), "http://127.0.0.1:9", [job], job.end, {})
    found = {i["node"]: (i["metric"], i["action"]) for i in rep.new}
    assert drained == [], found


# ---- sacct (c4f5976) ---------------------------------------------------------------------------


def test_the_docs_name_the_sacct_query_minder_runs() -> None:
    """docs/minder.md:46 still says the window comes from ``sacct -X -n -P -o
    NodeList,Start,End -j JOBID``; since c4f5976 ``from_sacct`` asks for
    ``JobIDRaw,JobID,NodeList,Start,End`` and an array's or a het job's own id with several
    allocations is an error (exit 1) naming them -- neither is documented, so an admin who
    reproduces the query by hand, or scripts around the exit code, is misled.  Cosmetic."""
    doc = (Path(__file__).parents[2] / "docs" / "minder.md").read_text()
    assert "JobIDRaw,JobID,NodeList,Start,End" in doc
    assert "name one of them" in doc or "array" in doc.split("## Input")[0]
