"""Raw sacct string fields -> the typed job-run table, with a reason for every rejected record.

Everything here is vectorized: one pass of polars expressions over all records.  The first failed
rule names the rejection reason; steps are counted as skipped, not rejected.
"""

from __future__ import annotations

import zoneinfo
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import polars as pl

from aegis_slurm.accounting.errors import AccountingInputError
from aegis_slurm.accounting.fields import TIME_FIELDS
from aegis_slurm.accounting.hostlists import HostlistCache, expand_series
from aegis_slurm.accounting.schema import ENDED_STATES, RUN_SCHEMA, STATES

#: Earliest believable timestamp and the first unbelievable one (Slurm prints 0/INFINITE as
#: Unknown): years 1995 to 2100.
_EARLIEST = datetime(1995, 1, 1, tzinfo=UTC)
_TOO_LATE = datetime(2101, 1, 1, tzinfo=UTC)
_DURATION = r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$"
_JOBID = r"^(\d+)(?:_(\d+|\[[^\]]*\]))?(?:\+(\d+))?$"
_NULL_TOKENS = ("", "Unknown", "None", "(null)")
#: Sane bounds: a value past them is a corrupt record, not a job (analytics would believe it).
MAX_ELAPSED_S = 10 * 365 * 86400  # ten years of run time
MAX_TIMELIMIT_S = 100 * 365 * 86400  # a time limit of a century is a wrapped counter
MAX_NODES = 1_000_000  # more nodes than any cluster has
MAX_GPUS = 1_048_576
#: ElapsedRaw may be shorter than End - Start (suspended time) but longer only by an hour (an
#: export read without --tz across a daylight-saving change) plus rounding.
_ELAPSED_SLACK_S = 3600 + 60


@dataclass
class Converted:
    runs: pl.DataFrame  # RUN_SCHEMA without run_index
    rejected: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    rejected_lines: pl.DataFrame | None = None  # _line, reason


