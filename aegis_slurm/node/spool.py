"""Durable per-node spool of Epilog records: JSON lines, atomic, private, bounded.  Stdlib only.

Layout: ``<spool_dir>/<node>/signals.jsonl`` plus rotated ``signals.jsonl.1`` ..
``signals.jsonl.<keep>`` (per node name: several slurmds may share one filesystem).

Durability: a write never appends in place.  Under an exclusive flock the writer builds the new
file content (old lines + the new record) in a fresh temp file (``O_EXCL``, mode 0600), fsyncs
it, ``rename``\\ s it over ``signals.jsonl`` and fsyncs the directory; only then does
:func:`append` return (the record is *acknowledged*).  rename is atomic, so a reader or a
``kill -9`` at any instant sees either the old complete file or the new complete file, never a
partial line, and an acknowledged record is on disk.  Leftover temp files of a killed writer are
removed by the next writer (under the lock) and ignored by readers.

Bounded: when the file would exceed ``max_bytes`` it is rotated first (``.1`` -> ``.2`` ...,
the oldest beyond ``keep`` is dropped), so a node never holds more than about
``(keep + 1) * max_bytes``.  The rewrite costs O(max_bytes) per job end, a few ms at 1 MiB.
Directories are 0700 and files 0600 (records may name users' jobs).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from aegis_slurm.errors import InputError
from aegis_slurm.node import files

FILE = "signals.jsonl"
#: the EpilogSlurmctld's job records (where the job's output went), in
#: ``<spool>/slurmctld/jobs.jsonl``: apart from the nodes' ``signals.jsonl``, so no reader of
#: node records ever sees one
JOB_DIR = "slurmctld"
JOB_FILE = "jobs.jsonl"
TMP_MARK = ".tmp."


def _key(rec: dict[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(rec.get("cluster", "")),
        str(rec.get("job_id", "")),
        str(rec.get("run", "")),
        str(rec.get("node", "")),
    )


def node_dir(spool_dir: str | os.PathLike[str], node: str) -> Path:
    try:
        return Path(spool_dir) / files.safe_name(node)
    except InputError as e:  # callers treat a bad record as a ValueError
        raise ValueError(str(e)) from None


def append(
    spool_dir: str | os.PathLike[str],
    record: dict[str, Any],
    *,
    max_bytes: int = 1 << 20,
    keep: int = 4,
    name: str = FILE,
) -> Path:
    """Durably add ``record`` (must have ``node``); a record with the same (cluster, job_id, run,
    node) replaces the older one (an Epilog re-run is idempotent).  Returns the file path.

    ``name``: the file in the node's directory (the EpilogSlurmctld's job records go to
    ``jobs.jsonl``, apart from the nodes' signal records)."""
    root = Path(spool_dir)
    files.private_dir(root)
    d = node_dir(root, str(record["node"]))
    files.private_dir(d)
    line = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    path = d / name
    lock_fd = os.open(d / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        for pattern in (name + TMP_MARK + "*", f".{name}{TMP_MARK}*"):  # killed writers' leftovers
            for stale in d.glob(pattern):
                with contextlib.suppress(OSError):
                    stale.unlink()
        kept: list[str] = []
        with contextlib.suppress(FileNotFoundError):
            key = _key(record)
            needles = _job_needles(key[1])
            for old in path.read_text(errors="replace").splitlines(keepends=True):
                if not any(n in old for n in needles):
                    kept.append(old)  # cannot be this job's: not parsed (10x cheaper appends)
                    continue
                try:
                    prev = json.loads(old)
                    if isinstance(prev, dict) and _key(prev) == key:
                        continue
                except ValueError:
                    pass  # not ours to judge; keep the bytes as they are
                kept.append(old)
        size = sum(len(x.encode()) for x in kept)
        if kept and size + len(line.encode()) > max_bytes:
            _rotate(d, keep, name)
            kept = []
        # the one atomic durable write: temp file, fsync, rename, fsync the directory
        files.atomic_write(path, "".join([*kept, line]))
    finally:
        os.close(lock_fd)  # releases the flock
    return path


def _job_needles(job_id: str) -> tuple[str, ...]:
    """How a line written by :func:`append` spells ``"job_id"`` of ``job_id`` (a string, or a
    bare number): only lines holding one can carry the same key.  Parsing every line of a
    1 MiB file of small records cost ~30 ms per append (measured: 2,500 job records)."""
    s = '"job_id":' + json.dumps(job_id)
    if job_id.isdigit():
        return (s, f'"job_id":{job_id},', f'"job_id":{job_id}}}')
    return (s,)


def _rotate(d: Path, keep: int, name: str = FILE) -> None:
    """signals.jsonl -> .1 -> .2 ... -> .keep; the oldest falls off."""
    have = sorted(
        (
            int(f.name[len(name) + 1 :])
            for f in d.glob(name + ".*")
            if f.name[len(name) + 1 :].isdigit()
        ),
        reverse=True,
    )
    for i in have:
        if i >= keep:
            (d / f"{name}.{i}").unlink()
        else:
            os.replace(d / f"{name}.{i}", d / f"{name}.{i + 1}")
    if keep > 0:
        os.replace(d / name, d / f"{name}.1")
    files.fsync_dir(d)


def spool_files(paths: list[str | os.PathLike[str]], name: str = FILE) -> list[Path]:
    """Every spool file called ``name`` (or a rotated copy) under ``paths`` (a spool root, a
    node directory, or a file: a file is taken when it has that name)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            if name == FILE or p.name.startswith(name):
                out.append(p)
            continue
        for f in sorted(p.rglob(name + "*")):
            suffix = f.name[len(name) :]
            if f.is_file() and (suffix == "" or suffix[1:].isdigit()):
                out.append(f)
    return out


def read_records(
    paths: list[str | os.PathLike[str]], errors: list[str] | None = None, name: str = FILE
) -> Iterator[dict[str, Any]]:
    """All records in the spool files under ``paths``.  Unreadable lines go to ``errors``."""
    for f in spool_files(paths, name):
        try:
            text = f.read_text(errors="replace")
        except OSError as e:
            if errors is not None:
                errors.append(f"{f}: {e.strerror}")
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError:
                if errors is not None:
                    errors.append(f"{f}:{n}: not JSON")
                continue
            if isinstance(rec, dict) and rec.get("node") and rec.get("job_id") is not None:
                yield rec
            elif errors is not None:
                errors.append(f"{f}:{n}: not an aegis record")


def tail_records(node_dir: str | os.PathLike[str], nbytes: int = 1 << 16) -> list[dict[str, Any]]:
    """Records in the last ``nbytes`` of a node's current file (the newest ones), cheaply.

    For the slurmctld side, which polls many nodes' spools for the run that just ended: a
    record of that run is the last line written, so the tail is enough and a 1 MiB file is not
    re-read on every poll.  A first partial line of the tail is skipped.
    """
    path = Path(node_dir) / FILE
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - nbytes))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if size > nbytes and lines:
        lines = lines[1:]
    out = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("node"):
            out.append(rec)
    return out
