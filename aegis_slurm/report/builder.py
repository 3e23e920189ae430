"""Write the monthly report: ``index.html``, ``report.json`` and ``figures/*.png|svg``.

The page is one HTML file with its CSS inline and its figures beside it (relative links only), so
the folder can be copied, mailed or opened with no network.  Jinja2 autoescaping is on for every
template: job names, users and drain reasons come from users and are shown as text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.errors import NoDataError
from aegis_slurm.report.compute import Month, compute_report
from aegis_slurm.sections import DEFAULTS, Settings, clean, load_inputs

__all__ = ["build_report", "clean", "latest_month", "render_html"]


def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("aegis_slurm.report", "templates"),
        autoescape=True,  # every template, whatever its name
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["pct"] = _pct
    env.filters["signed"] = _signed
    return env


def _num(v: Any, nd: int = 1) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != 0 and abs(v) < 10 ** (-nd):
            return f"{v:.2g}"
        return f"{v:,.{nd}f}"
    return str(v)


def _pct(v: Any, nd: int = 1) -> str:
    return "–" if v is None else f"{100 * v:.{nd}f}%"


def _signed(v: Any, nd: int = 1) -> str:
    if v is None:
        return "–"
    return f"{v:+,.{nd}f}" if isinstance(v, float) else f"{v:+,}"


def render_html(report: dict[str, Any], figures: dict[str, dict[str, Any]]) -> str:
    """The page for a cleaned report dict (pure)."""
    env = _env()
    css = (Path(__file__).parent / "templates" / "report.css").read_text(encoding="utf-8")
    return env.get_template("report.html.j2").render(r=report, fig=figures, css=css)


#: CSV name -> path of a list of rows inside the cleaned report (every table on the page).
CSV_TABLES: dict[str, tuple[str, ...]] = {
    "end_states": ("taxonomy", "by_state"),
    "categories": ("taxonomy", "by_category"),
    "infra_causes": ("taxonomy", "infra_by_cause"),
    "failure_rate_by_cause": ("failure_rate", "by_cause"),
    "failure_rate_rolling": ("failure_rate", "rolling"),
    "mttf_by_size": ("mttf", "buckets"),
    "mttf_projection": ("mttf_projection",),
    "goodput_by_size": ("goodput", "by_size"),
    "crash_loops": ("requeue_loops", "loops"),
    "lemon_nodes": ("lemon_nodes", "nodes"),
    "measured_ettr": ("measured_ettr", "measured_ettr"),
    "job_sizes": ("measured_ettr", "size_distribution"),
    "drains_by_check": ("drains", "by_check"),
    "drains_by_node": ("drains", "by_node"),
    "node_downtime": ("availability", "worst_nodes"),
    "nodes_to_watch": ("summary", "nodes_to_watch"),
    "month_over_month": ("month_over_month",),
    "by_partition": ("breakdowns", "partition"),
    "by_gpu_type": ("breakdowns", "gpu_type"),
    "trend": ("trend",),
}


def write_csv(report: dict[str, Any], out: Path) -> dict[str, str]:
    """Every table of the (cleaned) report as ``out/<name>.csv``; lists in a cell are joined
    with "; ", nested objects written as JSON.  Returns name -> path relative to out's parent."""
    import csv

    out.mkdir(parents=True, exist_ok=True)
    made: dict[str, str] = {}
    for name, path in CSV_TABLES.items():
        rows: Any = report
        for key in path:
            rows = rows.get(key) if isinstance(rows, dict) else None
        if not isinstance(rows, list):
            continue
        cols: list[str] = []
        for row in rows:
            cols += [c for c in row if c not in cols]

        def cell(v: Any) -> Any:
            if isinstance(v, list):
                return "; ".join(json.dumps(x) if isinstance(x, dict) else str(x) for x in v)
            if isinstance(v, dict):
                return json.dumps(v, sort_keys=True)
            return "" if v is None else v

        with open(out / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(cols)
            w.writerows([[cell(row.get(c)) for c in cols] for row in rows])
        made[name] = f"{out.name}/{name}.csv"
    return made


def build_report(
    store: Path,
    month: Month | str,
    out: Path,
    events_paths: Iterable[Path] = (),
    signals_paths: Iterable[Path] | Path | None = None,
    settings: Settings = DEFAULTS,
) -> dict[str, Any]:
    """Load the store once (runs, events, signals given and collected), compute the month,
    write ``out/index.html``, ``out/report.json`` and ``out/figures/``.  Returns the cleaned
    report (what ``report.json`` holds)."""
    from aegis_slurm.report.figures import render_figures

    m = Month.parse(month) if isinstance(month, str) else month
    events_paths = list(events_paths)
    if signals_paths is None:
        sig_paths: list[Path] = []
    elif isinstance(signals_paths, Path | str):
        sig_paths = [Path(signals_paths)]
    else:
        sig_paths = [Path(p) for p in signals_paths]
    first = m
    for _ in range(11):  # the 12-month trend, read in the same pass as the month
        first = first.prev()
    from aegis_slurm.report.compute import COLUMNS

    inp = load_inputs(store, events_paths, sig_paths, m.period, settings, first.start, COLUMNS)
    if inp.runs.height == 0:
        # An empty month (a failed ingest, a typo in --month) must not publish a clean page.
        raise NoDataError(f"no run ended in {m}: no report written ({store})")
    raw = compute_report(inp, m)
    raw["inputs"] = {
        "store": str(store),
        "events": [str(p) for p in events_paths],
        "signals": [str(p) for p in sig_paths],
        "collected_epilog_records": inp.sources["collected_epilog_records"],
    }
    out.mkdir(parents=True, exist_ok=True)
    figures = render_figures(raw, out / "figures")
    report = clean(raw)
    report["figures"] = figures
    report["csv"] = write_csv(report, out / "csv")
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / "index.html").write_text(render_html(report, figures), encoding="utf-8")
    return report


def latest_month(store: Path) -> Month:
    """The default ``--month``: the latest month in which at least half as many runs ended as in
    the busiest month (so the ragged tail of an export, a few runs that ended just after its
    last full month, does not become the report)."""
    from aegis_slurm.accounting.store import ended_per_month

    counts = ended_per_month(store)
    if counts.is_empty():
        raise NoDataError(f"{store}: no ended run to report on")
    busiest = int(counts["len"].max())  # type: ignore[arg-type]
    return Month.parse(str(counts.filter(pl.col("len") * 2 >= busiest)["m"].max()))
