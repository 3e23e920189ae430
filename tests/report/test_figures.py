"""Issue 13 item 11: figure properties a reader relies on, checked on the drawn Figure objects,
and labels from data drawn as plain text (a "$" in a node event reason must not crash)."""

from __future__ import annotations

import copy
from datetime import date
from pathlib import Path

import matplotlib.dates as mdates
import numpy as np
from report_store import Built

from aegis_slurm.report import figures as F


def test_dollar_signs_and_mathtext_in_data_labels_do_not_crash(built: Built, tmp_path: Path):
    r = copy.deepcopy(built.report)
    nasty = r"kernel: $ENV{x} \frac{a}{ cost $5"
    r["failure_rate"]["by_cause"] = [
        {"cause": nasty, "attribution_source": "node_event", "failures": 3, "rf_per_node_day": 0.1}
    ]
    r["drains"] = {
        "events_given": True,
        "aegis_drains": 2,
        "other_outs": 0,
        "by_check": [{"check": "$bad_check^", "drains": 2, "nodes": 1}],
        "by_node": [],
    }
    made = F.render_figures(r, tmp_path / "figures")
    assert "png" in made["failure_rate"] and "png" in made["drains"]
    svg = (tmp_path / "figures" / "failure_rate.svg").read_text()
    assert "cost $5" in svg  # drawn as text, not parsed


def test_failure_rate_axis_starts_at_zero_and_shows_the_report_month(built: Built):
    fig = F.fig_failure_rate(built.report)
    ax = fig.axes[0]
    assert ax.get_ylim()[0] == 0
    lo, hi = (mdates.num2date(x).date() for x in ax.get_xlim())
    assert (lo, hi) == (date(2024, 1, 1), date(2024, 2, 1))
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels and all("Feb" not in t for t in labels[:-1])
    # The legend sits below the axes, not over the data.
    fig.canvas.draw()
    leg = ax.get_legend().get_window_extent()
    assert leg.y1 <= ax.get_window_extent().y0


def test_mttf_theory_line_uses_the_clusters_gpus_per_node(built: Built):
    r = copy.deepcopy(built.report)
    r["mttf"]["gpus_per_node"] = 4
    rf = r["mttf"]["rf_per_node_day"]
    line = next(
        ln for ln in F.fig_mttf(r).axes[0].get_lines() if str(ln.get_label()).startswith("theory")
    )
    g, mttf = line.get_data()
    i = int(np.argmin(np.abs(np.asarray(g) - 1024)))
    assert mttf[i] == 24.0 / (np.ceil(g[i] / 4) * rf)


def test_ettr_map_colour_scale_spans_the_data(built: Built):
    fig = F.fig_ettr_map(built.report)
    mesh = fig.axes[0].collections[0]
    z = np.array(built.report["ettr_planning"]["map"]["ettr"])
    assert mesh.norm.vmin <= z.min() and mesh.norm.vmin > z.min() - 0.1
    assert z.min() > 0  # the exact form never clips the corner to 0


def test_goodput_log_axis_shows_empty_buckets(built: Built):
    r = copy.deepcopy(built.report)
    rows = [x for x in r["goodput"]["by_size"] if x["gpu_bucket"] is not None]
    keep = [rows[0], rows[-1]]  # a gap in between
    r["goodput"]["by_size"] = keep
    fig = F.fig_goodput(r)
    ax = fig.axes[0]
    assert ax.get_yscale() == "symlog"
    n = int(np.log2(keep[-1]["gpu_bucket"]) - np.log2(keep[0]["gpu_bucket"])) + 1
    assert len(ax.get_xticks()) == n and n > 2


def test_zero_failure_headline_reads_greater_than(built: Built):
    """Issue 13 item 8: with no failure at the common size the card says "> N h", not "–"."""
    from aegis_slurm.report.builder import render_html

    r = copy.deepcopy(built.report)
    cs = r["summary"]["common_size"]
    cs.update(failures=0, mttf_hours=None, mttf_at_least_hours=232.4, ci90_low_hours=232.4)
    page = render_html(r, r["figures"])
    assert "&gt; 232 h" in page and "90% one-sided bound" in page


def test_zero_failure_month_plans_at_the_rate_upper_bound():
    import polars as pl

    from aegis_slurm.accounting.schema import RUN_SCHEMA
    from aegis_slurm.report.compute import _ettr_planning
    from aegis_slurm.sections import Period
    from aegis_slurm.sections.inputs import Inputs

    empty = pl.DataFrame(schema=RUN_SCHEMA).with_row_index("row_id")
    inp = Inputs(context=empty, events=None, signals=None, period=Period())
    fr = {"rf_per_node_day": 0.0, "runs": 40, "ci90_high": 0.004}
    p = _ettr_planning(fr, None, 16, inp)
    assert p["available"] and p["rf_basis"] == "upper_bound" and p["rf_per_node_day"] == 0.004
    assert all(0 < c["ettr_at_interval"] < 1 for c in p["curves"])


def test_rate_change_test_is_exact():
    from scipy import stats

    from aegis_slurm.report.compute import rate_change_test

    same = rate_change_test(36, 3390.0, 51, 4229.0)  # the demo's January vs December
    assert 0.5 < same["p_value"] < 0.7 and not same["significant"]
    big = rate_change_test(40, 1000.0, 10, 1000.0)
    assert big["significant"] and big["p_value"] == stats.binomtest(40, 50, 0.5).pvalue
    assert rate_change_test(0, 10.0, 0, 10.0)["p_value"] is None
