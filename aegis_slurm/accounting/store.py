"""The analytics store: the job-run table as Parquet partitioned by month, plus ingest state.

Layout of a store directory::

    meta.json                        {"schema_version": 2}
    runs/month=YYYY-MM/part-*.parquet job runs whose Submit falls in that month (UTC)
    sacct_windows.json               live-ingest windows already fetched completely
    ingest_log.jsonl                 one report per ingest
    rejected/<stamp>.jsonl           every rejected record with its line number and reason

Text columns hold "" as null on disk (see ``_EMPTY_AS_NULL``); ``load_runs`` gives "" back.
A run's month comes from its Submit time, which never changes for a given run, so re-ingesting a
run always lands in the same partition and de-duplication stays local to one file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import socket
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from aegis_slurm.accounting.errors import AccountingError
from aegis_slurm.accounting.frames import chunked_like, repeated
from aegis_slurm.accounting.schema import RUN_SCHEMA, SCHEMA_VERSION, empty_runs

#: What to run when a store is damaged (docs/cli.md).
REPAIR_HINT = "run `aegis-slurm store check --repair --store DIR`"

KEY = ("cluster", "job_id", "submit_time")
_INGESTED = "_ingested_at"
_STORED_SCHEMA = {k: v for k, v in RUN_SCHEMA.items() if k != "run_index"} | {
    _INGESTED: pl.Datetime("us", "UTC")
}


#: Text columns are never null in the table, so "" is stored as null and restored on read: the
#: Parquet writer spends ~20 ms per column chunk of empty strings (most comment and FailedNode
#: columns), which was a fifth of a large ingest's encoding time.
_TEXT_COLUMNS = [name for name, dtype in RUN_SCHEMA.items() if dtype == pl.String()]
_EMPTY_AS_NULL = [
    pl.when(pl.col(name) != "").then(pl.col(name)).alias(name) for name in _TEXT_COLUMNS
]


class StoreError(AccountingError):
    """The store is unusable (unknown schema version, unreadable, a corrupt part)."""


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(folder: Path) -> None:
    """Make renames and unlinks in ``folder`` durable (a power loss cannot undo them)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return  # a platform without directory fds: nothing more we can do
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on a directory; their renames are synchronous
    finally:
        os.close(fd)


#: ``<host>`` in temporary names: letters and digits only, so the name can be parsed back.
_HOST = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"
#: Temporary parts: ``.staged-<time>-<pid>-<host>-<n>.parquet`` and ``.compact-<pid>-<host>-*``.
_TEMP_PART = re.compile(r"^\.(?:staged-\d{8}T\d+|compact)-(\d+)-([A-Za-z0-9]*)-")
#: A temporary file older than this is stale whoever wrote it (an ingest takes seconds).
STALE_AFTER_S = 24 * 3600


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def stale_temp_files(store: Path) -> list[Path]:
    """Temporary files a killed ingest or compaction left behind.

    A file is stale when the process that wrote it (on this host) is gone, or when it is older
    than ``STALE_AFTER_S`` (written from another host sharing the store); a live writer's files
    are never touched.
    """
    store = Path(store)
    now = time.time()
    stale = []
    candidates = [
        *store.glob("runs/month=*/.staged-*"),
        *store.glob("runs/month=*/.compact-*"),
        *store.glob(".*.json.*"),
        *store.glob("rejected/.*"),
    ]
    for path in candidates:
        try:
            age = now - path.stat().st_mtime
        except FileNotFoundError:
            continue
        match = _TEMP_PART.match(path.name)
        writer_gone = bool(
            match and match.group(2) == _HOST and not _pid_alive(int(match.group(1)))
        )
        if writer_gone or age > STALE_AFTER_S or (not match and age > 3600):
            stale.append(path)
    return sorted(stale)