def convert(
    records: pl.DataFrame,
    *,
    source: str,
    cluster: str = "",
    source_tz: str = "UTC",
    hostlist_cache: HostlistCache | None = None,
) -> Converted:
    """Type, validate and normalise raw records (one String column per sacct field).

    Pass one ``hostlist_cache`` to every piece of an export so each node list is expanded once.
    """
    present = set(records.columns)
    check_time_zone(source_tz)

    def raw(name: str) -> pl.Expr:
        # No strip: parsable output is unpadded, and stripping copies every string.
        if name in present:
            return pl.col(name)
        return pl.lit(None, dtype=pl.String)

    def text(name: str) -> pl.Expr:
        return raw(name).fill_null("")

    def free(name: str) -> pl.Expr:
        """Free text is kept byte for byte (whitespace may matter to whoever wrote it)."""
        if name in present:
            return pl.col(name).fill_null("")
        return pl.lit("", dtype=pl.String)

    frame = records.with_columns(
        pl.coalesce(raw("JobID").replace("", None), raw("JobIDRaw")).alias("_jobid"),
        raw("JobIDRaw").alias("_jobidraw"),
        text("State").alias("state_raw"),
    )
    is_step = pl.col("_jobid").str.contains(r"\.", literal=False).fill_null(False) | pl.col(
        "_jobidraw"
    ).str.contains(r"\.", literal=False).fill_null(False)
    frame = frame.with_columns(is_step.alias("_step"))
    skipped = Counter({"job step (not an allocation)": int(frame["_step"].sum())})
    frame = frame.filter(~pl.col("_step"))

    frame = _by_distinct_value(
        frame,
        "state_raw",
        pl.col("state_raw").str.split(" ").list.first().str.strip_chars_end("+").alias("state"),
        pl.col("state_raw")
        .str.extract(r"^CANCELLED by (\d+)", 1)
        .cast(pl.Int64, strict=False)
        .alias("cancelled_by_uid"),
    )
    jobid_parts = pl.col("_jobid").str.extract_groups(_JOBID)
    frame = frame.with_columns(
        jobid_parts.struct.field("1").cast(pl.Int64, strict=False).alias("_id_base"),
        jobid_parts.struct.field("2").alias("_array_task"),
        jobid_parts.struct.field("3").cast(pl.Int64, strict=False).alias("het_job_offset"),
    )
    frame = frame.with_columns(
        pl.when(pl.col("_array_task").is_not_null()).then(pl.col("_id_base")).alias("array_job_id"),
        pl.col("_array_task").cast(pl.Int64, strict=False).alias("array_task_id"),
        pl.when(pl.col("het_job_offset").is_not_null())
        .then(pl.col("_id_base"))
        .alias("het_job_id"),
        pl.coalesce(
            pl.col("_jobidraw").cast(pl.Int64, strict=False),
            # Without JobIDRaw only a plain id is its own raw id.
            pl.when(pl.col("_array_task").is_null() & pl.col("het_job_offset").is_null()).then(
                pl.col("_id_base")
            ),
        ).alias("job_id_raw"),
    )

    frame = _parse_times(frame, present, raw, source_tz)

    frame = frame.with_columns(
        text("ExitCode").alias("_exit"),
        text("DerivedExitCode").alias("_derived"),
        text("AllocTRES").alias("_tres"),
    )
    for column, code, signal in (
        ("_exit", "exit_code", "exit_signal"),
        ("_derived", "derived_exit_code", "derived_exit_signal"),
    ):
        parts = pl.col(column).str.extract_groups(r"^(\d+):(\d+)$")  # "code:signal"
        frame = _by_distinct_value(
            frame,
            column,
            parts.struct.field("1").cast(pl.Int32, strict=False).alias(code),
            parts.struct.field("2").cast(pl.Int32, strict=False).alias(signal),
        )
    frame = _by_distinct_value(
        frame,
        "_tres",
        _gpus(pl.col("_tres")).alias("gpus"),
        pl.col("_tres")
        .str.contains(r"(?:^|,)gres/gpu(?::[^=,]+)?=(?:-|\d{13})")
        .alias("_bad_gpus"),
        pl.col("_tres")
        .str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=")
        .list.eval(pl.element().str.extract(r"gres/gpu:([^=,]+)=", 1))
        .list.unique()
        .list.sort()
        .list.join(",")
        .alias("gpu_types"),
        pl.col("_tres")
        .str.extract(r"(?:^|,)node=(\d+)", 1)
        .cast(pl.Int64, strict=False)
        .alias("_tres_nodes"),
    )
    if "AllocTRES" not in present:  # unknown, not zero: analytics must not count it as 0 GPUs
        frame = frame.with_columns(pl.lit(None, pl.Int64).alias("gpus"))
    elapsed_parts = text("Elapsed").str.extract_groups(_DURATION)
    limit_parts = text("Timelimit").str.extract_groups(_DURATION)
    frame = frame.with_columns(
        pl.coalesce(
            raw("ElapsedRaw").cast(pl.Int64, strict=False),
            _duration_seconds(elapsed_parts),
            (pl.col("end_time") - pl.col("start_time")).dt.total_seconds(),
        ).alias("elapsed_s"),
        pl.coalesce(
            _minutes_to_seconds(raw("TimelimitRaw").cast(pl.Int64, strict=False)),
            _duration_seconds(limit_parts),
        ).alias("timelimit_s"),
        text("NodeList").alias("_nodelist_raw"),
    )
    nodes, bad_nodes = expand_series(frame.get_column("_nodelist_raw"), hostlist_cache)
    frame = frame.with_columns(
        nodes.alias("nodes"),
        bad_nodes.alias("_bad_nodelist"),
        pl.when(pl.col("_nodelist_raw").is_in([*_NULL_TOKENS, "None assigned"]))
        .then(pl.lit(""))
        .otherwise(pl.col("_nodelist_raw"))
        .alias("node_list"),
    )
    frame = frame.with_columns(
        pl.coalesce(
            raw("NNodes").cast(pl.Int64, strict=False),
            raw("AllocNodes").cast(pl.Int64, strict=False),
            pl.col("_tres_nodes"),
            # Only a NodeList the export has says how many; without one the count is unknown.
            pl.col("nodes").list.len().cast(pl.Int64)
            if "NodeList" in present
            else pl.lit(None, pl.Int64),
        ).alias("n_nodes"),
    )

    # Every rule is a cheap boolean over all records; the reason text (a long when/then chain)
    # is built only for the few records that broke one.
    rules = _rejection_rules(present)
    frame = frame.with_columns(pl.any_horizontal(c for c, _ in rules).alias("_bad"))
    rejected_lines = frame.filter(pl.col("_bad")).select(
        "_line", _first_reason(rules).alias("_reject")
    )
    rejected = Counter(dict(rejected_lines.get_column("_reject").value_counts().iter_rows()))
    good = frame.filter(~pl.col("_bad"))

    runs = good.select(
        pl.lit(cluster).alias("cluster")
        if "Cluster" not in present
        else text("Cluster").alias("cluster"),
        pl.col("job_id_raw"),
        pl.col("_jobid").alias("job_id"),
        "array_job_id",
        "array_task_id",
        "het_job_id",
        "het_job_offset",
        pl.lit(None, dtype=pl.Int32).alias("run_index"),
        free("JobName").alias("job_name"),
        text("User").alias("user"),
        text("Account").alias("account"),
        text("Partition").alias("partition"),
        text("QOS").alias("qos"),
        "state",
        "state_raw",
        "cancelled_by_uid",
        pl.col("state").is_in(list(ENDED_STATES)).alias("ended"),
        "exit_code",
        "exit_signal",
        "derived_exit_code",
        "derived_exit_signal",
        "submit_time",
        "eligible_time",
        "start_time",
        "end_time",
        "elapsed_s",
        "timelimit_s",
        "n_nodes",
        "gpus",
        "gpu_types",
        "node_list",
        "nodes",
        text("FailedNode").alias("failed_node"),
        text("Reason").alias("reason"),
        text("Flags").alias("flags"),
        free("Comment").alias("comment"),
        free("AdminComment").alias("admin_comment"),
        free("SystemComment").alias("system_comment"),
        free("WorkDir").alias("work_dir"),
        pl.lit(source).alias("source"),
    ).cast(RUN_SCHEMA)  # type: ignore[arg-type]
    return Converted(
        runs=runs,
        rejected=rejected,
        skipped=skipped,
        rejected_lines=rejected_lines.rename({"_reject": "reason"}),
    )


