"""The fast path for a clean export file: polars' streaming CSV reader over the whole file.

Nearly every export admins have is clean: each line is one record with exactly the expected
number of delimiters.  For such a file polars' multi-threaded reader splits the text into
batches itself (no Python per piece, no copies of the raw text), while a side thread counts the
delimiters in the file.  The file was clean when

* the reader met no line with too many fields and no invalid UTF-8 (it raises on both),
* the delimiter count is exactly what the number of lines implies, so no line had too few (a
  short line's missing fields read as "", indistinguishable from empty fields otherwise) or
  too many; the count is ready within a second, so most dirty files are refused early, and
* with ``--parsable`` every line ended with the delimiter.

Anything else raises ``NotClean``, even after some batches were delivered: the caller throws
those away and reads the file again piece by piece (``pieces``, ``repair``), where broken
records are repaired or rejected with a reason.  Both paths split a clean line the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.accounting.layout import Layout, unique_columns

#: Records per batch: about 32 MiB of typical export text, enough to keep both cores busy.
ROWS_PER_BATCH = 120_000
_COUNT_BLOCK = 8 << 20


class NotClean(Exception):
    """The file holds a line the fast path cannot take as it is."""


def can_stream(path: Path, layout: Layout) -> bool:
    """Whether the fast path applies: a regular file and a one-byte delimiter."""
    return path.is_file() and len(layout.delimiter.encode()) == 1


def iter_clean_batches(
    path: Path, layout: Layout, rows_per_batch: int | None = None
) -> Iterator[pl.DataFrame]:
    """Raw records of a clean file in batches: one String column per field, plus ``_line``.

    Raises ``NotClean`` (at any batch, at the latest when the last one has been taken) when the
    file is not clean; nothing read so far may then be kept.
    """
    columns = unique_columns(layout.fields)
    schema = dict.fromkeys(columns, pl.String)
    if layout.trailing:
        schema["_trailing"] = pl.String
    counter = _ByteCounter(path, layout.delimiter.encode()[0])
    counter.start()
    per_line = len(layout.fields) if layout.trailing else len(layout.fields) - 1

    def check_counts() -> None:
        """Every line holds ``per_line`` delimiters (the header as many as it has)."""
        if counter.error is not None:
            raise NotClean(f"cannot count delimiters: {counter.error}")
        header = counter.first_line_delimiters if layout.has_header else 0
        if counter.delimiters != header + counter.data_lines(layout.has_header) * per_line:
            raise NotClean("the delimiter count shows a line with too few or too many fields")

    try:
        scan = pl.scan_csv(
            path,
            has_header=False,
            skip_rows=1 if layout.has_header else 0,
            separator=layout.delimiter,
            quote_char=None,
            schema=schema,
            encoding="utf8",
            empty_string_is_null=False,
            raise_if_empty=False,
        )
        next_line = 2 if layout.has_header else 1
        rows = 0
        try:
            for batch in scan.collect_batches(chunk_size=rows_per_batch or ROWS_PER_BATCH):
                if not counter.is_alive():  # counting is done long before parsing: stop early
                    check_counts()
                if layout.trailing:
                    if (batch.get_column("_trailing") != "").any():
                        raise NotClean("a line does not end with the delimiter")
                    batch = batch.drop("_trailing")
                yield batch.with_row_index("_line", offset=next_line)
                next_line += batch.height
                rows += batch.height
        except pl.exceptions.PolarsError as exc:
            raise NotClean(str(exc).splitlines()[0]) from exc
        counter.join()
        check_counts()
        if rows != counter.data_lines(layout.has_header):
            raise NotClean("the reader and the file disagree on the number of lines")
    finally:
        counter.stop.set()


class _ByteCounter(threading.Thread):
    """Count delimiter and newline bytes in a file, in blocks.

    numpy releases the GIL while it counts, and a 1 GB file takes a quarter of a second, so the
    answer is there long before polars has parsed the file.
    """

    def __init__(self, path: Path, delimiter: int) -> None:
        super().__init__(name="aegis-delimiter-count", daemon=True)
        self.path, self.delimiter = path, delimiter
        self.delimiters = 0
        self.newlines = 0
        self.first_line_delimiters = 0
        self.ends_with_newline = True  # an empty file has no unterminated last line
        self.error: OSError | None = None
        self.stop = threading.Event()

    def data_lines(self, has_header: bool) -> int:
        lines = self.newlines + (0 if self.ends_with_newline else 1)
        return max(lines - (1 if has_header else 0), 0)

    def run(self) -> None:
        block = bytearray(_COUNT_BLOCK)
        view = np.frombuffer(block, dtype=np.uint8)
        newline = ord("\n")
        try:
            with open(self.path, "rb", buffering=0) as handle:
                self.first_line_delimiters = handle.readline().count(bytes([self.delimiter]))
                handle.seek(0)
                while not self.stop.is_set() and (size := handle.readinto(block)):
                    data = view[:size]
                    self.delimiters += int(np.count_nonzero(data == self.delimiter))
                    self.newlines += int(np.count_nonzero(data == newline))
                    self.ends_with_newline = bool(data[-1] == newline)
        except OSError as exc:
            self.error = exc
