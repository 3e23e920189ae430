"""Ingest sacct exports into the store and account for every record read."""

from __future__ import annotations

import io
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import polars as pl

from aegis_slurm.accounting import store as store_mod
from aegis_slurm.accounting.convert import convert
from aegis_slurm.accounting.fields import REQUIRED, REQUIRED_ANY_ID, record_is_plausible
from aegis_slurm.accounting.hostlists import HostlistCache
from aegis_slurm.accounting.layout import ExportFormatError, Layout, detect_layout
from aegis_slurm.accounting.parse_json import parse_json_export
from aegis_slurm.accounting.parse_stream import NotClean, can_stream, iter_clean_batches
from aegis_slurm.accounting.pieces import iter_pieces, read_clean_piece, read_lines
from aegis_slurm.accounting.repair import split_records
from aegis_slurm.accounting.schema import empty_runs

#: Bytes of export text parsed at a time: bounds the raw-string memory of a huge export.
CHUNK_BYTES = 32 << 20
#: Pieces parsed at once (two cores on the reference machine).
PIECES_IN_FLIGHT = 2

T = TypeVar("T")


@dataclass
class IngestReport:
    """What happened to every record.  ``rows_read == rows_kept + rows_rejected + rows_skipped``."""

    rows_read: int = 0
    rows_kept: int = 0
    rows_rejected: int = 0
    rows_skipped: int = 0
    rejected_by_reason: Counter[str] = field(default_factory=Counter)
    skipped_by_reason: Counter[str] = field(default_factory=Counter)
    recovered_by_reason: Counter[str] = field(default_factory=Counter)
    store: str = ""
    sources: list[str] = field(default_factory=list)
    rejected_file: str | None = None

    def add(self, other: IngestReport) -> None:
        self.rows_read += other.rows_read
        self.rows_kept += other.rows_kept
        self.rows_rejected += other.rows_rejected
        self.rows_skipped += other.rows_skipped
        self.rejected_by_reason.update(other.rejected_by_reason)
        self.skipped_by_reason.update(other.skipped_by_reason)
        self.recovered_by_reason.update(other.recovered_by_reason)
        self.sources.extend(other.sources)

    def as_dict(self) -> dict[str, Any]:
        """The ``ingest --json`` contract; the first five keys are relied on by other tools."""
        return {
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "rows_rejected": self.rows_rejected,
            "rejected_by_reason": dict(self.rejected_by_reason.most_common()),
            "store": self.store,
            "rows_skipped": self.rows_skipped,
            "skipped_by_reason": dict(self.skipped_by_reason.most_common()),
            "recovered_by_reason": dict(self.recovered_by_reason.most_common()),
            "rejected_file": self.rejected_file,
            "sources": self.sources,
        }


@dataclass
class Parsed:
    runs: pl.DataFrame
    report: IngestReport
    rejected_rows: list[dict[str, Any]]


def parse_export(
    data: bytes | BinaryIO,
    *,
    source: str,
    fields: Sequence[str] | None = None,
    delimiter: str | None = None,
    cluster: str = "",
    source_tz: str = "UTC",
    chunk_bytes: int = CHUNK_BYTES,
    trailing: bool | None = None,
    sink: Callable[[pl.DataFrame], None] | None = None,
    progress: Callable[[int | None, int], None] | None = None,
    hostlist_cache: HostlistCache | None = None,
) -> Parsed:
    """Parse one export (parsable, parsable2 or JSON) into typed runs plus a full account.

    ``data`` is the export's bytes or a binary file; a file is read piece by piece.
    ``trailing`` says the records end with the delimiter (``--parsable``); None detects it.  With a
    ``sink`` each piece's typed runs go to it as soon as they are ready (and ``runs`` stays
    empty), so memory holds one piece at a time.  ``progress(bytes_done, records_read)`` is
    called after each piece.
    """
    stream = io.BytesIO(data) if isinstance(data, bytes | bytearray) else data
    stream, _ = readable_export(stream)
    report = IngestReport(sources=[source])
    rejected_rows: list[dict[str, Any]] = []
    typed: list[pl.DataFrame] = []
    convert_options = _ConvertOptions(source, cluster, source_tz, hostlist_cache or HostlistCache())

    layout = _text_layout(stream, fields=fields, delimiter=delimiter, trailing=trailing)
    if layout is _JSON:
        records, n_jobs = parse_json_export(stream.read())
        report.rows_read = n_jobs
        if records.height < n_jobs:
            report.rejected_by_reason["JSON job entry is not an object of the expected shape"] += (
                n_jobs - records.height
            )
        runs = _convert_into(records, report, rejected_rows, convert_options)
        if sink is None:
            typed.append(runs)
        else:
            sink(runs)
    elif layout is not None:

        def work(item: tuple[bytes, int]) -> _PieceResult:
            piece, first_line_no = item
            part = IngestReport()
            rejected: list[dict[str, Any]] = []
            split = read_clean_piece(piece, layout, first_line_no)
            if split is None:  # something to repair or reject: line by line
                lines, invalid_utf8 = read_lines(piece)
                split = split_records(
                    lines, layout, record_is_plausible, first_line_no=first_line_no
                )
                if invalid_utf8:
                    part.recovered_by_reason["invalid UTF-8 replaced with U+FFFD"] += invalid_utf8
            del piece, item
            part.rows_read = split.rows_read
            part.rejected_by_reason.update(split.rejected)
            part.recovered_by_reason.update(split.recovered)
            rejected.extend({"source": source, **s} for s in split.rejected_samples)
            return _finish_piece(split.records, part, rejected, convert_options, sink)

        _run_in_file_order(
            iter_pieces(stream, layout, record_is_plausible, chunk_bytes),
            work,
            report,
            rejected_rows,
            typed,
            progress=(lambda: progress(stream.tell(), report.rows_read)) if progress else None,
        )
    return _parsed(report, rejected_rows, typed)