def sweep_stale(store: Path) -> list[Path]:
    """Delete ``stale_temp_files``; returns what was removed."""
    removed = []
    for path in stale_temp_files(store):
        try:
            path.unlink()
        except OSError:
            continue  # gone already, or a read-only store: nothing to sweep now
        removed.append(path)
    return removed


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _usable_path(store: Path | str) -> Path:
    """``store`` as a Path, refused when its name is not valid UTF-8 (Parquet I/O cannot use it)."""
    try:
        str(store).encode("utf-8")
    except UnicodeEncodeError:
        raise StoreError(
            f"{str(store).encode('utf-8', 'replace').decode()}: the path is not valid UTF-8; "
            "use a store path that is"
        ) from None
    return Path(store)


def open_store(store: Path) -> Path:
    """Create the store if needed and check its schema version."""
    store = _usable_path(store)
    meta_path = store / "meta.json"
    if store.exists() and not store.is_dir():
        raise StoreError(f"{store}: exists and is not a directory; give a store directory")
    if meta_path.exists():
        meta = read_meta(store)
        if meta.get("schema_version") != SCHEMA_VERSION:
            raise StoreError(
                f"{store}: schema version {meta.get('schema_version')} is not "
                f"{SCHEMA_VERSION}; re-ingest into a new store"
            )
    else:
        store.mkdir(parents=True, exist_ok=True)
        _atomic_write_bytes(meta_path, json.dumps({"schema_version": SCHEMA_VERSION}).encode())
    return store


def read_meta(store: Path) -> dict[str, Any]:
    """``meta.json`` as a dict; ``StoreError`` naming the file when it cannot be read."""
    meta_path = Path(store) / "meta.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{meta_path} is unreadable ({exc}); {REPAIR_HINT}") from exc
    if not isinstance(meta, dict):
        raise StoreError(f"{meta_path} is not a JSON object; {REPAIR_HINT}")
    return meta


def _month_of() -> pl.Expr:
    """The partition month of a run: its Submit month (UTC), which never changes for a run."""
    when = pl.coalesce("submit_time", "eligible_time", "start_time", "end_time")
    return when.dt.strftime("%Y-%m").fill_null("unknown")


