"""Split lines into records, repairing what a free-text field broke and rejecting the rest.

Lines with the right field count are still split vectorized; only the broken ones reach Python,
where two repairs are tried:

* a record broken by a newline inside a free-text field (``--parsable`` marks record ends with a
  trailing delimiter; otherwise adjacent lines that cannot start a record are rejoined);
* a delimiter inside free-text fields (``|`` in a job name): every placement of the surplus
  among the free-text fields is tried, and the repair is kept only if exactly one yields a valid
  record (property-tested: a kept record is never a wrong guess);
* a delimiter that overlaps itself (``;|`` in a job name before ``;|;``): every occurrence may be
  a field boundary, and the record is kept only if exactly one split is valid.

Anything else is rejected with a reason.  Nothing is dropped silently.
"""

from __future__ import annotations

import bisect
import re
from collections import Counter
from collections.abc import Callable
from itertools import combinations_with_replacement

import polars as pl

from aegis_slurm.accounting.fields import FREE_TEXT_FIELDS
from aegis_slurm.accounting.layout import Layout, SplitResult, starts_record, unique_columns
from aegis_slurm.accounting.pieces import LINE_COLUMN as _LINE_COLUMN

#: Most stray delimiters one record may hold before we stop trying to place them.
_MAX_SURPLUS = 4
#: Longest value slurmdbd stores in a free-text column: ``tinytext`` (255 bytes) for the job name,
#: reservation and WCKey, ``text`` (65,535) for SubmitLine, comments, WorkDir and the rest.  A run
#: of delimiter-free lines lies inside one field, so a longer run is not a job name or comment but
#: something else (another export, a log) and is rejected line by line.  A bound in bytes, not in
#: lines: ``sbatch --wrap "$(cat job.sh)"`` puts a whole script, hundreds of lines, in SubmitLine.
TINYTEXT_BYTES = 255
TEXT_BYTES = 65_535
_TINYTEXT_FIELDS = frozenset({"JobName", "Reservation", "WCKey"})
#: Lines a Slurm command prints on stderr (``sacct ... 2>&1``): never part of a record.
_SLURM_MESSAGE = re.compile(r"^(?:sacct|sacctmgr|squeue|scontrol|slurm\w*|srun|sbatch): ")
#: Other delimiters: a line they split into a full record belongs to another export.
_OTHER_DELIMITERS = (";|;", "^|^", "|#", "|", "\t")


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
    for mark in layout.overlap_marks:  # more than one split: the repair path decides
        ok = ok & ~pl.col(_LINE_COLUMN).str.contains(mark, literal=True)
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
        after = frame.filter(
            pl.col("_ok") & pl.col("_line").is_in((broken.get_column("_line") + 1).implode())
        )
        next_text = dict(after.select("_line", _LINE_COLUMN).iter_rows())
        repaired, tails, dropped = _repair(
            broken.rows(), layout, validate, result, first_data_line, previous_text, next_text
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


def _repair(
    rows: list[tuple[int, str]],
    layout: Layout,
    validate: Callable[[dict[str, str]], bool],
    result: SplitResult,
    first_data_line: int,
    previous_text: dict[int, str],
    next_text: dict[int, str] | None = None,
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

    marks = layout.overlap_marks

    def can_start(text: str) -> bool:
        if starts_record(text, layout, validate):
            return True
        # starts_record reads the plain split, which a delimiter that overlaps itself can get
        # wrong (AdminComment "a;|" first: "a" then JobIDRaw "|;2"): a line that is one whole
        # record, split the one valid way, starts a record all the same.
        return (
            any(mark in text for mark in marks)
            and _unique_split(text, layout, validate) is not None
        )

    def completes(count: int, text: str) -> bool:
        # A block cut inside a free-text field, and a line holding exactly its missing fields:
        # that line is the rest of the record even if it could pass for a record's start
        # ("echo goodbye^|^20:00:00^|^00:00.042" after a SubmitLine cut by a newline, with
        # AdminComment first so that a line's first fields decide nothing; reportseff issue 63).
        return (
            count < len(names)
            and names[count] in FREE_TEXT_FIELDS
            and count + text.count(delim) == expected
        )

    def leading_text(count: int, text: str) -> bool:
        # --parsable: delimiter-free lines are no record of their own (every record ends with
        # the delimiter); before any delimiter they are all inside a leading free-text field.
        return layout.trailing and count == 0 and names[0] in FREE_TEXT_FIELDS and delim not in text

    implausible, blank = _not_continuations(rows, layout, tail_may_continue)
    i = 0
    while i < len(rows):
        line_no, text = rows[i]
        if line_no in blank:  # whitespace after a record (a file's last line): not a record
            previous_line = line_no
            i += 1
            continue
        if line_no in implausible:
            result.rows_read += 1
            result.reject(implausible[line_no], line_no, text)
            open_record = None
            previous_line = line_no
            i += 1
            continue
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
            and not can_start(rows[i + 1][1])
        ):
            previous_line = line_no
            i += 1
            continue  # a blank line between records is not a record
        parts = [text]
        block_line = line_no
        if continued is not None and not can_start(text):
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
            and rows[j][0] not in implausible
            and rows[j][0] not in blank
            and (
                not can_start(rows[j][1])
                or completes(count, rows[j][1])
                or leading_text(count, rows[j][1])
            )
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
            values = _split_any(joined, layout, validate)
            if values is None:
                result.reject("the delimiter overlaps itself: no unique split", line_no, joined)
            elif validate(dict(zip(names, values, strict=True))):
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
        following = rows[j - 1][0] + 1
        if next_text and following in next_text and leading_text(count, ""):
            # --parsable ends every record with the delimiter: delimiter-free lines before a
            # good line are the start of that record, cut by newlines in its first field (a
            # free-text field), and the good line only looked whole.
            whole = joined + "\n" + next_text[following]
            values = _split_any(whole, layout, validate)
            if values is not None and validate(dict(zip(names, values, strict=True))):
                key = "newline inside a free-text field (rejoined)"
                repaired.append((line_no, values))
                repaired_text.append((whole, key))
                result.recovered[key] += 1
                result.rows_read -= 1  # the good line is read again as this record's rest
                dropped.add(following)
                open_record = (line_no, len(repaired) - 1)
                previous_line = following
                continue
        result.reject(
            f"truncated record ({count + 1 - layout.trailing} fields, {len(names)} expected)",
            line_no,
            joined,
        )
    return [r for r in repaired if r[0] >= 0], tails, dropped


def _split(text: str, layout: Layout) -> list[str]:
    if layout.trailing:
        text = text[: -len(layout.delimiter)]
    return text.split(layout.delimiter)


def _split_any(
    text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]
) -> list[str] | None:
    """A record with the expected count of delimiters, split; None when no split is unique."""
    if any(mark in text for mark in layout.overlap_marks):
        return _unique_split(text, layout, validate)
    return _split(text, layout)


