"""The report's figures (matplotlib, Agg), drawn from the numbers in ``report.json`` only.

Styled to read like HPCA'25 Figs. 3–10 and to survive a greyscale print and colour-blind
readers: the Okabe–Ito palette, plus hatches, markers and line styles so no series is told apart
by colour alone.  Each ``fig_*`` returns a Figure, or a sentence saying why there is nothing to
plot (the page shows that sentence instead of an empty chart).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.dates as mdates
import numpy as np
from matplotlib.colors import PowerNorm
from matplotlib.figure import Figure  # a bare Figure renders through Agg; pyplot is never used
from matplotlib.ticker import MaxNLocator

# Okabe & Ito (2008), the colour-blind-safe qualitative palette.
OI = {
    "black": "#000000",
    "orange": "#E69F00",
    "sky": "#56B4E9",
    "green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
}
CYCLE = [
    OI["blue"],
    OI["vermillion"],
    OI["green"],
    OI["orange"],
    OI["purple"],
    OI["sky"],
    OI["black"],
]
HATCHES = ["", "//", "..", "xx", "\\\\", "--", "oo"]
MARKERS = ["o", "s", "^", "D", "v", "P", "X"]
STYLES = ["-", "--", ":", "-."]

#: Fixed state colours so every month's Fig. 3 reads the same.
STATE_COLOR = {
    "COMPLETED": OI["green"],
    "FAILED": OI["vermillion"],
    "CANCELLED": OI["sky"],
    "PREEMPTED": OI["orange"],
    "REQUEUED": OI["purple"],
    "TIMEOUT": OI["yellow"],
    "NODE_FAIL": OI["black"],
    "OUT_OF_MEMORY": OI["blue"],
}

Result = Figure | str


def _style() -> None:
    matplotlib.rcParams.update(
        {
            "font.size": 9,
            "axes.titlesize": 10,
            "axes.labelsize": 9,
            "legend.fontsize": 8,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "grid.linewidth": 0.5,
            "svg.fonttype": "none",
            "figure.dpi": 100,
            "savefig.bbox": "tight",
        }
    )


def _fig(w: float = 7.0, h: float = 3.2, ncols: int = 1) -> tuple[Figure, Any]:
    _style()
    fig = Figure(figsize=(w, h), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, axes


def _plain(text: Any) -> str:
    """A label from data (node event reasons carry kernel text), drawn as plain text: every
    "$" escaped, so matplotlib never enters mathtext (an odd "$" or a "\\frac{" used to crash
    the report).  Matplotlib prints an escaped dollar as "$"."""
    return str(text).replace("$", r"\$")


def _gpu_label(g: int) -> str:
    return f"{g // 1024}k" if g >= 1024 and g % 1024 == 0 else str(g)


def fig_end_states(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 3: share of runs and of GPU-hours per end state."""
    rows = r["taxonomy"]["by_state"]
    if not rows:
        return "No run ended this month."
    rows = sorted(rows, key=lambda x: -x["runs"])
    states = [x["state"] for x in rows]
    fig, (a1, a2) = _fig(7.5, 0.45 * len(states) + 1.2, 2)
    y = np.arange(len(states))
    for ax, key, title in (
        (a1, "run_share", "Share of run records"),
        (a2, "gpu_hour_share", "Share of GPU-hours"),
    ):
        vals = [100 * (x[key] or 0.0) for x in rows]
        bars = ax.barh(
            y,
            vals,
            color=[STATE_COLOR.get(s, OI["sky"]) for s in states],
            edgecolor="black",
            linewidth=0.5,
        )
        for i, b in enumerate(bars):
            b.set_hatch(HATCHES[i % len(HATCHES)])
            ax.text(
                b.get_width(),
                b.get_y() + b.get_height() / 2,
                f" {vals[i]:.1f}%",
                va="center",
                fontsize=8,
            )
        ax.set_yticks(y, [_plain(st) for st in states])
        ax.invert_yaxis()
        ax.set_xlabel("%")
        ax.set_title(title)
        ax.set_xlim(0, max(vals) * 1.25 + 1)
    a2.set_yticklabels([])
    infra = next(
        (c for c in r["taxonomy"]["by_category"] if c["category"] == "infra_failure"), None
    )
    if infra is not None:  # the paper's "HW" slice: rare by count, heavy in GPU-hours
        fig.suptitle(
            f"Infrastructure failures: {100 * infra['run_share']:.2f}% of runs, "
            f"{100 * (infra['gpu_hour_share'] or 0):.1f}% of GPU-hours",
            fontsize=9,
        )
    return fig


