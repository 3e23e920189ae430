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


def test_evidence_order_signal_then_tag_then_event_then_node_fail():
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
    sig = signals([("n1", 99, "gpu_xid79", True)])
    ev = events([("n5", 301, "DRAIN", "xid 48"), ("n3", 201, "DOWN", "Not responding")])
    out = by_job(attribute_failures(runs, sig, ev))
    assert (out[1]["attribution_source"], out[1]["cause"]) == ("node_signal", "gpu_xid79")
    assert (out[2]["attribution_source"], out[2]["cause"]) == ("admin_comment", "ib_link_down")
    assert out[2]["blamed_nodes"] == ["n3", "n4"]
    assert (out[3]["attribution_source"], out[3]["cause"]) == ("node_event", "DRAIN: xid 48")
    assert (out[4]["attribution_source"], out[4]["cause"]) == ("node_fail", "unattributed")
    assert out[4]["blamed_nodes"] is None  # multi-node, no evidence: nobody to blame
    assert out[5]["blamed_nodes"] == ["n8"]  # one node: it can only be that one
    assert not out[6]["infra_failure"] and out[6]["attribution_source"] is None
    assert not out[7]["infra_failure"]
    assert sum(r["infra_failure"] for r in out.values()) == 5


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
