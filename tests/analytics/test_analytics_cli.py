"""The analytics commands end to end: simulate -> ingest -> every command's --json contract."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main


def run(*args: str) -> dict:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1  # one JSON object on stdout
    return json.loads(lines[0])


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    out = run(
        "simulate",
        "--out",
        str(d / "h.txt"),
        "--nodes",
        "256",
        "--days",
        "20",
        "--seed",
        "9",
        "--json",
    )
    truth = json.loads((d / "h.truth.json").read_text())
    assert out["records"] == truth["records"]
    res = CliRunner().invoke(main, ["ingest", str(d / "h.txt"), "--store", str(d / "st"), "--json"])
    assert res.exit_code == 0, res.output
    ev = ["--events", str(d / "h.events.txt"), "--signals", str(d / "h.signals.parquet")]
    return d / "st", ev, truth


@pytest.mark.parametrize(
    "cmd",
    [
        "taxonomy",
        "failure-rate",
        "mttf",
        "ettr",
        "checkpoint-plan",
        "goodput",
        "requeue-loops",
        "lemon-nodes",
        "simulate",
        "measured-ettr",
    ],
)
def test_help(cmd):
    res = CliRunner().invoke(main, [cmd, "--help"])
    assert res.exit_code == 0 and "--json" in res.output


def test_store_commands_json_contract(store):
    st, ev, truth = store
    fr = run("failure-rate", "--store", str(st), *ev, "--json")
    assert {"rf_per_node_day", "failures", "node_days", "min_gpus"} <= fr.keys()
    assert fr["min_gpus"] == 128 and fr["failures"] >= truth["infra_failures_gt128"]
    assert run("failure-rate", "--store", str(st), "--min-gpus", "0", "--json")["min_gpus"] == 0
    m = run("mttf", "--store", str(st), *ev, "--json")
    keys = {
        "gpus",
        "failures",
        "runtime_hours",
        "mttf_hours",
        "ci90_low_hours",
        "ci90_high_hours",
        "theory_mttf_hours",
    }
    assert m["buckets"] and all(keys <= b.keys() for b in m["buckets"])
    loops = run("requeue-loops", "--store", str(st), *ev, "--json")["loops"]
    assert {x["job_id"] for x in loops} == {str(x["job_id_raw"]) for x in truth["crash_loops"]}
    assert all(
        {"job_id", "gpus", "requeues", "preemptions_caused", "gpu_hours_lost"} <= x.keys()
        for x in loops
    )
    tax = run("taxonomy", "--store", str(st), *ev, "--json")
    assert tax["total_runs"] == truth["records"]
    gp = run("goodput", "--store", str(st), *ev, "--json")
    assert gp["goodput_lost_first_order"] >= truth["first_order_gpu_hours"] - 1e-6
    me = run("measured-ettr", "--store", str(st), *ev, "--qos", "high", "--json")
    assert me["job_runs"] > 0 and me["measured_ettr"] and me["size_distribution"]
    assert sum(b["gpu_hour_share"] for b in me["size_distribution"]) == pytest.approx(1.0)
    lem = run("lemon-nodes", "--store", str(st), *ev, "--json")
    assert set(truth["lemon_nodes"]) <= {n["node"] for n in lem["nodes"]}


def test_ettr_and_checkpoint_plan_json():
    e = run(
        "ettr",
        "--gpus",
        "16000",
        "--gpus-per-node",
        "8",
        "--rf",
        "0.0065",
        "--restart-min",
        "5",
        "--ckpt-interval-min",
        "60",
        "--ckpt-write-min",
        "0",
        "--queue-min",
        "0",
        "--monte-carlo",
        "500",
        "--json",
    )
    assert {"mttf_hours", "ettr_published", "ettr", "ettr_finite", "monte_carlo"} <= e.keys()
    assert 0.68 <= e["ettr_published"] <= 0.70
    assert {"mean", "stderr"} <= e["monte_carlo"].keys()
    c = run(
        "checkpoint-plan",
        "--gpus",
        "12000",
        "--rf",
        "0.0065",
        "--restart-min",
        "5",
        "--ckpt-write-min",
        "5",
        "--queue-min",
        "0",
        "--target-ettr",
        "0.7",
        "--json",
    )
    assert {
        "young_min",
        "daly_min",
        "optimal_min",
        "ettr_at_optimal",
        "interval_for_target_min",
    } <= c.keys()
    # Closed form of the linear E[ETTR] (spec §5: 33.1 min); the exact form's argmax is longer.
    assert round(c["optimal_first_order_min"], 1) == 33.1
    assert round(c["optimal_min"], 1) == 35.2 and c["interval_for_target_min"] > c["optimal_min"]
    c = run(
        "checkpoint-plan",
        "--gpus",
        "131072",
        "--rf",
        "0.0065",
        "--restart-min",
        "5",
        "--ckpt-write-min",
        "1",
        "--queue-min",
        "0",
        "--target-ettr",
        "0.9",
        "--json",
    )
    assert c["interval_for_target_min"] is None and "unreachable" in c["target_reason"]


def test_signals_csv_gives_the_same_attribution(store, tmp_path):
    import polars as pl

    st, ev, _ = store
    sig = pl.read_parquet(ev[3])
    sig.write_csv(tmp_path / "sig.csv")
    a = run("failure-rate", "--store", str(st), *ev, "--json")
    b = run(
        "failure-rate",
        "--store",
        str(st),
        ev[0],
        ev[1],
        "--signals",
        str(tmp_path / "sig.csv"),
        "--json",
    )
    assert a["failures"] == b["failures"] and a["by_cause"] == b["by_cause"]


@pytest.mark.parametrize(
    ("cmd", "args", "hint"),
    [
        ("ettr", ["--ckpt-interval-min", "0"], "--ckpt-interval-min"),
        ("ettr", ["--ckpt-interval-min", "60", "--rf", "-0.001"], "--rf"),
        ("checkpoint-plan", ["--gpus", "0"], "--gpus"),
        ("checkpoint-plan", ["--gpus-per-node", "0"], "--gpus-per-node"),
        ("checkpoint-plan", ["--restart-min", "-1"], "--restart-min"),
        ("checkpoint-plan", ["--target-ettr", "1.5"], "--target-ettr"),
    ],
)
def test_degenerate_job_inputs_are_usage_errors(cmd, args, hint):
    """Issue 13 item 9: no ZeroDivisionError, no silently accepted negative rate."""
    base = {"--gpus": "1024", "--gpus-per-node": "8", "--rf": "0.0065", "--restart-min": "5"}
    for i in range(0, len(args), 2):
        base[args[i]] = args[i + 1]
    flat = [x for kv in base.items() for x in kv]
    res = CliRunner().invoke(main, [cmd, *flat])
    assert res.exit_code == 2, res.output
    assert hint in res.output and "Traceback" not in res.output


def test_checkpoint_plan_explains_zero_rate_and_free_writes():
    res = CliRunner().invoke(
        main, ["checkpoint-plan", "--gpus", "1024", "--rf", "0", "--restart-min", "5"]
    )
    assert res.exit_code == 0, res.output
    assert "r_f = 0" in res.output and "write time is 0" not in res.output
    res = CliRunner().invoke(
        main, ["checkpoint-plan", "--gpus", "1024", "--rf", "0.0065", "--restart-min", "5"]
    )
    assert res.exit_code == 0 and "write time is 0" in res.output
    assert "-> 0.000" not in res.output


def test_ettr_points_at_the_exact_form_when_lambda_dt_is_large():
    """Issue 13 item 1: 16k GPUs at r_f = 10.6/1000 node-days, Δt = 60 min: linear 0.47,
    exact 0.57 (the Monte Carlo agrees with the exact form)."""
    c = run(
        "ettr",
        "--gpus",
        "16384",
        "--rf",
        "0.0106",
        "--restart-min",
        "5",
        "--ckpt-interval-min",
        "60",
        "--monte-carlo",
        "300",
        "--json",
    )
    assert round(c["ettr"], 2) == 0.47 and round(c["ettr_renewal"], 2) == 0.57
    assert abs(c["monte_carlo"]["mean"] - c["ettr_renewal_finite"]) < 0.01
    res = CliRunner().invoke(
        main,
        [
            "ettr",
            "--gpus",
            "16384",
            "--rf",
            "0.0106",
            "--restart-min",
            "5",
            "--ckpt-interval-min",
            "60",
            "--monte-carlo",
            "0",
        ],
    )
    assert "<- the one to use" in res.output