class RunWriter:
    """Write typed runs piece by piece as Parquet parts, then publish them per month.

    Each piece is encoded once, into a hidden file inside its month's partition, and its keys
    are hashed while the parsing threads still run; ``commit`` looks for repeated keys among
    those hashes (and the keys of parts already published), publishes the parts by renaming
    them, and rewrites a month only when a key repeats.  A hash collision (odds about 1e-19 per
    pair) can only cost a needless rewrite, which de-duplicates on the real keys, and one run
    miscounted as updated.  Memory holds one piece plus eight bytes per run, so a 4M-record
    export ingests in bounded memory.  On a repeated key the ended record beats an open one (a
    RUNNING copy from an old export must never hide the final state), and otherwise the newest
    ingest wins.  Readers apply the same rule (``load_runs``), so a crash
    between publishing and compacting never shows a run twice.
    """

    def __init__(self, store: Path) -> None:
        self.store = open_store(store)
        sweep_stale(self.store)
        self.now = datetime.now(UTC)
        self.stamp = self.now.strftime("%Y%m%dT%H%M%S%f") + f"-{os.getpid()}-{_HOST}"
        self.staged: dict[str, list[Path]] = {}
        self._key_hashes: dict[Path, pl.Series] = {}
        self._lock = threading.Lock()  # add() is called from several parsing threads
        self.rows_new = 0
        self.rows_updated = 0

    def add(self, runs: pl.DataFrame) -> None:
        if runs.height == 0:
            return
        incoming = runs.drop("run_index", strict=False).with_columns(
            pl.lit(self.now, dtype=pl.Datetime("us", "UTC")).alias(_INGESTED)
        )
        incoming = incoming.with_columns(_month_of().alias("_month"))
        months = incoming.get_column("_month").unique().to_list()
        parts = (
            {(months[0],): incoming}
            if len(months) == 1
            else incoming.partition_by("_month", as_dict=True)
        )
        for (month,), part in parts.items():
            folder = self.store / "runs" / f"month={month}"
            with self._lock:
                files = self.staged.setdefault(str(month), [])
                folder.mkdir(parents=True, exist_ok=True)
                path = folder / f".staged-{self.stamp}-{len(files):05d}.parquet"
                files.append(path)
            stored = (
                part.select(list(_STORED_SCHEMA))
                .cast(
                    _STORED_SCHEMA  # type: ignore[arg-type]
                )
                .with_columns(_EMPTY_AS_NULL)
            )
            try:
                stored.write_parquet(path, compression="zstd", compression_level=1, statistics=True)
                _fsync_file(path)
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise StoreError(f"cannot write {path}: {_first_line(exc)}") from exc
            hashes = stored.select(_key_hash()).to_series()
            with self._lock:
                self._key_hashes[path] = hashes

    def savepoint(self) -> dict[str, int]:
        """Where staging stands now, for ``rollback``."""
        with self._lock:
            return {month: len(files) for month, files in self.staged.items()}

    def rollback(self, savepoint: dict[str, int]) -> None:
        """Drop every part staged after ``savepoint`` (no ``add`` may be running)."""
        with self._lock:
            for month, files in list(self.staged.items()):
                keep = savepoint.get(month, 0)
                for path in files[keep:]:
                    path.unlink(missing_ok=True)
                    self._key_hashes.pop(path, None)
                del files[keep:]
                if not files:
                    del self.staged[month]

    def commit(self) -> dict[str, int]:
        """Publish every staged month; returns rows per touched month."""
        touched: dict[str, int] = {}
        try:
            for month, files in sorted(self.staged.items()):
                touched[month] = self._publish_month(month, files)
        finally:
            self.abort()
        return touched

    def abort(self) -> None:
        """Remove whatever was staged and not published."""
        for files in self.staged.values():
            for path in files:
                path.unlink(missing_ok=True)

    def _publish_month(self, month: str, files: list[Path]) -> int:
        folder = self.store / "runs" / f"month={month}"
        # Under the month's lock: another ingest's compaction cannot unlink the parts listed
        # here while their keys are read, nor compact half of what this one publishes.
        with _month_lock(folder):
            existing = _parts(folder)
            try:
                known = (
                    pl.scan_parquet(existing).select(_key_hash()).collect().to_series()
                    if existing
                    else pl.Series(dtype=pl.UInt64)
                )
            except (OSError, pl.exceptions.PolarsError) as exc:
                raise _damaged(self.store, existing, exc) from exc
            incoming = pl.concat([self._key_hashes.pop(path) for path in files])
            unique = pl.concat([known, incoming]).n_unique()
            new = unique - known.len()  # keys this ingest added; the rest replaced or repeated
            self.rows_new += new
            self.rows_updated += incoming.len() - new
            for index, path in enumerate(files):
                os.replace(path, folder / f"part-{self.stamp}-{index:05d}.parquet")
            files.clear()
            fsync_dir(folder)
            if unique != known.len() + incoming.len():
                _compact_locked(folder)
        return unique


def _key_hash() -> pl.Expr:
    """A 64-bit hash of each run's key (polars hashes with fixed seeds: stable across calls)."""
    return pl.struct(KEY).hash().alias("_key_hash")


def _parts(folder: Path) -> list[Path]:
    return sorted(folder.glob("part-*.parquet"))


def _deduplicate(frame: pl.LazyFrame) -> pl.LazyFrame:
    """One row per key: an ended record beats an open one, then the newest ingest wins."""
    return (
        frame.with_row_index("_row")
        .sort(["ended", _INGESTED, "_row"], nulls_last=False)
        .unique(subset=list(KEY), keep="last")
        .sort("_row")
        .drop("_row")
    )


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _compact(folder: Path) -> None:
    """Rewrite a month's parts as one de-duplicated part (new file first, then old ones go).

    The new part's data and its rename are synced before any old part is unlinked, so a power
    loss leaves either the old parts or the new one, never neither; readers that listed the old
    parts retry (``load_runs``).
    """
    with _month_lock(folder):
        _compact_locked(folder)


