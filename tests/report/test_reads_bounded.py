"""Issue 13, scale: with a period, no command and not the report reads the whole history.

Every read of the runs table goes through ``accounting.store._load_runs``; on a store with
three years of runs, each analytics command with ``--month``, ``report`` (with and without
``--month``), ``check`` and ``diagnose`` must read only windows near the month (the report's
12-month trend: eleven months more) and never the unwindowed whole store.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from aegis_slurm.accounting import ingest_files
from aegis_slurm.accounting import store as store_mod
from aegis_slurm.cli import main

HEADER = (
    "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|AllocTRES"
)
FMT = "%Y-%m-%dT%H:%M:%S"
MONTH = "2027-06"
MONTH_START = datetime(2027, 6, 1, tzinfo=UTC)
MONTH_END = datetime(2027, 7, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bounded")
    lines = []
    t = datetime(2026, 1, 1, tzinfo=UTC)
    raw = 1000
    while t < datetime(2028, 12, 1, tzinfo=UTC):  # a run every 2 days for three years
        raw += 1
        state = "FAILED" if raw % 5 == 0 else "COMPLETED"
        end = t + timedelta(hours=20)
        lines.append(
            f"{raw}|{raw}|c|{state}|{int(state == 'FAILED')}:0|{t.strftime(FMT)}|"
            f"{t.strftime(FMT)}|{end.strftime(FMT)}|72000|32|n[{raw % 50:03d}-{raw % 50 + 31:03d}]|"
            "cpu=64,gres/gpu=256,node=32"
        )
        t += timedelta(days=2)
    path = root / "a.txt"
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    ingest_files([path], root / "store")
    (root / "events.txt").write_text(
        "Cluster|Cluster Nodes|NodeName|TimeStart|TimeEnd|State|Reason|User|Event\n"
        "c||n007|2027-06-10T00:00:00|2027-06-10T05:00:00|DOWN|Not responding|root|Node\n"
    )
    return root / "store"


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    real = store_mod._load_runs

    def spy(
        store: Path,
        files: list[Path],
        start: Any,
        end: Any,
        where: Any = None,
        columns: Any = None,
    ) -> Any:
        seen.append({"start": start, "end": end, "where": where, "columns": columns})
        return real(store, files, start, end, where, columns)

    monkeypatch.setattr(store_mod, "_load_runs", spy)
    return seen


COMMANDS = [
    "taxonomy",
    "failure-rate",
    "mttf",
    "goodput",
    "requeue-loops",
    "lemon-nodes",
    "measured-ettr",
    "availability",
    "check",
]


def _run(*args: str) -> None:
    res = CliRunner().invoke(main, list(args))
    assert res.exit_code in (0, 3, 4), res.output  # 3: a check crossed, 4: no data


@pytest.mark.parametrize("command", COMMANDS)
def test_a_command_with_a_month_reads_only_the_month_and_its_context(store, reads, command):
    events = str(store.parent / "events.txt")
    _run(command, "--store", str(store), "--events", events, "--month", MONTH, "--json")
    assert reads, "the command read no runs at all"
    for r in reads:
        assert r["start"] is not None and r["end"] is not None, r
        assert r["start"] >= MONTH_START - timedelta(days=35), r
        assert r["end"] <= MONTH_END + timedelta(days=35), r
        # Projected: the columns its sections declare, never the export's free text.
        assert r["columns"] is not None and "work_dir" not in r["columns"], r


@pytest.mark.parametrize("month", [MONTH, None])
def test_the_report_reads_its_month_and_the_trend_year_only(store, reads, tmp_path, month):
    args = ["report", "--store", str(store), "--out", str(tmp_path / "r"), "--json"]
    _run(*args, *(["--month", month] if month else []))
    assert reads
    year_before = datetime(2026, 7, 1, tzinfo=UTC) if month else datetime(2027, 12, 1, tzinfo=UTC)
    for r in reads:
        assert r["start"] is not None and r["start"] >= year_before - timedelta(days=35), r
        assert r["columns"] is not None and "work_dir" not in r["columns"], r


def test_diagnose_reads_one_job(store, reads):
    _run("diagnose", "1100", "--store", str(store), "--json")
    assert reads and all(r["where"] is not None for r in reads), reads