def parse_clean_file(
    path: Path,
    layout: Layout,
    *,
    source: str,
    cluster: str = "",
    source_tz: str = "UTC",
    sink: Callable[[pl.DataFrame], None] | None = None,
    progress: Callable[[int | None, int], None] | None = None,
    hostlist_cache: HostlistCache | None = None,
) -> Parsed:
    """``parse_export`` for a file that is clean (see ``parse_stream``); raises ``NotClean``.

    On ``NotClean`` some batches may already have gone to ``sink``: the caller must drop them.
    """
    report = IngestReport(sources=[source])
    rejected_rows: list[dict[str, Any]] = []
    typed: list[pl.DataFrame] = []
    convert_options = _ConvertOptions(source, cluster, source_tz, hostlist_cache or HostlistCache())

    def work(records: pl.DataFrame) -> _PieceResult:
        return _finish_piece(
            records, IngestReport(rows_read=records.height), [], convert_options, sink
        )

    _run_in_file_order(
        iter_clean_batches(path, layout),
        work,
        report,
        rejected_rows,
        typed,
        progress=(lambda: progress(None, report.rows_read)) if progress else None,
    )
    return _parsed(report, rejected_rows, typed)


_PieceResult = tuple["IngestReport", list[dict[str, Any]], pl.DataFrame | None]


@dataclass(frozen=True)
class _ConvertOptions:
    source: str
    cluster: str
    source_tz: str
    hostlist_cache: HostlistCache


#: ``_text_layout``'s answer for a JSON export.
_JSON = Layout(fields=(), delimiter="", trailing=False, has_header=False)


def _text_layout(
    stream: BinaryIO,
    *,
    fields: Sequence[str] | None,
    delimiter: str | None,
    trailing: bool | None,
) -> Layout | None:
    """The export's text layout, ``_JSON`` for ``sacct --json`` output, None when it is empty."""
    head = stream.read(1 << 16)
    stream.seek(0)
    if head.lstrip()[:1] in (b"{", b"["):
        return _JSON
    if not head.strip():
        return None
    lines = head.decode("utf-8", errors="replace").split("\n")
    if len(head) == 1 << 16 and len(lines) > 1:
        lines.pop()  # cut short by the read
    layout = detect_layout(
        lines[0], fields=fields, delimiter=delimiter, trailing=trailing, sample=lines[1:50]
    )
    _check_required(layout.fields)
    return layout


_UTF8_BOM = b"\xef\xbb\xbf"


