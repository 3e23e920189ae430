"""``aegis-slurm minder`` offline: the JSON contract, fit, and one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.metrics.priority import default_priority
from aegis_slurm.simulate.metrics import simulate_job


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    d = tmp_path_factory.mktemp("minder")
    out: dict[str, object] = {"dir": d}
    for name, fault, seed in (("bad", "pcie", 31), ("ok", None, 32), ("nic", "nic", 33)):
        df, truth = simulate_job(12, 60, fault, seed=seed)
        df.write_parquet(d / f"{name}.parquet")
        out[name] = truth
    return out


def run(*args: str):
    return CliRunner().invoke(main, ["minder", *args])


def test_json_contract_names_the_culprit(files: dict) -> None:
    r = run(str(files["dir"] / "bad.parquet"), "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert set(doc) == {"faulty", "windows", "departed", "collateral"} and doc["windows"] > 100
    (f,) = doc["faulty"]
    # the four keys, and session 12's and 15's additive ones (a PCIe fault: no job
    # cause, a drain reason)
    assert set(f) == {"node", "first_detected", "metric", "score", "job_can_cause", "caveat"}
    assert f["job_can_cause"] is None and f["caveat"] is None
    assert f["node"] == files["bad"].node
    assert f["metric"] in ("DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER")
    assert f["first_detected"].endswith("Z") and isinstance(f["score"], float)


def test_healthy_job_gives_an_empty_list(files: dict) -> None:
    r = run(str(files["dir"] / "ok.parquet"), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["faulty"] == []


def test_lambda2delta_detector_over_the_same_windows(files: dict) -> None:
    r = run(str(files["dir"] / "nic.parquet"), "--detector", "lambda2delta", "--json")
    assert r.exit_code == 0, r.output
    assert files["nic"].node in [f["node"] for f in json.loads(r.stdout)["faulty"]]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent.parquet"], "does not exist"),
        (["{dir}/labels.csv"], "not a readable Parquet file"),
        (["{dir}/bad.parquet", "--priority", "{dir}/labels.csv"], "not JSON"),
        (["{dir}/bad.parquet", "--config", "{dir}/bad.toml"], "unknown key 'treshold'"),
    ],
)
def test_bad_input_is_one_line(files: dict, args: list[str], message: str) -> None:
    d = files["dir"]
    (d / "labels.csv").write_text("file,node,onset\nbad.parquet,x,2026-01-05T08:30:00Z\n")
    (d / "bad.toml").write_text("[detector]\ntreshold = 0.3\n")
    r = run(*[a.format(dir=d) for a in args])
    assert r.exit_code == 1
    assert r.stderr.startswith("aegis-slurm: error: ") and message in r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.output


def test_usage_errors() -> None:
    assert run().exit_code == 2
    assert run("x.parquet", "--prometheus", "http://p", "--job", "1").exit_code == 2


def test_fit_relearns_the_priority_from_labelled_history(files: dict, tmp_path: Path) -> None:
    d = files["dir"]
    bad, nic = files["bad"], files["nic"]
    from aegis_slurm.metrics import iso

    labels = tmp_path / "labels.csv"
    labels.write_text(
        "file,node,onset\n"
        f"{d / 'bad.parquet'},{bad.node},{iso(bad.onset)}\n"
        f"{d / 'nic.parquet'},{nic.node},{iso(nic.onset)}\n"
        f"{d / 'ok.parquet'},,\n"
    )
    out = tmp_path / "pri.json"
    r = run("fit", str(labels), "--out", str(out))
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert sorted(doc["priority"]) == sorted(default_priority())
    # PCIe and NIC faults only: a PCIe or InfiniBand metric must top the learnt order
    assert doc["priority"][0].startswith(("DCGM_FI_PROF_PCIE", "DCGM_FI_DEV_PCIE", "node_infini"))
    r = run(str(d / "bad.parquet"), "--priority", str(out), "--json")
    assert r.exit_code == 0 and json.loads(r.stdout)["faulty"][0]["node"] == bad.node
