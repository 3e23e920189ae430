"""The Parquet store's merge rules and the `aegis-slurm ingest` command-line contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from aegis_slurm.accounting import ingest_files, load_runs
from aegis_slurm.accounting.schema import RUN_SCHEMA
from aegis_slurm.accounting.store import StoreError
from aegis_slurm.cli import main

FIX = Path(__file__).parent.parent / "fixtures" / "sacct"
HEADER = "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName"


def export(tmp_path: Path, name: str, *lines: str) -> Path:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def test_final_state_beats_a_stale_running_copy(tmp_path):
    running = "7|7|c|RUNNING|0:0|2026-10-31T23:00:00|2026-10-31T23:00:05|Unknown|60|1|n1|job"
    done = (
        "7|7|c|FAILED|1:0|2026-10-31T23:00:00|2026-10-31T23:00:05|2026-11-01T01:00:00|7195|1|n1|job"
    )
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", running)], store)
    ingest_files([export(tmp_path, "b.txt", done)], store)
    ingest_files([export(tmp_path, "c.txt", running)], store)  # an old export read again
    runs = load_runs(store)
    assert runs.height == 1
    assert runs.row(0, named=True)["state"] == "FAILED"
    # Partitioned by Submit month, which never changes for a run.
    assert [p.name for p in (store / "runs").iterdir()] == ["month=2026-10"]
    # Repeated keys were compacted into one part, and nothing staged was left behind.
    assert [p.name[:5] for p in (store / "runs" / "month=2026-10").iterdir()] == ["part-"]


def test_requeued_runs_across_months_are_numbered_in_order(tmp_path):
    lines = [
        "9|9|c|NODE_FAIL|0:0|2026-10-31T22:00:00|2026-10-31T22:00:01|2026-10-31T23:30:00|5399|2|n[1-2]|big",
        "9|9|c|COMPLETED|0:0|2026-11-01T00:02:00|2026-11-01T00:03:00|2026-11-01T05:00:00|17820|2|n[3-4]|big",
    ]
    store = tmp_path / "store"
    report = ingest_files([export(tmp_path, "a.txt", *lines)], store)
    assert report["rows_new_in_store"] == 2
    runs = load_runs(store).sort("run_index")
    assert runs.get_column("state").to_list() == ["NODE_FAIL", "COMPLETED"]
    assert runs.get_column("run_index").to_list() == [0, 1]
    assert runs.schema == pl.Schema(RUN_SCHEMA)
    # A time filter keeps the numbering of the whole store (the first run ended in October).
    november = load_runs(store, start=datetime(2026, 11, 1, tzinfo=UTC))
    assert november.select("state", "run_index").rows() == [("COMPLETED", 1)]


def test_a_publish_interrupted_before_compaction_never_shows_a_run_twice(tmp_path):
    line = "5|5|c|FAILED|1:0|2026-11-02T00:00:00|2026-11-02T00:00:01|2026-11-02T00:09:00|539|1|n1|x"
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", line)], store)
    [part] = (store / "runs" / "month=2026-11").glob("part-*.parquet")
    shutil.copy(part, part.with_name("part-zzzz-duplicate.parquet"))  # as if killed mid-way
    runs = load_runs(store)
    assert runs.height == 1 and runs.row(0, named=True)["run_index"] == 0


def test_rejected_records_are_saved_with_reasons(tmp_path):
    bad = [
        "1|1|c|EXPLODED|0:0|2026-11-01T00:00:00|2026-11-01T00:00:01|2026-11-01T00:01:00|59|1|n1|x",
        "2|2|c|COMPLETED|0:0|2026-11-01T00:00:00|2026-11-01T00:05:00|2026-11-01T00:01:00|0|1|n1|x",
        "3|3|c|COMPLETED|0:0|2026-13-45T00:00:00|2026-11-01T00:00:01|2026-11-01T00:01:00|59|1|n1|x",
        "4|4|c|COMPLETED|0:0|2026-11-01T00:00:00|2026-11-01T00:00:01|2026-11-01T00:01:00|59|1|n[1-|x",
        "5|5|c|COMPLETED|0:0|1970-01-01T00:00:01|2026-11-01T00:00:01|2026-11-01T00:01:00|59|1|n1|x",
        "6|6|c|COMPLETED",
    ]
    report = ingest_files([export(tmp_path, "bad.txt", *bad)], tmp_path / "s")
    assert report["rows_read"] == 6 and report["rows_kept"] == 0
    assert report["rejected_by_reason"] == {
        "unknown state 'EXPLODED'": 1,
        "End before Start": 1,
        "unparseable timestamp in Submit": 1,
        "malformed NodeList": 1,
        "impossible timestamp in Submit": 1,
        "truncated record (4 fields, 12 expected)": 1,
    }
    saved = [json.loads(line) for line in Path(report["rejected_file"]).read_text().splitlines()]
    assert sorted(r["line"] for r in saved) == [2, 3, 4, 5, 6, 7]


def test_unknown_schema_version_is_refused(tmp_path):
    (tmp_path / "meta.json").write_text('{"schema_version": 999}')
    with pytest.raises(StoreError, match="schema version 999"):
        load_runs(tmp_path)


def test_cli_json_contract(tmp_path):
    result = CliRunner().invoke(
        main,
        [
            "ingest",
            str(FIX / "sacct-22.05.8_wide_steps_header.txt"),
            "--store",
            str(tmp_path / "s"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert list(report)[:5] == [
        "rows_read",
        "rows_kept",
        "rows_rejected",
        "rejected_by_reason",
        "store",
    ]
    assert (
        report["rows_read"]
        == report["rows_kept"] + report["rows_rejected"] + report["rows_skipped"]
    )


def test_cli_explains_a_headerless_export(tmp_path):
    result = CliRunner().invoke(
        main, ["ingest", str(FIX / "sacct-22.05.8_alloc.txt"), "--store", str(tmp_path / "s")]
    )
    assert result.exit_code == 1
    assert "pass the field list used with sacct --format (--fields)" in result.output


def test_cli_live_mode_needs_a_window(tmp_path):
    result = CliRunner().invoke(main, ["ingest", "--sacct", "--store", str(tmp_path)])
    assert result.exit_code == 2
    assert "--start and --end" in result.output


def test_every_command_has_help():
    from aegis_slurm.cli import COMMANDS

    for name in COMMANDS:
        result = CliRunner().invoke(main, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output


@pytest.mark.parametrize(
    ("slurm", "pyslurm", "backend"),
    [
        ("slurm 22.05.8", None, "sacct"),
        ("slurm 22.05.8", "25.11.2", "sacct"),
        (None, "22.05.1", "sacct"),
        ("slurm 25.11.1", "25.11.2", "pyslurm"),
    ],
)
def test_pyslurm_is_used_only_when_it_matches_the_installed_slurm(slurm, pyslurm, backend):
    from aegis_slurm.accounting.pyslurm_backend import choose_backend

    chosen, why = choose_backend(slurm, pyslurm)
    assert chosen == backend and why


ALLOCATOR_PROBE = """
import os, sys
from aegis_slurm.cli import main
assert "polars" not in sys.modules  # so the setting below is in place when polars loads
main(["ingest", "--help"], standalone_mode=False)
import polars  # appends what it finds to its own defaults; the last setting wins
print("CONF=" + os.environ["_RJEM_MALLOC_CONF"])
"""


@pytest.mark.parametrize(
    ("preset", "expected"),
    [(None, "dirty_decay_ms:5000,muzzy_decay_ms:5000"), ("dirty_decay_ms:0", "dirty_decay_ms:0")],
)
def test_cli_tunes_polars_allocator_before_polars_loads_unless_the_admin_did(preset, expected):
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"}
    if preset is not None:
        env["_RJEM_MALLOC_CONF"] = preset
    done = subprocess.run(
        [sys.executable, "-c", ALLOCATOR_PROBE], env=env, capture_output=True, text=True, check=True
    )
    conf = done.stdout.strip().splitlines()[-1]
    assert conf.startswith("CONF=") and conf.endswith(f",{expected}"), conf