def readable_export(stream: BinaryIO) -> tuple[BinaryIO, bool]:
    """A seekable UTF-8 stream with ``\\n`` line ends for ``stream``; True when it is ``stream``.

    sacct writes UTF-8 with ``\\n``, and that is read as it is, piece by piece.  Anything else is
    read whole and converted: a pipe or FIFO (``<(sacct ...)``, cannot be read twice), a byte
    order mark or UTF-16 (an export saved by an editor or PowerShell), bare CR line ends.
    """
    seekable = stream.seekable()
    head = stream.read(1 << 16)
    # Checked before anything is read whole: /dev/zero (seekable, endless) or a pipe of binary
    # data would otherwise be read until memory runs out.  Only the first line counts: a real
    # export whose tail a crash left NUL-filled still has its records read (and those rejected).
    utf16 = head.startswith((b"\xff\xfe", b"\xfe\xff")) or _looks_utf16(head)
    text = head.decode("utf-16", errors="replace").encode() if utf16 else head
    if b"\x00" in text.split(b"\n", 1)[0]:
        raise ExportFormatError("binary data (NUL bytes) on the first line: not a sacct export")
    if not seekable:
        return _converted(head + stream.read()), False
    stream.seek(0)
    if head.startswith(_UTF8_BOM) or utf16:
        return _converted(stream.read()), False
    if b"\r" in head and b"\n" not in head.rstrip(b"\r\n"):
        return _converted(stream.read()), False
    return stream, True


def _looks_utf16(head: bytes) -> bool:
    """UTF-16 without a byte order mark: every other byte of ASCII text is NUL."""
    sample = head[:4096]
    return len(sample) >= 4 and max(sample[0::2].count(0), sample[1::2].count(0)) * 4 > len(sample)


def _converted(data: bytes) -> io.BytesIO:
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")) or _looks_utf16(data):
        encoding = (
            "utf-16"
            if data.startswith((b"\xff\xfe", b"\xfe\xff"))
            else ("utf-16-le" if data[1:2] == b"\x00" else "utf-16-be")
        )
        try:
            data = data.decode(encoding).encode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExportFormatError(f"looks like UTF-16 but is not valid UTF-16: {exc}") from exc
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return io.BytesIO(data)


def _finish_piece(
    records: pl.DataFrame,
    part: IngestReport,
    rejected: list[dict[str, Any]],
    options: _ConvertOptions,
    sink: Callable[[pl.DataFrame], None] | None,
) -> _PieceResult:
    """Convert one piece's records; its runs go to ``sink`` (thread-safe) or come back."""
    runs = _convert_into(records, part, rejected, options)
    if sink is not None:
        sink(runs)
        return part, rejected, None
    return part, rejected, runs


def _run_in_file_order(
    items: Iterable[T],
    work: Callable[[T], _PieceResult],
    report: IngestReport,
    rejected_rows: list[dict[str, Any]],
    typed: list[pl.DataFrame],
    progress: Callable[[], None] | None,
) -> None:
    """Run ``work`` on every piece, two at a time, and merge the results in file order.

    Two pieces in flight: polars releases the GIL, so one piece's Python work (cutting, checks,
    repairs) overlaps another's vectorized work.  An exception from ``items`` or ``work`` ends
    the run once the pieces in flight are done.
    """
    with ThreadPoolExecutor(max_workers=PIECES_IN_FLIGHT) as pool:
        pending: deque[Future[_PieceResult]] = deque()
        for item in items:
            pending.append(pool.submit(work, item))
            del item
            while len(pending) >= PIECES_IN_FLIGHT:
                _merge(report, rejected_rows, typed, pending.popleft().result())
                if progress:
                    progress()
        while pending:
            _merge(report, rejected_rows, typed, pending.popleft().result())
            if progress:
                progress()


def _parsed(
    report: IngestReport, rejected_rows: list[dict[str, Any]], typed: list[pl.DataFrame]
) -> Parsed:
    runs = pl.concat(typed, how="vertical_relaxed", rechunk=False) if typed else empty_runs()
    report.rows_rejected = sum(report.rejected_by_reason.values())
    report.rows_skipped = sum(report.skipped_by_reason.values())
    return Parsed(runs, report, rejected_rows)


def _merge(
    report: IngestReport,
    rejected_rows: list[dict[str, Any]],
    typed: list[pl.DataFrame],
    result: _PieceResult,
) -> None:
    """Fold one piece's account (and runs, when kept in memory) in, in file order."""
    part, rejected, runs = result
    if runs is not None:
        typed.append(runs)
    report.rows_read += part.rows_read
    report.rows_kept += part.rows_kept
    report.rejected_by_reason.update(part.rejected_by_reason)
    report.skipped_by_reason.update(part.skipped_by_reason)
    report.recovered_by_reason.update(part.recovered_by_reason)
    rejected_rows.extend(rejected)


