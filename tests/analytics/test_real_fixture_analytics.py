"""Attribution, events and crash loops on the real Slurm 22.05.8 recordings (tests/fixtures)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from aegis_slurm.accounting import parse_export
from aegis_slurm.accounting.events import failure_events, load_events, parse_events_text
from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.job_runs import link_job_runs
from aegis_slurm.analytics.loops import requeue_loops

FIX = Path(__file__).parent.parent / "fixtures" / "sacct"
EVENTS = FIX / "sacctmgr-22.05.8_events.txt"


def test_events_parser_on_real_sacctmgr_output():
    ev = parse_events_text(EVENTS.read_text())
    # The "Cluster Registered TRES" row is a cluster event, not a node event.
    assert sorted(ev["node"].to_list()) == ["node1", "node2", "node4", "node5", "node6", "node7"]
    n5 = ev.filter(ev["node"] == "node5").row(0, named=True)
    assert n5["state"] == "DOWN" and n5["reason"] == "testbed: GPU fell off the bus (xid 79)"
    assert n5["time_start"] == datetime(2026, 11, 21, 17, 56, 59, tzinfo=UTC)
    assert n5["time_end"] == datetime(2026, 11, 21, 17, 57, 27, tzinfo=UTC)
    kept = failure_events(ev)
    # Prolog error, Epilog error and the maintenance drain are excluded; DOWN and DOWN* stay.
    assert sorted(kept["node"].to_list()) == ["node5", "node6", "node7"]
    assert load_events([EVENTS, EVENTS]).height == ev.height  # de-duplicated


@pytest.fixture(scope="module")
def runs():
    return parse_export(
        (FIX / "sacct-22.05.8_wide_steps_header.txt").read_bytes(), source="wide"
    ).runs


def test_real_node_fails_are_attributed_to_their_events(runs):
    out = attribute_failures(runs, None, load_events([EVENTS]))
    infra = {(r["job_id_raw"], r["cause"]) for r in out.filter(out["infra_failure"]).to_dicts()}
    assert infra == {
        # Causes are the reason without the state label (one cause per reason, spec item 4).
        (28, "Not responding"),
        (29, "Not responding"),
        (30, "Not responding"),
        (31, "testbed: GPU fell off the bus (xid 79)"),
    }
    # Jobs 4, 5, 12 (node1) and 14, 19 (node2) FAILED within minutes of the Epilog/Prolog-error
    # drains: they stay user failures by default ...
    failed = out.filter(out["state"] == "FAILED")
    assert not failed["infra_failure"].any()
    # ... and would be miscounted as hardware if those drains were taken as evidence.
    loose = attribute_failures(runs, None, load_events([EVENTS]), exclude_event_reasons=None)
    assert loose.filter(loose["state"] == "FAILED")["infra_failure"].sum() >= 4


def test_real_requeue_exit_loop_is_the_only_loop(runs):
    linked = link_job_runs(attribute_failures(runs, None, load_events([EVENTS])))
    loops = requeue_loops(linked)
    assert [(x["job_id_raw"], x["requeues"], x["failed_runs"]) for x in loops] == [(12, 3, 4)]
