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

from aegis_slurm.report.compute import Month, compute_report


def clean(o: Any) -> Any:
    """JSON-safe, exactly like the CLI's ``--json``: ISO 8601 times, inf/NaN as null."""
    from aegis_slurm.cli.analytics_cmd import _clean

    return _clean(o)


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


def _read_signals(path: Path) -> pl.DataFrame:
    sig = (
        pl.read_parquet(path)
        if path.suffix == ".parquet"
        else pl.read_csv(path, try_parse_dates=True)
    )
    # Same normalisation as the analytics commands (cli/analytics_cmd._load).
    return sig.with_columns(
        pl.col("time").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
        if sig.schema["time"] != pl.Datetime("us", "UTC")
        else pl.col("time"),
        pl.col("critical").cast(pl.Boolean),
    )


def build_report(
    store: Path,
    month: Month | str,
    out: Path,
    events_paths: Iterable[Path] = (),
    signals_path: Path | None = None,
) -> dict[str, Any]:
    """Load the store, compute the month, write ``out/index.html``, ``out/report.json`` and
    ``out/figures/``.  Returns the cleaned report (what ``report.json`` holds)."""
    from aegis_slurm.accounting import load_runs
    from aegis_slurm.accounting.events import load_events
    from aegis_slurm.report.figures import render_figures

    m = Month.parse(month) if isinstance(month, str) else month
    events_paths = list(events_paths)
    runs = load_runs(store, start=m.prev().start, end=m.end)
    events = load_events(events_paths) if events_paths else None
    signals = _read_signals(signals_path) if signals_path else None
    raw = compute_report(runs, m, events, signals)
    raw["inputs"] = {
        "store": str(store),
        "events": [str(p) for p in events_paths],
        "signals": str(signals_path) if signals_path else None,
    }
    out.mkdir(parents=True, exist_ok=True)
    figures = render_figures(raw, out / "figures")
    report = clean(raw)
    report["figures"] = figures
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    (out / "index.html").write_text(render_html(report, figures), encoding="utf-8")
    return report


def latest_month(store: Path) -> Month:
    """The default ``--month``: the latest month in which at least half as many runs ended as in
    the busiest month (so the ragged tail of an export, a few runs that ended just after its
    last full month, does not become the report)."""
    from aegis_slurm.accounting import load_runs

    counts = (
        load_runs(store)
        .filter(pl.col("end_time").is_not_null())
        .group_by(pl.col("end_time").dt.strftime("%Y-%m").alias("m"))
        .len()
    )
    if counts.is_empty():
        raise ValueError(f"{store}: no ended run")
    busiest = int(counts["len"].max())  # type: ignore[arg-type]
    return Month.parse(str(counts.filter(pl.col("len") * 2 >= busiest)["m"].max()))
