"""Hostile and odd exports (issue 12, items 1-4, 9, 10): refused clearly or read whole."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from aegis_slurm.accounting import ingest_files, load_runs, parse_export
from aegis_slurm.accounting.layout import ExportFormatError
from aegis_slurm.accounting.parse_json import JsonExportError
from aegis_slurm.accounting.repair import TEXT_BYTES, TINYTEXT_BYTES

FIX = Path(__file__).parent.parent / "fixtures" / "sacct"
ALLOC = FIX / "sacct-22.05.8_alloc.txt"  # headerless, F1 fields, `|`
F1 = [
    *("JobID", "JobIDRaw", "JobName", "User", "Partition", "State", "ExitCode"),
    *("DerivedExitCode", "Submit", "Eligible", "Start", "End", "Elapsed", "ElapsedRaw"),
    *("NNodes", "NodeList", "AllocTRES", "ReqTRES", "Reason", "Comment", "AdminComment", "Flags"),
]
HEADER = "JobIDRaw|JobID|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName"


def line(job: int, name: str = "train") -> str:
    return (
        f"{job}|{job}|COMPLETED|0:0|2026-11-01T10:00:00|2026-11-01T10:00:05|"
        f"2026-11-01T11:00:05|3600|1|gpu{job:03d}|{name}"
    )


def alloc_records() -> int:
    return len(ALLOC.read_bytes().splitlines())


@pytest.mark.parametrize("delimiter", ["\t", "☃", ";|;"])
def test_headerless_export_with_another_delimiter_is_detected_from_the_data(delimiter):
    data = ALLOC.read_text().replace("|", delimiter).encode()
    parsed = parse_export(data, source="x", fields=F1)
    reference = parse_export(ALLOC.read_bytes(), source="x", fields=F1, delimiter="|")
    assert parsed.report.rows_read == alloc_records()
    assert parsed.report.rows_rejected == reference.report.rows_rejected
    assert (
        parsed.runs.get_column("job_id").to_list() == reference.runs.get_column("job_id").to_list()
    )


def test_headerless_export_whose_delimiter_cannot_be_told_is_refused():
    # Fields given do not match the data: no character splits it into that many fields.
    with pytest.raises(ExportFormatError, match="cannot tell the delimiter"):
        parse_export(ALLOC.read_bytes().replace(b"|", b"\t"), source="x", fields=F1[:-3])


def test_concatenated_exports_with_another_delimiter_are_rejected_not_swallowed():
    first = [line(j) for j in range(1, 4)]
    second = [line(j).replace("|", "\t") for j in range(10, 110)]
    data = "\n".join([HEADER, *first, *second]).encode() + b"\n"
    report = parse_export(data, source="x").report
    assert report.rows_kept == 3
    assert report.rows_rejected == 100
    assert report.rows_read == 103
    assert not report.recovered_by_reason
    runs = parse_export(data, source="x").runs
    assert runs.get_column("job_name").to_list() == ["train"] * 3


def test_sacct_error_message_from_2_and_1_is_a_counted_rejection():
    data = "\n".join(
        [HEADER, line(1), "sacct: error: slurmdbd: Connection refused", line(2)]
    ).encode()
    parsed = parse_export(data, source="x")
    assert parsed.report.rows_kept == 2
    assert parsed.report.rejected_by_reason == {"a message from a Slurm command, not a record": 1}
    assert parsed.runs.get_column("job_name").to_list() == ["train", "train"]


def test_a_long_run_of_delimiter_free_lines_is_not_one_job_name():
    # slurmdbd keeps a job name in 255 bytes: more lines than that are not the rest of one.
    junk = [f"log line {k}" for k in range(TINYTEXT_BYTES // 10 + 1)]
    data = "\n".join([HEADER, line(1), *junk, line(2)]).encode()
    parsed = parse_export(data, source="x")
    assert parsed.report.rows_kept == 2
    assert parsed.report.rows_rejected == len(junk)
    assert parsed.report.rows_read == 2 + len(junk)
    assert parsed.runs.get_column("job_name").to_list() == ["train", "train"]


SCRIPT = "#!/bin/bash\n" + "\n".join(f"srun python step{k}.py --seed {k}" for k in range(300))


@pytest.mark.parametrize("last", [False, True], ids=["comment-in-the-middle", "comment-last"])
def test_a_whole_batch_script_in_a_free_text_field_is_kept(last):
    # sbatch --wrap "$(cat job.sh)" or --comment "$(cat job.sh)": hundreds of lines, one value.
    comments = ["short", SCRIPT, ""]
    if last:  # the continuation lines end the record
        header = HEADER + "|Comment"
        rows = [f"{line(j)}|{c}" for j, c in enumerate(comments, start=1)]
    else:
        header = HEADER.replace("|JobName", "|Comment|JobName")
        rows = [line(j).replace("|train", f"|{c}|train") for j, c in enumerate(comments, start=1)]
    parsed = parse_export("\n".join([header, *rows]).encode() + b"\n", source="x")
    assert parsed.report.rejected_by_reason == {}
    assert parsed.report.rows_kept == 3
    assert parsed.runs.get_column("comment").to_list() == comments
    assert parsed.runs.get_column("job_name").to_list() == ["train"] * 3


def test_a_run_longer_than_any_stored_comment_is_rejected_line_by_line():
    header = HEADER + "|Comment"
    junk = ["x" * 99] * (TEXT_BYTES // 100 + 1)
    rows = [line(1) + "|first", *junk, line(2) + "|"]
    parsed = parse_export("\n".join([header, *rows]).encode(), source="x")
    assert parsed.report.rows_kept == 2
    assert parsed.report.rows_rejected == len(junk)
    assert parsed.runs.get_column("comment").to_list() == ["first", ""]


def test_a_short_continuation_is_still_rejoined():
    data = "\n".join([HEADER, line(1, "two"), "lines", line(2)]).encode()
    parsed = parse_export(data, source="x")
    assert parsed.runs.get_column("job_name").to_list() == ["two\nlines", "train"]


@pytest.mark.parametrize("ending", [b"\r", b"\r\n"])
def test_cr_line_ends_are_read(tmp_path, ending):
    path = tmp_path / "cr.txt"
    path.write_bytes(ending.join(text.encode() for text in [HEADER, line(1), line(2)]) + ending)
    report = ingest_files([path], tmp_path / "store")
    assert (report["rows_read"], report["rows_kept"]) == (2, 2)
    runs = load_runs(tmp_path / "store")
    assert sorted(runs.get_column("job_name").to_list()) == ["train", "train"]


def test_whitespace_only_last_line_does_not_break_the_record_before():
    # F1's last field (Flags) is not free text: the blank line cannot belong to the record.
    data = ALLOC.read_bytes() + b"   \n"
    parsed = parse_export(data, source="x", fields=F1, delimiter="|")
    reference = parse_export(ALLOC.read_bytes(), source="x", fields=F1, delimiter="|")
    assert parsed.report.rows_read == reference.report.rows_read
    assert parsed.report.rows_rejected == reference.report.rows_rejected
    assert parsed.runs.height == reference.runs.height


@pytest.mark.parametrize(
    ("encode", "name"),
    [
        (lambda t: b"\xef\xbb\xbf" + t.encode(), "utf-8 BOM"),
        (lambda t: t.encode("utf-16"), "utf-16 with BOM"),
        (lambda t: t.encode("utf-16-le"), "utf-16-le without BOM"),
    ],
)
def test_bom_and_utf16_exports_are_read(tmp_path, encode, name):
    path = tmp_path / "export.txt"
    path.write_bytes(encode("\n".join([HEADER, line(1, "naïve"), line(2)]) + "\n"))
    report = ingest_files([path], tmp_path / "store")
    assert report["rows_kept"] == 2, name
    assert sorted(load_runs(tmp_path / "store").get_column("job_name")) == ["naïve", "train"]


def test_export_from_a_fifo_is_read(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    payload = ("\n".join([HEADER, line(1), line(2)]) + "\n").encode()

    def writer() -> None:
        with open(fifo, "wb") as handle:
            handle.write(payload)

    thread = threading.Thread(target=writer)
    thread.start()
    report = ingest_files([fifo], tmp_path / "store")
    thread.join(timeout=10)
    assert (report["rows_read"], report["rows_kept"]) == (2, 2)


def test_a_column_named_like_an_internal_one_is_kept_apart():
    data = "\n".join([HEADER + "|_line|_jobid", line(1) + "|zzz|yyy"]).encode()
    parsed = parse_export(data, source="x")
    assert parsed.report.rows_kept == 1
    assert parsed.runs.row(0, named=True)["job_id"] == "1"


@pytest.mark.parametrize(
    "document",
    [
        b'{"jobs": [{"job_id": 1, "time": "soon", "state": {"current": ["COMPLETED"]}}]}',
        b'{"jobs": [{"job_id": NaN, "state": {"current": "COMPLETED"}, '
        b'"time": {"end": Infinity}}]}',
        b'{"jobs": [{"job_id": 1, "state": "COMPLETED", "array": [], "het": 3, "tres": "x"}]}',
        b'{"jobs": "none"}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jobs": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}",
    ],
)
def test_malformed_json_is_a_clear_error_or_a_counted_rejection(document):
    try:
        parsed = parse_export(document, source="x")
    except JsonExportError as exc:
        assert str(exc)
        return
    report = parsed.report
    assert report.rows_read == report.rows_kept + report.rows_rejected + report.rows_skipped
    if b"NaN" in document:  # no job id: never a row
        assert report.rows_rejected == 1


def _num(n: int) -> dict[str, object]:
    return {"set": True, "infinite": False, "number": n}


def _job_2311(job_id: int, **extra: object) -> dict[str, object]:
    """One job as Slurm 23.11+ ``sacct --json`` (data_parser v0.0.40) prints it."""
    job: dict[str, object] = {
        "job_id": job_id,
        "name": "train",
        "user": "alice",
        "account": "ml",
        "partition": "gpu",
        "qos": "normal",
        "cluster": "c1",
        "nodes": "gpu[001-002]",
        "allocation_nodes": 2,
        "state": {"current": ["FAILED"], "reason": "None"},
        "exit_code": {
            "status": ["SIGNALED"],
            "return_code": _num(0),
            "signal": {"id": _num(9), "name": "KILL"},
        },
        "derived_exit_code": {"status": ["SUCCESS"], "return_code": _num(0), "signal": {}},
        "time": {
            "submission": 1_790_000_000,
            "eligible": 1_790_000_000,
            "start": 1_790_000_010,
            "end": 1_790_003_610,
            "elapsed": 3600,
            "limit": _num(120),
        },
        "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 16}]},
    }
    job.update(extra)
    return job


def _json(*jobs: dict[str, object]) -> bytes:
    import json

    return json.dumps(
        {"meta": {"slurm": {"version": {"major": "23", "minor": "11"}}}, "jobs": jobs}
    ).encode()


def test_sacct_json_2311_signal_failed_node_canceller_and_pending_nodes():
    data = _json(
        _job_2311(1, failed_node="gpu002"),
        _job_2311(2, state={"current": ["CANCELLED"]}, kill_request_user="bob"),
        _job_2311(
            3,
            state={"current": ["PENDING"], "reason": "Priority"},
            allocation_nodes=0,
            nodes="None assigned",
            time={"submission": 1_790_000_000, "start": 0, "end": 0, "elapsed": 0},
            tres={"allocated": []},
        ),
    )
    runs = {r["job_id"]: r for r in parse_export(data, source="x").runs.iter_rows(named=True)}
    assert runs["1"]["exit_signal"] == 9
    assert runs["1"]["failed_node"] == "gpu002"
    assert runs["1"]["gpus"] == 16 and runs["1"]["n_nodes"] == 2
    assert runs["2"]["state"] == "CANCELLED"
    assert runs["2"]["state_raw"] == "CANCELLED by bob"
    assert runs["3"]["state"] == "PENDING"
    assert runs["3"]["n_nodes"] == 0


@pytest.mark.parametrize("command", ["squeue", "scontrol"])
def test_squeue_and_scontrol_json_are_refused(command):
    job = {"job_id": 5, "job_state": ["RUNNING"], "name": "x", "nodes": "n1", "user_name": "a"}
    with pytest.raises(JsonExportError, match="not an accounting export"):
        parse_export(_json(job), source=f"{command}.json")


def test_sacct_table_output_is_refused_by_name():
    data = (FIX / "sacct-22.05.8_table.txt").read_bytes()
    with pytest.raises(ExportFormatError, match=r"fixed-width table.*--parsable2"):
        parse_export(data, source="table")


def test_a_sacct_error_transcript_is_refused_by_name():
    data = (FIX / "sacct-22.05.8_unsupported_fields.txt").read_bytes()
    with pytest.raises(ExportFormatError, match=r"error message from Slurm.*Restarts"):
        parse_export(data, source="errors")


def test_a_header_with_an_empty_column_name_is_read():
    # A `|` in a job name too: the repaired record is built under the same column names.
    data = "\n".join([HEADER.replace("|NNodes|", "||"), line(1), line(2, "a|b")]).encode()
    parsed = parse_export(data, source="x")
    assert parsed.report.rows_kept == 2
    assert parsed.runs.get_column("job_name").to_list() == ["train", "a|b"]
    assert parsed.runs.get_column("n_nodes").to_list() == [1, 1]  # NodeList; NNodes unnamed


# A delimiter that overlaps itself (";|;" has ";" at both ends): ";|" at a field's edge makes
# ";|;|;", which splits two ways.  Found by the property test (test_parser_properties).
OVERLAP_HEADER = (
    "JobIDRaw;|;State;|;ExitCode;|;Start;|;End;|;JobName;|;User;|;Comment;|;AdminComment"
)


def overlap_line(job: int, name: str, user: str, comment: str, admin: str) -> str:
    fields = [str(job), "FAILED", "1:0", "1600000000", "1600003600", name, user, comment, admin]
    return ";|;".join(fields)


@pytest.mark.parametrize("trailing", [False, True])
def test_an_overlapping_delimiter_next_to_a_checked_field_splits_the_one_valid_way(trailing):
    # ";|;" + ";|" + ";|;" + "alice": "" then User "|;alice" is not a user name; ";|" then
    # "alice" is the one valid reading, on the fast path's lines and the repair path's alike.
    end = ";|;" if trailing else ""
    rows = [overlap_line(1, ";|", "alice", "c", "a"), overlap_line(2, "train", "bob", "", "")]
    data = "\n".join(r + end for r in [OVERLAP_HEADER, *rows]) + "\n"
    parsed = parse_export(data.encode(), source="x")
    assert parsed.report.rows_kept == 2
    got = {r["job_id"]: r for r in parsed.runs.to_dicts()}
    assert (got["1"]["job_name"], got["1"]["user"]) == (";|", "alice")
    assert got["2"]["job_name"] == "train"


def test_an_overlapping_delimiter_between_two_free_text_fields_is_a_counted_rejection():
    # Comment ";|" then AdminComment "" is written as Comment "" then AdminComment "|;":
    # either reading is valid, so the record is refused with a reason, never guessed.
    rows = [overlap_line(1, "x", "alice", ";|", ""), overlap_line(2, "train", "bob", "", "")]
    data = ("\n".join([OVERLAP_HEADER, *rows]) + "\n").encode()
    parsed = parse_export(data, source="x")
    assert parsed.runs.get_column("job_id").to_list() == ["2"]
    assert parsed.report.rejected_by_reason == {"the delimiter overlaps itself: no unique split": 1}
    assert parsed.report.rows_read == 2
