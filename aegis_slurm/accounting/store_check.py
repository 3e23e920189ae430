"""Verify a store and repair what can be repaired (``aegis-slurm store check [--repair]``).

What is checked, and what ``--repair`` does about it:

* ``meta.json`` unreadable: rewritten, when every part has this version's schema;
  a store of another schema version is never "repaired" (re-ingest into a new store);
* a part that cannot be read, or holds another schema: moved to ``quarantine/`` (nothing is
  deleted; the admin decides), so every other command works again;
* temporary files a killed ingest left (``.staged-*``, ``.compact-*``): deleted once their
  writer is gone;
* a month whose parts repeat a key (an ingest killed between publishing and compacting;
  readers already hide the repeats): compacted.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.accounting import store as store_mod
from aegis_slurm.accounting.schema import SCHEMA_VERSION


@dataclass
class Finding:
    path: str
    problem: str
    repaired: bool = False
    action: str = ""


@dataclass
class CheckReport:
    store: str
    parts: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.repaired for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.store,
            "ok": self.ok,
            "parts": self.parts,
            "problems": [f.__dict__ for f in self.findings],
        }


def check_store(store: Path | str, *, repair: bool = False) -> CheckReport:
    """Check every file of ``store``; with ``repair``, fix what can be fixed safely."""
    store = Path(store)
    meta_path = store / "meta.json"
    if not meta_path.exists() and not (store / "runs").is_dir():
        raise store_mod.StoreError(
            f"{store}: not an aegis-slurm store (no meta.json, no runs/); run ingest first"
        )
    report = CheckReport(store=str(store))

    for path in store_mod.stale_temp_files(store):
        finding = Finding(str(path), "temporary file left by a killed ingest")
        if repair:
            path.unlink(missing_ok=True)
            finding.repaired, finding.action = True, "deleted"
        report.findings.append(finding)

    bad_parts = 0
    for folder in sorted((store / "runs").glob("month=*")):
        # Under the month's lock, as ingests publish and compact: a part a concurrent compaction
        # unlinks is never taken for a corrupt one, nor moved while it is rewritten.
        with _month_locked(folder, required=repair):
            bad_parts += _check_month(store, folder, report, repair)
    _check_meta(store, report, repair, sound_parts=bad_parts == 0 or repair)
    return report


@contextlib.contextmanager
def _month_locked(folder: Path, *, required: bool) -> Iterator[None]:
    """The month's lock; a plain check of a read-only store goes on without it."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(store_mod._month_lock(folder))
        except OSError:
            if required:
                raise
        yield


def _check_month(store: Path, folder: Path, report: CheckReport, repair: bool) -> int:
    """Check (and with ``repair`` fix) one month's parts; returns how many were bad."""
    parts = sorted(folder.glob("part-*.parquet"))
    report.parts += len(parts)
    bad = []
    for path in parts:
        problem = store_mod.part_problem(path)
        if problem is None:
            continue
        bad.append(path)
        finding = Finding(str(path), problem)
        if repair:
            target = _quarantine_path(store, path)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)
            store_mod.fsync_dir(path.parent)
            finding.repaired, finding.action = True, f"moved to {target}"
        report.findings.append(finding)
    sound = [path for path in parts if path not in bad]
    if len(sound) < 2:
        return len(bad)
    try:
        keys = pl.scan_parquet(sound).select(store_mod.KEY).collect()
    except (OSError, pl.exceptions.PolarsError):
        return len(bad)
    if keys.n_unique() == keys.height:
        return len(bad)
    finding = Finding(
        str(folder),
        f"{keys.height - keys.n_unique()} run(s) stored twice (an ingest stopped before "
        "compacting; readers already show them once)",
    )
    if repair:
        store_mod._compact_locked(folder)
        finding.repaired, finding.action = True, "compacted"
    report.findings.append(finding)
    return len(bad)


def _quarantine_path(store: Path, path: Path) -> Path:
    """Where a bad part goes: never over an earlier quarantined file of the same name."""
    target = store / "quarantine" / path.parent.name / path.name
    n = 1
    while target.exists():
        target = target.with_name(f"{path.stem}.{n}{path.suffix}")
        n += 1
    return target


def _check_meta(store: Path, report: CheckReport, repair: bool, sound_parts: bool) -> None:
    meta_path = store / "meta.json"
    try:
        version = store_mod.read_meta(store).get("schema_version") if meta_path.exists() else None
        problem = (
            None
            if version == SCHEMA_VERSION
            else ("meta.json is missing" if version is None else f"schema version {version}")
        )
    except store_mod.StoreError as exc:
        version, problem = None, str(exc).split("; ")[0]
    if problem is None:
        return
    finding = Finding(str(meta_path), problem)
    if version is not None:
        finding.action = f"this version reads schema {SCHEMA_VERSION}: re-ingest into a new store"
    elif repair and sound_parts:
        payload = json.dumps({"schema_version": SCHEMA_VERSION}).encode()
        store_mod._atomic_write_bytes(meta_path, payload)
        finding.repaired, finding.action = True, "rewritten"
    report.findings.append(finding)