def _by_distinct_value(frame: pl.DataFrame, column: str, *exprs: pl.Expr) -> pl.DataFrame:
    """Evaluate ``exprs`` once per distinct value of ``column`` and join the results back.

    States, exit codes and TRES strings repeat across millions of records; parsing each distinct
    string once is what keeps a 4M-record ingest within seconds.
    """
    derived = frame.select(pl.col(column).unique().drop_nulls()).with_columns(*exprs)
    # Join only the key column: joining the whole frame would copy every other column too.
    looked_up = frame.select(column).join(derived, on=column, how="left", maintain_order="left")
    return frame.with_columns(looked_up.drop(column))


def _parse_times(
    frame: pl.DataFrame, present: set[str], raw: Callable[[str], pl.Expr], source_tz: str
) -> pl.DataFrame:
    """Submit/Eligible/Start/End -> UTC datetimes in ``<name>_time``, plus ``_bad_<Name>`` flags.

    sacct prints ISO local time (read in ``source_tz``), or epoch seconds under
    ``SLURM_TIME_FORMAT=%s``; Unknown/None and the like are null, anything else is bad.  Epoch
    parsing runs only for columns where ISO parsing left something unread.
    """
    iso_parsed, null_tokens = [], []
    for name in TIME_FIELDS:
        value = raw(name)
        # cache=False: timestamps are mostly distinct, so polars' parse cache only costs.
        iso = value.str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False, cache=False)
        if source_tz == "UTC":
            iso = iso.dt.replace_time_zone("UTC")
        else:
            iso = iso.dt.replace_time_zone(
                source_tz, ambiguous="earliest", non_existent="null"
            ).dt.convert_time_zone("UTC")
        iso_parsed.append(iso.alias(f"{name.lower()}_time"))
        null_tokens.append((value.is_null() | value.is_in(_NULL_TOKENS)).alias(f"_null_{name}"))
    frame = frame.with_columns(*iso_parsed, *null_tokens)
    if source_tz != "UTC" and {"Start", "End"} <= present:
        frame = _resolve_repeated_hour(frame, present, raw, source_tz)
    unread = {
        name: ~pl.col(f"_null_{name}") & pl.col(f"{name.lower()}_time").is_null()
        for name in TIME_FIELDS
    }
    counts = frame.select(expr.sum().alias(name) for name, expr in unread.items()).row(0)
    epoch_columns = []
    for name, count in zip(TIME_FIELDS, counts, strict=True):
        if not count or name not in present:
            continue
        column = f"{name.lower()}_time"
        epoch = (
            pl.from_epoch(raw(name).cast(pl.Int64, strict=False), "s")
            .dt.replace_time_zone("UTC")
            .dt.cast_time_unit("us")
        )
        epoch_columns.append(
            pl.when(pl.col(f"_null_{name}"))
            .then(None)
            .otherwise(pl.coalesce(pl.col(column), epoch))
            .alias(column)
        )
    if epoch_columns:
        frame = frame.with_columns(epoch_columns)
    return frame.with_columns(unread[name].alias(f"_bad_{name}") for name in TIME_FIELDS)


