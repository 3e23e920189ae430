"""Attribution of infrastructure failures: window, evidence order, exclusions (spec §2.1)."""

from __future__ import annotations

import polars as pl
import pytest
from runs_helpers import events, frame, run, signals

from aegis_slurm.analytics.attribution import attribute_failures


def by_job(df: pl.DataFrame) -> dict[int, dict]:
    return {r["job_id_raw"]: r for r in df.to_dicts()}


@pytest.mark.parametrize(
    ("offset_min", "inside"),
    [(-10.5, False), (-9.5, True), (0.0, True), (4.9, True), (5.5, False)],
)
def test_signal_window_is_end_minus_10_to_end_plus_5(offset_min, inside):
    runs = frame([run(1, "FAILED", 100, 60, ["n1", "n2"])])
    sig = signals([("n2", 100 + offset_min, "gpu_xid79", True)])
    r = by_job(attribute_failures(runs, sig))[1]
    assert r["infra_failure"] is inside
    assert r["attribution_source"] == ("node_signal" if inside else None)


def test_non_critical_and_foreign_node_signals_do_not_count():
    runs = frame([run(1, "FAILED", 100, 60, ["n1"])])
    sig = signals([("n1", 99, "temp_warn", False), ("n9", 99, "gpu_xid79", True)])
    assert not by_job(attribute_failures(runs, sig))[1]["infra_failure"]


def test_evidence_order_tag_then_signal_then_event_then_node_fail():
    tag = "user note; aegis:v1;hw=n3:ib_link_down,n4:pcie_aer"
    runs = frame(
        [
            run(1, "FAILED", 100, 60, ["n1"], admin_comment="aegis:v1;hw=n1:fs_mount"),
            run(2, "FAILED", 200, 60, ["n3", "n4"], admin_comment=tag),
            run(3, "FAILED", 300, 60, ["n5"]),
            run(4, "NODE_FAIL", 400, 60, ["n6", "n7"]),
            run(5, "NODE_FAIL", 500, 60, ["n8"]),
            run(6, "FAILED", 600, 60, ["n9"]),
            run(7, "COMPLETED", 700, 60, ["n1"]),
        ]
    )
    sig = signals([("n1", 99, "gpu_xid79", True), ("n9", 599, "gpu_xid79", True)])
    ev = events([("n5", 301, "DRAIN", "xid 48"), ("n3", 201, "DOWN", "Not responding")])
    out = by_job(attribute_failures(runs, sig, ev))
    # The job's own tag comes before windowed node evidence.
    assert (out[1]["attribution_source"], out[1]["cause"]) == ("admin_comment", "fs_mount")
    assert (out[2]["attribution_source"], out[2]["cause"]) == ("admin_comment", "ib_link_down")
    assert out[2]["blamed_nodes"] == ["n3", "n4"]
    assert (out[3]["attribution_source"], out[3]["cause"]) == ("node_event", "xid 48")
    assert (out[4]["attribution_source"], out[4]["cause"]) == ("node_fail", "unattributed")
    assert out[4]["blamed_nodes"] is None  # multi-node, no evidence: nobody to blame
    assert out[5]["blamed_nodes"] == ["n8"]  # one node: it can only be that one
    assert (out[6]["attribution_source"], out[6]["cause"]) == ("node_signal", "gpu_xid79")
    assert not out[7]["infra_failure"]
    assert sum(r["infra_failure"] for r in out.values()) == 6


def test_prolog_epilog_and_maintenance_drains_are_ignored_by_default():
    runs = frame([run(i, "FAILED", 100 * i, 30, [f"n{i}"]) for i in (1, 2, 3)])
    ev = events(
        [
            ("n1", 101, "DRAIN", "Prolog error"),
            ("n2", 201, "DRAIN", "Epilog error"),
            ("n3", 301, "DRAIN", "testbed: scheduled maintenance"),
        ]
    )
    assert not attribute_failures(runs, None, ev)["infra_failure"].any()
    assert attribute_failures(runs, None, ev, exclude_event_reasons=None)["infra_failure"].all()