@contextlib.contextmanager
def _month_lock(folder: Path) -> Iterator[None]:
    """One compaction of a month at a time (two concurrent ingests may both want one)."""
    # The lock file lives in the store's root (runs/ holds only month folders, those only parts).
    with open(folder.parent.parent / f".lock-{folder.name}", "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _compact_locked(folder: Path) -> None:
    old = _parts(folder)  # listed under the lock: nobody else unlinks them now
    if not old:
        return
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    fd, tmp = tempfile.mkstemp(
        dir=folder, prefix=f".compact-{os.getpid()}-{_HOST}-", suffix=".parquet"
    )
    os.close(fd)
    try:
        _deduplicate(pl.scan_parquet(old)).sink_parquet(
            tmp, compression="zstd", compression_level=1, statistics=True
        )
        _fsync_file(Path(tmp))
        os.replace(tmp, folder / f"part-{stamp}-c.parquet")
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError | pl.exceptions.PolarsError):
            raise StoreError(f"cannot compact {folder}: {_first_line(exc)}") from exc
        raise
    fsync_dir(folder)
    for path in old:
        path.unlink(missing_ok=True)
    fsync_dir(folder)


def write_runs(store: Path, runs: pl.DataFrame) -> dict[str, int]:
    """Merge one in-memory table into the store (see RunWriter for the rules)."""
    writer = RunWriter(store)
    try:
        writer.add(runs)
    except BaseException:
        writer.abort()
        raise
    return writer.commit()


def load_runs(
    store: Path | str,
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    where: pl.Expr | None = None,
    columns: Iterable[str] | None = None,
) -> pl.DataFrame:
    """The job-run table (``RUN_SCHEMA``), optionally limited to runs ending in [start, end)
    and to the rows ``where`` keeps (an expression over the stored columns).

    ``columns`` (a subset of ``RUN_SCHEMA``, any order) is the projection: only those columns
    are returned, in schema order, and only they plus what the key, de-duplication, the window
    and ``run_index`` need are read from the Parquet parts.  None: every column.

    ``run_index`` numbers the runs of each job in Submit order across the whole store.  With a
    window or ``where`` only the matching rows are read (the predicate is pushed down into the
    Parquet scan); the numbering then comes from the runs of the jobs that have several, found
    by one scan of three integer id columns (:func:`_load_some`).
    """
    store = _usable_path(store)
    for _attempt in range(5):
        files = sorted((store / "runs").glob("month=*/part-*.parquet"))
        try:
            return _load_runs(store, files, start, end, where, _projection(columns))
        except (OSError, pl.exceptions.PolarsError) as exc:
            if all(path.exists() for path in files):
                raise _damaged(store, files, exc) from exc
            # An ingest compacted a month while we read: list the parts again.
    raise StoreError(f"{store}: the store kept changing while it was read; try again")


def load_job_runs(store: Path | str, job_id: str) -> pl.DataFrame:
    """Every run of job ``job_id`` in the store, oldest first: ``job_runs(load_runs(store),
    job_id)`` reading only that job's rows (the match is pushed down into the Parquet scan)."""
    # A plain JobID "N" has JobIDRaw N (ingest derives it when the export lacks JobIDRaw), so a
    # numeric id needs only the integer column: row groups are skipped by their statistics and
    # no JobID text is read.  job_runs then applies the full match.
    raw = _raw_id(job_id)
    where = pl.col("job_id") == job_id if raw is None else pl.col("job_id_raw") == raw
    return job_runs(load_runs(store, where=where), job_id)


