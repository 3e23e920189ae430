"""The ingest on every real recorded sacct export (tests/fixtures/sacct, see its README)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import ingest_files, load_runs, parse_export

FIX = Path(__file__).parent.parent / "fixtures" / "sacct"
F1 = [
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Partition",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "ReqTRES",
    "Reason",
    "Comment",
    "AdminComment",
    "Flags",
]
FS = [
    "JobIDRaw",
    "JobID",
    "Cluster",
    "User",
    "Account",
    "Partition",
    "QOS",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ElapsedRaw",
    "TimelimitRaw",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "NNodes",
    "AllocTRES",
    "ReqTRES",
    "NodeList",
    "Priority",
    "Reason",
    "WorkDir",
    "JobName",
]


def parse(name: str, fields: list[str] | None = None):
    return parse_export((FIX / name).read_bytes(), source=name, fields=fields)


def accounted(report) -> bool:
    return report.rows_read == report.rows_kept + report.rows_rejected + report.rows_skipped


@pytest.fixture(scope="module")
def alloc() -> pl.DataFrame:
    parsed = parse("sacct-22.05.8_alloc.txt", F1)
    assert accounted(parsed.report)
    return parsed.runs


def one(runs: pl.DataFrame, job_id: str) -> dict:
    rows = runs.filter(pl.col("job_id") == job_id).sort("submit_time").to_dicts()
    assert len(rows) == 1, rows
    return rows[0]


def test_every_2205_allocation_is_kept_and_the_pipe_name_recovered():
    parsed = parse("sacct-22.05.8_alloc.txt", F1)
    assert parsed.report.rows_read == 40
    assert parsed.report.rows_kept == 40
    assert parsed.report.recovered_by_reason == {"delimiter inside a free-text field": 1}
    assert one(parsed.runs, "17")["job_name"] == "name|with pipe"


@pytest.mark.parametrize(
    ("job_id", "state", "exit_code", "exit_signal"),
    [
        ("1", "TIMEOUT", 0, 0),
        ("4", "FAILED", 1, 0),
        ("5", "FAILED", 0, 9),
        ("10", "OUT_OF_MEMORY", 0, 125),
        ("27", "PREEMPTED", 0, 0),
        ("31", "NODE_FAIL", 0, 0),
        ("14_2", "FAILED", 2, 0),
    ],
)
def test_end_states_and_exit_codes(alloc, job_id, state, exit_code, exit_signal):
    row = one(alloc, job_id)
    assert (row["state"], row["exit_code"], row["exit_signal"]) == (state, exit_code, exit_signal)
    assert row["ended"] is True


def test_derived_exit_code_of_a_failed_step(alloc):
    row = one(alloc, "6")
    assert (row["state"], row["derived_exit_code"]) == ("COMPLETED", 3)


def test_cancelled_by_uid_and_never_started(alloc):
    running, pending = one(alloc, "7"), one(alloc, "8")
    assert running["state_raw"] == "CANCELLED by 0" and running["cancelled_by_uid"] == 0
    assert pending["start_time"] is None
    assert pending["nodes"] == [] and pending["node_list"] == ""


def test_gpu_count_never_adds_typed_and_untyped(alloc):
    row = one(alloc, "2")
    assert (row["gpus"], row["gpu_types"], row["n_nodes"]) == (32, "h100", 4)
    assert row["nodes"] == ["node5", "node6", "node7", "node8"]
    assert one(alloc, "3")["gpus"] == 1
    assert one(alloc, "4")["gpus"] == 0


def test_requeued_runs_are_separate_rows(alloc):
    loop = alloc.filter(pl.col("job_id") == "12").sort("submit_time")
    assert loop.get_column("state").to_list() == ["REQUEUED"] * 3 + ["FAILED"]
    assert loop.get_column("exit_code").to_list() == [42, 42, 42, 1]
    assert loop.get_column("submit_time").n_unique() == 4  # Submit is reset per run
    node_fail = alloc.filter(pl.col("job_id") == "30").sort("submit_time")
    assert node_fail.get_column("state").to_list() == ["NODE_FAIL", "COMPLETED"]


def test_array_and_het_ids_are_split(alloc):
    task = one(alloc, "14_0")
    assert (task["job_id_raw"], task["array_job_id"], task["array_task_id"]) == (18, 14, 0)
    het = one(alloc, "15+1")
    assert (het["job_id_raw"], het["het_job_id"], het["het_job_offset"]) == (16, 15, 1)
    assert het["array_job_id"] is None


def test_times_are_utc(alloc):
    row = one(alloc, "1")
    assert row["start_time"] == datetime(2026, 11, 21, 17, 56, 42, tzinfo=UTC)
    assert row["elapsed_s"] == 87


def test_epoch_export_equals_iso_export(alloc):
    epoch = parse("sacct-22.05.8_alloc_epoch.txt", F1).runs
    assert epoch.drop("source").equals(alloc.drop("source"))


def test_steps_are_skipped_and_counted():
    parsed = parse("sacct-22.05.8_steps.txt", F1)
    assert parsed.report.rows_kept == 40
    assert parsed.report.skipped_by_reason == {"job step (not an allocation)": 80}
    assert accounted(parsed.report)


def test_trailing_multichar_delimiter_export_matches(alloc):
    spec = parse("sacct-22.05.8_spec_delim.txt", FS)
    assert spec.report.rows_kept == 40 and not spec.report.rejected_by_reason
    cols = ["job_id", "submit_time", "state", "exit_code", "gpus", "nodes", "elapsed_s"]
    assert spec.runs.select(cols).sort(cols[:2]).equals(alloc.select(cols).sort(cols[:2]))
    assert one(spec.runs, "17")["job_name"] == "name|with pipe"
    assert one(spec.runs, "1")["timelimit_s"] == 60


def test_header_export_with_pipe_in_two_fields_is_rejected_with_reason():
    parsed = parse("sacct-22.05.8_wide_steps_header.txt")
    assert parsed.report.rows_kept == 39
    [(reason, count)] = parsed.report.rejected_by_reason.items()
    assert count == 1 and reason.startswith("delimiter inside free-text fields: no unique repair")
    assert (
        parsed.rejected_rows[0]["line"] == 50 or "name|with pipe" in parsed.rejected_rows[0]["text"]
    )
    assert accounted(parsed.report)


def test_json_export_matches_text_except_lost_exit_codes(alloc):
    parsed = parse("sacct-22.05.8_duplicates.json")
    assert parsed.report.rows_kept == 40
    cols = ["job_id", "submit_time", "state", "gpus", "nodes", "start_time", "end_time"]
    assert parsed.runs.select(cols).sort(cols[:2]).equals(alloc.select(cols).sort(cols[:2]))
    unknown = parsed.runs.filter(pl.col("exit_code").is_null()).get_column("job_id")
    assert sorted(unknown) == ["12", "14_1", "14_2", "4"]  # 22.05 JSON lost their exit 1/2
    assert one(parsed.runs, "5")["exit_signal"] == 9


def test_gcm_multiline_records_are_rejoined():
    parsed = parse("gcm/sample-sacct-multiple-multiline.txt")
    assert parsed.report.recovered_by_reason["newline inside a free-text field (rejoined)"] == 3
    assert not parsed.report.rejected_by_reason
    assert accounted(parsed.report)
    # The newline sits in SubmitLine; the fields after it must land in the right columns.
    rejoined = parsed.runs.filter(pl.col("job_id_raw") == 201844)
    assert rejoined.height == 3
    assert set(rejoined.get_column("work_dir")) == {"/home/test_user/cluster/project"}
    assert set(rejoined.get_column("state")) == {"REQUEUED"}
    assert set(rejoined.get_column("gpus")) == {256}


def test_gcm_invalid_utf8_is_replaced_not_fatal():
    parsed = parse("gcm/sample-sacct-output-invalid-utf8.txt")
    assert parsed.report.recovered_by_reason == {"invalid UTF-8 replaced with U+FFFD": 1}
    assert accounted(parsed.report)
    assert parsed.report.rows_kept == 2


def test_gcm_truncated_record_is_rejected_with_reason():
    parsed = parse("gcm/sample-sacct-output-with-invalid-lines.txt")
    assert parsed.report.rows_kept == 0
    assert parsed.report.rejected_by_reason == {"truncated record (93 fields, 109 expected)": 1}


def test_gcm_cancelled_by_large_uid_and_partial_field_set():
    parsed = parse("gcm/sample-sacct-output-midnight-edge-case-small.txt")
    assert parsed.report.rows_kept == 3
    assert set(parsed.runs.get_column("cancelled_by_uid")) == {1185300516}
    assert parsed.runs.get_column("start_time").null_count() == 3  # no Start column: unknown


@pytest.mark.parametrize(
    "name",
    [
        "gcm/sample-sacct-output.txt",
        "gcm/sample-sacct-running-output.txt",
        "gcm/sample-sacct-one-multiline.txt",
    ],
)
def test_gcm_samples_are_fully_accounted(name):
    parsed = parse(name)
    assert parsed.report.rows_read > 0
    assert accounted(parsed.report)


def test_ingest_files_into_store_is_idempotent(tmp_path):
    first = ingest_files([FIX / "sacct-22.05.8_spec_delim.txt"], tmp_path, fields=FS)
    assert first["rows_kept"] == 40
    runs = load_runs(tmp_path)
    ingest_files([FIX / "sacct-22.05.8_spec_delim.txt"], tmp_path, fields=FS)
    again = load_runs(tmp_path)
    assert again.height == runs.height == 40
    crash = again.filter(pl.col("job_id") == "12").sort("run_index")
    assert crash.get_column("run_index").to_list() == [0, 1, 2, 3]
    assert crash.get_column("state").to_list()[-1] == "FAILED"


@pytest.mark.parametrize(
    ("name", "fields"),
    [
        ("sacct-22.05.8_alloc.txt", F1),
        ("sacct-22.05.8_steps.txt", F1),
        ("sacct-22.05.8_spec_delim.txt", FS),
        ("gcm/sample-sacct-multiple-multiline.txt", None),
        ("gcm/sample-sacct-output-invalid-utf8.txt", None),
    ],
)
def test_parsing_in_tiny_pieces_gives_the_same_table(name, fields):
    """Pieces are cut only before complete records, so cutting everywhere changes nothing."""
    data = (FIX / name).read_bytes()
    whole = parse_export(data, source=name, fields=fields)
    pieces = parse_export(data, source=name, fields=fields, chunk_bytes=1)
    assert pieces.runs.equals(whole.runs)
    assert pieces.report.as_dict() == whole.report.as_dict()