def test_failed_node_field_is_blamed_for_node_fail():
    runs = frame([run(1, "NODE_FAIL", 100, 60, ["n1", "n2"], failed_node="n2")])
    assert by_job(attribute_failures(runs))[1]["blamed_nodes"] == ["n2"]


def _streak(job: int, nodes: int, minutes: float, n: int, state: str = "NODE_FAIL") -> list[dict]:
    names = [f"x{i}" for i in range(nodes)]
    return [
        run(job, state, 1000 + i * (minutes + 5), minutes, names, gpus=8 * nodes, run_index=i)
        for i in range(n)
    ] + [run(job, "COMPLETED", 1000 + n * (minutes + 5) + 600, 600, names, 8 * nodes, run_index=n)]


def test_crash_loop_bad_luck_test_for_all_infrastructure_streaks():
    from aegis_slurm.analytics.job_runs import link_job_runs
    from aegis_slurm.analytics.loops import requeue_loops

    # 512 nodes, three 20-min NODE_FAIL runs: short, but at r_f = 0.0065 (MTTF 7.2 h) three
    # quick failures in a row happen by chance on a big cluster ...
    big = frame(_streak(1, 512, 20, 3))
    linked = link_job_runs(attribute_failures(big))
    assert [x["job_id_raw"] for x in requeue_loops(linked)] == [1]
    assert requeue_loops(linked, rf=0.0065) == []
    # ... while eight 5-min NODE_FAILs of an 8-node job are not bad luck (p ~ 1e-30).
    loop = link_job_runs(attribute_failures(frame(_streak(2, 8, 5, 8))))
    found = requeue_loops(loop, rf=0.0065)
    assert [x["job_id_raw"] for x in found] == [2] and found[0]["poisson_p"] < 1e-20
    # User-side loops (RequeueExit, REQUEUED exit 42) never need the test.
    user = [r | {"exit_code": 42} for r in _streak(3, 512, 20, 3, state="REQUEUED")]
    assert [
        x["job_id_raw"]
        for x in requeue_loops(link_job_runs(attribute_failures(frame(user))), rf=0.0065)
    ] == [3]


def test_event_reason_with_a_pipe_is_kept_whole():
    """Admins write free text in drain reasons; a `|` in it must not drop or shift the event."""
    from aegis_slurm.accounting.events import parse_events_text

    text = (
        "Cluster|Cluster Nodes|NodeName|TimeStart|TimeEnd|State|Reason|User|Event\n"
        "c||gpu[01-02]|2026-11-21T17:56:59|2026-11-21T17:57:27|DOWN|xid 79|gpu lost|root(0)|Node\n"
    )
    events = parse_events_text(text)
    assert events.height == 2
    assert set(events.get_column("reason")) == {"xid 79|gpu lost"}


def _job_signals(rows: list[tuple[str, float, str, str, int]]) -> pl.DataFrame:
    """Collected Epilog signals: (node, minute, signal, job_id, run)."""
    from datetime import timedelta

    from runs_helpers import T0

    return pl.DataFrame(
        [
            {
                "node": n,
                "time": T0 + timedelta(minutes=m),
                "signal": s,
                "critical": True,
                "cluster": "c",
                "job_id": j,
                "run": r,
            }
            for n, m, s, j, r in rows
        ],
        schema={
            "node": pl.String,
            "time": pl.Datetime("us", "UTC"),
            "signal": pl.String,
            "critical": pl.Boolean,
            "cluster": pl.String,
            "job_id": pl.String,
            "run": pl.Int32,
        },
    )


