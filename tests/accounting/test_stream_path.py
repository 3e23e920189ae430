"""The streaming fast path for clean files gives exactly what the piece-by-piece path gives.

``ingest_files`` reads a clean file with polars' streaming CSV reader (``parse_stream``) and any
other file piece by piece (``parse_text``).  A file found dirty half-way is read again the slow
way and whatever the fast path had staged is thrown away.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_parser_properties import records, render
from test_real_exports import F1, FIX, FS

from aegis_slurm.accounting import ingest_files, load_runs, parse_export, parse_stream
from aegis_slurm.accounting.hostlists import HostlistCache, expand_series
from aegis_slurm.accounting.ingest import _text_layout, parse_clean_file
from aegis_slurm.accounting.parse_stream import NotClean
from aegis_slurm.accounting.store import RunWriter, write_runs

CLEAN = [
    ("gcm/sample-sacct-output.txt", None),
    ("gcm/sample-sacct-output-midnight-edge-case-small.txt", None),
]
DIRTY = [
    ("sacct-22.05.8_alloc.txt", F1),  # job 17's name holds the delimiter
    ("sacct-22.05.8_steps.txt", F1),
    ("sacct-22.05.8_wide_steps_header.txt", None),
    ("gcm/sample-sacct-output-invalid-utf8.txt", None),
    ("gcm/sample-sacct-output-with-invalid-lines.txt", None),
]
#: Multi-character delimiters never take the fast path (polars splits on one byte).
PIECES_ONLY = [
    ("gcm/sample-sacct-multiple-multiline.txt", None),
    ("gcm/sample-sacct-running-output.txt", None),
    ("sacct-22.05.8_spec_delim.txt", FS),
]


@pytest.fixture(autouse=True)
def small_batches(monkeypatch):
    """Many batches from small files, so a late dirty line finds batches already staged."""
    monkeypatch.setattr(parse_stream, "ROWS_PER_BATCH", 3)


def layout_of(path: Path, fields):
    with open(path, "rb") as stream:
        return _text_layout(stream, fields=fields, delimiter=None, trailing=None)


def same_table(stored: pl.DataFrame, parsed: pl.DataFrame) -> None:
    order = ["job_id_raw", "submit_time", "job_id"]
    left = stored.sort(order, nulls_last=True)
    right = parsed.sort(order, nulls_last=True)
    assert left.equals(right), (left, right)


def staged_files(store: Path) -> list[Path]:
    return sorted(store.glob("runs/month=*/.staged-*"))


def ingest_and_compare(path: Path, fields, store: Path) -> dict:
    """Ingest ``path`` into ``store`` and check it against the piece-by-piece parse."""
    report = ingest_files([path], store, fields=fields)
    expected = parse_export(path.read_bytes(), source=str(path), fields=fields)
    assert {k: report[k] for k in ("rows_read", "rows_kept", "rows_rejected")} == {
        "rows_read": expected.report.rows_read,
        "rows_kept": expected.report.rows_kept,
        "rows_rejected": expected.report.rows_rejected,
    }
    assert report["rejected_by_reason"] == dict(expected.report.rejected_by_reason)
    assert report["recovered_by_reason"] == dict(expected.report.recovered_by_reason)
    reference = store.with_name(store.name + "-reference")
    write_runs(reference, expected.runs)  # the store's own de-duplication, on the parsed runs
    same_table(load_runs(store), load_runs(reference))
    assert staged_files(store) == []
    return report


@pytest.mark.parametrize(("name", "fields"), CLEAN)
def test_clean_real_exports_take_the_fast_path_and_match(name, fields, tmp_path):
    path = FIX / name
    parsed = parse_clean_file(path, layout_of(path, fields), source=str(path))
    assert parsed.report.rows_read > 3  # several batches
    ingest_and_compare(path, fields, tmp_path)


def test_a_clean_2205_export_takes_the_fast_path_and_matches(tmp_path):
    """The real 22.05 export less job 17, whose name holds the delimiter."""
    lines = (FIX / "sacct-22.05.8_alloc.txt").read_text().splitlines(keepends=True)
    path = tmp_path / "alloc-clean.txt"
    path.write_text("".join(x for x in lines if x.count("|") == len(F1) - 1))
    parsed = parse_clean_file(path, layout_of(path, F1), source=str(path))
    assert parsed.report.rows_read == 39
    report = ingest_and_compare(path, F1, tmp_path / "store")
    assert report["rows_kept"] == 39


@pytest.mark.parametrize(("name", "fields"), PIECES_ONLY)
def test_multicharacter_delimiters_go_piece_by_piece(name, fields, tmp_path):
    path = FIX / name
    assert not parse_stream.can_stream(path, layout_of(path, fields))
    ingest_and_compare(path, fields, tmp_path)


@pytest.mark.parametrize(("name", "fields"), DIRTY)
def test_dirty_real_exports_are_refused_by_the_fast_path_and_nothing_is_lost(
    name, fields, tmp_path
):
    path = FIX / name
    with pytest.raises(NotClean):
        parse_clean_file(path, layout_of(path, fields), source=str(path))
    ingest_and_compare(path, fields, tmp_path)


HEADER = "JobIDRaw|JobID|State|Submit|Start|End|NNodes|NodeList|JobName"


def line(job: int, name: str = "train") -> str:
    return (
        f"{job}|{job}|COMPLETED|2026-01-02T00:00:00|2026-01-02T00:01:00|"
        f"2026-01-02T01:00:00|2|gpu[01-02]|{name}"
    )


GOOD = [line(job) for job in range(1, 20)]


@pytest.mark.parametrize(
    ("case", "text"),
    [
        ("blank line", "\n".join([HEADER, *GOOD[:15], "", *GOOD[15:]]) + "\n"),
        ("blank line at the end", "\n".join([HEADER, *GOOD]) + "\n\n"),
        ("short line", "\n".join([HEADER, *GOOD[:16], "17|17|FAILED", *GOOD[17:]]) + "\n"),
        ("newline in the name", "\n".join([HEADER, *GOOD[:-1], line(19, "a\nb")]) + "\n"),
        ("long line", "\n".join([HEADER, *GOOD[:-1], line(19, "a|b")]) + "\n"),
    ],
)
def test_a_dirty_line_sends_the_file_piece_by_piece(case, text, tmp_path):
    path = tmp_path / "export.txt"
    path.write_text(text)
    with pytest.raises(NotClean):
        parse_clean_file(path, layout_of(path, None), source=case)
    report = ingest_and_compare(path, None, tmp_path / "store")
    assert report["rows_kept"] >= 18


def test_invalid_utf8_late_in_a_file_is_refused_by_the_fast_path(tmp_path):
    path = tmp_path / "export.txt"
    path.write_bytes(
        ("\n".join([HEADER, *GOOD]) + "\n").encode() + line(20, "\xff").encode("latin-1") + b"\n"
    )
    with pytest.raises(NotClean):
        parse_clean_file(path, layout_of(path, None), source="utf8")
    report = ingest_and_compare(path, None, tmp_path / "store")
    assert report["recovered_by_reason"] == {"invalid UTF-8 replaced with U+FFFD": 1}


def test_a_dirty_last_line_rolls_back_what_the_fast_path_staged(tmp_path):
    """--parsable: the last line has one more field instead of the trailing delimiter.

    The delimiter count is right, so only the last batch shows it: everything before it has
    been staged by then and must go.
    """
    rows = [g + "|" for g in GOOD]
    rows[-1] = rows[-1][:-1] + "|x"
    path = tmp_path / "export.txt"
    path.write_text("\n".join([HEADER + "|", *rows]) + "\n")
    delivered: list[pl.DataFrame] = []
    with pytest.raises(NotClean, match="does not end with the delimiter"):
        parse_clean_file(path, layout_of(path, None), source="parsable", sink=delivered.append)
    assert sum(batch.height for batch in delivered) >= 15
    report = ingest_and_compare(path, None, tmp_path / "store")  # no staged part left behind
    assert report["rows_read"] == 19


def test_rollback_drops_only_what_came_after_the_savepoint(tmp_path):
    writer = RunWriter(tmp_path)
    runs = parse_export(
        (FIX / "sacct-22.05.8_alloc_epoch.txt").read_bytes(), source="a", fields=F1
    ).runs
    writer.add(runs.head(5))
    savepoint = writer.savepoint()
    writer.add(runs.slice(5, 10))
    writer.add(runs.slice(15))
    writer.rollback(savepoint)
    assert len(staged_files(tmp_path)) == 1
    writer.commit()
    assert load_runs(tmp_path).height == 5


@settings(deadline=None)
@given(
    rows=st.lists(records(), min_size=1, max_size=12, unique_by=lambda r: r["JobIDRaw"]),
    trailing=st.booleans(),
)
def test_file_ingest_equals_parsing_the_bytes(rows, trailing):
    """Whichever path a generated export takes, the stored table is the parsed one."""
    data = render(rows, "|", trailing)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.txt"
        path.write_bytes(data)
        report = ingest_files([path], Path(tmp) / "store")
        expected = parse_export(data, source=str(path))
        assert report["rows_kept"] == expected.report.rows_kept
        assert report["rejected_by_reason"] == dict(expected.report.rejected_by_reason)
        if expected.report.rows_kept:
            write_runs(Path(tmp) / "reference", expected.runs)
            same_table(load_runs(Path(tmp) / "store"), load_runs(Path(tmp) / "reference"))


def test_hostlist_cache_expands_each_list_once_and_agrees_with_no_cache():
    cache = HostlistCache(max_entries=3)
    first = pl.Series(["gpu[01-03]", "gpu01", "", "gpu[01-03]", "bad[", "n[1-2],m7"])
    second = pl.Series(["gpu01", "gpu[04-05]", "gpu[01-03]", "bad["])
    for series in (first, second, first):
        cached_nodes, cached_bad = expand_series(series, cache)
        nodes, bad = expand_series(series)
        assert cached_nodes.to_list() == nodes.to_list()
        assert cached_bad.to_list() == bad.to_list()
    assert expand_series(first, cache)[1].to_list() == [False, False, False, False, True, False]
    # Bounded: it stopped keeping new lists once full.
    assert cache.table_for(pl.Series([], dtype=pl.String)).height <= 3


SHORT_BY_ONE = "|".join(line(5).split("|")[:-1])  # no JobName field at all


@pytest.mark.parametrize("chunk_bytes", [1, 1 << 20])
def test_a_long_line_balanced_by_a_short_one_is_repaired_or_rejected_not_fatal(chunk_bytes):
    """The piece's delimiter total is right, yet two lines are broken: the CSV reader refuses the
    long one and both go the line-by-line way (this crashed the ingest; the fuzzer never drew
    two broken lines that balance)."""
    text = "\n".join([HEADER, line(1), line(2, "a|b"), line(3), SHORT_BY_ONE, line(4)]) + "\n"
    parsed = parse_export(text.encode(), source="balanced", chunk_bytes=chunk_bytes)
    report = parsed.report
    assert report.rows_read == report.rows_kept + report.rows_rejected == 5
    assert dict(report.recovered_by_reason) == {"delimiter inside a free-text field": 1}
    assert dict(report.rejected_by_reason) == {"truncated record (8 fields, 9 expected)": 1}
    names = dict(parsed.runs.select("job_id", "job_name").iter_rows())
    assert names == {"1": "train", "2": "a|b", "3": "train", "4": "train"}


def test_a_parsable_line_without_its_trailing_delimiter_is_never_cut_short():
    """``--parsable``: a last field "train|x" must not be read as "train" with "x" dropped."""
    rows = [g + "|" for g in GOOD[:4]]
    rows[-1] = rows[-1][:-1] + "|x"
    parsed = parse_export(("\n".join([HEADER + "|", *rows]) + "\n").encode(), source="p")
    assert dict(parsed.report.rejected_by_reason) == {"record does not end with the delimiter": 1}
    assert parsed.runs.get_column("job_id").to_list() == ["1", "2", "3"]
