"""Split ``sacct --parsable``/``--parsable2`` text into records of raw string fields.

Text is read in pieces cut only before complete records (``iter_pieces``).  A clean piece (every
line has the right field count) is split by polars' CSV reader in one pass (``read_clean_piece``).
Otherwise the piece goes line by line: lines with the right count are still split vectorized, and
only the broken ones reach Python, where two repairs are tried:

* a record broken by a newline inside a free-text field (``--parsable`` marks record ends with a
  trailing delimiter; otherwise adjacent lines that cannot start a record are rejoined);
* a delimiter inside free-text fields (``|`` in a job name): every placement of the surplus
  among the free-text fields is tried, and the repair is kept only if exactly one yields a valid
  record (property-tested: a kept record is never a wrong guess).

Anything else is rejected with a reason.  Nothing is dropped silently.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import combinations_with_replacement
from typing import BinaryIO

import numpy as np
import polars as pl

from aegis_slurm.accounting.fields import (
    CHECKED_FIELDS,
    FREE_TEXT_FIELDS,
    KNOWN_FIELDS,
    canonical_field,
)
from aegis_slurm.errors import InputError

_LINE_COLUMN = "line"
#: Most stray delimiters one record may hold before we stop trying to place them.
_MAX_SURPLUS = 4


class ExportFormatError(InputError, ValueError):
    """The whole file cannot be read as a sacct export (no header, unknown delimiter, ...)."""


@dataclass
class SplitResult:
    """Raw string fields of every readable record, plus the account of everything else."""

    fields: list[str]  # canonical sacct field names, in file order (duplicates kept)
    records: pl.DataFrame  # one String column per distinct field, plus "_line" (1-based)
    rows_read: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    recovered: Counter[str] = field(default_factory=Counter)
    rejected_samples: list[dict[str, object]] = field(default_factory=list)

    def reject(self, reason: str, line_no: int, text: str) -> None:
        self.rejected[reason] += 1
        if len(self.rejected_samples) < 10_000:  # keep evidence, bounded
            self.rejected_samples.append({"line": line_no, "reason": reason, "text": text[:2000]})


@dataclass(frozen=True)
class Layout:
    """How records are laid out in a text export."""

    fields: tuple[str, ...]
    delimiter: str
    trailing: bool  # --parsable: every record ends with the delimiter
    has_header: bool


def detect_layout(
    first_line: str,
    fields: Sequence[str] | None = None,
    delimiter: str | None = None,
    trailing: bool | None = None,
) -> Layout:
    """Work out field names, delimiter and trailing-delimiter mode from the first line.

    A header is recognised when its first token is a sacct field name.  Without a header the
    caller must name the fields (``--fields``), as sacct's ``--noheader`` output carries none.
    """
    first = first_line.rstrip("\r\n")
    match = re.match(r"([A-Za-z][A-Za-z0-9]*)([^A-Za-z0-9]+)[A-Za-z]", first)
    header_like = match is not None and canonical_field(match.group(1)) in KNOWN_FIELDS
    if header_like and fields is None:
        delim = delimiter or match.group(2)  # type: ignore[union-attr]
        names = first.split(delim)
        trailing = names[-1] == ""
        if trailing:
            names = names[:-1]
        return Layout(tuple(canonical_field(n) for n in names), delim, trailing, True)
    if fields is None:
        raise ExportFormatError(
            "no header line: the first line does not start with a sacct field name; "
            "pass the field list used with sacct --format (--fields)"
        )
    names = tuple(canonical_field(f) for f in fields)
    delim = delimiter or _guess_delimiter(first, len(names))
    if header_like and first.split(delim)[: len(names)] == [f for f in fields][: len(names)]:
        has_header = True
    else:
        has_header = header_like and canonical_field(first.split(delim)[0]) == names[0]
    if trailing is None:
        trailing = first.endswith(delim) and first.count(delim) == len(names)
    return Layout(names, delim, trailing, has_header)


#: Delimiters seen in the wild (slurm2sql ``;|;``, reportseff ``^|^``, gcm ``|#``), longest first.
_KNOWN_DELIMITERS = (";|;", "^|^", "|#", "|")


def _guess_delimiter(line: str, n_fields: int) -> str:
    """The known delimiter that splits ``line`` into ``n_fields`` (trailing delimiter allowed)."""
    for candidate in _KNOWN_DELIMITERS:
        if line.count(candidate) == n_fields - 1 or (
            line.count(candidate) == n_fields and line.endswith(candidate)
        ):
            return candidate
    return "|"


def read_lines(data: bytes) -> tuple[pl.Series, int]:
    """All lines as a String series (invalid UTF-8 replaced) and the count of such lines."""
    separator = next((c for c in ("\x1f", "\x1e", "\x1d", "\x00") if c.encode() not in data), None)
    if separator is None:  # every candidate byte occurs in the data: split in Python
        text = data.decode("utf-8", errors="replace")
        # Not str.splitlines(): it also splits on \x1c-\x1e, \x85 and U+2028, sacct does not.
        pieces = text.split("\n")
        if pieces and pieces[-1] == "":
            pieces.pop()
        lines = pl.Series(_LINE_COLUMN, [p.removesuffix("\r") for p in pieces], dtype=pl.String)
    else:
        lines = (
            pl.read_csv(
                io.BytesIO(data),
                has_header=False,
                separator=separator,
                quote_char=None,
                new_columns=[_LINE_COLUMN],
                schema={_LINE_COLUMN: pl.String},
                encoding="utf8-lossy",
                raise_if_empty=False,
            ).get_column(_LINE_COLUMN)
            if not data.isspace()
            else pl.Series(_LINE_COLUMN, [], pl.String)
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


def split_records(
    lines: pl.Series,
    layout: Layout,
    validate: Callable[[dict[str, str]], bool],
    *,
    first_line_no: int = 1,
    skip_header: bool | None = None,
) -> SplitResult:
    """Split lines into records; repair or reject the ones whose field count is wrong.

    ``first_line_no`` is the file line number of ``lines[0]`` (for chunked input); the header is
    skipped when ``skip_header`` (default: the layout has one and this is the file's start).
    """
    names = list(layout.fields)
    delim = layout.delimiter
    expected = len(names) if layout.trailing else len(names) - 1
    frame = pl.DataFrame({_LINE_COLUMN: lines.fill_null("")}).with_row_index(
        "_line", offset=first_line_no
    )
    if skip_header is None:
        skip_header = layout.has_header and first_line_no == 1
    first_data_line = first_line_no + 1 if skip_header else first_line_no
    if skip_header:
        frame = frame.slice(1)
    count = pl.col(_LINE_COLUMN).str.count_matches(delim, literal=True)
    ok = count == expected
    if layout.trailing:
        ok = ok & pl.col(_LINE_COLUMN).str.ends_with(delim)
    frame = frame.with_columns(ok.alias("_ok"))
    unique_names = unique_columns(names)
    good = frame.filter(pl.col("_ok"))
    body = pl.col(_LINE_COLUMN)
    if layout.trailing:
        body = body.str.slice(0, body.str.len_chars() - len(delim))
    split = good.select("_line", body.str.split_exact(delim, len(names) - 1).alias("_rec")).unnest(
        "_rec"
    )
    split = split.rename({f"field_{i}": col for i, col in enumerate(unique_names)})
    result = SplitResult(fields=names, records=split, rows_read=good.height)

    broken = frame.filter(~pl.col("_ok")).select("_line", _LINE_COLUMN)
    if broken.height:
        before = frame.filter(
            pl.col("_ok") & pl.col("_line").is_in((broken.get_column("_line") - 1).implode())
        )
        previous_text = dict(before.select("_line", _LINE_COLUMN).iter_rows())
        repaired, tails, dropped = _repair(
            broken.rows(), layout, validate, result, first_data_line, previous_text
        )
        last = unique_names[-1]
        if dropped:
            split = split.filter(~pl.col("_line").is_in(list(dropped)))
        if tails:
            # Newlines inside the last free-text field of a --parsable2 record.
            suffix = pl.DataFrame(
                {"_line": list(tails), "_tail": list(tails.values())},
                schema={"_line": split.schema["_line"], "_tail": pl.String},
            )
            split = (
                split.join(suffix, on="_line", how="left")
                .with_columns(pl.concat_str(pl.col(last), pl.col("_tail").fill_null("")))
                .drop("_tail")
            )
        if repaired:
            extra = pl.DataFrame(
                [[line_no, *values] for line_no, values in repaired],
                schema=["_line", *unique_names],
                orient="row",
            ).with_columns(pl.col("_line").cast(split.schema["_line"]))
            split = pl.concat([split, extra], how="vertical_relaxed").sort("_line")
        result.records = split
    return result


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

    def clean_start(line: bytes) -> bool:
        line = line.rstrip(b"\r")
        if line.count(delim) != expected or (layout.trailing and not line.endswith(delim)):
            return False
        return _starts_record(line.decode("utf-8", errors="replace"), layout, validate)

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


def unique_columns(names: Sequence[str]) -> list[str]:
    """Column names for the split frame; a repeated field (gcm appends End) gets a suffix."""
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        out.append(name if not seen[name] else f"{name}__{seen[name]}")
        seen[name] += 1
    return out


def _repair(
    rows: list[tuple[int, str]],
    layout: Layout,
    validate: Callable[[dict[str, str]], bool],
    result: SplitResult,
    first_data_line: int,
    previous_text: dict[int, str],
) -> tuple[list[tuple[int, list[str]]], dict[int, str], set[int]]:
    """Rejoin records split by embedded newlines and absorb stray delimiters; reject the rest.

    Returns the repaired records and, for good records whose last field continued on the
    following lines, the text to append to that field, and the good lines that turned out to be
    only the start of a record.  In ``--parsable2`` output a delimiter-free line after a record
    can only be the rest of its last field.  Any other line that cannot start a record means the
    record before it only looked complete (a delimiter and a newline in its free text), so both
    are read again as one block, and kept only if exactly one reading fits.
    """
    names = list(layout.fields)
    delim = layout.delimiter
    expected = len(names) if layout.trailing else len(names) - 1
    tail_may_continue = not layout.trailing and names[-1] in FREE_TEXT_FIELDS
    broken_lines = {line_no for line_no, _ in rows}
    repaired: list[tuple[int, list[str]]] = []
    repaired_text: list[tuple[str, str]] = []  # raw text and the recovery counted for it
    tails: dict[int, str] = {}
    dropped: set[int] = set()
    # The record the previous physical line ended: (first line, index in `repaired` or -1 for a
    # good line), so that a continuation line can be appended to its last field.
    open_record: tuple[int, int] | None = None
    previous_line = 0

    def starts_record(text: str) -> bool:
        return _starts_record(text, layout, validate)

    i = 0
    while i < len(rows):
        line_no, text = rows[i]
        if previous_line and line_no - 1 > previous_line:
            open_record = None  # good lines came in between
        if (
            open_record is None
            and line_no - 1 >= first_data_line
            and (line_no - 1 not in broken_lines)
        ):
            open_record = (line_no - 1, -1)  # the line before was a good record
        if tail_may_continue and open_record is not None and delim not in text:
            # Every field boundary was on the record's first line: the rest is its last field.
            start, index = open_record
            if index < 0:
                tails[start] = tails.get(start, "") + "\n" + text
            else:
                repaired[index][1][-1] += "\n" + text
                raw_text, recovery = repaired_text[index]
                repaired_text[index] = (raw_text + "\n" + text, recovery)
            result.recovered["newline inside a free-text field (rejoined)"] += 1
            previous_line = line_no
            i += 1
            continue
        continued, open_record = open_record, None
        if text == "" and not (
            continued is not None
            and layout.trailing
            and i + 1 < len(rows)
            and rows[i + 1][0] == line_no + 1
            and not starts_record(rows[i + 1][1])
        ):
            previous_line = line_no
            i += 1
            continue  # a blank line between records is not a record
        parts = [text]
        block_line = line_no
        if continued is not None and not starts_record(text):
            start, index = continued
            if index < 0:
                parts.insert(0, previous_text[start] + tails.pop(start, ""))
                dropped.add(start)
            else:
                raw_text, recovery = repaired_text[index]
                parts.insert(0, raw_text)
                repaired[index] = (-1, [])
                result.recovered[recovery] -= 1
                if result.recovered[recovery] <= 0:
                    del result.recovered[recovery]
            result.rows_read -= 1  # that record is read again as part of this block
            block_line = start
        count = sum(part.count(delim) for part in parts)
        j = i + 1
        # A record cut by newlines: append the adjacent broken lines that cannot start a record.
        while (
            (count < expected or layout.trailing)
            and j < len(rows)
            and rows[j][0] == rows[j - 1][0] + 1
            and not starts_record(rows[j][1])
        ):
            parts.append(rows[j][1])
            count += rows[j][1].count(delim)
            j += 1
        joined = "\n".join(parts)
        line_no = block_line
        previous_line = rows[j - 1][0]
        i = j
        result.rows_read += 1
        complete = count == expected and (not layout.trailing or joined.endswith(delim))
        if complete:
            values = _split(joined, layout)
            if validate(dict(zip(names, values, strict=True))):
                key = "newline inside a free-text field (rejoined)" if len(parts) > 1 else ""
                repaired.append((line_no, values))
                repaired_text.append((joined, key))
                open_record = (line_no, len(repaired) - 1)
                if key:
                    result.recovered[key] += 1
            else:
                result.reject("invalid values after rejoining lines", line_no, joined)
            continue
        if count > expected:
            values = _absorb_delimiters(joined, layout, validate)
            if values is not None:
                key = "delimiter inside a free-text field"
                if len(parts) > 1:
                    key = "newline and delimiter inside free-text fields"
                repaired.append((line_no, values))
                repaired_text.append((joined, key))
                open_record = (line_no, len(repaired) - 1)
                result.recovered[key] += 1
            else:
                result.reject(
                    "delimiter inside free-text fields: no unique repair "
                    f"({count + 1 - layout.trailing} fields, {len(names)} expected)",
                    line_no,
                    joined,
                )
            continue
        if count == expected:  # --parsable, yet the last delimiter is not at the end
            result.reject("record does not end with the delimiter", line_no, joined)
            continue
        result.reject(
            f"truncated record ({count + 1 - layout.trailing} fields, {len(names)} expected)",
            line_no,
            joined,
        )
    return [r for r in repaired if r[0] >= 0], tails, dropped


def _starts_record(text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]) -> bool:
    """Could this line be the first line of a record (rather than the rest of a free-text field)?

    When checked fields (ids, state, times, counts) come before the first free-text field, those
    decide, whatever the free text holds.  Otherwise (gcm puts Account and AdminComment first)
    every field of the line is checked in place, which a continuation line almost never passes.
    """
    names = list(layout.fields)
    parts = text.split(layout.delimiter)
    if parts == [""]:
        return False
    fixed = next((k for k, n in enumerate(names) if n in FREE_TEXT_FIELDS), len(names))
    if CHECKED_FIELDS.intersection(names[:fixed]):
        if len(parts) < min(fixed, 2):
            return False
        return validate(dict(zip(names[:fixed], parts[:fixed], strict=False)))
    if len(parts) > len(names):
        return False
    return validate(dict(zip(names, parts, strict=False)))


def _split(text: str, layout: Layout) -> list[str]:
    if layout.trailing:
        text = text[: -len(layout.delimiter)]
    return text.split(layout.delimiter)


def _absorb_delimiters(
    text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]
) -> list[str] | None:
    """Give the surplus delimiters back to the free-text fields; None unless exactly one fits.

    The surplus may be spread over several free-text fields (``-J a|b`` puts the pipe in both
    SubmitLine and JobName), so every distribution of up to ``_MAX_SURPLUS`` is tried.
    """
    names = list(layout.fields)
    parts = _split(text, layout)
    surplus = len(parts) - len(names)
    free = [pos for pos, name in enumerate(names) if name in FREE_TEXT_FIELDS]
    if surplus > _MAX_SURPLUS or not free:
        return None
    candidates = []
    for chosen in combinations_with_replacement(free, surplus):
        extra = Counter(chosen)
        values, cursor = [], 0
        for pos in range(len(names)):
            width = 1 + extra.get(pos, 0)
            values.append(layout.delimiter.join(parts[cursor : cursor + width]))
            cursor += width
        if validate(dict(zip(names, values, strict=True))):
            candidates.append(values)
            if len(candidates) > 1:
                return None
    return candidates[0] if candidates else None
