"""Each published section, computed once from :class:`~aegis_slurm.sections.inputs.Inputs`.

The analytics commands print these dicts (``--json``) and the report puts the same dicts into
``report.json``, so the two agree by construction.  Parameters default to ``inp.settings``.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import polars as pl

from aegis_slurm.sections.inputs import LINK_COLUMNS, Inputs, needs, rejected_counts

_AEGIS_REASON = re.compile(r"^(?:[A-Z_]+[*~#!%$@^-]?:\s*)*aegis:\s*([^:\s]+)")


@needs()
def taxonomy(inp: Inputs) -> dict[str, Any]:
    """Runs and GPU-hours per end state, category and cause (HPCA'25 Fig. 3)."""
    from aegis_slurm.analytics.taxonomy import failure_taxonomy

    return failure_taxonomy(inp.runs)


@needs()
def failure_rate(
    inp: Inputs, min_gpus: int | None = None, window_days: int | None = None
) -> dict[str, Any]:
    """r_f with its 90% interval, causes, and the rolling series (HPCA'25 §V, Fig. 5).  The
    series' windows look back into the context; its dates are the period's."""
    from aegis_slurm.analytics.failure_rate import failure_rate as fr
    from aegis_slurm.analytics.failure_rate import rolling_failure_rate

    mg = inp.settings.min_gpus if min_gpus is None else min_gpus
    wd = inp.settings.window_days if window_days is None else window_days
    given = evidence_given(inp)
    res = fr(inp.runs, min_gpus=mg, evidence_given=given)
    res["evidence_given"] = given
    p = inp.period
    lookback = inp.context
    if p.start is not None:
        lookback = lookback.filter(pl.col("end_time") >= p.start - timedelta(days=wd))
    if p.end is not None:
        lookback = lookback.filter(pl.col("end_time") < p.end)
    series = rolling_failure_rate(lookback, mg, wd)
    if p.start is not None and not series.is_empty():
        series = series.filter(pl.col("date") >= p.start.date())
    res["rolling"] = series.to_dicts()
    return res


def evidence_given(inp: Inputs) -> bool:
    """Any source that could attribute a FAILED run: events, signals, or an aegis tag."""
    if inp.events is not None and not inp.events.is_empty():
        return True
    if inp.signals is not None and not inp.signals.is_empty():
        return True
    return bool(
        inp.runs.select(
            pl.col("admin_comment").fill_null("").str.contains("aegis:v1;hw=").any()
        ).item()
    )


def _rf(inp: Inputs, min_gpus: int | None = None) -> float | None:
    from aegis_slurm.analytics.failure_rate import failure_rate as fr

    mg = inp.settings.min_gpus if min_gpus is None else min_gpus
    return fr(inp.runs, min_gpus=mg)["rf_per_node_day"]


@needs()
def mttf(
    inp: Inputs,
    min_gpus: int | None = None,
    method: str | None = None,
    project_sizes: tuple[int, ...] | None = None,
    gpus_per_node: int | None = None,
) -> dict[str, Any]:
    """MTTF per GPU bucket with 90% intervals, the 1/(N r_f) line and projections (Fig. 7)."""
    from aegis_slurm.analytics.mttf import mttf_by_size, project_mttf

    rf = _rf(inp, min_gpus)
    m = method or inp.settings.mttf_method
    gpn, gpn_source = (gpus_per_node, "option") if gpus_per_node else inp.gpus_per_node
    sizes = project_sizes if project_sizes is not None else inp.settings.project_sizes
    return {
        "rf_per_node_day": rf,
        "method": m,
        "gpus_per_node": gpn,
        "gpus_per_node_source": gpn_source,
        "buckets": mttf_by_size(inp.runs, rf, method=m),  # type: ignore[arg-type]
        "projections": project_mttf(sizes, rf, gpn) if rf else [],
    }


@needs(*LINK_COLUMNS, "exit_code")
def goodput(inp: Inputs) -> dict[str, Any]:
    """GPU-hours lost to infrastructure failures, first and second order (Fig. 8)."""
    from aegis_slurm.analytics.goodput import goodput_lost

    return goodput_lost(inp.linked)


@needs(*LINK_COLUMNS, "job_id", "exit_code")
def requeue_loops(
    inp: Inputs,
    k: int | None = None,
    window_hours: float | None = None,
    short_min: float | None = None,
    rf: float | None = None,
) -> dict[str, Any]:
    """Crash loops found over the context, kept when they overlap the period: a loop that
    straddles a month boundary is reported whole, in each month it touches."""
    from aegis_slurm.analytics.loops import requeue_loops as find

    s = inp.settings
    rate = _rf(inp) if rf is None else rf
    loops = find(
        inp.linked_context,
        k or s.loop_min_failed_runs,
        timedelta(hours=window_hours or s.loop_window_hours),
        timedelta(minutes=short_min or s.loop_short_min),
        rf=rate,
    )
    p = inp.period
    kept = [
        x
        for x in loops
        if (p.start is None or x["last_end"] >= p.start)
        and (p.end is None or x["first_start"] < p.end)
    ]
    return {"rf_per_node_day": rate, "loops": kept}


@needs()
def lemon_nodes(
    inp: Inputs, window_days: int | None = None, min_node_fails: int | None = None
) -> dict[str, Any]:
    """Lemon nodes over the window ending at the period's last run end (HPCA'25 §V-C)."""
    from aegis_slurm.analytics.lemon import LemonThresholds
    from aegis_slurm.analytics.lemon import lemon_nodes as find

    s = inp.settings
    as_of = inp.runs["end_time"].max() if inp.runs.height else None
    return find(
        inp.context.filter(pl.col("end_time") <= as_of) if as_of is not None else inp.runs,
        inp.events,
        thresholds=LemonThresholds(
            window_days=window_days or s.lemon_window_days,
            min_node_fails=min_node_fails or s.lemon_min_node_fails,
        ),
        as_of=as_of,  # type: ignore[arg-type]
    )


@needs(*LINK_COLUMNS, "qos", "eligible_time")
def measured_ettr(
    inp: Inputs,
    qos: str | None = None,
    u0: float | None = None,
    dt: float | None = None,
    min_hours: float | None = None,
    min_gpus: int | None = None,
) -> dict[str, Any]:
    """Measured ETTR of job runs next to E[ETTR] (Fig. 9) and the job-size distribution (Fig. 6)."""
    from aegis_slurm.analytics.job_runs import (
        measured_ettr as per_run,
    )
    from aegis_slurm.analytics.job_runs import (
        measured_ettr_summary,
        size_distribution,
    )

    s = inp.settings
    rf = _rf(inp, min_gpus)
    per = per_run(
        inp.linked,
        rf,
        u0_min=s.restart_min if u0 is None else u0,
        dt_cp_min=s.ckpt_interval_min if dt is None else dt,
        min_training_hours=s.measured_min_hours if min_hours is None else min_hours,
        qos=qos,
    )
    return {
        "rf_per_node_day": rf,
        "job_runs": per.height,
        "measured_ettr": measured_ettr_summary(per),
        "size_distribution": size_distribution(inp.linked),
    }


#: An aegis drain resumed sooner than this was undone by the drain-storm guard's second look.
GUARD_REVERSAL = timedelta(seconds=60)


@needs()
def drains(inp: Inputs) -> dict[str, Any]:
    """Drains the aegis Prolog made (Reason ``aegis: <check>: ...``) in the period, by check and
    by node, next to all other DOWN/DRAIN events (counted, not broken down)."""
    if inp.events is None:
        return {
            "events_given": False,
            "aegis_drains": 0,
            "guard_reversals": 0,
            "other_outs": 0,
            "by_check": [],
            "by_node": [],
        }
    ev = inp.events.filter(inp.period.mask("time_start")).filter(
        pl.col("state").str.contains(r"^(DOWN|DRAIN|FAIL)")
    )
    ev = ev.with_columns(
        pl.col("reason").fill_null("").str.extract(_AEGIS_REASON.pattern, 1).alias("check")
    )
    ours = ev.filter(pl.col("check").is_not_null())
    # The drain-storm guard's second look drains and resumes within a second or two: such an
    # event is a guard reversal, not a drain (issue 10.17), counted on its own.
    reverted = pl.col("time_end").is_not_null() & (
        pl.col("time_end") - pl.col("time_start") < GUARD_REVERSAL
    )
    guard_reversals = ours.filter(reverted).height
    ours = ours.filter(~reverted)
    by_check = (
        ours.group_by("check")
        .agg(pl.len().alias("drains"), pl.col("node").n_unique().alias("nodes"))
        .sort(["drains", "check"], descending=[True, False])
    )
    by_node = (
        ours.group_by("node")
        .agg(pl.len().alias("drains"), pl.col("check").unique().sort().alias("checks"))
        .sort(["drains", "node"], descending=[True, False])
    )
    return {
        "events_given": True,
        "aegis_drains": ours.height,
        "guard_reversals": guard_reversals,
        "other_outs": ev.height - ours.height - guard_reversals,
        "by_check": by_check.to_dicts(),
        "by_node": by_node.to_dicts(),
    }


@needs()
def data_quality(inp: Inputs) -> dict[str, Any]:
    """What the numbers rest on: rows the ingest rejected and why, which evidence sources were
    given and used, and how many FAILED runs had evidence to look at."""
    runs = inp.runs
    failed = runs.filter(pl.col("state") == "FAILED")
    sources: dict[str, int] = {}
    for src, n in (
        runs.filter(pl.col("infra_failure"))
        .group_by("attribution_source")
        .len()
        .sort("attribution_source")
        .iter_rows()
    ):
        sources[str(src)] = int(n)
    # A FAILED run "had evidence to look at" when its own Epilog record or aegis tag exists,
    # or node events / anonymous signals were given at all.
    has_tag = pl.col("admin_comment").fill_null("").str.contains("aegis:v1;")
    with_own = failed.select(has_tag.alias("_own"), "job_id_raw", "run_index")
    if inp.signals is not None and "job_id" in inp.signals.columns and failed.height:
        keys = (
            inp.signals.filter(pl.col("job_id").is_not_null())
            .select(
                pl.col("job_id").alias("_j"), pl.col("run").cast(pl.Int64).fill_null(0).alias("_r")
            )
            .unique()
            .with_columns(pl.lit(True).alias("_rec"))
        )
        with_own = (
            with_own.with_columns(
                pl.col("job_id_raw").cast(pl.String).alias("_j"),
                pl.col("run_index").cast(pl.Int64).fill_null(0).alias("_r"),
            )
            .join(keys, on=["_j", "_r"], how="left")
            .with_columns(pl.col("_own") | pl.col("_rec").fill_null(False))
        )
    own_n = int(with_own["_own"].sum()) if with_own.height else 0
    anon_sig = inp.signals is not None and (
        "job_id" not in inp.signals.columns
        or inp.signals.filter(pl.col("job_id").is_null()).height > 0
    )
    windowed = inp.events is not None or anon_sig
    return {
        "ingest": rejected_counts(inp.store),
        "runs_in_period": runs.height,
        "end_unknown_imputed": inp.imputed_end,
        "end_unknown_left_out": inp.no_end,
        "cancelled_before_start": int(
            runs.filter(
                (pl.col("state") == "CANCELLED") & (pl.col("elapsed_s").fill_null(0) == 0)
            ).height
        ),
        "evidence_sources_given": {
            "node_events": inp.events is not None,
            "signal_tables": inp.sources.get("signals", []),
            "collected_epilog_records": inp.sources.get("collected_epilog_records", False),
            "aegis_tags_in_period": int(runs.filter(has_tag).height),
        },
        "infra_failures_by_source": sources,
        "failed_runs": failed.height,
        "failed_runs_with_own_record_or_tag": own_n,
        "failed_runs_with_evidence_to_look_at": failed.height if windowed else own_n,
        "failed_runs_attributed": int(failed.filter(pl.col("infra_failure")).height),
    }


#: --by choices -> run-table column (a --by command loads that column too).
BY_COLUMNS = {
    "partition": "partition",
    "account": "account",
    "user": "user",
    "qos": "qos",
    "gpu_type": "gpu_types",
}


def _group_label(col: str) -> pl.Expr:
    blank = "(untyped)" if col == "gpu_types" else "(none)"
    v = pl.col(col).cast(pl.String).fill_null("")
    return pl.when(v == "").then(pl.lit(blank)).otherwise(v)


def subsets(inp: Inputs, by: str) -> list[tuple[str, Inputs]]:
    """The inputs restricted to each value of ``by`` (partition, account, user, qos,
    gpu_type) among the period's runs, largest GPU-hours first.  Each subset keeps its own
    context, so history-dependent sections behave as on a store of that group alone."""
    import dataclasses

    from aegis_slurm.analytics.common import gpu_hours

    col = BY_COLUMNS[by]
    order = (
        inp.runs.group_by(_group_label(col).alias("_g"))
        .agg(gpu_hours().sum().alias("_gh"))
        .sort(["_gh", "_g"], descending=[True, False])["_g"]
        .to_list()
    )
    labelled = inp.context.with_columns(_group_label(col).alias("_g"))
    return [
        (g, dataclasses.replace(inp, context=labelled.filter(pl.col("_g") == g).drop("_g")))
        for g in order
    ]


def by_group(inp: Inputs, by: str, section: Any, **kw: Any) -> dict[str, Any]:
    """``section`` per value of ``by``: {"by": by, "groups": [{"group": value, ...section}]}."""
    return {"by": by, "groups": [{"group": g, **section(sub, **kw)} for g, sub in subsets(inp, by)]}


def breakdown(inp: Inputs, by: str) -> list[dict[str, Any]]:
    """One row per value of ``by`` for the page: runs, GPU-hours, infrastructure failures and
    r_f with its 90% interval (runs with more than min_gpus GPUs)."""
    from aegis_slurm.analytics.common import gpu_hours
    from aegis_slurm.analytics.failure_rate import failure_rate as fr

    rows = []
    for g, sub in subsets(inp, by):
        r = fr(sub.runs, min_gpus=inp.settings.min_gpus)
        rows.append(
            {
                "group": g,
                "runs": sub.runs.height,
                "gpu_hours": float(sub.runs.select(gpu_hours().sum()).item()),
                "infra_failures_all_sizes": int(sub.runs["infra_failure"].sum()),
                "rf_runs": r["runs"],
                "rf_failures": r["failures"],
                "rf_per_1000_node_days": r["rf_per_1000_node_days"],
                "rf_ci90_per_1000": [
                    None if r["ci90_low"] is None else r["ci90_low"] * 1000,
                    None if r["ci90_high"] is None else r["ci90_high"] * 1000,
                ],
            }
        )
    return rows


@needs()
def availability(inp: Inputs, failures_only: bool = False) -> dict[str, Any]:
    """Node availability, downtime and MTTR over the period from the node events (the
    period's bounds default to its runs' first and last end)."""
    from aegis_slurm.analytics.availability import node_availability

    if inp.events is None:
        return {"events_given": False}
    start = inp.period.start or (inp.runs["end_time"].min() if inp.runs.height else None)
    end = inp.period.end or (inp.runs["end_time"].max() if inp.runs.height else None)
    if start is None or end is None:
        return {"events_given": True, "nodes": 0, "availability": None}
    nodes = int(inp.runs.select(pl.col("nodes").explode().drop_nulls().n_unique()).item())
    return {
        "events_given": True,
        **node_availability(inp.events, start, end, nodes, failures_only),  # type: ignore[arg-type]
    }


def _signals_for(inp: Inputs, older: pl.DataFrame) -> pl.DataFrame | None:
    """The signals to attribute runs older than the loaded ones: those given, plus the store's
    collected records of that time (the loaded ones cover the period and its context only)."""
    from pathlib import Path

    from aegis_slurm.accounting.signals import RECORDS
    from aegis_slurm.sections.inputs import _signal_frame, collected_signals

    if inp.store is None:
        return inp.signals
    own = (inp.store / RECORDS).resolve()
    if any(Path(p).resolve() == own for p in inp.sources.get("signals", [])):
        return inp.signals  # given as a signal table: read whole already
    extra = collected_signals(inp.store, older)
    if extra is None or extra.is_empty():
        return inp.signals
    parts = [extra] if inp.signals is None else [inp.signals, extra]
    return _signal_frame(parts)


@needs()
def trend(inp: Inputs, months: int = 12) -> list[dict[str, Any]]:
    """r_f and the MTTF of runs with more than min_gpus GPUs, each with its 90% interval, for
    the ``months`` calendar months ending with the period's (the store's last month without a
    period), leaving out the months before the store's first run.  Earlier months are read
    from the store and attributed with the same evidence."""
    from aegis_slurm.accounting import RUN_SCHEMA, load_runs
    from aegis_slurm.analytics.failure_rate import failure_rate as fr
    from aegis_slurm.analytics.mttf import poisson_rate_interval
    from aegis_slurm.sections.inputs import CONTEXT, Month, attribute

    anchor = inp.period.start or (inp.runs["end_time"].max() if inp.runs.height else None)
    if anchor is None:
        return []
    last = Month(anchor.year, anchor.month)  # type: ignore[union-attr]
    seq = [last]
    for _ in range(months - 1):
        seq.insert(0, seq[0].prev())
    if inp.history is not None and inp.history["end_time"].min() is not None:
        runs = inp.history
    else:
        frames = [inp.context.drop("row_id")]
        ctx_start = inp.context["end_time"].min() if inp.context.height else None
        if inp.store is not None and (ctx_start is None or seq[0].start < ctx_start):
            older = load_runs(
                inp.store,
                start=seq[0].start,
                end=ctx_start or (inp.period.start - CONTEXT),
                # The columns the context was loaded with (a projection stays one).
                columns=[c for c in inp.context.columns if c in RUN_SCHEMA],
            )
            if older.height:
                frames.append(attribute(older, _signals_for(inp, older), inp.events).drop("row_id"))
        runs = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    out = []
    for m in seq:
        sub = runs.filter(pl.col("end_time").is_between(m.start, m.end, closed="left"))
        r = fr(sub, min_gpus=inp.settings.min_gpus)
        big = sub.filter(
            (pl.col("gpus") > inp.settings.min_gpus) & (pl.col("elapsed_s").fill_null(0) > 0)
        )
        hours = float(big["elapsed_s"].sum() or 0) / 3600.0
        lo, hi = poisson_rate_interval(r["failures"], hours) if hours > 0 else (None, None)
        out.append(
            {
                "month": str(m),
                "runs": sub.height,
                "rf_runs": r["runs"],
                "failures": r["failures"],
                "node_days": r["node_days"],
                "rf_per_1000_node_days": r["rf_per_1000_node_days"],
                "rf_ci90_per_1000": [
                    None if r["ci90_low"] is None else r["ci90_low"] * 1000,
                    None if r["ci90_high"] is None else r["ci90_high"] * 1000,
                ],
                "mttf_hours": hours / r["failures"] if r["failures"] else None,
                "mttf_ci90_hours": [lo, hi],
            }
        )
    while out and out[0]["runs"] == 0:  # months before the store's history began
        out.pop(0)
    return out