def _resolve_repeated_hour(
    frame: pl.DataFrame, present: set[str], raw: Callable[[str], pl.Expr], source_tz: str
) -> pl.DataFrame:
    """Read a Start or End inside a daylight-saving fall-back hour as the run's length says.

    Local times in the repeated hour name two instants.  Of the (at most four) readings of
    Start and End, the one whose span agrees best with ElapsedRaw (or Elapsed) wins; without
    either, the earliest reading that does not end before it starts.
    """

    def latest(name: str) -> pl.Expr:
        parsed = raw(name).str.strptime(
            pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False, cache=False
        )
        return parsed.dt.replace_time_zone(
            source_tz, ambiguous="latest", non_existent="null"
        ).dt.convert_time_zone("UTC")

    elapsed = [raw("ElapsedRaw").cast(pl.Int64, strict=False)] if "ElapsedRaw" in present else []
    if "Elapsed" in present:
        elapsed.append(_duration_seconds(raw("Elapsed").str.extract_groups(_DURATION)))
    frame = frame.with_columns(
        pl.coalesce(latest("Start"), "start_time").alias("_start_late"),
        pl.coalesce(latest("End"), "end_time").alias("_end_late"),
        (pl.coalesce(elapsed) if elapsed else pl.lit(None, pl.Int64)).alias("_elapsed_hint"),
    )
    readings = [
        (pl.col(start), pl.col(end))
        for start in ("start_time", "_start_late")
        for end in ("end_time", "_end_late")
    ]

    def score(start: pl.Expr, end: pl.Expr) -> pl.Expr:
        span = (end - start).dt.total_seconds()
        return (
            pl.when(span < 0)
            .then(pl.lit(1 << 40))
            .otherwise((span - pl.col("_elapsed_hint")).abs().fill_null(0))
        )

    scores = [score(start, end).alias(f"_score{k}") for k, (start, end) in enumerate(readings)]
    frame = frame.with_columns(scores)
    best = pl.min_horizontal(pl.col(f"_score{k}") for k in range(len(readings)))
    chosen_start = pl.when(pl.col("_score0") == best).then(readings[0][0])
    chosen_end = pl.when(pl.col("_score0") == best).then(readings[0][1])
    for k, (start, end) in enumerate(readings[1:], start=1):
        chosen_start = chosen_start.when(pl.col(f"_score{k}") == best).then(start)
        chosen_end = chosen_end.when(pl.col(f"_score{k}") == best).then(end)
    return frame.with_columns(
        chosen_start.otherwise(pl.col("start_time")).alias("start_time"),
        chosen_end.otherwise(pl.col("end_time")).alias("end_time"),
    ).drop("_start_late", "_end_late", "_elapsed_hint", *(f"_score{k}" for k in range(4)))


