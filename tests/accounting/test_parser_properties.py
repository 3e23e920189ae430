"""Property-based fuzzing of the record parser and the hostlist expansion."""

from __future__ import annotations

import hostlist
import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from aegis_slurm.accounting import parse_export
from aegis_slurm.accounting.hostlists import expand_series
from aegis_slurm.accounting.layout import Layout

FIELDS = [
    "JobIDRaw",
    "JobID",
    "JobName",
    "User",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "ElapsedRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "Comment",
    "AdminComment",
]
STATES = [
    "COMPLETED",
    "FAILED",
    "NODE_FAIL",
    "TIMEOUT",
    "CANCELLED by 1001",
    "PREEMPTED",
    "RUNNING",
    "REQUEUED",
]

# "\r" is left out: a CR before the line feed is read as a CRLF line ending.
names = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters="\r"),
    max_size=12,
)
free_text = st.one_of(
    names, st.sampled_from(["a|b", "x\ny", "|", "", "a;|;b", "<b>&amp;", "\n", "p\nq|r", "\n\n"])
)


@st.composite
def records(draw) -> dict[str, str]:
    job = draw(st.integers(1, 10**7))
    start = draw(st.integers(1_600_000_000, 1_900_000_000))
    elapsed = draw(st.integers(0, 10**6))
    nodes = draw(st.lists(st.integers(1, 64), min_size=1, max_size=6, unique=True))
    gpus = draw(st.integers(0, 8)) * len(nodes)
    return {
        "JobIDRaw": str(job),
        "JobID": str(job),
        "JobName": draw(free_text),
        "User": draw(st.sampled_from(["alice", "bob"])),
        "State": draw(st.sampled_from(STATES)),
        "ExitCode": f"{draw(st.integers(0, 255))}:{draw(st.integers(0, 64))}",
        "Submit": str(start - 10),
        "Start": str(start),
        "End": str(start + elapsed),
        "ElapsedRaw": str(elapsed),
        "NNodes": str(len(nodes)),
        "NodeList": hostlist.collect_hostlist([f"gpu{n:03d}" for n in nodes]),
        "AllocTRES": f"cpu=8,gres/gpu:h100={gpus},gres/gpu={gpus},node={len(nodes)}",
        "Comment": draw(free_text),
        "AdminComment": draw(free_text),
    }


def render(rows: list[dict[str, str]], delimiter: str, trailing: bool) -> bytes:
    end = delimiter if trailing else ""
    lines = [delimiter.join(FIELDS) + end]
    lines += [delimiter.join(r[f] for f in FIELDS) + end for r in rows]
    return ("\n".join(lines) + "\n").encode("utf-8")


def clean(record: dict[str, str], delimiter: str) -> bool:
    """No delimiter or newline inside a field, and a line that splits one way only: with a
    delimiter that overlaps itself, Comment ";|" then AdminComment "" is written exactly as
    Comment "" then AdminComment "|;", and no parser can tell which was meant."""
    layout = Layout(tuple(FIELDS), delimiter, trailing=False, has_header=True)
    line = delimiter.join(record[f] for f in FIELDS)
    return all(
        delimiter not in record[f] and "\n" not in record[f] and "\r" not in record[f]
        for f in ("JobName", "Comment", "AdminComment")
    ) and not any(mark in line for mark in layout.overlap_marks)


@given(
    rows=st.lists(records(), min_size=1, max_size=12, unique_by=lambda r: r["JobIDRaw"]),
    delimiter=st.sampled_from(["|", ";|;", "|#"]),
    trailing=st.booleans(),
)
def test_parser_never_loses_or_corrupts_a_record(rows, delimiter, trailing):
    parsed = parse_export(render(rows, delimiter, trailing), source="fuzz")
    report = parsed.report
    assert report.rows_read == report.rows_kept + report.rows_rejected + report.rows_skipped
    kept = {r["job_id"]: r for r in parsed.runs.to_dicts()}
    for record in rows:
        got = kept.get(record["JobID"])
        if clean(record, delimiter):
            assert got is not None, record
        if got is None:
            continue  # rejected, with a counted reason
        # Whatever was kept must be exactly what was written: a repair may never guess wrong.
        assert got["job_name"] == record["JobName"]
        assert got["comment"] == record["Comment"]
        assert got["admin_comment"] == record["AdminComment"]
        assert got["state_raw"] == record["State"]
        assert got["elapsed_s"] == int(record["ElapsedRaw"])
        assert got["nodes"] == hostlist.expand_hostlist(record["NodeList"])
        assert got["gpus"] * 1 == int(record["AllocTRES"].split("gres/gpu=")[1].split(",")[0])


@given(st.lists(st.binary(max_size=200), max_size=20))
def test_garbage_after_a_header_never_crashes(lines):
    data = b"JobIDRaw|JobID|State|Start|End|NodeList|JobName\n" + b"\n".join(lines)
    report = parse_export(data, source="garbage").report
    assert report.rows_read == report.rows_kept + report.rows_rejected + report.rows_skipped


host_sets = st.lists(
    st.tuples(
        st.sampled_from(["gpu", "node", "rack1-n", "a"]),
        st.integers(0, 1200),
        st.sampled_from([1, 2, 4]),
    ),
    min_size=1,
    max_size=40,
).map(lambda items: sorted({f"{p}{n:0{w}d}" for p, n, w in items}))


@given(st.lists(host_sets, min_size=1, max_size=8))
def test_vectorized_hostlist_expansion_matches_python_hostlist(sets):
    compressed = [hostlist.collect_hostlist(s) for s in sets]
    nodes, bad = expand_series(pl.Series(compressed))
    assert not any(bad)
    assert nodes.to_list() == [hostlist.expand_hostlist(c) for c in compressed]


@given(st.text(alphabet="ab01-,[]", max_size=16))
def test_hostlist_expansion_agrees_or_flags_bad_input(text):
    nodes, bad = expand_series(pl.Series([text]))
    try:
        expected = hostlist.expand_hostlist(text) if text.strip() else []
    except hostlist.BadHostlist:
        expected = None
    if bad[0]:
        return  # we refuse it: the record is rejected with "malformed NodeList"
    assert expected is not None, text
    assert nodes[0].to_list() == expected
