"""How a text export is laid out: field names, delimiter, trailing delimiter, header.

``detect_layout`` reads the first line (and, for a headerless export, the field list given with
``--fields``); ``starts_record`` says whether a line can be the first line of a record, which
both the piece cutter and the repairs rely on.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import polars as pl

from aegis_slurm.accounting.errors import AccountingInputError
from aegis_slurm.accounting.fields import (
    CHECKED_FIELDS,
    FREE_TEXT_FIELDS,
    KNOWN_FIELDS,
    canonical_field,
)


class ExportFormatError(AccountingInputError):
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

    @property
    def overlap_marks(self) -> tuple[str, ...]:
        """Texts in which two occurrences of the delimiter overlap (``;|;|;`` for ``;|;``).  A
        line holding one splits more than one way (``;|`` then a delimiter, or a delimiter then
        ``|;``), so it never takes a fast path; empty for ``|``, ``|#`` and tab."""
        d = self.delimiter
        return tuple(
            d[:shift] + d for shift in range(1, len(d)) if d[shift:] == d[: len(d) - shift]
        )


def detect_layout(
    first_line: str,
    fields: Sequence[str] | None = None,
    delimiter: str | None = None,
    trailing: bool | None = None,
    sample: Sequence[str] = (),
) -> Layout:
    """Work out field names, delimiter and trailing-delimiter mode from the first line.

    A header is recognised when its first token is a sacct field name.  Without a header the
    caller must name the fields (``--fields``), as sacct's ``--noheader`` output carries none;
    the delimiter is then the one that splits the first lines (``sample``: the lines after the
    first) into that many fields, or the file is refused.
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
        return Layout(_column_names(names), delim, trailing, True)
    if fields is None:
        _refuse_what_is_not_an_export(first, sample)
        raise ExportFormatError(
            "no header line: the first line does not start with a sacct field name; "
            "pass the field list used with sacct --format (--fields)"
        )
    if delimiter == "":
        raise ExportFormatError("the delimiter is empty; pass the one given to sacct --delimiter")
    names = _column_names(fields)
    lines = [first, *(line.rstrip("\r\n") for line in sample)]
    delim = delimiter or _guess_delimiter([line for line in lines if line.strip()], len(names))
    if header_like and first.split(delim)[: len(names)] == [f for f in fields][: len(names)]:
        has_header = True
    else:
        has_header = header_like and canonical_field(first.split(delim)[0]) == names[0]
    if trailing is None:
        trailing = _looks_trailing([line for line in lines if line.strip()], delim, len(names))
    return Layout(names, delim, trailing, has_header)


def _looks_trailing(lines: Sequence[str], delim: str, n_fields: int) -> bool:
    """Do most records end with the delimiter (``--parsable``)?  Lines are taken together until
    they hold a record's delimiters, as the first record may span lines (a newline in its
    SubmitLine): its first line alone does not end with the delimiter."""
    records = trailing = count = 0
    for line in lines:
        count += line.count(delim)
        if count >= n_fields - 1:
            records += 1
            trailing += count == n_fields and line.endswith(delim)
            count = 0
    return records > 0 and trailing * 2 > records


_SLURM_ERROR = re.compile(r"^(?:sacct|sacctmgr|slurm\w*): error: ")


def _refuse_what_is_not_an_export(first: str, sample: Sequence[str]) -> None:
    """Name what the file is when it is plainly not an export (instead of "no header line")."""
    lines = [first, *(line.rstrip("\r\n") for line in sample[:5])]
    message = next((line for line in lines if _SLURM_ERROR.match(line)), None)
    if message is not None:
        raise ExportFormatError(
            f"the file holds an error message from Slurm, not an export: {message[:200]!r}"
        )
    words = first.split()
    known = sum(canonical_field(word.rstrip("+")) in KNOWN_FIELDS for word in words)
    dashes = len(lines) > 1 and set(lines[1].replace(" ", "")) == {"-"}
    if words and (dashes or known * 2 > len(words)) and known:
        raise ExportFormatError(
            "this is sacct's fixed-width table, not --parsable output (long values are cut "
            "there): export with sacct --parsable2 (-P) and the same --format"
        )


def _column_names(names: Sequence[str]) -> tuple[str, ...]:
    """Canonical field names; a name of ours (``_line``...) cannot shadow ours, and an empty one
    (``A||B`` in a header) gets its position."""
    out = []
    for position, raw in enumerate(names, start=1):
        name = canonical_field(raw)
        if not name:
            name = f"unknown:{position}"
        elif name.startswith("_"):
            name = f"unknown:{name}"
        out.append(name)
    return tuple(out)


#: Delimiters seen in the wild (slurm2sql ``;|;``, reportseff ``^|^``, gcm ``|#``), longest first.
_KNOWN_DELIMITERS = (";|;", "^|^", "|#", "|")
#: Characters that occur inside sacct values (times, TRES, node lists, states): never a delimiter.
_NOT_DELIMITERS = frozenset("-_:./+[]()=, '\"*%@")


def _guess_delimiter(lines: Sequence[str], n_fields: int) -> str:
    """The delimiter that splits most of ``lines`` into ``n_fields`` (trailing one allowed).

    Known delimiters first; otherwise any one character (a tab, ``☃``) that does so.  More
    than one candidate, or none, is refused: a wrong guess would reject every record.
    """

    def fits(candidate: str) -> bool:
        good = sum(
            line.count(candidate) == n_fields - 1
            or (line.count(candidate) == n_fields and line.endswith(candidate))
            for line in lines
        )
        return good * 2 > len(lines)

    def fits_records(candidate: str) -> bool:
        # Lines taken together until they hold a record's delimiters: a newline inside a
        # free-text field splits a record over lines (reportseff issue 63, a multi-line
        # SubmitLine), and the first lines may all be such records.
        records = good = count = 0
        for line in lines:
            count += line.count(candidate)
            if count >= n_fields - 1:
                records += 1
                good += count == n_fields - 1 or (count == n_fields and line.endswith(candidate))
                count = 0
        return records > 0 and good * 2 > records

    if not lines:
        return "|"
    for candidate in _KNOWN_DELIMITERS:
        if fits(candidate):
            return candidate
    if n_fields > 1:
        chars = {c for c in lines[0] if not c.isalnum() and c not in _NOT_DELIMITERS}
        found = sorted(c for c in chars if fits(c))
        if len(found) == 1:
            return found[0]
        if found:
            raise ExportFormatError(
                f"cannot tell the delimiter: {' or '.join(map(repr, found))} both split the "
                f"lines into {n_fields} fields; pass --delimiter"
            )
    # Only the delimiters seen in the wild are tried across lines: any character counted over
    # enough lines adds up to a record's worth of delimiters.
    found = [candidate for candidate in _KNOWN_DELIMITERS if fits_records(candidate)]
    if found:
        return found[0]
    raise ExportFormatError(
        f"cannot tell the delimiter: no character splits the first lines into the {n_fields} "
        "fields given with --fields; pass --delimiter (and check --fields)"
    )


def unique_columns(names: Sequence[str]) -> list[str]:
    """Column names for the split frame; a repeated field (gcm appends End) gets a suffix."""
    seen: Counter[str] = Counter()
    out = []
    for name in names:
        out.append(name if not seen[name] else f"{name}__{seen[name]}")
        seen[name] += 1
    return out


def starts_record(text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]) -> bool:
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
