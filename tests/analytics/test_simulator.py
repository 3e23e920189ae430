"""The cluster-history simulator: schema, determinism, Slurm requeue semantics, the export."""

from __future__ import annotations

import polars as pl
import pytest

from aegis_slurm.accounting import ingest_files, load_runs
from aegis_slurm.accounting.events import load_events
from aegis_slurm.accounting.schema import RUN_SCHEMA
from aegis_slurm.simulate.history import SimConfig, simulate, write_history


@pytest.fixture(scope="module")
def sim():
    return simulate(SimConfig(nodes=256, days=20, seed=4))


def test_schema_and_determinism(sim):
    assert sim.runs.schema == pl.Schema(RUN_SCHEMA)
    again = simulate(SimConfig(nodes=256, days=20, seed=4))
    assert again.runs.equals(sim.runs) and again.truth == sim.truth
    other = simulate(SimConfig(nodes=256, days=20, seed=5))
    assert not other.runs.equals(sim.runs)


def test_mix_resembles_rsc1(sim):
    runs = sim.runs
    share = dict(runs["state"].value_counts(normalize=True).iter_rows())
    assert 0.55 <= share["COMPLETED"] <= 0.75 and 0.15 <= share["FAILED"] <= 0.30
    assert 0.02 <= share["PREEMPTED"] <= 0.15 and share["NODE_FAIL"] < 0.01
    jobs = runs.unique("job_id_raw")
    assert (jobs["gpus"] <= 8).mean() > 0.9 and (jobs["gpus"] == 1).mean() > 0.35
    gh = runs.select(pl.col("elapsed_s") * pl.col("gpus"), pl.col("gpus") >= 256)
    big_share = gh.filter(pl.col("gpus"))["elapsed_s"].sum() / gh["elapsed_s"].sum()
    assert big_share > 0.5  # most GPU time in ≥ 256-GPU jobs (Fig. 6)


def test_requeue_semantics(sim):
    r = sim.runs.sort("job_id_raw", "run_index")
    nxt = r.with_columns(
        pl.col("state").shift(-1).over("job_id_raw").alias("next_state"),
        pl.col("submit_time").shift(-1).over("job_id_raw").alias("next_submit"),
        pl.col("eligible_time").shift(-1).over("job_id_raw").alias("next_eligible"),
    ).filter(pl.col("next_state").is_not_null())
    # Only NODE_FAIL, PREEMPTED and REQUEUED runs are followed by another run of the same id.
    assert set(nxt["state"].unique()) <= {"NODE_FAIL", "PREEMPTED", "REQUEUED"}
    assert (nxt["next_submit"] >= nxt["end_time"]).all()  # Submit is reset on requeue
    assert ((nxt["next_eligible"] - nxt["next_submit"]).dt.total_seconds() == 120).all()
    # A crash loop: RequeueExit runs read REQUEUED with exit 42, the last one FAILED.
    for loop in sim.truth["crash_loops"]:
        rec = r.filter(pl.col("job_id_raw") == loop["job_id_raw"])
        assert rec.height == loop["runs"]
        assert rec["state"].to_list() == ["REQUEUED"] * (loop["runs"] - 1) + ["FAILED"]
        assert (rec["exit_code"][:-1] == 42).all()
        assert rec["submit_time"].n_unique() == rec.height


def test_export_round_trips_through_the_real_ingest(sim, tmp_path):
    paths = write_history(sim, tmp_path / "hist.txt")
    header = (tmp_path / "hist.txt").read_text().splitlines()[0]
    assert header.startswith("JobIDRaw|JobID|Cluster|") and header.endswith("|WorkDir|JobName")
    report = ingest_files([paths["sacct"]], tmp_path / "store")
    assert report["rows_kept"] == sim.runs.height and report["rows_rejected"] == 0
    back = load_runs(tmp_path / "store").sort("job_id_raw", "run_index").drop("source")
    assert back.equals(sim.runs.sort("job_id_raw", "run_index").drop("source"))
    assert load_events([paths["events"]]).height == sim.events.height
