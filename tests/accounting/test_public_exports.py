"""Exports other projects recorded from real clusters: every valid record kept, right values.

Provenance: tests/fixtures/sacct/README.md (reportseff, slurm2sql).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from aegis_slurm.accounting import ingest_files, load_runs, parse_export

FIX = Path(__file__).parent.parent / "fixtures" / "sacct"
REPORTSEFF_11 = [
    *("AdminComment", "AllocCPUS", "Elapsed", "JobID", "JobIDRaw", "MaxRSS", "NNodes"),
    *("NTasks", "REQMEM", "State", "TotalCPU"),
]
REPORTSEFF_12 = [*REPORTSEFF_11[:10], "Timelimit", "TotalCPU"]


def by_id(runs) -> dict[str, dict]:
    return {r["job_id"]: r for r in runs.iter_rows(named=True)}


def test_reportseff_headerless_caret_pipe_export_with_trailing_delimiter(tmp_path):
    path = FIX / "reportseff" / "console_jobs_11_fields.txt"
    # No --delimiter: ^|^ is told from the data and the field list.
    report = ingest_files([path], tmp_path / "s", fields=REPORTSEFF_11)
    assert report["rows_read"] == 12
    assert (report["rows_kept"], report["rows_rejected"], report["rows_skipped"]) == (4, 0, 8)
    runs = by_id(load_runs(tmp_path / "s"))
    assert set(runs) == {"25569410", "24418435", "24220929_421", "24220929_431"}
    assert runs["25569410"]["elapsed_s"] == 21 * 3600 + 14 * 60 + 48
    assert runs["24418435"]["elapsed_s"] == 3600 + 27 * 60 + 42
    task = runs["24220929_421"]
    assert (task["job_id_raw"], task["array_job_id"], task["array_task_id"]) == (
        24221219,
        24220929,
        421,
    )
    assert runs["24220929_431"]["state"] == "PENDING"
    assert all(r["n_nodes"] == 1 for r in runs.values())
    # No AllocTRES, no NodeList in the export: unknown, not zero.
    assert all(r["gpus"] is None for r in runs.values())


def test_reportseff_export_with_timelimit_and_a_canceller():
    data = (FIX / "reportseff" / "console_jobs_12_fields.txt").read_bytes()
    parsed = parse_export(data, source="reportseff", fields=REPORTSEFF_12)
    assert parsed.report.rows_rejected == 0
    runs = by_id(parsed.runs)
    assert runs["24418435"]["timelimit_s"] == 3 * 3600
    cancelled = runs["23000233"]
    assert (cancelled["state"], cancelled["cancelled_by_uid"]) == ("CANCELLED", 129319)
    assert cancelled["timelimit_s"] == 6 * 86400


@pytest.mark.parametrize("name", ["test-data1.csv", "test-data2.csv"])
def test_slurm2sql_triton_exports(name):
    parsed = parse_export((FIX / "slurm2sql" / name).read_bytes(), source=name, source_tz="UTC")
    report = parsed.report
    assert (report.rows_read, report.rows_kept, report.rows_rejected) == (5, 2, 0)
    assert report.rows_skipped == 3
    runs = by_id(parsed.runs)
    first = runs["43974388"]
    assert first["state_raw"] == "CANCELLED by 1300204"
    assert first["cancelled_by_uid"] == 1300204
    assert first["user"] == "user1" and first["partition"] == "jupyter-long"
    assert first["submit_time"] == datetime(2019, 7, 31, 22, 29, 13, tzinfo=UTC)
    assert first["end_time"] == datetime(2019, 8, 1, 2, 2, 39, tzinfo=UTC)
    assert first["elapsed_s"] == 3 * 3600 + 33 * 60 + 25
    assert first["timelimit_s"] == 5 * 86400
    assert first["nodes"] == ["pe2"] and first["n_nodes"] == 1
    second = runs["43977780"]
    assert second["end_time"] is None and second["elapsed_s"] == 17


def test_slurm2sql_export_read_in_the_clusters_time_zone():
    """Triton is in Finland: with --tz the same records land three hours earlier in UTC."""
    data = (FIX / "slurm2sql" / "test-data1.csv").read_bytes()
    runs = by_id(parse_export(data, source="t", source_tz="Europe/Helsinki").runs)
    assert runs["43974388"]["submit_time"] == datetime(2019, 7, 31, 19, 29, 13, tzinfo=UTC)