def _unique_split(
    text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]
) -> list[str] | None:
    """The one split of ``text`` into the layout's fields when the delimiter overlaps itself;
    None unless exactly one is valid.

    Every occurrence of the delimiter, overlapping ones included, may be a field boundary.  A
    checked field (not free text) holds no delimiter character and must be plausible; free text
    may hold anything.  Splits are counted by dynamic programming over (field, offset), capped
    at two, so a hostile line costs at most fields x occurrences^2 steps, and lines with more
    than a few surplus occurrences are refused outright.
    """
    names = list(layout.fields)
    delim = layout.delimiter
    if layout.trailing:
        if not text.endswith(delim):
            return None
        text = text[: -len(delim)]
    starts = [i for i in range(len(text)) if text.startswith(delim, i)]
    if len(starts) > len(names) - 1 + 2 * _MAX_SURPLUS:
        return None
    delim_chars = set(delim)
    free = [name in FREE_TEXT_FIELDS for name in names]
    last = len(names) - 1
    memo: dict[tuple[int, int], int] = {}

    def fits(k: int, value: str) -> bool:
        return free[k] or (not delim_chars & set(value) and validate({names[k]: value}))

    def choices(k: int, pos: int) -> list[int]:
        """Ends of field ``k`` (a boundary's offset) that fit, from ``pos`` on."""
        ends = []
        for q in starts[bisect.bisect_left(starts, pos) :]:
            value = text[pos:q]
            if not free[k] and delim_chars & set(value):
                break  # a checked field only grows from here
            if fits(k, value):
                ends.append(q)
        return ends

    def ways(k: int, pos: int) -> int:
        if k == last:
            return int(fits(k, text[pos:]))
        if (k, pos) not in memo:
            n = 0
            for q in choices(k, pos):
                n += ways(k + 1, q + len(delim))
                if n >= 2:
                    break
            memo[(k, pos)] = min(n, 2)
        return memo[(k, pos)]

    if ways(0, 0) != 1:
        return None
    values, pos = [], 0
    for k in range(last):
        q = next(q for q in choices(k, pos) if ways(k + 1, q + len(delim)))
        values.append(text[pos:q])
        pos = q + len(delim)
    values.append(text[pos:])
    return values


