"""report.json: every section equals the analytics commands' ``--json`` on the same store, the
summary is made of those numbers, and months without big jobs / events / history say so."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from report_store import MONTH, SCRIPT_NAME, Built, make_store

from aegis_slurm.analytics.common import AnalyticsError
from aegis_slurm.cli import main
from aegis_slurm.errors import NoDataError
from aegis_slurm.report.builder import build_report
from aegis_slurm.report.compute import Month
from aegis_slurm.simulate.history import SIZE_MIX, SimConfig


def cli_json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def same(a: Any, b: Any, path: str = "") -> None:
    """Equal JSON trees; floats to 1e-12 relative (parallel sums may differ in the last bit)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, int | float) and isinstance(b, int | float), path
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, a.keys(), b)
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (path, len(a), b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, (path, a, b)


def test_report_json_equals_cli_json(built: Built):
    rep = json.loads((built.out / "report.json").read_text())
    st = [
        "--store",
        str(built.store),
        "--events",
        str(built.events),
        "--signals",
        str(built.signals),
    ]
    same(rep["taxonomy"], cli_json("taxonomy", *st))
    same(rep["failure_rate"], cli_json("failure-rate", *st))
    same(rep["mttf"], cli_json("mttf", *st))
    same(rep["goodput"], cli_json("goodput", *st))
    same(rep["requeue_loops"], cli_json("requeue-loops", *st))
    same(rep["lemon_nodes"], cli_json("lemon-nodes", *st))
    same(rep["measured_ettr"], cli_json("measured-ettr", *st))
    same(rep["availability"], cli_json("availability", *st, "--month", MONTH))
    assert 0.9 < rep["availability"]["availability"] < 1.0 and rep["availability"]["mttr_hours"] > 0
    # ... and `aegis-slurm report --json` prints what report.json holds.
    printed = cli_json(
        "report",
        "--store",
        str(built.store),
        "--month",
        MONTH,
        "--out",
        str(built.out.parent / "again"),
        "--events",
        str(built.events),
        "--signals",
        str(built.signals),
    )
    printed.pop("inputs")
    on_disk = dict(rep)
    on_disk.pop("inputs")
    same(printed, on_disk)


def test_summary_is_made_of_the_section_numbers(built: Built):
    r = built.report
    s = r["summary"]
    assert s["runs"] == r["taxonomy"]["total_runs"]
    assert s["gpu_hours"] == r["taxonomy"]["total_gpu_hours"]
    assert s["rf_per_1000_node_days"] == r["failure_rate"]["rf_per_1000_node_days"]
    assert s["worst_crash_loops"] == r["requeue_loops"]["loops"][:3]
    assert s["goodput_lost_gpu_hours"] == r["goodput"]["goodput_lost_total"]
    # The largest common size: the largest bucket with >= 10 runs, its measured MTTF.
    common = max((b for b in r["mttf"]["buckets"] if b["runs"] >= 10), key=lambda b: b["gpus"])
    assert s["common_size"]["gpus"] == common["gpus"]
    assert s["common_size"]["mttf_hours"] == common["mttf_hours"]
    # The planted crash loop (renamed) is found and named; lemon nodes are on the watch list.
    assert SCRIPT_NAME in [x["job_name"] for x in s["worst_crash_loops"]]
    lemons = {n["node"] for n in r["lemon_nodes"]["nodes"]}
    assert lemons and lemons <= {n["node"] for n in s["nodes_to_watch"]}
    # Drains by check come from `aegis: <check>` reasons only (the simulator also writes
    # Prolog-error and maintenance drains, which must not be counted as checks).
    checks = {c["check"] for c in r["drains"]["by_check"]}
    assert checks and all(c.isidentifier() for c in checks)
    assert r["drains"]["other_outs"] > 0
    # The page shows these very numbers (formatted as the template formats them).
    page = (built.out / "index.html").read_text()
    for shown in (
        f"{s['jobs']:,}",
        f"{s['runs']:,}",
        f"{s['gpu_hours']:,.0f}",
        f"{s['rf_per_1000_node_days']:,.2f}",
        f"{s['common_size']['gpus']:,}-GPU",
        f"{s['goodput_lost_gpu_hours']:,.0f}",
    ):
        assert shown in page, shown
    for row in r["taxonomy"]["by_state"]:
        assert f'<td class="t">{row["state"]}</td><td>{row["runs"]:,}</td>' in page
    # Every figure was written as PNG and SVG (a one-month store has no trend to draw).
    assert r["figures"]["trend"]["missing"].startswith("Fewer than two months")
    for name, f in r["figures"].items():
        if name == "trend":
            continue
        assert "missing" not in f, (name, f)
        assert (built.out / f["png"]).stat().st_size > 1000
        assert (built.out / f["svg"]).stat().st_size > 1000


def test_two_months_give_deltas_and_a_rolling_series(tmp_path: Path):
    b = make_store(
        tmp_path,
        SimConfig(nodes=96, days=62, seed=3, start="2023-12-01T00:00:00", crash_loops=1),
        month_end=None,
    )
    r = build_report(b.store, MONTH, tmp_path / "out", [b.events], b.signals)
    dec = build_report(b.store, "2023-12", tmp_path / "dec", [b.events], b.signals)
    mom = {d["metric"]: d for d in r["month_over_month"]}
    assert mom["runs"]["this_month"] == r["summary"]["runs"]
    assert mom["runs"]["previous_month"] == dec["summary"]["runs"]
    assert mom["runs"]["change"] == r["summary"]["runs"] - dec["summary"]["runs"]
    assert r["summary"]["rf_previous_per_1000_node_days"] == dec["summary"]["rf_per_1000_node_days"]
    # The rolling series has January's dates; its windows reach back into December.
    roll = r["failure_rate"]["rolling"]
    assert roll[0]["date"] == "2024-01-01" and all(x["date"].startswith("2024-01") for x in roll)
    assert roll[0]["node_days_30d"] > roll[0]["node_days"] * 5
    # The trend: twelve months ending in January; December and January equal their reports.
    trend = {t["month"]: t for t in r["trend"]}
    # (the store begins in December: the months before it are left out)
    assert [t["month"] for t in r["trend"]] == ["2023-12", MONTH]
    for m, rep in (("2023-12", dec), (MONTH, r)):
        assert trend[m]["rf_per_1000_node_days"] == pytest.approx(
            rep["summary"]["rf_per_1000_node_days"], rel=1e-12
        )
    assert "png" in r["figures"]["trend"]
    # Month over month: the r_f change comes with an exact rate test and its p-value.
    test = mom["rf_per_1000_node_days"]["test"]
    assert 0.0 <= test["p_value"] <= 1.0 and test["significant"] == (test["p_value"] < 0.05)
    assert not any("month-over-month" in n for n in r["notes"])


def test_month_without_large_jobs_or_events_says_so(tmp_path: Path):
    small = {g: p for g, p in SIZE_MIX.items() if g <= 64}
    b = make_store(
        tmp_path, SimConfig(nodes=32, days=31, seed=5, crash_loops=0, lemons=0, size_mix=small)
    )
    r = build_report(b.store, MONTH, tmp_path / "out")  # no events, no signals
    assert r["summary"]["rf_per_1000_node_days"] is None
    assert r["ettr_planning"]["available"] is False
    for name in ("ettr_interval", "ettr_map", "drains"):
        assert "missing" in r["figures"][name], name
    assert "png" in r["figures"]["end_states"] and "png" in r["figures"]["sizes"]
    notes = " ".join(r["notes"])
    assert "No runs with more than 128 GPUs" in notes
    assert "--signals" in notes and "--events" in notes
    html = (tmp_path / "out" / "index.html").read_text()
    assert "No runs with more than 128 GPUs" in html
    assert "No node events were given" in html


def test_month_with_no_runs_at_all(built: Built, tmp_path: Path):
    """An empty month (a failed ingest, a typo) is no data, exit 4: no page that reads as a
    clean month of zero failures is written."""
    with pytest.raises(NoDataError, match="no run ended in 2030-05"):
        build_report(built.store, "2030-05", tmp_path / "empty")
    assert not (tmp_path / "empty").exists()
    res = CliRunner().invoke(
        main, ["report", "--store", str(built.store), "--month", "2030-05", "--out", str(tmp_path)]
    )
    assert res.exit_code == 4 and res.output.startswith("aegis-slurm: error: no run ended")


def test_month_parsing_and_cli_errors(built: Built, tmp_path: Path):
    assert str(Month.parse("2024-12").next()) == "2025-01"
    assert str(Month.parse("2024-01").prev()) == "2023-12"
    with pytest.raises(AnalyticsError):
        Month.parse("2024-13")
    res = CliRunner().invoke(
        main,
        ["report", "--store", str(built.store), "--month", "Jan", "--out", str(tmp_path / "x")],
    )
    assert res.exit_code != 0 and "YYYY-MM" in res.output
    res = CliRunner().invoke(main, ["report", "--help"])
    assert res.exit_code == 0 and "--month" in res.output
    # Without --month: the latest month with a real share of the runs.
    res = CliRunner().invoke(
        main, ["report", "--store", str(built.store), "--out", str(tmp_path / "y")]
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "y" / "report.json").read_text())["month"] == MONTH