def fig_failure_rate(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 5: 30-day rolling r_f, and the infrastructure failures by cause."""
    fr = r["failure_rate"]
    roll = [x for x in fr.get("rolling", []) if x.get("rf_30d") is not None]
    if not roll:
        return (
            f"No runs with more than {fr['min_gpus']} GPUs ended in the last two months: "
            "there is no failure rate to plot."
        )
    fig, (a1, a2) = _fig(8.0, 3.6, 2)
    d = [
        x["date"] if isinstance(x["date"], date) else date.fromisoformat(str(x["date"]))
        for x in roll
    ]
    ys = [1000 * x["rf_30d"] for x in roll]
    a1.plot(d, ys, color=OI["blue"], lw=1.8, label="r_f, 30-day trailing window")
    # The axis is the report's period: ticks name days of *this* month, never the next one.
    period = r.get("period") or {}
    if period.get("start") and period.get("end"):
        lo = date.fromisoformat(str(period["start"])[:10])
        hi = date.fromisoformat(str(period["end"])[:10])
        a1.set_xlim(lo, hi)
    a1.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=3, maxticks=6))
    a1.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
    fail_days = [(di, x["failures"]) for di, x in zip(d, roll, strict=True) if x["failures"]]
    if fail_days:
        ax2 = a1.twinx()
        ax2.vlines(
            [f[0] for f in fail_days],
            0,
            [f[1] for f in fail_days],
            color=OI["vermillion"],
            lw=1.2,
            label="failures that day",
        )
        ax2.set_ylabel("failures / day", color=OI["vermillion"])
        ax2.set_ylim(0, max(f[1] for f in fail_days) * 3)
        ax2.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax2.grid(False)
    if fr["rf_per_1000_node_days"] is not None:
        a1.axhline(
            fr["rf_per_1000_node_days"], color=OI["black"], ls="--", lw=1, label="this month"
        )
    a1.set_ylim(bottom=0, top=max([*ys, fr["rf_per_1000_node_days"] or 0, 1e-9]) * 1.15)
    a1.set_ylabel("failures / 1000 node-days")
    a1.set_title(f"Failure rate r_f (runs > {fr['min_gpus']} GPUs)")
    # Below the axes: a legend inside would cover the series.
    a1.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=2, frameon=False)
    causes = fr["by_cause"]
    if causes:
        agg: dict[str, int] = {}
        for c in causes:
            agg[c["cause"]] = agg.get(c["cause"], 0) + c["failures"]
        items = sorted(agg.items(), key=lambda kv: -kv[1])[:10]
        y = np.arange(len(items))
        bars = a2.barh(
            y, [v for _, v in items], color=OI["vermillion"], edgecolor="black", linewidth=0.5
        )
        for i, b in enumerate(bars):
            b.set_hatch(HATCHES[i % len(HATCHES)])
        a2.set_yticks(y, [_plain(k) for k, _ in items])
        a2.invert_yaxis()
        a2.set_xlabel("failures this month")
        a2.set_title("Infrastructure failures by cause")
    else:
        a2.axis("off")
        a2.text(
            0.5,
            0.5,
            f"no infrastructure failure\nin runs > {fr['min_gpus']} GPUs",
            ha="center",
            va="center",
        )
    return fig


def fig_mttf(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 7: MTTF by job size with 90% intervals, the 1/(N r_f) line, projections."""
    buckets = [b for b in r["mttf"]["buckets"] if b["runtime_hours"] > 0]
    if not buckets:
        return "No GPU run ended this month."
    fig, ax = _fig(7.0, 3.8)
    has = [b for b in buckets if b["mttf_hours"] is not None]
    if has:
        x = np.array([b["gpus"] for b in has], float)
        y = np.array([b["mttf_hours"] for b in has], float)
        lo = np.array([b["ci90_low_hours"] for b in has], float)
        hi = np.array([b["ci90_high_hours"] or np.nan for b in has], float)
        ax.errorbar(
            x,
            y,
            yerr=[y - lo, np.where(np.isnan(hi), 0, hi - y)],
            fmt="o",
            color=OI["blue"],
            ecolor=OI["blue"],
            capsize=3,
            ms=5,
            label="measured MTTF (90% interval)",
        )
    zero = [b for b in buckets if b["mttf_hours"] is None]
    if zero:
        # No failure: only a lower bound on MTTF (the 90% interval's low end).
        ax.scatter(
            [b["gpus"] for b in zero],
            [b["ci90_low_hours"] for b in zero],
            marker="^",
            facecolors="none",
            edgecolors=OI["green"],
            s=36,
            label="no failure: MTTF above this",
        )
    rf = r["mttf"]["rf_per_node_day"]
    gpn = r["mttf"].get("gpus_per_node") or r["parameters"]["gpus_per_node"]
    proj = r.get("mttf_projection") or []
    if rf:
        xmax = max([b["gpus"] for b in buckets] + [p["gpus"] for p in proj])
        g = np.geomspace(gpn, xmax * 1.2, 100)
        ax.plot(
            g,
            24.0 / (np.ceil(g / gpn) * rf),
            color=OI["black"],
            ls="--",
            lw=1,
            label=f"theory 1/(N_nodes r_f), r_f={rf * 1000:.2f}/1000 node-days",
        )
        if proj:
            ax.scatter(
                [p["gpus"] for p in proj],
                [p["mttf_hours"] for p in proj],
                marker="D",
                facecolors="none",
                edgecolors=OI["vermillion"],
                s=40,
                zorder=3,
                label="projected",
            )
            for p in proj:
                ax.annotate(
                    f"{p['mttf_hours']:.2g} h",
                    (p["gpus"], p["mttf_hours"]),
                    textcoords="offset points",
                    xytext=(4, 4),
                    fontsize=7,
                )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ticks = sorted({b["gpus"] for b in buckets} | {p["gpus"] for p in proj})
    ax.set_xticks(ticks, [_gpu_label(t) for t in ticks], rotation=45)
    ax.set_xlabel("job size (GPUs)")
    ax.set_ylabel("MTTF (hours)")
    ax.set_title("Mean time to failure by job size")
    ax.legend(loc="lower left")
    return fig


def fig_ettr_interval(r: dict[str, Any]) -> Result:
    """E[ETTR] vs checkpoint interval at the measured r_f for a few job sizes."""
    p = r["ettr_planning"]
    if not p["available"]:
        return p["reason"]
    fig, ax = _fig(7.0, 3.4)
    for i, c in enumerate(p["curves"]):
        ax.plot(
            c["interval_min"],
            c["ettr"],
            color=CYCLE[i % len(CYCLE)],
            ls=STYLES[i % len(STYLES)],
            lw=1.8,
            label=f"{_gpu_label(c['gpus'])} GPUs, {c['n_nodes']} nodes "
            f"(MTTF {c['mttf_hours']:.3g} h)",
        )
    at = p.get("ckpt_interval_min", 60.0)
    ax.axvline(at, color="grey", lw=0.8, ls=":")
    ax.text(at, 0.02, f" {at:g} min", fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_ylim(0, 1)
    ax.set_xlabel("checkpoint interval Δt_cp (minutes)")
    ax.set_ylabel("E[ETTR]")
    which = "90% upper bound of r_f" if p.get("rf_basis") == "upper_bound" else "this month's r_f"
    ax.set_title(
        f"Exact E[ETTR] at {which} = {p['rf_per_node_day'] * 1000:.2f}/1000 node-days"
        f" (u0 = {p['u0_min']:g} min)"
    )
    ax.legend(loc="lower left")
    return fig


def fig_ettr_map(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 10: E[ETTR] over r_f × checkpoint interval, for a whole-cluster job."""
    p = r["ettr_planning"]
    if not p["available"]:
        return p["reason"]
    m = p["map"]
    rf = np.array(m["rf_axis"]) * 1000
    dt = np.array(m["interval_axis_min"])
    z = np.array(m["ettr"])
    fig, ax = _fig(6.5, 4.0)
    # The colour scale spans the values the map holds (in 0.1 steps), and a power norm spreads
    # the top of the range: most of a map lies above 0.9, where the decisions are made, and a
    # linear scale paints all of it one saturated colour.
    vmin = max(0.0, np.floor(float(np.nanmin(z)) * 10) / 10)
    vmax = min(1.0, np.ceil(float(np.nanmax(z)) * 10) / 10)
    norm = PowerNorm(gamma=3.0, vmin=vmin, vmax=max(vmax, vmin + 0.1))
    mesh = ax.pcolormesh(dt, rf, z, cmap="cividis", norm=norm)
    cs = ax.contour(dt, rf, z, levels=[0.5, 0.7, 0.8, 0.9, 0.95], colors="black", linewidths=0.8)
    ax.clabel(cs, fmt="%.2f", fontsize=7)
    ax.axhline(p["rf_per_node_day"] * 1000, color=OI["orange"], ls="--", lw=1.5)
    ax.text(
        dt[-1] / 1.1,  # right end: the contour labels sit at short intervals
        p["rf_per_node_day"] * 1000 * 1.08,
        f"this month's r_f ({p['rf_per_node_day'] * 1000:.2f})",
        color="black",
        fontsize=8,
        ha="right",
        bbox={"facecolor": "white", "edgecolor": OI["orange"], "pad": 1.5},
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("checkpoint interval Δt_cp (minutes)")
    ax.set_ylabel("r_f (failures / 1000 node-days)")
    ax.set_title(f"Exact E[ETTR] for a {_gpu_label(m['gpus'])}-GPU job (u0 = {p['u0_min']:g} min)")
    ax.grid(False)
    cb = fig.colorbar(mesh, ax=ax, label="E[ETTR]")
    cb.set_ticks([t for t in (0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0) if vmin <= t <= vmax])
    return fig


def fig_goodput(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 8: GPU-hours lost by job size, first and second order."""
    g = r["goodput"]
    rows = [x for x in g["by_size"] if x["gpu_bucket"] is not None]
    if not rows or g["goodput_lost_total"] <= 0:
        return "No GPU-hours were lost to infrastructure failures this month."
    fig, ax = _fig(7.0, 3.2)
    # Every power-of-two bucket between the smallest and largest shown, empty ones included.
    have = {int(x_["gpu_bucket"]): x_ for x_ in rows}
    lo_b, hi_b = min(have), max(have)
    buckets = [1 << i for i in range(lo_b.bit_length() - 1, hi_b.bit_length())]
    empty = {"first_order_gpu_hours": 0.0, "second_order_gpu_hours": 0.0}
    rows = [{"gpu_bucket": b, **have.get(b, empty)} for b in buckets]
    x = np.arange(len(rows))
    f1 = [x_["first_order_gpu_hours"] or 0.0 for x_ in rows]
    f2 = [x_["second_order_gpu_hours"] or 0.0 for x_ in rows]
    ax.bar(
        x,
        f1,
        color=OI["blue"],
        edgecolor="black",
        linewidth=0.5,
        label="first order (the failed job)",
    )
    ax.bar(
        x,
        f2,
        bottom=f1,
        color=OI["orange"],
        edgecolor="black",
        linewidth=0.5,
        hatch="//",
        label="second order (jobs preempted by its restart)",
    )
    # Losses span orders of magnitude across sizes: a log axis (symlog keeps 0 drawable).
    ax.set_yscale("symlog", linthresh=1.0)
    ax.set_ylim(bottom=0, top=max(a + b for a, b in zip(f1, f2, strict=True)) * 4)
    for i, (a, b) in enumerate(zip(f1, f2, strict=True)):
        if a + b == 0:
            ax.text(i, 0.05, "0", ha="center", va="bottom", fontsize=7, color="grey")
    ax.set_xticks(x, [_gpu_label(x_["gpu_bucket"]) for x_ in rows])
    ax.set_xlabel("size of the failed job (GPUs)")
    ax.set_ylabel("GPU-hours lost")
    share = g["share_second_order"]
    ax.set_title(
        f"Goodput lost: {g['goodput_lost_total']:,.0f} GPU-h"
        + (f", {100 * share:.1f}% second order" if share is not None else "")
    )
    ax.legend(loc="upper left")
    return fig


def fig_sizes(r: dict[str, Any]) -> Result:
    """HPCA'25 Fig. 6: share of jobs vs share of GPU time by job size."""
    rows = [x for x in r["measured_ettr"]["size_distribution"] if x["gpu_bucket"] is not None]
    if not rows:
        return "No GPU job ended this month."
    fig, ax = _fig(7.0, 3.2)
    x = np.arange(len(rows))
    w = 0.4
    ax.bar(
        x - w / 2,
        [100 * (x_["job_share"] or 0) for x_ in rows],
        w,
        color=OI["sky"],
        edgecolor="black",
        linewidth=0.5,
        label="jobs",
    )
    ax.bar(
        x + w / 2,
        [100 * (x_["gpu_hour_share"] or 0) for x_ in rows],
        w,
        color=OI["vermillion"],
        edgecolor="black",
        linewidth=0.5,
        hatch="//",
        label="GPU-hours",
    )
    ax.set_xticks(x, [_gpu_label(x_["gpu_bucket"]) for x_ in rows])
    ax.set_xlabel("job size (GPUs, power-of-two bucket)")
    ax.set_ylabel("% of month")
    ax.set_title("Job sizes: share of jobs and of GPU time")
    ax.legend()
    return fig


def fig_drains(r: dict[str, Any]) -> Result:
    """Drains made by the aegis Prolog this month, by check."""
    d = r["drains"]
    if not d["events_given"]:
        return (
            "No node events were given (--events FILE from `sacctmgr show event -P`): "
            "drains by check cannot be shown."
        )
    if not d["by_check"]:
        return "The aegis Prolog drained no node this month."
    rows = d["by_check"]
    fig, ax = _fig(6.5, 0.4 * len(rows) + 1.2)
    y = np.arange(len(rows))
    bars = ax.barh(
        y, [x["drains"] for x in rows], color=OI["blue"], edgecolor="black", linewidth=0.5
    )
    for i, b in enumerate(bars):
        b.set_hatch(HATCHES[i % len(HATCHES)])
        ax.text(
            b.get_width(),
            b.get_y() + b.get_height() / 2,
            f" {rows[i]['drains']} ({rows[i]['nodes']} nodes)",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(y, [_plain(x["check"]) for x in rows])
    ax.invert_yaxis()
    ax.set_xlim(0, max(x["drains"] for x in rows) * 1.4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("drains")
    ax.set_title("Nodes drained by the aegis Prolog, by check")
    return fig


def fig_trend(r: dict[str, Any]) -> Result:
    """r_f per calendar month with 90% intervals, the last 12 months."""
    rows = [x for x in r.get("trend", []) if x["rf_per_1000_node_days"] is not None]
    if len(rows) < 2:
        return "Fewer than two months with runs above the r_f size threshold: no trend to draw."
    fig, ax = _fig(7.0, 3.0)
    x = np.arange(len(rows))
    y = np.array([x_["rf_per_1000_node_days"] for x_ in rows])
    lo = np.array([x_["rf_ci90_per_1000"][0] for x_ in rows], float)
    hi = np.array([x_["rf_ci90_per_1000"][1] for x_ in rows], float)
    ax.errorbar(
        x, y, yerr=[y - lo, hi - y], fmt="o-", color=OI["blue"], capsize=3, label="r_f (90%)"
    )
    ax.set_xticks(x, [x_["month"] for x_ in rows], rotation=45)
    ax.set_ylim(bottom=0, top=float(np.nanmax(hi)) * 1.1)
    ax.set_ylabel("failures / 1000 node-days")
    ax.set_title("r_f by month with 90% intervals")
    return fig


#: name -> (function, caption); the order of the page.
FIGURES: dict[str, tuple[Callable[[dict[str, Any]], Result], str]] = {
    "end_states": (
        fig_end_states,
        "End states by run records and by GPU-hours (cf. HPCA'25 Fig. 3).",
    ),
    "failure_rate": (
        fig_failure_rate,
        "Infrastructure failure rate over time and its causes (cf. Fig. 5).",
    ),
    "trend": (fig_trend, "r_f per month over the last year, with exact 90% intervals."),
    "mttf": (
        fig_mttf,
        "MTTF vs job size with 90% intervals, the theory line and projections (cf. Fig. 7).",
    ),
    "ettr_interval": (
        fig_ettr_interval,
        "Expected ETTR vs checkpoint interval at this month's r_f.",
    ),
    "ettr_map": (
        fig_ettr_map,
        "Expected ETTR over failure rate × checkpoint interval (cf. Fig. 10).",
    ),
    "goodput": (fig_goodput, "GPU-hours lost by job size, first and second order (cf. Fig. 8)."),
    "drains": (fig_drains, "Prolog drains by check."),
    "sizes": (fig_sizes, "Job-size distribution and GPU-time share (cf. Fig. 6)."),
}


def render_figures(report: dict[str, Any], out_dir: Path) -> dict[str, dict[str, Any]]:
    """Write every figure as PNG and SVG into ``out_dir``; returns name -> {png, svg, caption}
    (paths relative to ``out_dir``'s parent) or {missing: reason, caption}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, dict[str, Any]] = {}
    for name, (fn, caption) in FIGURES.items():
        res = fn(report)
        if isinstance(res, str):
            made[name] = {"missing": res, "caption": caption}
            continue
        for ext in ("png", "svg"):
            res.savefig(
                out_dir / f"{name}.{ext}",
                dpi=150 if ext == "png" else None,
                metadata={"Date": None} if ext == "svg" else None,
            )
        made[name] = {
            "png": f"{out_dir.name}/{name}.png",
            "svg": f"{out_dir.name}/{name}.svg",
            "caption": caption,
        }
    return made
