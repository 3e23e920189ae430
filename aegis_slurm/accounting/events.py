"""Parse ``sacctmgr show event -P`` output into a node-event frame.

Command the parser is written for (header line required; any field order)::

    TZ=UTC sacctmgr show event -P Start=<t0> End=<t1> \\
        format=Cluster,ClusterNodes,NodeName,TimeStart,TimeEnd,State,Reason,User,Event

Only node events are kept (cluster events such as "Cluster Registered TRES" have no NodeName).
``TimeEnd`` reads ``Unknown`` while the node is still out; that becomes null.

Which events count as *failure evidence* for attribution is decided by
:func:`failure_events`; see its docstring for the documented exclusions.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

import hostlist
import polars as pl

from aegis_slurm.accounting.errors import AccountingInputError

UTC_TIME = pl.Datetime("us", "UTC")

EVENT_SCHEMA: dict[str, pl.DataType] = {
    "cluster": pl.String(),
    "node": pl.String(),
    "time_start": UTC_TIME,
    "time_end": UTC_TIME,
    "state": pl.String(),  # as printed, e.g. "DOWN*", "DRAIN"
    "reason": pl.String(),
    "user": pl.String(),
}

_HEADER_MAP = {
    "Cluster": "cluster",
    "NodeName": "node",
    "TimeStart": "time_start",
    "TimeEnd": "time_end",
    "State": "state",
    "Reason": "reason",
    "User": "user",
    "Event": "event",
}

#: Reasons that are not evidence of a hardware fault (case-insensitive regex).
#: * ``Prolog error`` / ``Epilog error``: slurmd drains the node when a site script exits non-zero.
#:   A prolog failure happens *before* the job runs (Slurm requeues the job) and an epilog failure
#:   *after* it ended, and either is as often a script or configuration bug as a fault.  The aegis
#:   epilog reports real hardware findings through node signals / the AdminComment tag instead.
#: * maintenance/reboot/upgrade/planned drains: administrative, not failures.  Note that Slurm only
#:   records DRAIN when the node *became* drained (DRAINING is not an event), so a maintenance drain
#:   often starts exactly when a job ends and would otherwise look like a failure.
DEFAULT_EXCLUDE_REASONS = r"(?i)(prolog error|epilog error|maint|reboot|upgrade|planned|reserv)"

_FAILURE_STATE = r"^(DOWN|DRAIN|FAIL)"


def _parse_time(col: str) -> pl.Expr:
    return (
        pl.when(pl.col(col).is_in(["Unknown", "None", ""]))
        .then(None)
        .otherwise(pl.col(col))
        .str.strptime(pl.Datetime("us"), "%Y-%m-%dT%H:%M:%S", strict=False)
        .dt.replace_time_zone("UTC")
        .alias(col)
    )


def _fit_fields(parts: list[str], header: list[str]) -> list[str]:
    """Give surplus ``|`` back to Reason, the one free-text field (admins write reasons)."""
    surplus = len(parts) - len(header)
    if surplus > 0 and "Reason" in header:
        at = header.index("Reason")
        parts = [*parts[:at], "|".join(parts[at : at + surplus + 1]), *parts[at + surplus + 1 :]]
    return (parts + [""] * len(header))[: len(header)]


class EventExportError(AccountingInputError):
    """A ``sacctmgr show event`` export that cannot be read."""


def parse_events_text(text: str) -> pl.DataFrame:
    """Parse the text of ``sacctmgr show event -P`` (with its header) into :data:`EVENT_SCHEMA`.

    NodeName is hostlist-expanded so each row is one node (sacctmgr prints one node per line, but
    a compressed list costs nothing to handle).
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    header = lines[0].split("|")
    missing = {"NodeName", "TimeStart", "State"} - set(header)
    if missing:
        raise EventExportError(
            f"sacctmgr event export lacks fields {sorted(missing)} (need a header line, "
            "as written by sacctmgr show event -P)"
        )
    rows = [_fit_fields(ln.split("|"), header) for ln in lines[1:]]
    raw = pl.DataFrame(rows, schema=dict.fromkeys(header, pl.String()), orient="row")
    raw = raw.select([pl.col(h).alias(_HEADER_MAP[h]) for h in header if h in _HEADER_MAP])
    for name in EVENT_SCHEMA:
        if name not in raw.columns:
            raw = raw.with_columns(pl.lit("").alias(name))
    raw = raw.filter(pl.col("node") != "")
    if "event" in raw.columns:
        raw = raw.filter(pl.col("event").is_in(["Node", ""]))
    raw = raw.with_columns(
        pl.col("node").map_elements(hostlist.expand_hostlist, return_dtype=pl.List(pl.String()))
    ).explode("node")
    return raw.with_columns(_parse_time("time_start"), _parse_time("time_end")).select(
        [pl.col(c).cast(t) for c, t in EVENT_SCHEMA.items()]
    )


def load_events(paths: Iterable[str | Path]) -> pl.DataFrame:
    """Read and concatenate sacctmgr event exports (de-duplicated on node, start and state)."""
    frames = []
    for path in paths:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
        try:
            frames.append(parse_events_text(text))
        except EventExportError as exc:
            raise EventExportError(f"{path}: {exc}") from exc
    if not frames:
        return pl.DataFrame(schema=EVENT_SCHEMA)
    return (
        pl.concat(frames)
        .unique(["node", "time_start", "state"], keep="first")
        .sort("time_start", "node")
    )


def failure_events(
    events: pl.DataFrame, exclude_reasons: str | None = DEFAULT_EXCLUDE_REASONS
) -> pl.DataFrame:
    """Events that count as evidence of a node fault: State DOWN*/DRAIN*/FAIL* whose Reason does
    not match ``exclude_reasons`` (default :data:`DEFAULT_EXCLUDE_REASONS`).  "Not responding"
    (slurmd lost) counts: that is how a dead node shows up."""
    out = events.filter(pl.col("state").str.contains(_FAILURE_STATE))
    if exclude_reasons:
        out = out.filter(~pl.col("reason").fill_null("").str.contains(exclude_reasons))
    return out


def is_excluded_reason(reason: str, exclude_reasons: str = DEFAULT_EXCLUDE_REASONS) -> bool:
    """True when a Reason would be ignored by :func:`failure_events`."""
    return re.search(exclude_reasons, reason) is not None