def ended_per_month(store: Path | str) -> pl.DataFrame:
    """Runs with an End time per UTC month of it (columns ``m`` = ``YYYY-MM``, ``len``), read
    from the key and End columns only; a key an ingest left repeated counts once."""
    store = _usable_path(store)
    for _attempt in range(5):
        files = sorted((store / "runs").glob("month=*/part-*.parquet"))
        try:
            if not _checked(store, files):
                return pl.DataFrame(schema={"m": pl.String, "len": pl.UInt32})
            # Month partition by partition: a key repeats only inside its partition, so
            # memory holds one partition's key hashes, not the store's.
            counts = [
                pl.scan_parquet([p for p in files if p.parent == folder])
                .filter(pl.col("end_time").is_not_null())
                .select(_key_hash(), pl.col("end_time").dt.strftime("%Y-%m").alias("m"))
                .unique("_key_hash")
                .group_by("m")
                .len()
                .collect()
                for folder in sorted({p.parent for p in files})
            ]
            return pl.concat(counts).group_by("m").agg(pl.col("len").sum()).sort("m")
        except (OSError, pl.exceptions.PolarsError) as exc:
            if all(path.exists() for path in files):
                raise _damaged(store, files, exc) from exc
    raise StoreError(f"{store}: the store kept changing while it was read; try again")


def job_runs(runs: pl.DataFrame, job_id: str) -> pl.DataFrame:
    """Every run of job ``job_id`` in a job-run table, oldest first (``run_index`` order).

    ``job_id`` is matched as sacct prints it: the numeric JobIDRaw, or JobID (``123_4`` for an
    array task, ``123+1`` for a het component).  Empty when the table does not hold the job.
    To look a job up in a store, :func:`load_job_runs` reads only its rows.
    """
    return runs.filter(_job_match(job_id)).sort("run_index")


def _raw_id(job_id: str) -> int | None:
    """``job_id`` as the JobIDRaw it can equal (as sacct prints it: digits, no leading zero)."""
    if job_id.isascii() and job_id.isdigit() and len(job_id) < 19 and str(int(job_id)) == job_id:
        return int(job_id)
    return None


def _job_match(job_id: str) -> pl.Expr:
    by_name = pl.col("job_id") == job_id
    raw = _raw_id(job_id)
    # An integer comparison (not a cast to text) lets the scan skip row groups by statistics.
    return by_name if raw is None else (pl.col("job_id_raw") == raw) | by_name


def _damaged(store: Path, files: list[Path], exc: BaseException) -> StoreError:
    """A StoreError naming the part that cannot be read (or the error, if none can be named)."""
    for path in files:
        problem = part_problem(path)
        if problem:
            return StoreError(f"{path}: {problem}; {REPAIR_HINT}")
    return StoreError(f"{store}: cannot read the store ({_first_line(exc)}); {REPAIR_HINT}")


def part_problem(path: Path) -> str | None:
    """Why a Parquet part cannot be used (corrupt, foreign schema), or None when it is sound."""
    try:
        frame = pl.read_parquet(path)
    except (OSError, pl.exceptions.PolarsError) as exc:
        return f"corrupt part ({_first_line(exc)})"
    missing = [name for name in _STORED_SCHEMA if name not in frame.columns]
    if missing:
        return f"not a job-run part (lacks {', '.join(missing[:5])})"
    wrong = [name for name, dtype in _STORED_SCHEMA.items() if frame.schema[name] != dtype]
    if wrong:
        return f"foreign schema (column {wrong[0]} is {frame.schema[wrong[0]]})"
    return None


def _window(start: datetime | None, end: datetime | None, where: pl.Expr | None) -> pl.Expr:
    """Runs that ended in [start, end), and ``where``.

    A run sacct printed with End=Unknown (seen on NODE_FAIL) ended at Start + Elapsed: it
    belongs to the window that time falls in, as the analytics impute it.
    """
    ended_at = pl.coalesce(
        pl.col("end_time"), pl.col("start_time") + pl.duration(seconds=pl.col("elapsed_s"))
    )
    keep = pl.lit(True) if where is None else where
    if start is not None:
        keep &= ended_at >= start
    if end is not None:
        keep &= ended_at < end
    return keep