def _absorb_delimiters(
    text: str, layout: Layout, validate: Callable[[dict[str, str]], bool]
) -> list[str] | None:
    """Give the surplus delimiters back to the free-text fields; None unless exactly one fits.

    The surplus may be spread over several free-text fields (``-J a|b`` puts the pipe in both
    SubmitLine and JobName), so every distribution of up to ``_MAX_SURPLUS`` is tried.
    """
    if any(mark in text for mark in layout.overlap_marks):
        return _unique_split(text, layout, validate)
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


def _not_continuations(
    rows: list[tuple[int, str]], layout: Layout, tail_may_continue: bool
) -> tuple[dict[int, str], set[int]]:
    """Broken lines that cannot be the rest of a free-text field (with why), and blank ones.

    A continuation must be plausible: a message from a Slurm command, a line that is a whole
    record under another delimiter, or one of a run of delimiter-free lines longer than any
    free-text field of the layout can hold (``TEXT_BYTES``, ``TINYTEXT_BYTES``) is rejected on its
    own.  Whitespace-only lines that end a run of broken lines
    (nothing but good records or the end of the file follows) are blank, not part of a record,
    unless the last field is free text that may end in them (kept byte for byte).
    """
    delim = layout.delimiter
    n_fields = len(layout.fields)
    implausible: dict[int, str] = {}
    blank: set[int] = set()
    run: list[tuple[int, str]] = []
    free_fields = [name for name in layout.fields if name in FREE_TEXT_FIELDS]
    budget = max(
        (TINYTEXT_BYTES if name in _TINYTEXT_FIELDS else TEXT_BYTES for name in free_fields),
        default=0,
    )
    reason = (
        f"line without a delimiter, one of more than {budget} bytes of them in a row "
        "(longer than any free-text field)"
    )

    def check_free_run(free: list[tuple[int, str]]) -> None:
        # Characters, not bytes: never more than the UTF-8 length, so the bound only loosens.
        if sum(len(text) + 1 for _, text in free) > budget:
            implausible.update(dict.fromkeys((line_no for line_no, _ in free), reason))

    def close_run() -> None:
        while not tail_may_continue and run and not run[-1][1].strip() and delim not in run[-1][1]:
            blank.add(run.pop()[0])
        free: list[tuple[int, str]] = []  # consecutive delimiter-free lines: inside one field
        for line_no, text in run:
            if delim in text:
                check_free_run(free)
                free = []
            else:
                free.append((line_no, text))
        check_free_run(free)
        run.clear()

    for line_no, text in rows:
        if run and line_no != run[-1][0] + 1:
            close_run()
        run.append((line_no, text))
        if delim in text:
            continue
        if _SLURM_MESSAGE.match(text):
            implausible[line_no] = "a message from a Slurm command, not a record"
        elif any(
            n_fields > 3
            and other != delim
            and other not in delim
            and text.count(other) in (n_fields - 1, n_fields)
            for other in _OTHER_DELIMITERS
        ):
            implausible[line_no] = "a record with another delimiter (two exports concatenated?)"
    close_run()
    return implausible, blank
