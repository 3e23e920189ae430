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


REPORTSEFF_63 = [*REPORTSEFF_11[:10], "SubmitLine", "Timelimit", "TotalCPU"]


@pytest.mark.parametrize("parsable", [False, True], ids=["parsable2", "parsable"])
@pytest.mark.parametrize("delimiter", [None, "^|^"], ids=["detected", "given"])
def test_reportseff_issue_63_multi_line_submit_line(delimiter, parsable):
    """A SubmitLine cut by a newline, in the first lines and with AdminComment first: the
    delimiter was not told (no single line had 13 fields) and, given, the rest of the SubmitLine
    ("echo goodbye^|^20:00:00^|^00:00.042") passed for a record start: 4 rejections, 0 kept.
    reportseff's fix was ``--parsable``: the same records with a trailing delimiter, which the
    cut first line alone did not show."""
    data = (FIX / "reportseff" / "issue63_multiline_submitline.txt").read_bytes()
    if parsable:
        lines = data.split(b"\n")
        data = b"\n".join(line + b"^|^" if k in (1, 3, 4) else line for k, line in enumerate(lines))
    parsed = parse_export(data, source="x", fields=REPORTSEFF_63, delimiter=delimiter)
    report = parsed.report
    assert (report.rows_read, report.rows_kept, report.rows_rejected) == (3, 1, 0)
    assert report.recovered_by_reason == {"newline inside a free-text field (rejoined)": 2}
    [run] = parsed.runs.iter_rows(named=True)
    assert (run["job_id"], run["state"], run["elapsed_s"]) == ("59374177", "COMPLETED", 2)
    assert (run["n_nodes"], run["timelimit_s"]) == (1, 20 * 3600)


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


XDMOD = FIX / "xdmod"
XDMOD_FIELDS = [
    *("jobid", "jobidraw", "cluster", "partition", "qos", "account", "group", "gid", "user"),
    *("uid", "submit", "eligible", "start", "end", "elapsed", "exitcode", "state", "nnodes"),
    *("ncpus", "reqcpus", "reqmem", "reqtres", "alloctres", "timelimit", "nodelist", "jobname"),
]


def epoch(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp())


def test_xdmod_shredder_inputs_read_as_xdmod_reads_them():
    """XDMoD's own parser's values (shredder/output) are the oracle, field by field."""
    import json

    data = (XDMOD / "shredder" / "input" / "accounting-logs.log").read_bytes()
    parsed = parse_export(data, source="xdmod", fields=XDMOD_FIELDS)
    assert (parsed.report.rows_read, parsed.report.rows_rejected) == (4, 0)
    runs = by_id(parsed.runs)
    expected = json.loads((XDMOD / "shredder" / "output" / "accounting-logs.json").read_text())
    assert len(expected) == 4
    for want in expected:
        got = runs[want["job_id"]]
        assert got["job_id_raw"] == int(want["job_id_raw"])
        assert got["partition"] == want["partition_name"]
        assert got["qos"] == want["qos_name"]
        assert got["user"] == want["user_name"]
        assert got["account"] == want["account_name"]
        assert epoch(got["submit_time"]) == want["submit_time"]
        assert epoch(got["eligible_time"]) == want["eligible_time"]
        assert epoch(got["start_time"]) == want["start_time"]
        assert epoch(got["end_time"]) == want["end_time"]
        assert got["elapsed_s"] == want["elapsed"]
        assert f"{got['exit_code']}:{got['exit_signal']}" == want["exit_code"]
        assert got["state_raw"] == want["state"]
        assert got["n_nodes"] == int(want["nnodes"])
        assert got["timelimit_s"] == want["timelimit"]
        assert got["node_list"] == want["node_list"]
        assert got["job_name"] == want["job_name"]
        assert got["gpus"] == want["ngpus"]


def test_xdmod_array_placeholders_and_multibyte_names():
    data = (XDMOD / "shredder" / "input" / "accounting-logs-with-job-arrays.log").read_bytes()
    parsed = parse_export(data, source="xdmod", fields=XDMOD_FIELDS)
    assert (parsed.report.rows_kept, parsed.report.rows_rejected) == (6, 0)
    assert parsed.runs.get_column("array_job_id").to_list() == [4103947] * 6
    data = (XDMOD / "shredder" / "input" / "utf8-multibyte-chars.log").read_bytes()
    runs = parse_export(data, source="xdmod", fields=XDMOD_FIELDS).runs
    assert runs.get_column("job_name").to_list() == ["aàb"]


def test_xdmod_open_and_unknown_states():
    """XDMoD skips open states and unknown ones; we keep open runs (not ended) and reject
    unknown states with a reason: nothing is silently dropped."""
    data = (XDMOD / "shredder" / "input" / "non-ended-job-state.log").read_bytes()
    runs = parse_export(data, source="xdmod", fields=XDMOD_FIELDS).runs
    assert runs.select("state", "ended").rows() == [("RUNNING", False), ("PENDING", False)]
    data = (XDMOD / "shredder" / "input" / "unknown-job-state.log").read_bytes()
    report = parse_export(data, source="xdmod", fields=XDMOD_FIELDS).report
    assert report.rejected_by_reason == {"unknown state 'FOO'": 1, "unknown state 'BAR'": 1}


def test_xdmod_reference_log_every_record_kept_with_its_values(tmp_path):
    """4,285 anonymised records: each one's values checked against the text it came from."""
    path = XDMOD / "phillips.log"
    report = ingest_files([path], tmp_path / "s", fields=XDMOD_FIELDS)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert (report["rows_read"], report["rows_kept"], report["rows_rejected"]) == (
        len(lines),
        len(lines),
        0,
    )
    runs = load_runs(tmp_path / "s")
    assert runs.height == len(lines)
    got = {(r["job_id"], epoch(r["submit_time"])): r for r in runs.iter_rows(named=True)}
    for line in lines:
        f = dict(zip(XDMOD_FIELDS, line.split("|"), strict=True))
        submit = int(datetime.fromisoformat(f["submit"]).replace(tzinfo=UTC).timestamp())
        run = got[(f["jobid"], submit)]
        assert run["state_raw"] == f["state"]
        assert run["user"] == f["user"] and run["partition"] == f["partition"]
        assert run["n_nodes"] == int(f["nnodes"])
        assert run["node_list"] == ("" if f["nodelist"] == "None assigned" else f["nodelist"])
        assert run["job_name"] == f["jobname"]
        days, _, clock = f["elapsed"].rpartition("-")
        h, m, s = (int(x) for x in clock.split(":"))
        assert run["elapsed_s"] == int(days or 0) * 86400 + h * 3600 + m * 60 + s
        gpus = [kv.split("=")[1] for kv in f["alloctres"].split(",") if kv.startswith("gres/gpu=")]
        assert run["gpus"] == (int(gpus[0]) if gpus else 0)
        if f["end"] != "Unknown":
            end = datetime.fromisoformat(f["end"]).replace(tzinfo=UTC)
            assert run["end_time"] == end
