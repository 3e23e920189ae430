"""Hostile review of session 7 (``git diff 43d156d 6d34b3b``): each test is one finding.

Fixed findings pass (the last one, a newline in a leading job name, in session 8).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from aegis_slurm.accounting import parse_export
from aegis_slurm.accounting.schema import RUN_SCHEMA
from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.goodput import goodput_lost
from aegis_slurm.analytics.job_runs import link_job_runs, size_distribution
from aegis_slurm.analytics.loops import requeue_loops
from aegis_slurm.metrics.catalog import BY_NAME, VIRTUAL_NICS

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(job: int | None, state: str, end_min: float, elapsed_min: float, **extra: Any) -> dict:
    """One run record with the real schema (8 GPUs on node n1 of cluster c unless overridden)."""
    end = T0 + timedelta(minutes=end_min)
    start = end - timedelta(minutes=elapsed_min)
    row: dict[str, Any] = dict.fromkeys(RUN_SCHEMA)
    row.update(
        cluster="c",
        job_id_raw=job,
        job_id=str(job),
        run_index=0,
        job_name=f"j{job}",
        user="u",
        account="a",
        partition="p",
        qos="normal",
        state=state,
        state_raw=state,
        ended=True,
        exit_code=0,
        exit_signal=0,
        submit_time=start - timedelta(minutes=1),
        eligible_time=start - timedelta(minutes=1),
        start_time=start,
        end_time=end,
        elapsed_s=round(elapsed_min * 60),
        n_nodes=1,
        gpus=8,
        gpu_types="",
        node_list="n1",
        nodes=["n1"],
        failed_node="",
        reason="None",
        flags="",
        comment="",
        admin_comment="",
        system_comment="",
        work_dir="",
        source="test",
    )
    row.update(extra)
    return row


def linked(rows: list[dict]) -> pl.DataFrame:
    return link_job_runs(attribute_failures(pl.DataFrame(rows, schema=RUN_SCHEMA)))


# ---- 1. parser: a line the plain split misreads takes a clean record down with it ----------


@pytest.mark.parametrize("trailing", [False, True])
def test_an_overlapping_line_after_a_clean_record_keeps_both(trailing: bool) -> None:
    """A free-text field first (gcm puts Account and AdminComment first) and ";|;": the line
    of AdminComment "a;|" splits one valid way ("a;|", JobIDRaw 2), but starts_record read the
    plain split ("a", JobIDRaw "|;2"), called it no record's start and glued it to the clean
    record before it; the 14-field block was refused and job 1 vanished with it (3 records
    written, 2 read, 1 kept)."""
    header = ["AdminComment", "JobIDRaw", "State", "Start", "End", "User", "JobName"]
    end = ";|;" if trailing else ""

    def rec(job: int, admin: str) -> list[str]:
        return [admin, str(job), "FAILED", "1600000000", "1600003600", "alice", "n"]

    rows = [header, rec(1, "x"), rec(2, "a;|"), rec(3, "y")]
    data = "\n".join(";|;".join(r) + end for r in rows) + "\n"
    parsed = parse_export(data.encode(), source="x")
    assert parsed.report.rows_read == 3
    got = dict(zip(parsed.runs["job_id"], parsed.runs["admin_comment"], strict=True))
    assert got == {"1": "x", "2": "a;|", "3": "y"}


# ---- 2. goodput: a node name is not unique across clusters ----------------------------------


def test_a_preemption_on_another_cluster_is_not_credited_to_a_restart() -> None:
    """Cluster a's job 10 fails (NODE_FAIL) and restarts on its n1; cluster b's job 20 is
    preempted on *its* n1 at that moment.  link_preemptions joined on the node name alone, so
    b's preemption was second-order goodput lost to a's failure (and a preemption "caused" by
    a's crash loop) although the two machines merely share a name."""
    rows = [
        run(10, "NODE_FAIL", 60, 60, cluster="a"),
        run(10, "COMPLETED", 200, 139, cluster="a", run_index=1),
        run(20, "PREEMPTED", 61, 60, cluster="b"),
    ]
    same_cluster = goodput_lost(linked([*rows[:2], dict(rows[2], cluster="a")]))
    assert same_cluster["preempted_runs_linked"] == 1  # the case itself links on one cluster
    other_cluster = goodput_lost(linked(rows))
    assert other_cluster["preempted_runs_linked"] == 0
    assert other_cluster["goodput_lost_second_order"] == 0.0


# ---- 3. crash loops: two equally long streaks of one job ------------------------------------


def test_a_job_with_two_equal_streaks_reports_the_same_one_every_time() -> None:
    """Three short FAILED runs, a COMPLETED one, three more FAILED runs of 10 min: two streaks
    of 3.  The loop kept whichever streak the hash group_by emitted first, so one report said
    median 5 min from 00:01 and the next 10 min from 01:10 (about half the calls each)."""
    rows, t = [], 0.0
    plan = [("FAILED", 5)] * 3 + [("COMPLETED", 50)] + [("FAILED", 10)] * 3
    for i, (state, minutes) in enumerate(plan):
        t += minutes + 1
        rows.append(run(5, state, t, minutes, run_index=i))
    table = linked(rows)
    seen = {
        (x["failed_runs"], x["first_start"], x["median_run_min"])
        for _ in range(30)
        for x in requeue_loops(table)
    }
    assert seen == {(3, T0 + timedelta(minutes=1), 5.0)}  # the first streak, every time


# ---- 4. job counts: clusters number their jobs independently --------------------------------


def test_size_distribution_counts_each_clusters_job_and_each_record_without_an_id() -> None:
    """Job 7 of cluster a, job 7 of cluster b and two array tasks of an export without
    JobIDRaw are four jobs (link_job_runs now reads them so); n_unique(job_id_raw) said 2."""
    rows = [
        run(7, "COMPLETED", 60, 60, cluster="a"),
        run(7, "COMPLETED", 60, 60, cluster="b"),
        run(None, "COMPLETED", 60, 60),
        run(None, "COMPLETED", 60, 60),
    ]
    (bucket,) = size_distribution(pl.DataFrame(rows, schema=RUN_SCHEMA))
    assert (bucket["jobs"], bucket["runs"]) == (4, 4)
    # an id beyond JobIDRaw's 32 bits is not packed with the cluster: counted exactly
    rows += [
        run(2**40, "COMPLETED", 60, 60, cluster="a"),
        run(2**40, "FAILED", 90, 20, cluster="a"),
    ]
    (bucket,) = size_distribution(pl.DataFrame(rows, schema=RUN_SCHEMA))
    assert (bucket["jobs"], bucket["runs"]) == (5, 6)


# ---- 5. Minder: virtual interfaces that come and go with VMs and pods -----------------------


def test_per_vm_and_per_pod_interfaces_are_left_out_of_the_link_series() -> None:
    """VIRTUAL_NICS named libvirt but only its bridge (virbr*): each guest's tap is vnet<N>
    (macvtap<N> with direct attachment), and Cilium gives each pod an lxc<hash> endpoint.
    They appear and vanish with every VM or pod, so node_network_up's sum moved and a vanished
    device's counters read as a counter reset of the sum (the whole total as one burst)."""
    virtual = re.compile(f"(?:{VIRTUAL_NICS})")
    for name in ("vnet0", "vnet12", "macvtap0", "lxc1a2b3c4d5e6f", "cilium_host", "podman0"):
        assert virtual.fullmatch(name), name
    for name in ("eth0", "eno1", "ens1f0np0", "enp4s0", "ib0", "ib0.8001", "bond0", "lan0"):
        assert not virtual.fullmatch(name), name
    assert BY_NAME["node_network_receive_errs_total"].exclude_devices == VIRTUAL_NICS


# ---- 6. a newline in a free-text field that comes first (fixed in session 8) ---------------


@pytest.mark.parametrize("lines", [["first line"], ["first line", "more"]])
def test_a_newline_in_a_leading_job_name_is_never_kept_truncated(lines: list[str]) -> None:
    head = "".join(f"{line}\n" for line in lines)
    data = (
        "JobName|JobIDRaw|State|End|\n"
        + head
        + "second|7|FAILED|1600000000|\n"
        + "ok|8|FAILED|1600000000|\n"
        + "stray line\n"
    )
    parsed = parse_export(data.encode(), source="x")
    names = dict(zip(parsed.runs["job_id"], parsed.runs["job_name"], strict=True))
    # kept as written (never "second"), the next record untouched, a stray last line refused
    assert names == {"7": "\n".join([*lines, "second"]), "8": "ok"}
    assert [r["line"] for r in parsed.rejected_rows] == [len(lines) + 4]
    assert parsed.report.recovered_by_reason["newline inside a free-text field (rejoined)"] == 1
