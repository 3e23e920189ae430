"""Attribution with its evidence prepared once and its columns computed for candidates only
equals the code before (``reference_attribution_before_s8``, kept verbatim) on simulated
histories: window signals and events, Epilog records carrying their job, aegis tags,
unattributed NODE_FAILs with and without FailedNode, and in batches as ``sections.inputs``
runs it over years of history."""

from __future__ import annotations

import polars as pl
import pytest
import reference_attribution_before_s8 as ref  # this directory is on sys.path

from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.sections.inputs import attribute
from aegis_slurm.simulate.history import SimConfig, SimResult, simulate


@pytest.fixture(scope="module", params=[2, 9])
def sim(request: pytest.FixtureRequest) -> SimResult:
    return simulate(SimConfig(nodes=128, days=40, seed=request.param, crash_loops=3, lemons=2))


def own_records(runs: pl.DataFrame, every: int) -> pl.DataFrame:
    """Critical Epilog-record signals naming their job and run, for every ``every``-th FAILED
    run (some on a node the run did not hold, some of another cluster: never evidence)."""
    failed = runs.filter(pl.col("state") == "FAILED").gather_every(every)
    return failed.select(
        pl.when(pl.int_range(pl.len()) % 5 == 4)
        .then(pl.lit("elsewhere"))
        .otherwise(pl.col("nodes").list.first())
        .alias("node"),
        pl.col("end_time").alias("time"),
        pl.lit("aegis: xid: GPU2 Xid 79").alias("signal"),
        pl.lit(True).alias("critical"),
        pl.col("job_id_raw").cast(pl.String).alias("job_id"),
        pl.col("run_index").alias("run"),
        pl.when(pl.int_range(pl.len()) % 7 == 3)
        .then(pl.lit("other"))
        .otherwise(pl.col("cluster"))
        .alias("cluster"),
    )


def with_tags(runs: pl.DataFrame, every: int) -> pl.DataFrame:
    tagged = (pl.int_range(pl.len()) % every == 0) & (pl.col("state") == "FAILED")
    return runs.with_columns(
        pl.when(tagged)
        .then(
            pl.concat_str(
                pl.lit("ckpt ok aegis:v1;hw="), pl.col("nodes").list.first(), pl.lit(":row_remap")
            )
        )
        .otherwise(pl.col("admin_comment"))
        .alias("admin_comment")
    )


def assert_same(new: pl.DataFrame, old: pl.DataFrame) -> None:
    assert new.columns == old.columns
    assert new.equals(old), (
        new.join(old, on="row_id").filter(pl.col("cause").ne_missing(pl.col("cause_right"))).head(5)
    )


def test_window_evidence_as_before(sim: SimResult) -> None:
    new = attribute_failures(sim.runs, sim.signals, sim.events)
    assert new["infra_failure"].sum() > 0
    assert_same(new, ref.attribute_failures(sim.runs, sim.signals, sim.events))


def test_own_records_and_tags_as_before(sim: SimResult) -> None:
    runs = with_tags(sim.runs, 3)
    signals = pl.concat([sim.signals, own_records(runs, 2)], how="diagonal_relaxed")
    new = attribute_failures(runs, signals, sim.events)
    sources = set(new["attribution_source"].drop_nulls())
    assert {"node_signal", "admin_comment"} <= sources
    assert_same(new, ref.attribute_failures(runs, signals, sim.events))


def test_without_failed_node_or_evidence_as_before(sim: SimResult) -> None:
    runs = sim.runs.drop("failed_node")
    new = attribute_failures(runs)
    assert (new["attribution_source"] == "node_fail").sum() > 0
    assert_same(new, ref.attribute_failures(runs))
    runs = sim.runs.with_columns(
        pl.when(pl.int_range(pl.len()) % 2 == 0)
        .then(pl.col("nodes").list.first())
        .otherwise(pl.lit(""))
        .alias("failed_node")
    )
    assert_same(attribute_failures(runs, sim.signals), ref.attribute_failures(runs, sim.signals))


def test_batches_as_one_call_before(sim: SimResult) -> None:
    runs = with_tags(sim.runs, 4)
    signals = pl.concat([sim.signals, own_records(runs, 3)], how="diagonal_relaxed")
    batched = attribute(runs, signals, sim.events, batch=977)
    whole = ref.attribute_failures(
        attribute(runs, None, None).drop(
            "infra_failure", "attribution_source", "cause", "blamed_nodes"
        ),
        signals,
        sim.events,
    )
    assert batched.height == runs.height
    assert_same(batched, whole)


def test_a_minimal_table_as_before() -> None:
    """A caller's table with only the columns its evidence needs (no Start, no job ids): the
    tag attributes it, as before (found by the real-cluster Epilog test)."""
    from datetime import UTC, datetime

    runs = pl.DataFrame(
        {
            "state": ["NODE_FAIL", "FAILED"],
            "nodes": [["n5", "n6"], ["n1"]],
            "admin_comment": ["aegis:v1;hw=n6:node_fail", ""],
            "end_time": [datetime(2026, 1, 1, tzinfo=UTC)] * 2,
        }
    )
    new = attribute_failures(runs)
    assert new.row(0, named=True)["blamed_nodes"] == ["n6"]
    assert_same(new, ref.attribute_failures(runs))
