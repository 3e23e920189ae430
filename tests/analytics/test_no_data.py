"""A period, or a store, with no run: every analytics command and ``report`` exit 4 with one
line (like ``check``), never "0 runs" and exit 0 -- an empty month after a failed ingest must not
look like a clean month."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from aegis_slurm.accounting import ingest_files
from aegis_slurm.cli import main

HEADER = (
    "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|AllocTRES"
)
ROW = (
    "{i}|{i}|c|{state}|0:0|2024-01-0{d}T00:00:00|2024-01-0{d}T00:00:00|2024-01-0{d}T10:00:00|"
    "36000|1|n00{i}|cpu=8,gres/gpu=8,node=1"
)
COMMANDS = [
    "taxonomy",
    "failure-rate",
    "mttf",
    "goodput",
    "requeue-loops",
    "lemon-nodes",
    "measured-ettr",
    "availability",
]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("nodata")
    rows = [ROW.format(i=i, d=i, state="FAILED" if i == 2 else "COMPLETED") for i in (1, 2, 3)]
    (root / "a.txt").write_text("\n".join([HEADER, *rows]) + "\n")
    ingest_files([root / "a.txt"], root / "full")
    (root / "h.txt").write_text(HEADER + "\n")
    ingest_files([root / "h.txt"], root / "empty")
    (root / "ev.txt").write_text(
        "Cluster|Cluster Nodes|NodeName|TimeStart|TimeEnd|State|Reason|User|Event\n"
        "c||n002|2024-01-02T09:58:00|2024-01-02T12:00:00|DOWN|Not responding|root|Node\n"
    )
    return root / "full", root / "empty", root / "ev.txt"


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_month_is_no_data(stores, command):
    full, _, ev = stores
    res = _invoke(command, "--store", str(full), "--events", str(ev), "--month", "2024-03")
    assert res.exit_code == 4, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aegis-slurm: error: no run ended in 2024-03")
    # The month that has runs still answers, with and without a period.
    ok = _invoke(command, "--store", str(full), "--events", str(ev), "--month", "2024-01")
    assert ok.exit_code == 0, ok.output
    assert _invoke(command, "--store", str(full), "--events", str(ev)).exit_code == 0


@pytest.mark.parametrize("command", COMMANDS)
def test_an_empty_store_is_no_data(stores, command):
    _, empty, ev = stores
    res = _invoke(command, "--store", str(empty), "--events", str(ev), "--json")
    assert res.exit_code == 4, res.output
    assert (
        res.output.strip()
        == f"aegis-slurm: error: no run ended in the store: nothing to analyse ({empty})"
    )


def test_report_of_an_empty_month_is_no_data_and_writes_nothing(stores, tmp_path):
    full, _, ev = stores
    out = tmp_path / "r"
    res = _invoke(
        "report", "--store", str(full), "--events", str(ev), "--month", "2024-03", "--out", str(out)
    )
    assert res.exit_code == 4, res.output
    assert res.output.strip().startswith("aegis-slurm: error: no run ended in 2024-03")
    assert not out.exists()
    good = _invoke(
        "report", "--store", str(full), "--month", "2024-01", "--out", str(out), "--json"
    )
    assert good.exit_code == 0, good.output