def _checked(store: Path, files: list[Path]) -> bool:
    """False when the store holds no part; StoreError when it is no store at all."""
    if not (store / "meta.json").exists() and not files:
        raise StoreError(f"{store}: not an aegis-slurm store (no meta.json); run ingest first")
    open_store(store)
    return bool(files)


def _projection(columns: Iterable[str] | None) -> list[str]:
    """The requested columns in ``RUN_SCHEMA`` order (all of them for None)."""
    if columns is None:
        return list(RUN_SCHEMA)
    wanted = set(columns)
    unknown = sorted(wanted - set(RUN_SCHEMA))
    if unknown:
        raise ValueError(f"not job-run columns: {', '.join(unknown)}")
    return [name for name in RUN_SCHEMA if name in wanted]


def _stored(columns: list[str], *extra: str) -> list[str]:
    """Stored columns to read for ``columns`` plus ``extra`` (run_index is computed, never
    read), in storage order."""
    wanted = {*columns, *extra}
    return [name for name in _STORED_SCHEMA if name in wanted]


def _load_runs(
    store: Path,
    files: list[Path],
    start: datetime | None,
    end: datetime | None,
    where: pl.Expr | None = None,
    columns: list[str] | None = None,
) -> pl.DataFrame:
    """The rows of ``files`` (one listing of the store) that ``load_runs`` returns."""
    columns = list(RUN_SCHEMA) if columns is None else columns
    if start is None and end is None and where is None:
        return _load_all(store, files, columns)
    return _load_some(store, files, _window(start, end, where), columns)


def _load_all(store: Path, files: list[Path], columns: list[str]) -> pl.DataFrame:
    """The whole store (the ``columns`` of every run)."""
    if not _checked(store, files):
        return empty_runs().select(columns)
    # One read of the columns with what the key, de-duplication and run_index need, month
    # partition by partition: a key repeats only inside its partition (its Submit month), and
    # decoding one month at a time keeps the reader's buffers to a month's.
    read = _stored(columns, *KEY, "start_time")
    frames = []
    for folder in sorted({p.parent for p in files}):  # file order: files are sorted
        month = pl.scan_parquet(_parts_of(folder, files)).select(_stored(read, "ended", _INGESTED))
        frame = month.collect()
        if _repeats_key(frame):  # an ingest stopped before compacting
            frame = _deduplicate(frame.lazy()).collect()
        frames.append(frame.select(read))
    runs = pl.concat(frames, how="vertical", rechunk=False)
    runs = runs.with_columns(chunked_like(_run_index(runs), runs))
    return _as_table(runs, columns)


def _parts_of(folder: Path, files: list[Path]) -> list[Path]:
    return [p for p in files if p.parent == folder]


def _repeats_key(runs: pl.DataFrame) -> bool:
    """Whether a key occurs twice.  Distinct 64-bit key hashes prove distinct keys, and hashing
    costs a fraction of the memory of counting the (text) keys themselves; only when hashes
    repeat are the keys compared."""
    if runs.select(_key_hash().n_unique()).item() == runs.height:
        return False
    return bool(runs.select(KEY).n_unique() != runs.height)


