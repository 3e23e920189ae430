"""The fast path for a clean export file: polars' streaming CSV reader over the whole file.

Nearly every export admins have is clean: each line is one record with exactly the expected
number of delimiters.  For such a file polars' multi-threaded reader splits the text into
batches itself (no Python per piece, no copies of the raw text), while a side thread counts the
delimiters in the file.  The file was clean when

* the reader met no line with too many fields and no invalid UTF-8 (it raises on both),
* the delimiter count is exactly what the number of lines implies, so no line had too few (a
  short line's missing fields read as "", indistinguishable from empty fields otherwise), and
* with ``--parsable`` every line ended with the delimiter.

Anything else raises ``NotClean``, even after some batches were delivered: the caller throws
those away and reads the file again piece by piece (``parse_text``), where broken records are
repaired or rejected with a reason.  Both paths split a clean line the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.accounting.parse_text import Layout, unique_columns

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
    delimiter = layout.delimiter.encode()
    counter = _DelimiterCounter(path, delimiter[0])
    counter.start()
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
        if counter.error is not None:
            raise NotClean(f"cannot count delimiters: {counter.error}")
        per_line = len(layout.fields) if layout.trailing else len(layout.fields) - 1
        header = _header_delimiters(path, delimiter) if layout.has_header else 0
        if counter.count != header + rows * per_line:
            raise NotClean("a line has too few fields")
    finally:
        counter.stop.set()


def _header_delimiters(path: Path, delimiter: bytes) -> int:
    with open(path, "rb") as handle:
        return handle.readline().count(delimiter)


class _DelimiterCounter(threading.Thread):
    """Count one byte value in a file, in blocks (numpy releases the GIL while it counts)."""

    def __init__(self, path: Path, byte: int) -> None:
        super().__init__(name="aegis-delimiter-count", daemon=True)
        self.path, self.byte = path, byte
        self.count = 0
        self.error: OSError | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        block = bytearray(_COUNT_BLOCK)
        view = np.frombuffer(block, dtype=np.uint8)
        try:
            with open(self.path, "rb", buffering=0) as handle:
                while not self.stop.is_set() and (size := handle.readinto(block)):
                    self.count += int(np.count_nonzero(view[:size] == self.byte))
        except OSError as exc:
            self.error = exc
