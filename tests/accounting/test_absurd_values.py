"""Values no job has are rejected with a reason; values an export lacks are null (items 5-8)."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pytest

from aegis_slurm.accounting import parse_export
from aegis_slurm.accounting.hostlists import MAX_NODES_PER_LIST
from aegis_slurm.errors import InputError

HEADER = (
    "JobIDRaw|JobID|State|ExitCode|Submit|Start|End|ElapsedRaw|TimelimitRaw|NNodes|NodeList|"
    "AllocTRES|JobName"
)


def record(job: int, **values: str) -> str:
    fields = {
        "State": "COMPLETED",
        "Submit": "2026-11-01T10:00:00",
        "Start": "2026-11-01T10:00:00",
        "End": "2026-11-01T11:00:00",
        "ElapsedRaw": "3600",
        "TimelimitRaw": "120",
        "NNodes": "1",
        "NodeList": "gpu001",
        "AllocTRES": "cpu=8,gres/gpu=8,node=1",
    } | values
    return (
        f"{job}|{job}|{fields['State']}|0:0|{fields['Submit']}|{fields['Start']}|{fields['End']}|"
        f"{fields['ElapsedRaw']}|{fields['TimelimitRaw']}|{fields['NNodes']}|{fields['NodeList']}|"
        f"{fields['AllocTRES']}|job{job}"
    )


def parse(*lines: str, tz: str = "UTC"):
    return parse_export("\n".join([HEADER, *lines]).encode(), source="t", source_tz=tz)


def test_sacct_default_format_leaves_nodes_and_gpus_unknown():
    # `sacct -P` with no --format: JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode
    data = b"JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode\n"
    data += b"7|train|gpu|ml|8|COMPLETED|0:0\n"
    run = parse_export(data, source="t").runs.row(0, named=True)
    assert run["n_nodes"] is None
    assert run["gpus"] is None


def test_present_but_gpu_free_alloctres_is_zero_gpus():
    run = parse(record(1, AllocTRES="cpu=8,node=1")).runs.row(0, named=True)
    assert run["gpus"] == 0
    assert run["n_nodes"] == 1


@pytest.mark.parametrize(
    ("values", "reason"),
    [
        ({"ElapsedRaw": "-3600"}, "negative ElapsedRaw"),
        ({"ElapsedRaw": "9000000000000000000"}, "implausible ElapsedRaw (over ten years)"),
        ({"ElapsedRaw": str(1000 * 86400)}, "ElapsedRaw longer than End - Start"),
        ({"AllocTRES": "cpu=8,gres/gpu=2147483647,node=1"}, "implausible GPU count in AllocTRES"),
        ({"AllocTRES": "gres/gpu=99999999999999999999"}, "implausible GPU count in AllocTRES"),
        ({"AllocTRES": "gres/gpu:h100=4294967296"}, "implausible GPU count in AllocTRES"),
        ({"NNodes": "-1"}, "negative NNodes"),
        ({"NNodes": "99999999999"}, "implausible NNodes"),
        ({"TimelimitRaw": "-5"}, "negative TimelimitRaw"),
        ({"TimelimitRaw": "9223372036854775807"}, "implausible TimelimitRaw"),
    ],
)
def test_absurd_numbers_are_rejected_with_a_reason(values, reason):
    parsed = parse(record(1), record(2, **values))
    assert parsed.runs.get_column("job_id").to_list() == ["1"]
    assert dict(parsed.report.rejected_by_reason) == {reason: 1}
    assert parsed.rejected_rows[0]["line"] == 3


def test_suspended_time_and_an_hour_of_clock_change_are_not_absurd():
    parsed = parse(record(1, ElapsedRaw="1800"), record(2, ElapsedRaw="7200"))
    assert parsed.report.rows_kept == 2


def test_node_list_bound_is_on_the_whole_list_not_each_range():
    ranges = ",".join(f"{k * 100000}-{k * 100000 + 24999}" for k in range(40))
    huge = f"n[{ranges}]"
    nested = "a[0-999]b[0-999]"  # python-hostlist's path: a million names
    fine = f"n[1-{MAX_NODES_PER_LIST}]"
    parsed = parse(
        record(1, NodeList=huge, NNodes="1000000"),
        record(2, NodeList=nested, NNodes="1000000"),
        record(3, NodeList=fine, NNodes=str(MAX_NODES_PER_LIST)),
    )
    assert parsed.report.rejected_by_reason == {"malformed NodeList": 2}
    run = parsed.runs.row(0, named=True)
    assert run["job_id"] == "3" and len(run["nodes"]) == MAX_NODES_PER_LIST


def test_daylight_saving_fall_back_is_resolved_with_elapsed_raw():
    # Europe/Berlin, 2026-10-25: 03:00 CEST becomes 02:00 CET, so 02:00-02:59 happens twice.
    parsed = parse(
        # starts in the first 02:30 (CEST), ends 40 min later in the second 02:10 (CET)
        record(1, Start="2026-10-25T02:30:00", End="2026-10-25T02:10:00", ElapsedRaw="2400"),
        # starts before the change, ends in the second pass of the repeated hour
        record(2, Start="2026-10-25T01:50:00", End="2026-10-25T02:20:00", ElapsedRaw="5400"),
        # entirely in the first pass
        record(3, Start="2026-10-25T02:05:00", End="2026-10-25T02:15:00", ElapsedRaw="600"),
        tz="Europe/Berlin",
    )
    assert parsed.report.rows_rejected == 0
    runs = {r["job_id"]: r for r in parsed.runs.iter_rows(named=True)}
    assert runs["1"]["start_time"] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert runs["1"]["end_time"] == datetime(2026, 10, 25, 1, 10, tzinfo=UTC)
    assert runs["2"]["start_time"] == datetime(2026, 10, 24, 23, 50, tzinfo=UTC)
    assert runs["2"]["end_time"] == datetime(2026, 10, 25, 1, 20, tzinfo=UTC)
    assert runs["3"]["start_time"] == datetime(2026, 10, 25, 0, 5, tzinfo=UTC)
    assert runs["3"]["end_time"] == datetime(2026, 10, 25, 0, 15, tzinfo=UTC)


@pytest.mark.parametrize("tz", ["Mars/Olympus", "", "../../etc/passwd", "UTC+99"])
def test_invalid_time_zone_is_an_input_error(tz):
    with pytest.raises(InputError, match="unknown time zone"):
        parse(record(1), tz=tz)


def test_many_big_node_lists_are_expanded_in_batches_with_the_same_result(monkeypatch):
    """3,000 distinct 4,096-node lists took 2.4 GB in one pass; batches bound the peak."""
    from aegis_slurm.accounting import hostlists

    lists = pl.Series(
        "node_list",
        [f"gpu[{j:04d}-{j + 4095:04d}]" for j in range(0, 40, 3)]
        + ["n1", "", "None assigned", "bad[1-", "a[1-2]b[3-4]", "x[1-3],y[7-9],z", None]
        + [f"r{j}n[001-{MAX_NODES_PER_LIST + 1}]" for j in range(2)],
    )
    whole = hostlists._expansion_table(lists)
    calls = []
    one_pass = hostlists._expansion_table
    monkeypatch.setattr(hostlists, "_BATCH_NAMES", 10_000)
    monkeypatch.setattr(
        hostlists, "_expansion_table", lambda part: calls.append(part.len()) or one_pass(part)
    )
    batched = hostlists.expansion_table(lists)
    assert len(calls) > 3 and max(calls) < lists.len()
    assert batched.to_dicts() == whole.to_dicts()
    assert batched.filter(pl.col("node_list") == "gpu[0000-4095]")["nodes"][0].len() == 4096


def test_the_hostlist_cache_is_bounded_by_names_not_only_by_lists():
    from aegis_slurm.accounting.hostlists import HostlistCache, expand_series

    cache = HostlistCache(max_names=5_000)
    big = pl.Series([f"gpu[{j:04d}-{j + 4095:04d}]" for j in range(3)])
    nodes, bad = expand_series(big, cache)  # still expanded, just not all kept
    assert nodes.list.len().to_list() == [4096] * 3 and not bad.any()
    kept = cache.table_for(pl.Series([], dtype=pl.String))
    assert kept.get_column("nodes").list.len().sum() <= 5_000