def _minutes_to_seconds(minutes: pl.Expr) -> pl.Expr:
    """Minutes -> seconds; a count past the bound stays past it instead of wrapping around."""
    return (
        pl.when(minutes.abs() > MAX_TIMELIMIT_S // 60)
        .then(minutes.sign() * (MAX_TIMELIMIT_S + 1))
        .otherwise(minutes * 60)
    )


def check_time_zone(name: str) -> None:
    """Raise ``InputError`` unless ``name`` is a time zone (``--tz Europe/Berlin``)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError) as exc:
        raise AccountingInputError(
            f"unknown time zone {name!r}: give an IANA name such as UTC or Europe/Berlin"
        ) from exc


def _duration_seconds(parts: pl.Expr) -> pl.Expr:
    """``[D-][HH:]MM:SS[.frac]`` groups -> seconds (null when the text did not match)."""
    days = parts.struct.field("1").cast(pl.Int64, strict=False).fill_null(0)
    hours = parts.struct.field("2").cast(pl.Int64, strict=False).fill_null(0)
    minutes = parts.struct.field("3").cast(pl.Int64, strict=False)
    seconds = parts.struct.field("4").cast(pl.Int64, strict=False)
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def _gpus(alloc_tres: pl.Expr) -> pl.Expr:
    """GPUs from AllocTRES: untyped ``gres/gpu=N`` if present, else the sum of typed entries.

    Never both: ``gres/gpu:h100=32,gres/gpu=32`` is 32 GPUs.  The pattern is anchored so usage
    TRES such as ``gres/gpumem`` or ``gres/gpuutil`` never match (analytics-spec §6).
    """
    # At most 12 digits: a longer count cannot be a GPU count (and would overflow the sum).
    untyped = alloc_tres.str.extract(r"(?:^|,)gres/gpu=(\d{1,12})(?:,|$)", 1).cast(
        pl.Int64, strict=False
    )
    typed = (
        alloc_tres.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=\d{1,12}(?:,|$)")
        .list.eval(pl.element().str.extract(r"=(\d+),?$", 1).cast(pl.Int64, strict=False))
        .list.sum()
    )
    # Int64 and non-strict: an absurd count is rejected by a rule, never a crash of the ingest.
    return pl.coalesce(untyped, typed, pl.lit(0, pl.Int64))


def _rejection_rules(present: set[str]) -> list[tuple[pl.Expr, pl.Expr]]:
    """``(broken, reason)`` pairs, in the order a record's reason is chosen; never null."""
    rules: list[tuple[pl.Expr, pl.Expr]] = [
        (pl.col("_jobid").is_null() | (pl.col("_jobid") == ""), pl.lit("missing job id")),
        (
            pl.col("job_id_raw").is_null()
            & pl.col("_jobidraw").is_not_null()
            & (pl.col("_jobidraw") != ""),
            pl.lit("malformed JobIDRaw"),
        ),
        (pl.col("_id_base").is_null(), pl.lit("malformed JobID")),
        (
            ~pl.col("state").is_in(list(STATES)),
            pl.format("unknown state '{}'", pl.col("state").str.slice(0, 40)),
        ),
    ]
    for name in TIME_FIELDS:
        if name in present:
            rules.append((pl.col(f"_bad_{name}"), pl.lit(f"unparseable timestamp in {name}")))
    for name in TIME_FIELDS:
        col = pl.col(f"{name.lower()}_time")
        rules.append(
            (
                col.is_not_null() & ((col < _EARLIEST) | (col >= _TOO_LATE)),
                pl.lit(f"impossible timestamp in {name}"),
            )
        )
    rules += [
        (
            pl.col("end_time").is_not_null()
            & pl.col("start_time").is_not_null()
            & (pl.col("end_time") < pl.col("start_time")),
            pl.lit("End before Start"),
        ),
        (
            pl.col("exit_code").is_null() & (pl.col("ExitCode") != "")
            if "ExitCode" in present
            else pl.lit(False),
            pl.lit("malformed ExitCode"),
        ),
        (
            pl.col("ElapsedRaw").cast(pl.Int64, strict=False).is_null()
            & pl.col("ElapsedRaw").str.contains(r"\S")
            if "ElapsedRaw" in present
            else pl.lit(False),
            pl.lit("malformed ElapsedRaw"),
        ),
        (
            pl.col("NNodes").cast(pl.Int64, strict=False).is_null()
            & pl.col("NNodes").str.contains(r"\S")
            if "NNodes" in present
            else pl.lit(False),
            pl.lit("malformed NNodes"),
        ),
        (pl.col("_bad_nodelist"), pl.lit("malformed NodeList")),
        (pl.col("elapsed_s") < 0, pl.lit("negative ElapsedRaw")),
        (pl.col("elapsed_s") > MAX_ELAPSED_S, pl.lit("implausible ElapsedRaw (over ten years)")),
        (
            # Only an ended run's End is its end: sacct prints a running job's End as the
            # query window's end (or its Start), while Elapsed runs on (XDMoD's test data).
            pl.col("state").is_in(list(ENDED_STATES))
            & (
                pl.col("elapsed_s")
                > (pl.col("end_time") - pl.col("start_time")).dt.total_seconds() + _ELAPSED_SLACK_S
            ),
            pl.lit("ElapsedRaw longer than End - Start"),
        ),
        (pl.col("timelimit_s") < 0, pl.lit("negative TimelimitRaw")),
        (pl.col("timelimit_s") > MAX_TIMELIMIT_S, pl.lit("implausible TimelimitRaw")),
        (pl.col("n_nodes") < 0, pl.lit("negative NNodes")),
        (pl.col("n_nodes") > MAX_NODES, pl.lit("implausible NNodes")),
        (
            pl.col("_bad_gpus") | (pl.col("gpus") > MAX_GPUS),
            pl.lit("implausible GPU count in AllocTRES"),
        ),
    ]
    return [(condition.fill_null(False), why) for condition, why in rules]


def _first_reason(rules: list[tuple[pl.Expr, pl.Expr]]) -> pl.Expr:
    """The first rule a record breaks, as a human-readable reason (null when it is fine)."""
    expr = pl.when(rules[0][0]).then(rules[0][1])
    for condition, why in rules[1:]:
        expr = expr.when(condition).then(why)
    return expr.otherwise(pl.lit(None, dtype=pl.String))