def _load_some(store: Path, files: list[Path], keep: pl.Expr, columns: list[str]) -> pl.DataFrame:
    """The rows ``keep`` selects, read month by month with the predicate pushed down.

    A month is read whole (then de-duplicated) only when it holds a repeated key -- an ingest
    stopped between publishing and compacting -- so a stale copy never stands in for the final
    record.  ``run_index`` needs every run of a job, wherever its month: the jobs of the kept
    rows whose id (:func:`_job_hash`, constant over a job's runs) occurs more than once in the
    store are read again, key columns only, and numbered over all their runs.
    """
    if not _checked(store, files):
        return empty_runs().select(columns)
    # The key and the job-hash ids are read with the columns (run_index needs them).
    read = _stored(columns, *KEY, "array_job_id", "het_job_id", "job_id_raw")
    read = _stored(read, "array_task_id", "het_job_offset")
    # The predicate sees text columns as the table has them ("" rather than the stored null).
    texts = [name for name in keep.meta.root_names() if name in _TEXT_COLUMNS]
    as_read = [pl.col(name).fill_null("") for name in dict.fromkeys(texts)]
    hits = (
        pl.scan_parquet(files, include_file_paths="_file")
        .with_columns(as_read)
        .filter(keep)
        .select(pl.col("_file").unique())
        .collect()
        .get_column("_file")
        .to_list()
    )
    months = sorted({Path(f).parent for f in hits})
    frames = []
    for folder in months:
        parts = [p for p in files if p.parent == folder]
        month = pl.scan_parquet(parts)
        keys = month.select(_key_hash()).collect().to_series()
        if keys.n_unique() != keys.len():
            month = _deduplicate(month)
        frames.append(month.with_columns(as_read).filter(keep).select(read))
    if not frames:
        return empty_runs().select(columns)
    runs = pl.concat(frames, how="vertical").collect()
    return _as_table(_with_run_index(runs, _repeated_job_keys(files, runs)), columns)


def _job_hash() -> pl.Expr:
    """A 64-bit hash that every run of a job shares, from integer columns only (reading the
    JobID text of a whole store is what a windowed read avoids): the JobID's leading number
    (array or het parent, else JobIDRaw), its array task and its het offset.  Equal for all runs
    of one JobID, whether or not the export had JobIDRaw; a collision only reads a few more
    keys, which are then numbered by the real key."""
    base = pl.coalesce("array_job_id", "het_job_id", "job_id_raw")
    return pl.struct(base, "array_task_id", "het_job_offset").hash().alias("_job_hash")


def _repeated_job_keys(files: list[Path], runs: pl.DataFrame) -> pl.DataFrame:
    """Key columns of every run of the jobs in ``runs`` that ran more than once, numbered."""
    mine = runs.select(_job_hash()).to_series().unique()
    scan = pl.scan_parquet(files)
    # Superset of the jobs with several runs: their job hash repeats in the store.
    several = (
        scan.select(_job_hash())
        .filter(pl.col("_job_hash").is_in(mine.implode()))
        .group_by("_job_hash")
        .len()
        .filter(pl.col("len") > 1)
        .collect()
        .get_column("_job_hash")
    )
    keys = (
        scan.filter(_job_hash().is_in(several.implode()))
        .select(*KEY, "start_time", "ended", _INGESTED)
        .collect()
    )
    if keys.select(KEY).n_unique() != keys.height:
        keys = _deduplicate(keys.lazy()).collect()
    return keys.with_columns(_run_index(keys))


