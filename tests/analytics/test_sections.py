"""The sections layer on hand-made stores: periods with context (crash loops across a month
boundary), GPUs per node from the data, End=Unknown and never-started runs, the lower-bound
note, the site config (issue 13 items 2, 3, 7, 10)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from runs_helpers import frame, run

from aegis_slurm.accounting.schema import RUN_SCHEMA
from aegis_slurm.accounting.store import write_runs
from aegis_slurm.errors import ConfigError
from aegis_slurm.sections import Month, Period, compute, load_inputs, load_settings
from aegis_slurm.sections.inputs import infer_gpus_per_node

JAN = Month(2026, 1)
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # runs_helpers' epoch


def _store(tmp_path: Path, rows: list[dict]) -> Path:
    write_runs(tmp_path / "store", frame(rows))
    return tmp_path / "store"


def _loop(job: int, first_end_min: float, n: int, nodes: list[str]) -> list[dict]:
    """n 5-minute FAILED runs 10 minutes apart, then a long completed one (a crash loop)."""
    out = [
        run(
            job,
            "FAILED",
            first_end_min + 10 * i,
            5,
            nodes,
            gpus=8 * len(nodes),
            run_index=i,
            exit_code=1,
        )
        for i in range(n)
    ]
    out.append(
        run(
            job,
            "COMPLETED",
            first_end_min + 10 * n + 600,
            600,
            nodes,
            gpus=8 * len(nodes),
            run_index=n,
        )
    )
    return out


def test_crash_loop_across_the_month_boundary_is_seen_whole(tmp_path: Path):
    feb = (datetime(2026, 2, 1, tzinfo=UTC) - T0).total_seconds() / 60
    rows = _loop(1, feb - 40, 12, ["a1", "a2"])  # 4 failed runs in January, 8 in February
    rows += _loop(2, feb - 20, 4, ["b1"])  # 2 + 2: a loop in neither month, analysed alone
    rows += [run(9, "COMPLETED", 60 * 24 * i, 60, ["c1"]) for i in range(1, 50)]
    st = _store(tmp_path, rows)
    for month in (JAN, JAN.next()):
        loops = compute.requeue_loops(load_inputs(st, period=month.period))["loops"]
        got = {x["job_id_raw"]: x["failed_runs"] for x in loops}
        assert got == {1: 12, 2: 4}, (month, got)


def test_gpus_per_node_from_the_data_not_a_hard_coded_8(tmp_path: Path):
    rows = [run(i, "COMPLETED", 100 * i, 60, [f"n{i}", f"n{i + 1}"], gpus=8) for i in range(1, 9)]
    rows += [run(20, "COMPLETED", 3000, 60, ["n1"], gpus=1)]
    assert infer_gpus_per_node(frame(rows))[0] == 4
    st = _store(tmp_path, rows)
    inp = load_inputs(st)
    m = compute.mttf(inp, project_sizes=(16384,))
    assert m["gpus_per_node"] == 4 and m["gpus_per_node_source"].startswith("data")
    # The site config wins over the data.
    cfg = dataclasses.replace(inp.settings, gpus_per_node=2)
    assert compute.mttf(load_inputs(st, settings=cfg))["gpus_per_node"] == 2


def test_node_fail_with_unknown_end_counts_in_r_f_and_taxonomy_alike(tmp_path: Path):
    big = [f"g{i}" for i in range(32)]
    unknown = run(1, "NODE_FAIL", 600, 120, big, gpus=256) | {"end_time": None}
    rows = [unknown, run(2, "COMPLETED", 900, 600, big, gpus=256)]
    inp = load_inputs(_store(tmp_path, rows))
    tax = compute.taxonomy(inp)
    fr = compute.failure_rate(inp)
    nf = next(x for x in tax["by_state"] if x["state"] == "NODE_FAIL")
    assert nf["runs"] == 1 and fr["node_fail"] == 1 and fr["runs"] == 2
    assert inp.imputed_end == 1


def test_a_period_keeps_node_fail_runs_whose_end_is_unknown(tmp_path: Path):
    # load_runs filters on End; a NODE_FAIL printed with End=Unknown ended at Start + Elapsed
    # and must be in its month, as it is without a period
    big = [f"g{i}" for i in range(32)]
    unknown = run(1, "NODE_FAIL", 600, 120, big, gpus=256) | {"end_time": None}
    rows = [unknown, run(2, "COMPLETED", 900, 600, big, gpus=256)]
    inp = load_inputs(_store(tmp_path, rows), period=Period(T0, T0 + timedelta(days=1)))
    fr = compute.failure_rate(inp)
    assert fr["node_fail"] == 1 and fr["runs"] == 2
    assert inp.imputed_end == 1
    # ... and a period it does not fall in leaves it out
    later = load_inputs(_store(tmp_path / "b", rows), period=Period(T0 + timedelta(days=40)))
    assert compute.failure_rate(later)["runs"] == 0


def test_never_started_runs_add_no_mttf_row(tmp_path: Path):
    never = run(1, "CANCELLED", 100, 0, ["n1"], gpus=64) | {"start_time": None}
    rows = [never, run(2, "COMPLETED", 200, 60, ["n1"], gpus=8)]
    buckets = compute.mttf(load_inputs(_store(tmp_path, rows)))["buckets"]
    assert [b["gpus"] for b in buckets] == [8]
    dq = compute.data_quality(load_inputs(_store(tmp_path / "b", rows)))
    assert dq["cancelled_before_start"] == 1


def test_lower_bound_note_only_when_true(tmp_path: Path):
    big = [f"g{i}" for i in range(32)]
    rows = [
        run(1, "NODE_FAIL", 600, 120, big, gpus=256),
        run(2, "FAILED", 900, 120, big, gpus=256),
        run(3, "COMPLETED", 1900, 900, big, gpus=256),
    ]
    st = _store(tmp_path, rows)
    assert compute.failure_rate(load_inputs(st))["lower_bound_only"] is True
    # With evidence given (even if it attributes nothing), it is no longer a lower bound ...
    ev = tmp_path / "events.txt"
    ev.write_text(
        "Cluster|Cluster Nodes|NodeName|TimeStart|TimeEnd|State|Reason|User\n"
        "c||g99|2026-01-01T00:01:00|2026-01-01T00:02:00|DRAIN|fan|root(0)\n"
    )
    assert compute.failure_rate(load_inputs(st, [ev]))["lower_bound_only"] is False
    # ... and r_f = 0 is not "a lower bound counting NODE_FAIL".
    st0 = _store(tmp_path / "zero", rows[2:])
    assert compute.failure_rate(load_inputs(st0))["lower_bound_only"] is False


def test_period_options_select_runs_that_ended_in_it(tmp_path: Path):
    rows = [run(i, "COMPLETED", 60 * 24 * 10 * i, 60, ["n1"]) for i in range(1, 7)]
    st = _store(tmp_path, rows)
    p = Period(T0 + timedelta(days=15), T0 + timedelta(days=45))
    assert compute.taxonomy(load_inputs(st, period=p))["total_runs"] == 3  # days 20, 30, 40


def test_site_config_is_strict(tmp_path: Path):
    ok = tmp_path / "ok.toml"
    ok.write_text("[analytics]\nmin_gpus = 64\ngpus_per_node = 4\nrestart_min = 7.5\n")
    s = load_settings(ok)
    assert (s.min_gpus, s.gpus_per_node, s.restart_min) == (64, 4, 7.5)
    ok.write_text("[analytics]\nrestart_min = 7\nckpt_interval_min = 30\n")  # ints for floats
    s = load_settings(ok)
    assert (s.restart_min, s.ckpt_interval_min, s.gpus_per_node) == (7.0, 30.0, None)
    assert isinstance(s.restart_min, float)
    for text, msg in [
        ("[analytics]\nmin_gpu = 64\n", "unknown key analytics.min_gpu"),
        ("[report]\n", "unknown key report"),
        ("[analytics]\ngpus_per_node = 0\n", "analytics.gpus_per_node must be > 0"),
        ("[analytics]\nwindow_days = 0\n", "analytics.window_days must be > 0"),
        ("[analytics]\nqueue_min = -1\n", "analytics.queue_min must be >= 0"),
        ("[analytics]\nmin_gpus = 6.5\n", "analytics.min_gpus must be an integer"),
        ("[analytics]\nmin_gpus = true\n", "analytics.min_gpus must be an integer"),
        ("analytics = 3\n", "analytics must be a table"),
        ("[analytics]\nrestart_min = 'five'\n", "must be a number"),
        ("[analytics\n", "not valid TOML"),
    ]:
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ConfigError, match=msg) as err:
            load_settings(bad)
        assert "\n" not in str(err.value) and str(bad) in str(err.value)


def test_schema_unchanged_by_the_layer(tmp_path: Path):
    inp = load_inputs(_store(tmp_path, [run(1, "COMPLETED", 100, 60, ["n1"])]))
    assert set(RUN_SCHEMA) <= set(inp.runs.columns)
    assert inp.runs["row_id"].to_list() == list(range(inp.runs.height))
    assert isinstance(inp.context, pl.DataFrame)


def test_by_partition_groups_sum_to_the_whole(tmp_path: Path):
    import json

    from click.testing import CliRunner

    from aegis_slurm.cli import main

    big = [f"g{i}" for i in range(32)]
    rows = [
        run(1, "NODE_FAIL", 600, 120, big, gpus=256, partition="a"),
        run(2, "COMPLETED", 900, 600, big, gpus=256, partition="a"),
        run(3, "COMPLETED", 1900, 900, big, gpus=256, partition="b"),
        run(4, "FAILED", 2900, 60, ["n1"], gpus=8, partition="b", gpu_types="h100"),
    ]
    st = _store(tmp_path, rows)
    res = CliRunner().invoke(main, ["taxonomy", "--store", str(st), "--by", "partition", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["by"] == "partition"
    groups = {g["group"]: g for g in out["groups"]}
    assert set(groups) == {"a", "b"}
    assert sum(g["total_runs"] for g in groups.values()) == 4
    # Each group is exactly the section on that group's runs.
    fr = CliRunner().invoke(
        main, ["failure-rate", "--store", str(st), "--by", "partition", "--json"]
    )
    fa = {g["group"]: g for g in json.loads(fr.output)["groups"]}
    assert fa["a"]["failures"] == 1 and fa["b"]["failures"] == 0
    assert fa["a"]["node_days"] + fa["b"]["node_days"] == pytest.approx(
        compute.failure_rate(load_inputs(st))["node_days"]
    )
    gt = compute.breakdown(load_inputs(st), "gpu_type")
    assert [r["group"] for r in gt] == ["(untyped)", "h100"]
    human = CliRunner().invoke(main, ["mttf", "--store", str(st), "--by", "partition"])
    assert human.exit_code == 0 and "== partition a ==" in human.output


def test_drain_storm_guard_reversals_are_not_counted_as_drains(tmp_path: Path):
    # The guard's second look drains and resumes within seconds (issue 10.17): such an event is
    # shown as a reversal, never as a drain of its check or node.
    events = tmp_path / "events.txt"
    events.write_text(
        "Cluster|Cluster Nodes|NodeName|TimeStart|TimeEnd|State|Reason|User|Event\n"
        "c||g1|2026-01-01T02:00:00|2026-01-01T04:00:00|DRAIN|aegis: xid: Xid 79 on GPU 3|root(0)|"
        "Node\n"
        "c||g2|2026-01-01T02:00:00|2026-01-01T02:00:01|DRAIN|aegis: xid: Xid 79 on GPU 1|root(0)|"
        "Node\n"
        "c||g3|2026-01-01T03:00:00|2026-01-01T05:00:00|DRAIN|bad fan|root(0)|Node\n"
    )
    st = _store(tmp_path, [run(1, "COMPLETED", 600, 60, ["g1"])])
    inp = load_inputs(st, events_paths=[events], period=Period(T0, T0 + timedelta(days=1)))
    got = compute.drains(inp)
    assert got["aegis_drains"] == 1 and got["guard_reversals"] == 1 and got["other_outs"] == 1
    assert [(c["check"], c["drains"]) for c in got["by_check"]] == [("xid", 1)]
    assert [n["node"] for n in got["by_node"]] == ["g1"]
