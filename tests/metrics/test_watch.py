"""``minder watch``: one action per node per incident, and no action on its own failures."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.metrics.config import MinderConfig, WatchConfig
from aegis_slurm.metrics.slurmjob import JobWindow
from aegis_slurm.metrics.watch import parse_squeue, prom_text, run_pass

from .conftest import PromJob, free_port


def config(tmp_path: Path, **watch: object) -> MinderConfig:
    w = WatchConfig(
        textfile_dir=str(tmp_path / "textfile"),
        state_file=str(tmp_path / "state.json"),
        syslog=False,
        slurm_timeout=5.0,
    )
    return MinderConfig(watch=replace(w, **watch))


def test_parse_squeue() -> None:
    text = "101|gpu[0001-0003]|2026-01-05T08:00:00\n102|gpu0009|2026-01-05T09:00:00\nbad line\n"
    jobs = parse_squeue(text, now=2e9)
    assert [j.job_id for j in jobs] == ["101", "102"]
    assert jobs[0].nodes == ["gpu0001", "gpu0002", "gpu0003"] and jobs[0].end == 2e9


def test_an_incident_is_acted_on_once(prom_job: PromJob, tmp_path: Path) -> None:
    cfg = config(tmp_path)
    job = JobWindow("77", prom_job.nodes, prom_job.start, prom_job.end)
    state: dict = {}
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert rep.prometheus_ok and rep.jobs_checked == 1
    assert [(i["node"], i["action"]) for i in rep.new] == [(prom_job.truth.node, "alert")]
    text = prom_text(rep, prom_job.end)
    assert f'aegis_minder_faulty{{node="{prom_job.truth.node}",job="77"' in text
    # the window (last 10 min) lacks the job's start: the per-node reference was queried over
    # the job's [start + warm-up, + baseline] and kept for the next passes
    ref = state["references"]["77"]
    assert ref["start"] == prom_job.start + cfg.detector.warmup
    assert set(ref["offsets"]["DCGM_FI_DEV_GPU_TEMP"]["offsets"]) == set(prom_job.nodes)
    assert 30 < ref["offsets"]["DCGM_FI_DEV_GPU_TEMP"]["level"] < 90  # °C under load
    ref["offsets"]["DCGM_FI_DEV_GPU_TEMP"]["marker"] = 1.0  # a second query would drop it
    again = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert again.new == [] and list(again.open) == [f"77:{prom_job.truth.node}"]
    assert "marker" in state["references"]["77"]["offsets"]["DCGM_FI_DEV_GPU_TEMP"]
    # the job ended: the incident and the reference are closed
    assert run_pass(cfg, prom_job.url, [], prom_job.end, state).open == {}
    assert state["references"] == {}


def test_without_the_jobs_reference_it_alerts_but_never_drains(
    prom_job: PromJob, tmp_path: Path
) -> None:
    # the job started two days before the recorded series: its first minutes are beyond what
    # Prometheus holds (retention); judged without a reference, the culprit is still found, and
    # alerted only — a constant hardware offset would look the same without it
    cfg = config(tmp_path, drain=True)
    job = JobWindow("79", prom_job.nodes, prom_job.start - 2 * 86400, prom_job.end)
    state: dict = {}
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert rep.jobs_checked == 1
    ((node, action),) = [(i["node"], i["action"]) for i in rep.new]
    assert node == prom_job.truth.node
    assert action.startswith("alert (no per-node reference: no usable metric samples")
    assert state["references"]["79"]["offsets"] is None


def test_small_jobs_have_no_peers_to_compare(prom_job: PromJob, tmp_path: Path) -> None:
    cfg = config(tmp_path, min_nodes=64)
    job = JobWindow("78", prom_job.nodes, prom_job.start, prom_job.end)
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, {})
    assert rep.jobs_checked == 0 and rep.new == []


def test_down_prometheus_never_acts(prom_job: PromJob, tmp_path: Path) -> None:
    cfg = config(tmp_path, drain=True)
    cfg = replace(cfg, prometheus={"retries": 0, "timeout": 1.0})
    job = JobWindow("79", prom_job.nodes, prom_job.start, prom_job.end)
    rep = run_pass(cfg, f"http://127.0.0.1:{free_port()}", [job], prom_job.end, {})
    assert not rep.prometheus_ok and rep.new == [] and rep.open == {}
    assert "aegis_minder_prometheus_up 0" in prom_text(rep, prom_job.end)


def test_drain_fails_open_when_slurm_cannot_be_read(
    prom_job: PromJob, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no scontrol on PATH: the drain-storm guard cannot be evaluated, so nothing is drained
    monkeypatch.setenv("PATH", str(tmp_path))
    cfg = config(tmp_path, drain=True)
    job = JobWindow("80", prom_job.nodes, prom_job.start, prom_job.end)
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, {})
    assert [i["action"] for i in rep.new] == ["guard_unavailable"]


def test_watch_once_without_squeue_is_an_error_and_writes_the_textfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    conf = tmp_path / "minder.toml"
    conf.write_text(
        f'[watch]\ntextfile_dir = "{tmp_path / "tf"}"\nstate_file = "{tmp_path / "s.json"}"\n'
        "syslog = false\n"
    )
    r = CliRunner().invoke(
        main,
        ["minder", "watch", "--prometheus", "http://127.0.0.1:9", "--once", "--config", str(conf)],
    )
    assert r.exit_code == 1
    assert r.stderr.startswith("aegis-slurm: error: squeue failed")
    assert "aegis_minder_jobs_checked 0" in (tmp_path / "tf" / "aegis_minder.prom").read_text()


def test_a_node_without_any_sample_is_alerted_never_drained(
    prom_job: PromJob, tmp_path: Path
) -> None:
    # "ghost01" has no series at all (a wrong label mapping looks the same): drain is configured,
    # but the action is an alert only, and the real culprit is still found
    cfg = config(tmp_path, drain=True, syslog=False)
    job = JobWindow("81", [*prom_job.nodes, "ghost01"], prom_job.start, prom_job.end)
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, {})
    actions = {i["node"]: i["action"] for i in rep.new}
    assert actions["ghost01"].startswith("alert (no samples")
    assert prom_job.truth.node in actions


@pytest.mark.parametrize(
    "content", [b"{not json", b"[]", b'{"incidents": {"77:x": 3}}', b"\xff\xfe", b""]
)
def test_a_corrupt_state_file_never_repeats_an_action(
    prom_job: PromJob, tmp_path: Path, content: bytes
) -> None:
    from aegis_slurm.metrics.watch import load_state, save_state

    cfg = config(tmp_path)
    job = JobWindow("77", prom_job.nodes, prom_job.start, prom_job.end)
    state = load_state(cfg.watch.state_file)
    first = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert [i["node"] for i in first.new] == [prom_job.truth.node]
    save_state(cfg.watch.state_file, state)
    # the state file is damaged between two passes: the incident is re-learnt, not re-acted on
    Path(cfg.watch.state_file).write_bytes(content)
    state = load_state(cfg.watch.state_file)
    again = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert again.new == [] and list(again.open) == [f"77:{prom_job.truth.node}"]
    assert again.open[f"77:{prom_job.truth.node}"]["action"].startswith("none (state file")
    save_state(cfg.watch.state_file, state)
    # and the pass after that is back to normal: still one action in all
    third = run_pass(cfg, prom_job.url, [job], prom_job.end, load_state(cfg.watch.state_file))
    assert third.new == []


def _drain_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, df, job_id: str
) -> tuple[list[dict], list[str]]:
    """One ``drain = true`` pass over the table Prometheus would answer (its own path is
    tested against a real Prometheus): the new incidents, and the nodes drained."""
    from aegis_slurm.metrics import watch

    monkeypatch.setattr(watch, "fetch_job", lambda *a, **k: df)
    drained: list[str] = []
    monkeypatch.setattr(watch, "_drain", lambda cfg, node, *a: drained.append(node) or "drains")
    nodes = sorted(df["node"].unique().to_list())
    t = df["time"].dt.epoch("s")
    job = JobWindow(job_id, nodes, float(t.min()), float(t.max()))
    rep = run_pass(config(tmp_path, drain=True), "http://127.0.0.1:9", [job], job.end, {})
    return rep.new, drained


def test_absence_of_one_exporter_is_alerted_never_drained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # gpu0005's dcgm-exporter is gone for the whole window, its node_exporter still answers
    import polars as pl

    from aegis_slurm.simulate.metrics import simulate_job

    df, _ = simulate_job(8, 30, None, seed=44)
    df = df.filter(~((pl.col("node") == "gpu0005") & pl.col("metric").str.contains("DCGM_")))
    new, drained = _drain_pass(tmp_path, monkeypatch, df, "90")
    actions = {i["node"]: i["action"] for i in new}
    assert actions.get("gpu0005", "").startswith("alert (no samples of this metric")
    assert drained == []


def test_a_reference_span_still_in_progress_is_used_but_not_kept(
    prom_job: PromJob, tmp_path: Path
) -> None:
    # a 1-minute lookback on a job 7 minutes old: the window lies after the warm-up, inside the
    # reference span [5 min, 10 min] that is not over yet
    cfg = config(tmp_path, lookback=60.0)
    job = JobWindow("80", prom_job.nodes, prom_job.end - 7 * 60, prom_job.end)
    state: dict = {}
    rep = run_pass(cfg, prom_job.url, [job], prom_job.end, state)
    assert rep.jobs_checked == 1 and rep.prometheus_ok
    assert "80" not in state["references"]


@pytest.mark.parametrize(
    ("metric", "value", "why"),
    [
        # its kernel OOM-kills a rank (its count since boot goes 0 -> 1): the OOM killer fires
        # for a rank that loads too much as for a machine short of memory
        (
            "node_vmstat_oom_kill",
            lambda late: pl.when(late).then(1.0).otherwise(0.0),
            "an OOM kill may be the job's own doing",
        ),
        # no task on it makes progress for I/O 90 % of the time (PSI full, seconds since boot):
        # a rank writing more than its disk takes stalls it as a failing disk does
        (
            "node_pressure_io_stalled_seconds_total",
            lambda late: (
                pl.when(late)
                .then(0.9 * (pl.col("time") - pl.col("time").min()).dt.total_seconds())
                .otherwise(0.0)
            ),
            "an I/O stall may be the job's own writes",
        ),
        # no task on it makes progress for memory 60 % of the time (PSI full): a rank allocating
        # past the node's memory stalls it in reclaim as a node with fragmented memory stalls
        (
            "node_pressure_memory_stalled_seconds_total",
            lambda late: (
                pl.when(late)
                .then(0.6 * (pl.col("time") - pl.col("time").min()).dt.total_seconds())
                .otherwise(0.0)
            ),
            "a memory stall may be the job's own use",
        ),
    ],
)
def test_what_a_job_can_cause_is_alerted_never_drained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, metric: str, value, why: str
) -> None:
    # gpu0003 from 21 minutes in: reported, never drained
    from aegis_slurm.simulate.metrics import simulate_job

    df, _ = simulate_job(8, 30, None, seed=44)
    base = df.filter(pl.col("metric") == "node_load1")
    t0 = base["time"].min()
    late = (pl.col("node") == "gpu0003") & (pl.col("time") > t0 + pl.duration(minutes=21))
    extra = base.with_columns(metric=pl.lit(metric), value=value(late))
    new, drained = _drain_pass(tmp_path, monkeypatch, pl.concat([df, extra]), "91")
    found = {i["node"]: (i["metric"], i["action"]) for i in new}
    assert found["gpu0003"] == (metric, f"alert ({why}: not drained)")
    assert drained == []