def _with_run_index(runs: pl.DataFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """``runs`` with the ``run_index`` of ``keys`` (0 for a run whose key is not there: its job
    ran once), joined on the key columns only, so the wide table is not copied."""
    index = (
        runs.select(KEY)
        .join(
            keys.select(*KEY, "run_index"),
            on=list(KEY),
            how="left",
            nulls_equal=True,
            maintain_order="left",
        )
        .get_column("run_index")
        .fill_null(0)
    )
    return runs.with_columns(chunked_like(index, runs))


def _as_table(runs: pl.DataFrame, columns: list[str] | None = None) -> pl.DataFrame:
    """Stored columns back to ``RUN_SCHEMA`` (text columns hold "" again), the ``columns`` of
    it only (all for None)."""
    columns = list(RUN_SCHEMA) if columns is None else columns
    stored_empty = [
        name for name in _TEXT_COLUMNS if name in columns and runs.get_column(name).null_count()
    ]
    return (
        runs.select(columns)
        .cast({name: RUN_SCHEMA[name] for name in columns})  # type: ignore[arg-type]
        .with_columns(pl.col(stored_empty).fill_null(""))
    )


def _job_key_hash(keys: pl.DataFrame) -> pl.Series:
    """A u64 per run from its job's (cluster, JobID) (a test swaps it for a colliding one)."""
    return keys.select(pl.struct("cluster", "job_id").hash()).to_series()


def _run_index(keys: pl.DataFrame) -> pl.Series:
    """Each run's 0-based order among the runs of its job (Submit, then Start order).

    Most jobs ran once, so only the jobs with several runs are numbered, by one sort and a
    running count from each job's first row (a window with an ordering over a million groups
    took seconds).
    """
    job = ["cluster", "job_id"]
    # Rows whose job hash repeats: a superset of the jobs with several runs (a collision only
    # numbers a lone run, which the running count below gives 0 all the same), found at a
    # fraction of the memory of hashing the text key as a struct of strings.
    job_hash = _job_key_hash(keys)
    repeated_job = repeated(job_hash)
    index = pl.zeros(keys.height, dtype=pl.Int32, eager=True).alias("run_index")
    if not repeated_job.any():
        return index
    rows = (
        keys.select(*job, "submit_time", "start_time")
        .with_columns(job_hash.alias("_jh"))
        .with_row_index("_row")
        .filter(repeated_job)
    )
    # Each job's runs in Submit, Start, row order: two stable sorts (time, then the job hash)
    # instead of one on two text columns and three more; only when two jobs' hashes collide
    # (their runs would interleave) is the text key sorted on.
    ordered = rows.sort("submit_time", "start_time", maintain_order=True, nulls_last=False).sort(
        "_jh", maintain_order=True
    )
    same_hash = pl.col("_jh") == pl.col("_jh").shift()
    other_job = pl.col("cluster").ne_missing(pl.col("cluster").shift()) | pl.col(
        "job_id"
    ).ne_missing(pl.col("job_id").shift())
    if ordered.select((same_hash & other_job).any()).item():
        ordered = rows.sort([*job, "submit_time", "start_time", "_row"], nulls_last=False)
    at = pl.int_range(pl.len(), dtype=pl.Int64)
    starts = (at == 0) | other_job
    numbered = ordered.select(
        "_row",
        (at - pl.when(starts).then(at).forward_fill()).cast(pl.Int32).alias("run_index"),
    )
    return index.scatter(numbered.get_column("_row"), numbered.get_column("run_index"))


def append_log(store: Path, report: dict[str, Any]) -> None:
    """Append one ingest report to ``ingest_log.jsonl``."""
    with open(Path(store) / "ingest_log.jsonl", "a", encoding="utf-8") as handle:
        handle.write(json.dumps(report, default=str) + "\n")


def write_rejected(store: Path, stamp: str, rows: Iterable[dict[str, Any]]) -> Path | None:
    """Keep every rejected record (line number, reason, text) for the admin to inspect."""
    rows = list(rows)
    if not rows:
        return None
    path = Path(store) / "rejected" / f"{stamp}.jsonl"
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    _atomic_write_bytes(path, payload.encode("utf-8", errors="replace"))
    return path


def fetched_windows(store: Path) -> set[str]:
    """Days (``YYYY-MM-DD``) whose live sacct window was fetched after it had closed."""
    path = Path(store) / "sacct_windows.json"
    if not path.exists():
        return set()
    return set(json.loads(path.read_text()).get("complete_days", []))


def mark_windows(store: Path, days: Iterable[str]) -> None:
    days_done = fetched_windows(store) | set(days)
    _atomic_write_bytes(
        Path(store) / "sacct_windows.json",
        json.dumps({"complete_days": sorted(days_done)}, indent=0).encode(),
    )
