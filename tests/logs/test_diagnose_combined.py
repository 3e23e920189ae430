"""``aegis-slurm diagnose``: Epilog signals and the L4 log verdict joined, each source named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.errors import EXIT_NO_DATA
from aegis_slurm.node import spool

from .corpus import healthy_baseline, make_case

JOB = "4711"
XID79 = {
    "signal": "xid79",
    "kind": "critical",
    "critical": True,
    "time": "2026-11-02T11:59:00+00:00",
    "detail": "XID 79 on 0000:9b:00",
    "pci": "0000:9b:00",
}


@pytest.fixture(scope="module")
def ecc(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("combined")
    case = make_case(root / "failed", "ecc", 11)
    healthy_baseline(root / "baseline", 11)
    return case


def write_spool(spool_dir: Path, nodes: list[str], critical_on: str | None) -> None:
    for n in nodes:
        spool.append(
            spool_dir,
            {
                "v": 1,
                "node": n,
                "job_id": JOB,
                "run": 0,
                "cluster": "c",
                "captured_at": "2026-11-02T12:00:01+00:00",
                "signals": [XID79] if n == critical_on else [],
            },
        )


def diagnose(*args: str) -> tuple[int, dict]:
    r = CliRunner().invoke(main, ["diagnose", JOB, *args, "--json"])
    return r.exit_code, json.loads(r.stdout)


def test_signals_and_logs_agree_and_both_are_named(ecc, tmp_path: Path) -> None:
    write_spool(tmp_path / "spool", ecc.nodes, ecc.culprit)
    code, out = diagnose("--spool", str(tmp_path / "spool"), "--logs", str(ecc.path))
    assert code == 0
    assert out["verdict"] == "critical" and out["nodes"] == [ecc.culprit]  # Algorithm 1 keys
    assert out["logs"]["nodes"][0]["node"] == ecc.culprit
    assert next(iter(out["named_by"])) == ecc.culprit
    assert out["named_by"][ecc.culprit] == ["signals", "logs"]
    assert out["metrics"] is None


def test_logs_name_the_culprit_when_the_epilog_saw_nothing(ecc, tmp_path: Path) -> None:
    # no hardware fingerprint anywhere: Algorithm 1 has no culprit, the logs do
    write_spool(tmp_path / "spool", ecc.nodes, None)
    code, out = diagnose("--spool", str(tmp_path / "spool"), "--logs", str(ecc.path))
    assert code == 0
    assert out["nodes"] == []
    assert next(iter(out["named_by"])) == ecc.culprit
    assert out["named_by"][ecc.culprit] == ["logs"]
    human = CliRunner().invoke(
        main, ["diagnose", JOB, "--spool", str(tmp_path / "spool"), "--logs", str(ecc.path)]
    )
    assert human.output.startswith(f"culprit: {ecc.culprit} (named by logs)")


def test_logs_alone_answer_without_any_epilog_record(ecc, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out = diagnose("--spool", str(tmp_path / "empty"), "--logs", str(ecc.path))
    assert code == 0 and out["verdict"] == "no-records"
    assert out["named_by"][ecc.culprit] == ["logs"]


def test_a_down_prometheus_is_the_metrics_error_never_a_clean_bill(ecc, tmp_path: Path) -> None:
    write_spool(tmp_path / "spool", ecc.nodes, ecc.culprit)
    code, out = diagnose(
        "--spool",
        str(tmp_path / "spool"),
        "--prometheus",
        "http://127.0.0.1:9",
        "--nodes",
        ",".join(ecc.nodes),
    )
    assert code == 0  # the signals still answer
    assert set(out["metrics"]) == {"error"} and out["metrics"]["error"]
    assert out["named_by"] == {ecc.culprit: ["signals"]}


def test_no_source_with_data_is_exit_no_data(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    code, out = diagnose("--spool", str(tmp_path / "empty"))
    assert code == EXIT_NO_DATA and out["verdict"] == "no-records" and out["named_by"] == {}


def test_a_log_file_name_is_never_a_culprit_node(tmp_path: Path) -> None:
    # an unprefixed combined stdout is read as one unit named after the file; with the job's
    # nodes known, that name is not a node and must not be printed as the culprit
    log = tmp_path / "slurm-4711.out"
    log.write_text(
        "step 10 loss 2.3\n" * 50
        + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    )
    other = tmp_path / "slurm-4711.err"
    other.write_text("step 10 loss 2.3\n" * 50)
    code, out = diagnose("--nodes", "gpu[01-02]", "--logs", str(tmp_path))
    assert code == 0 and out["logs"] and "error" not in out["logs"]
    assert {n["node"] for n in out["logs"]["nodes"]} & {"slurm-4711"}  # the logs' own view
    assert "slurm-4711" not in out["named_by"]