def test_another_jobs_epilog_record_is_never_evidence():
    """Found on the real test cluster: a user's exit 3 was counted as hardware because the next
    job on that node recorded a row-remap 22 s later."""
    runs = frame(
        [
            run(1, "FAILED", 100, 30, ["n1"], exit_code=3),
            run(2, "FAILED", 100.5, 0.3, ["n1"]),
        ]
    )
    sig = _job_signals([("n1", 100.4, "row_remap", "2", 0)])
    out = by_job(attribute_failures(runs, sig))
    assert not out[1]["infra_failure"] and out[1]["attribution_source"] is None
    assert (out[2]["attribution_source"], out[2]["cause"]) == ("node_signal", "row_remap")


def test_own_record_counts_by_job_and_run_not_by_time():
    runs = frame(
        [
            run(5, "REQUEUED", 100, 30, ["n1"], run_index=0),
            run(5, "FAILED", 300, 30, ["n1"], run_index=1),
        ]
    )
    # Captured late (the Epilog waited), but it is run 1's own record: it counts for run 1 only.
    sig = _job_signals([("n1", 330, "gpu_xid79", "5", 1)])
    out = attribute_failures(runs, sig).sort("run_index").to_dicts()
    assert out[0]["attribution_source"] is None
    assert (out[1]["attribution_source"], out[1]["cause"]) == ("node_signal", "gpu_xid79")


def test_own_tag_wins_over_signals_of_jobs_that_ended_before_it_started():
    """A 3-minute job tagged hw=node3:xid79 was attributed to row_remap on two nodes from jobs
    that ended before it started."""
    runs = frame(
        [
            run(1, "FAILED", 97, 5, ["node3", "node4"]),
            run(2, "FAILED", 100, 3, ["node3", "node4"], admin_comment="aegis:v1;hw=node3:xid79"),
            run(3, "FAILED", 200, 3, ["node3", "node4"]),
        ]
    )
    anon = signals([("node3", 96.5, "row_remap", True), ("node4", 96.6, "row_remap", True)])
    out = by_job(attribute_failures(runs, anon))
    assert (out[2]["attribution_source"], out[2]["cause"]) == ("admin_comment", "xid79")
    assert out[2]["blamed_nodes"] == ["node3"]
    # Run 3 started at 197: the window opens at its start, not 10 min before its end.
    assert out[3]["attribution_source"] is None
    assert out[1]["attribution_source"] == "node_signal"


@pytest.mark.parametrize(
    ("label", "check"),
    [
        ("aegis: gpu_ecc: GPU3 DBE count 2", "gpu_ecc"),
        ("aegis: gpu_ecc: GPU5 DBE count 7", "gpu_ecc"),
        ("DRAIN: aegis: ib_link_down: mlx5_0 port 1 Down", "ib_link_down"),
        ("DOWN+DRAIN: aegis:ib_link_down", "ib_link_down"),
        ("ib_link_down", "ib_link_down"),
        ("DOWN: Not responding", "Not responding"),
    ],
)
def test_causes_are_normalised_to_the_check(label, check):
    from aegis_slurm.analytics.attribution import normalise_cause

    out = pl.DataFrame({"x": [label]}).select(normalise_cause(pl.col("x")))
    assert out.item() == check


def test_one_check_is_one_cause_in_the_taxonomy():
    from aegis_slurm.analytics.taxonomy import failure_taxonomy

    runs = frame([run(i, "FAILED", 100 * i, 30, [f"n{i}"]) for i in (1, 2, 3)])
    ev = events(
        [
            ("n1", 101, "DRAIN", "aegis: gpu_ecc: GPU3 DBE count 2"),
            ("n2", 201, "DRAIN", "aegis: gpu_ecc: GPU5 DBE count 9"),
        ]
    )
    sig = signals([("n3", 299, "gpu_ecc", True)])
    tax = failure_taxonomy(attribute_failures(runs, sig, ev))
    assert [(c["cause"], c["runs"]) for c in tax["infra_by_cause"]] == [("gpu_ecc", 3)]