def parse_records(
    records: pl.DataFrame,
    *,
    source: str,
    cluster: str = "",
    source_tz: str = "UTC",
    sink: Callable[[pl.DataFrame], None] | None = None,
) -> Parsed:
    """Type raw sacct-field records from another backend (pyslurm) with the same rules."""
    report = IngestReport(sources=[source], rows_read=records.height)
    rejected_rows: list[dict[str, Any]] = []
    runs = _convert_into(
        records, report, rejected_rows, _ConvertOptions(source, cluster, source_tz, HostlistCache())
    )
    if sink is not None:
        sink(runs)
        runs = empty_runs()
    report.rows_rejected = sum(report.rejected_by_reason.values())
    report.rows_skipped = sum(report.skipped_by_reason.values())
    return Parsed(runs, report, rejected_rows)


def _convert_into(
    records: pl.DataFrame,
    report: IngestReport,
    rejected_rows: list[dict[str, Any]],
    options: _ConvertOptions,
) -> pl.DataFrame:
    """Convert raw records, adding their rejections and skips to ``report``."""
    source = options.source
    converted = convert(
        records,
        source=source,
        cluster=options.cluster,
        source_tz=options.source_tz,
        hostlist_cache=options.hostlist_cache,
    )
    report.rejected_by_reason.update(converted.rejected)
    report.skipped_by_reason.update({k: v for k, v in converted.skipped.items() if v})
    if converted.rejected_lines is not None and converted.rejected_lines.height:
        lookup = converted.rejected_lines.join(records, on="_line", how="left")
        for row in lookup.head(10_000).iter_rows(named=True):
            line_no, reason = row.pop("_line"), row.pop("reason")
            rejected_rows.append(
                {
                    "source": source,
                    "line": line_no,
                    "reason": reason,
                    "fields": {k: v for k, v in row.items() if v},
                }
            )
    report.rows_kept += converted.runs.height
    return converted.runs


def _check_required(names: Sequence[str]) -> None:
    present = set(names)
    missing = [f for f in REQUIRED if f not in present]
    if not any(f in present for f in REQUIRED_ANY_ID):
        missing.append(" or ".join(REQUIRED_ANY_ID))
    if missing:
        raise ExportFormatError(f"export lacks required field(s): {', '.join(missing)}")


def ingest_files(
    paths: Sequence[Path | str],
    store: Path | str,
    *,
    fields: Sequence[str] | None = None,
    delimiter: str | None = None,
    cluster: str = "",
    source_tz: str = "UTC",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Ingest exports into ``store``; returns the ``ingest --json`` report as a dict.

    ``progress`` receives a one-line status after each piece of a large file.
    """
    writer = store_mod.RunWriter(Path(store))
    total = IngestReport(store=str(writer.store))
    rejected: list[dict[str, Any]] = []
    hostlist_cache = HostlistCache()  # node lists repeat across files too
    try:
        for path in map(Path, paths):
            size = path.stat().st_size

            def tell(done: int | None, records: int, path: Path = path, size: int = size) -> None:
                if progress:
                    read = f"{done / 2**20:,.0f}/" if done is not None else ""
                    progress(f"{path}: {read}{size / 2**20:,.0f} MB, {records:,} records")

            options: dict[str, Any] = {
                "source": str(path),
                "cluster": cluster,
                "source_tz": source_tz,
                "sink": writer.add,
                "progress": tell,
                "hostlist_cache": hostlist_cache,
            }
            parsed = None
            with open(path, "rb") as raw:
                stream, as_is = readable_export(raw)
                layout = _text_layout(stream, fields=fields, delimiter=delimiter, trailing=None)
                if as_is and layout not in (None, _JSON) and can_stream(path, layout):
                    savepoint = writer.savepoint()
                    try:
                        parsed = parse_clean_file(path, layout, **options)
                    except NotClean as why:
                        writer.rollback(savepoint)
                        if progress:
                            progress(f"{path}: {why}; reading it line by line")
                if parsed is None:
                    stream.seek(0)
                    parsed = parse_export(stream, fields=fields, delimiter=delimiter, **options)
            total.add(parsed.report)
            rejected.extend(parsed.rejected_rows)
    except BaseException:
        writer.abort()
        raise
    return commit(writer, total, rejected)


def commit(
    writer: store_mod.RunWriter, report: IngestReport, rejected: list[dict[str, Any]]
) -> dict[str, Any]:
    """Publish staged runs, keep the rejected records, log the report."""
    writer.commit()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    rejected_file = store_mod.write_rejected(writer.store, stamp, rejected)
    report.rejected_file = str(rejected_file) if rejected_file else None
    result = report.as_dict()
    result["rows_new_in_store"] = writer.rows_new
    result["rows_updated_in_store"] = writer.rows_updated
    store_mod.append_log(writer.store, {"at": stamp, **result})
    return result
