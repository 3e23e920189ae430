"""Cut a text export into pieces and split the clean ones in one vectorized pass.

``iter_pieces`` reads a stream in pieces cut only before complete records, so no record and no
repair spans two pieces.  ``read_clean_piece`` splits a piece whose every line has the right
field count with polars' CSV reader; anything else goes line by line (``read_lines``, then
``repair.split_records``).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import BinaryIO

import numpy as np
import polars as pl

from aegis_slurm.accounting.layout import Layout, SplitResult, starts_record, unique_columns

LINE_COLUMN = "line"


def read_lines(data: bytes) -> tuple[pl.Series, int]:
    """All lines as a String series (invalid UTF-8 replaced) and the count of such lines."""
    separator = next((c for c in ("\x1f", "\x1e", "\x1d", "\x00") if c.encode() not in data), None)
    if separator is None:  # every candidate byte occurs in the data: split in Python
        text = data.decode("utf-8", errors="replace")
        # Not str.splitlines(): it also splits on \x1c-\x1e, \x85 and U+2028, sacct does not.
        pieces = text.split("\n")
        if pieces and pieces[-1] == "":
            pieces.pop()
        lines = pl.Series(LINE_COLUMN, [p.removesuffix("\r") for p in pieces], dtype=pl.String)
    else:
        lines = (
            pl.read_csv(
                io.BytesIO(data),
                has_header=False,
                separator=separator,
                quote_char=None,
                new_columns=[LINE_COLUMN],
                schema={LINE_COLUMN: pl.String},
                encoding="utf8-lossy",
                raise_if_empty=False,
            ).get_column(LINE_COLUMN)
            if not data.isspace()
            else pl.Series(LINE_COLUMN, [], pl.String)
        )
    invalid = 0 if _is_utf8(data) else int(lines.str.contains("\ufffd", literal=True).sum())
    return lines, invalid


def _is_utf8(data: bytes) -> bool:
    if data.isascii():  # no copy, and what sacct prints almost always is
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def read_clean_piece(piece: bytes, layout: Layout, first_line_no: int) -> SplitResult | None:
    """The fast path: split a piece with one CSV pass when no line can need repair.

    A piece is clean when it is valid UTF-8, holds exactly ``expected`` delimiters per line in
    total, and polars' reader, which refuses a line with too many fields, read it whole: with
    no line long, the total rules out a short one too (its missing fields would read as "",
    not null).  With ``--parsable`` every line must also end with the delimiter.  Otherwise
    None, and the caller takes the line-by-line path that repairs or rejects.
    """
    names = list(layout.fields)
    delim = layout.delimiter.encode()
    expected = len(names) if layout.trailing else len(names) - 1
    skip_header = layout.has_header and first_line_no == 1
    body = piece
    if skip_header:
        newline = piece.find(b"\n")
        body = piece[newline + 1 :] if newline != -1 else b""
    if not body or not _is_utf8(body):
        return None
    if any(mark.encode() in body for mark in layout.overlap_marks):
        return None  # a line that splits more than one way: the repair path decides
    n_lines = count_bytes(body, b"\n") + (0 if body.endswith(b"\n") else 1)
    if count_bytes(body, delim) != n_lines * expected:
        return None
    records = _read_clean_piece(
        body, layout, unique_columns(names), False, first_line_no + (1 if skip_header else 0)
    )
    if records is None or records.height != n_lines:
        return None
    if layout.trailing:
        trailing = records.get_column("_trailing")
        if trailing.null_count() or (trailing != "").any():
            return None  # a line has its last delimiter inside a field instead of at its end
        records = records.drop("_trailing")
    return SplitResult(fields=names, records=records, rows_read=records.height)


def count_bytes(data: bytes, token: bytes) -> int:
    """Occurrences of ``token`` in ``data``; one-byte tokens are counted without the GIL."""
    if len(token) != 1:
        return data.count(token)
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == token[0]))


def iter_pieces(
    stream: BinaryIO,
    layout: Layout,
    validate: Callable[[dict[str, str]], bool],
    chunk_bytes: int = 32 << 20,
) -> Iterator[tuple[bytes, int]]:
    """Read ``stream`` in pieces of about ``chunk_bytes``: yields ``(piece, first_line_no)``.

    Every cut falls before a line that is a complete record on its own, so no record (and no
    repair) ever spans two pieces.  Only one piece of raw text is in memory at a time.
    """
    delim = layout.delimiter.encode()
    expected = len(layout.fields) if layout.trailing else len(layout.fields) - 1
    marks = [mark.encode() for mark in layout.overlap_marks]

    def clean_start(line: bytes) -> bool:
        line = line.rstrip(b"\r")
        if line.count(delim) != expected or (layout.trailing and not line.endswith(delim)):
            return False
        if any(mark in line for mark in marks):
            return False
        return starts_record(line.decode("utf-8", errors="replace"), layout, validate)

    remainder = b""
    line_no = 1
    while True:
        block = stream.read(chunk_bytes)
        buffer = remainder + block
        if not block:
            if buffer:
                yield buffer, line_no
            return
        # Cut before the last complete line that is a clean record start, scanning backwards
        # from the end of the block: the remainder carried over is usually one line.
        line_end = buffer.rfind(b"\n")
        cut = -1
        while line_end > 0:
            line_start = buffer.rfind(b"\n", 0, line_end) + 1
            if line_start <= 0:
                break
            if clean_start(buffer[line_start:line_end]):
                cut = line_start
                break
            line_end = line_start - 1
        if cut <= 0:
            remainder = buffer  # no safe cut yet: read on
            continue
        piece, remainder = buffer[:cut], buffer[cut:]
        yield piece, line_no
        line_no += count_bytes(piece, b"\n")


def _read_clean_piece(
    raw: bytes, layout: Layout, columns: list[str], skip_header: bool, first_data_line: int
) -> pl.DataFrame | None:
    """Split a piece whose every line has the right field count with polars' CSV reader."""
    separator = layout.delimiter
    if len(separator.encode()) != 1:
        # A multi-character delimiter becomes one byte the piece does not contain.
        spare = next((c for c in ("\x1f", "\x1e", "\x1d") if c.encode() not in raw), None)
        if spare is None:
            return None
        raw = raw.replace(separator.encode(), spare.encode())
        separator = spare
    schema = dict.fromkeys(columns, pl.String)
    if layout.trailing:
        schema["_trailing"] = pl.String
    try:
        records = pl.read_csv(
            io.BytesIO(raw),
            has_header=False,
            skip_rows=1 if skip_header else 0,
            separator=separator,
            quote_char=None,
            schema=schema,
            encoding="utf8-lossy",
            empty_string_is_null=False,
            raise_if_empty=False,
        )
    except pl.exceptions.PolarsError:
        return None  # a line with too many fields (balanced by a short one elsewhere)
    return records.with_row_index("_line", offset=first_data_line)
