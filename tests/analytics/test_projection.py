"""Column projection: every section computed from the columns it declares equals the same
section computed from every column, with a month, a start/end window and no period at all,
on a multi-month store (a crash loop and lemon nodes planted, events and signals given)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import RUN_SCHEMA, ingest_files, load_runs
from aegis_slurm.report.compute import COLUMNS as REPORT_COLUMNS
from aegis_slurm.report.compute import compute_report
from aegis_slurm.sections import Month, Period, clean, compute, load_inputs
from aegis_slurm.sections.alerts import COLUMNS as CHECK_COLUMNS
from aegis_slurm.sections.alerts import Thresholds, evaluate
from aegis_slurm.sections.inputs import INPUT_COLUMNS, columns_for
from aegis_slurm.simulate.history import SimConfig, simulate, write_history

SECTIONS = [
    compute.taxonomy,
    compute.failure_rate,
    compute.mttf,
    compute.goodput,
    compute.requeue_loops,
    compute.lemon_nodes,
    compute.measured_ettr,
    compute.drains,
    compute.data_quality,
    compute.availability,
]
PERIODS = {
    "whole store": Period(),
    "month": Month(2024, 2).period,
    "start/end": Period(datetime(2024, 1, 20, tzinfo=UTC), datetime(2024, 3, 10, tzinfo=UTC)),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[Path]]:
    root = tmp_path_factory.mktemp("proj")
    sim = simulate(SimConfig(nodes=128, days=100, seed=5, crash_loops=4, lemons=3))
    paths = write_history(sim, root / "h.txt")
    ingest_files([Path(paths["sacct"])], root / "store")
    return root / "store", [Path(paths["events"])], [Path(paths["signals"])]


def same(a: object, b: object) -> bool:
    """Equal, floats to 1e-9 relative: polars sums floats in parallel chunks, so the last bits
    of a GPU-hour total differ from one run of the same code to the next."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return type(a) is type(b) and a == b


def test_same_tells_a_difference():
    assert same({"a": [1, 2.0]}, {"a": [1, 2.0 + 1e-13]})
    assert not same({"a": [1, 2.0]}, {"a": [1, 2.001]})
    assert not same({"a": [1, 2]}, {"a": [1, 2, 3]})
    assert not same({"a": 1}, {"a": "1"})


def _narrow(columns: frozenset[str]) -> bool:
    return len(columns) < len(RUN_SCHEMA) and columns >= INPUT_COLUMNS


@pytest.mark.parametrize("period", PERIODS, ids=list(PERIODS))
@pytest.mark.parametrize("section", SECTIONS, ids=lambda s: s.__name__)
def test_section_from_its_columns_equals_all_columns(store, section, period):
    st, ev, sig = store
    p = PERIODS[period]
    full = load_inputs(st, ev, sig, p)
    narrow = load_inputs(st, ev, sig, p, columns=section.columns)
    assert _narrow(section.columns)
    assert set(narrow.context.columns) < set(full.context.columns)
    assert full.runs.height > 0
    assert same(clean(section(narrow)), clean(section(full)))


@pytest.mark.parametrize("by", list(compute.BY_COLUMNS))
def test_by_group_from_its_columns_equals_all_columns(store, by):
    st, ev, sig = store
    p = Month(2024, 2).period
    cols = columns_for(compute.failure_rate, extra=(compute.BY_COLUMNS[by],))
    full = compute.by_group(load_inputs(st, ev, sig, p), by, compute.failure_rate)
    narrow = compute.by_group(load_inputs(st, ev, sig, p, columns=cols), by, compute.failure_rate)
    assert same(clean(narrow), clean(full))


def test_check_and_report_from_their_columns(store):
    st, ev, sig = store
    p = Month(2024, 3).period
    th = Thresholds(None, 1000, 1000)
    assert same(
        clean(evaluate(load_inputs(st, ev, sig, p, columns=CHECK_COLUMNS), th)),
        clean(evaluate(load_inputs(st, ev, sig, p), th)),
    )
    m = Month(2024, 3)
    first = Month(2023, 4)
    full = compute_report(load_inputs(st, ev, sig, m.period, history_start=first.start), m)
    narrow = compute_report(
        load_inputs(st, ev, sig, m.period, history_start=first.start, columns=REPORT_COLUMNS), m
    )
    assert same(clean(narrow), clean(full))


def test_load_runs_projection(store):
    st, _, _ = store
    full = load_runs(st)
    cols = ["state", "nodes", "run_index", "end_time"]
    part = load_runs(st, columns=reversed(cols))
    # schema order, whatever the order asked
    assert part.columns == [c for c in RUN_SCHEMA if c in cols]
    assert part.equals(full.select(part.columns))
    start = datetime(2024, 2, 1, tzinfo=UTC)
    window = load_runs(st, start=start, columns=cols)
    assert window.equals(load_runs(st, start=start).select(window.columns))
    assert window["run_index"].max() > 0  # numbered across the whole store all the same
    with pytest.raises(ValueError, match="not job-run columns: nope"):
        load_runs(st, columns=["state", "nope"])


def test_whole_store_inputs_share_the_table(store):
    """Without a period the period's runs are the context itself, not a copy."""
    st, ev, sig = store
    inp = load_inputs(st, ev, sig, columns=INPUT_COLUMNS)
    assert inp.context.filter(pl.col("end_time").is_null()).height == 0
    assert inp.runs is inp.context


def test_attribution_in_batches_equals_one_shot(store):
    from aegis_slurm.accounting.events import load_events
    from aegis_slurm.sections.inputs import attribute, read_signal_table

    st, ev, sig = store
    runs = load_runs(st)
    events, signals = load_events(ev), read_signal_table(sig[0])
    one = attribute(runs, signals, events)
    assert one["infra_failure"].sum() > 0
    batched = attribute(runs, signals, events, batch=977)
    assert batched.n_chunks() > 1
    assert batched.equals(one)
