"""Run ``sacct`` in day-sized windows and ingest what it prints (the live backend).

Why each flag (analytics-spec §6): ``--allocations`` one record per allocation; ``--duplicates``
every requeued run (Submit is reset per run); ``TZ=UTC`` because sacct prints local time with no
offset; ``--parsable`` with a multi-character delimiter so the trailing delimiter marks record
ends and free text (last in the field list) may hold ``|`` or newlines.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from aegis_slurm.accounting import pyslurm_backend
from aegis_slurm.accounting import store as store_mod
from aegis_slurm.accounting.errors import AccountingServiceError
from aegis_slurm.accounting.fields import LIVE_FIELDS
from aegis_slurm.accounting.ingest import IngestReport, commit, parse_export, parse_records

DELIMITER = ";|;"
#: A window is complete once its end is this far in the past (records reach slurmdbd late).
SETTLE = timedelta(hours=1)


class SacctError(AccountingServiceError):
    """sacct failed; the message carries its stderr."""


def _sacct_env() -> dict[str, str]:
    env = dict(os.environ)
    env["TZ"] = "UTC"
    # A site default of "relative" would print "Tomorrow 10:00"; force ISO timestamps.
    env["SLURM_TIME_FORMAT"] = "standard"
    return env


def run_sacct(argv: Sequence[str], timeout: float = 600) -> bytes:
    """Run sacct (argv list, never a shell) and return stdout; raise SacctError on failure."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, env=_sacct_env(), timeout=timeout, check=False
        )
    except FileNotFoundError as exc:
        raise SacctError("sacct not found on PATH: install slurm-client") from exc
    except subprocess.TimeoutExpired as exc:
        raise SacctError(f"sacct timed out after {timeout:.0f} s: {' '.join(argv)}") from exc
    if done.returncode != 0:
        raise SacctError(
            f"sacct exited {done.returncode}: {done.stderr.decode(errors='replace').strip()}"
        )
    return done.stdout


def available_fields(sacct: str = "sacct") -> set[str]:
    """Fields this site's sacct knows (``sacct --helpformat``); 22.05 lacks FailedNode etc."""
    return set(run_sacct([sacct, "--helpformat"], timeout=60).decode().split())


def window_argv(
    start: datetime,
    end: datetime,
    fields: Sequence[str],
    *,
    sacct: str = "sacct",
    clusters: str | None = None,
) -> list[str]:
    argv = [
        sacct,
        "--allusers",
        "--duplicates",
        "--allocations",
        "--parsable",
        "--noheader",
        f"--delimiter={DELIMITER}",
        "-S",
        start.strftime("%Y-%m-%dT%H:%M:%S"),
        "-E",
        end.strftime("%Y-%m-%dT%H:%M:%S"),
        f"--format={','.join(fields)}",
    ]
    if clusters:
        argv += ["-M", clusters]
    return argv


def ingest_sacct(
    store: Path | str,
    start: date,
    end: date,
    *,
    sacct: str = "sacct",
    clusters: str | None = None,
    now: datetime | None = None,
    progress: Callable[[str], None] | None = None,
    use_pyslurm: bool = True,
) -> dict[str, Any]:
    """Fetch ``[start, end)`` day by day, skipping days already fetched after they closed.

    pyslurm is used when one matching the installed Slurm imports (see pyslurm_backend);
    otherwise, or when it fails, sacct.
    """
    store_path = store_mod.open_store(Path(store))
    now = now or datetime.now(UTC)
    backend, why = ("sacct", "pyslurm disabled")
    if use_pyslurm:
        backend, why = pyslurm_backend.choose_backend(
            pyslurm_backend.installed_slurm_version(sacct), pyslurm_backend.pyslurm_version()
        )
    known = available_fields(sacct)
    fields = [f for f in LIVE_FIELDS if f in known]
    done = store_mod.fetched_windows(store_path)
    total = IngestReport(store=str(store_path))
    writer = store_mod.RunWriter(store_path)
    rejected: list[dict[str, Any]] = []
    closed: list[str] = []
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    pending = [d for d in days if d.isoformat() not in done]
    try:
        for index, day in enumerate(pending, 1):
            t0 = datetime(day.year, day.month, day.day, tzinfo=UTC)
            t1 = t0 + timedelta(days=1)
            parsed = None
            if backend == "pyslurm":
                try:
                    records = pyslurm_backend.fetch_window(t0, t1)
                except Exception as exc:  # untested here: never let it stop an ingest
                    backend, why = "sacct", f"pyslurm failed ({exc!r}); fell back to sacct"
                else:
                    parsed = parse_records(
                        records, source=f"pyslurm:{day.isoformat()}", sink=writer.add
                    )
            if parsed is None:
                data = run_sacct(window_argv(t0, t1, fields, sacct=sacct, clusters=clusters))
                parsed = parse_export(
                    data,
                    source=f"sacct:{day.isoformat()}",
                    fields=fields,
                    delimiter=DELIMITER,
                    trailing=True,
                    sink=writer.add,
                )
            total.add(parsed.report)
            rejected.extend(parsed.rejected_rows)
            if t1 + SETTLE <= now:
                closed.append(day.isoformat())
            if progress:
                progress(
                    f"[{index}/{len(pending)}] {day.isoformat()}: "
                    f"{parsed.report.rows_read} records, {parsed.report.rows_kept} kept"
                )
    except BaseException:
        writer.abort()
        raise
    total.sources = [f"sacct:{start.isoformat()}..{end.isoformat()}"]
    result = commit(writer, total, rejected)
    store_mod.mark_windows(store_path, closed)
    result["backend"] = backend
    result["backend_reason"] = why
    result["windows_fetched"] = len(pending)
    result["windows_skipped"] = len(days) - len(pending)
    return result
