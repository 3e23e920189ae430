"""Node availability, downtime and MTTR from node events: overlaps merged, clipped to the
period, open events counted until its end."""

from __future__ import annotations

from datetime import timedelta

import pytest
from runs_helpers import T0, events

from aegis_slurm.analytics.availability import node_availability, outages


def _ev(rows):
    """(node, start_min, end_min or None, state, reason)."""
    df = events([(n, s, st, r) for n, s, _, st, r in rows])
    ends = [None if e is None else T0 + timedelta(minutes=e) for _, _, e, _, _ in rows]
    import polars as pl

    return df.with_columns(pl.Series("time_end", ends, dtype=pl.Datetime("us", "UTC")))


def test_overlapping_events_are_one_outage_and_clipped():
    ev = _ev(
        [
            ("n1", 60, 180, "DRAIN", "aegis: gpu_ecc: DBE"),
            ("n1", 120, 240, "DOWN", "Not responding"),  # overlaps: one 3-hour outage
            ("n2", -60, 60, "DOWN", "Not responding"),  # starts before the period
            ("n3", 600, None, "DRAIN", "fan"),  # still out at the end
            ("n4", 100, 200, "IDLE", "back"),  # not an outage
        ]
    )
    assert outages(ev).height == 3
    res = node_availability(ev, T0, T0 + timedelta(hours=24), n_nodes=10)
    worst = {r["node"]: r["downtime_h"] for r in res["worst_nodes"]}
    assert worst == pytest.approx({"n1": 3.0, "n2": 1.0, "n3": 14.0})
    assert res["downtime_node_hours"] == pytest.approx(18.0)
    assert res["availability"] == pytest.approx(1 - 18.0 / 240.0)
    # MTTR over outages repaired in the period, whole length (n2: 2 h, n1: 3 h).
    assert res["mttr_hours"] == pytest.approx(2.5)
    assert res["still_out_at_end"] == 1 and res["repaired_outages"] == 2


def test_failures_only_leaves_out_maintenance():
    ev = _ev([("n1", 0, 120, "DRAIN", "scheduled maintenance"), ("n2", 0, 60, "DOWN", "xid 79")])
    all_out = node_availability(ev, T0, T0 + timedelta(hours=10), 2)
    fails = node_availability(ev, T0, T0 + timedelta(hours=10), 2, failures_only=True)
    assert all_out["downtime_node_hours"] == pytest.approx(3.0)
    assert fails["downtime_node_hours"] == pytest.approx(1.0)
