"""Read a job's log files into per-line frames, each line attributed to a node.

Layouts (docs/logs.md):

- a directory of ``<node>.log`` (or ``.out``/``.err``) files, one per node (``--output=%N.log``);
- per-task files (``%t``: a name ending in the task number, ``train-7.out``), mapped to nodes by the
  job's task layout (block distribution: task ``t`` runs on ``nodes[t // tasks_per_node]``);
- one file with ``srun --label`` prefixes (``12: ...``): the prefix is the task number;
- PyTorch rank prefixes (``[rank12]:``): the global rank, mapped with ``ranks_per_node`` (only in a
  single combined file, and only when ``ranks_per_node`` is given).  Real logs put things in front
  of it: torchrun's ``[default3]:`` (the *local* rank: stripped, never used alone to pick a node),
  a log collector's timestamp (`` 2025-02-18 12:54 [rank13]:``) or line counter
  (``[80746] [rank0]:``); those stay in the text (a timestamp is still read as the line's time).
- NCCL's own prefix (``NCCL_DEBUG``: ``host:pid:tid [dev] ...``) names the host: in a combined file
  (its NCCL lines name two or more hosts) whose lines carry no srun label or mapped rank (one
  ``slurm-%j.out`` without ``--label``), the NCCL lines are attributed to that host; in a
  labelled file only when the host is one of the job's nodes (rank units and host names never
  mix).

Each file is read whole, split into lines and handled by polars' vectorized string kernels; the
frame holds ``line`` (1-based in the file) and ``text`` (prefix stripped) and ``source`` (the
task or rank number, or null).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from aegis_slurm.errors import InputError, NoDataError

LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
#: the pseudo-node of a labelled file's unlabelled lines: ``slurm-4242(unlabelled)``
UNLABELLED = "(unlabelled)"
#: ``srun --label``: the task number, a colon and one space, at the start of the line.
_SRUN_LABEL = r"^\s*(\d+): "
#: PyTorch's ``[rank12]:`` (global rank, group 2) after what real logs put in front of it
#: (group 1, kept): a collector's timestamp or ``|`` columns (up to 40 characters without a
#: bracket), a ``[80746] `` line counter, a bracketed ISO timestamp (``[2025-02-27T16:30:43Z] ``,
#: a log shipper's), torchrun's ``[default3]:`` (local rank).
_RANK_PREFIX = (
    r"^((?:[^\[]{0,40}?|\[\d+\] |\[\d{4}-\d\d-\d\d[T ][^\]]{0,40}\]\s?)?"
    r"(?:\[[A-Za-z_]+\d+\]:)?)\[rank(\d+)\]:"
)
_LOCAL_PREFIX = r"^\[[A-Za-z_]+\d+\]:"
#: NCCL's debug prefix ``host:pid:tid [dev] `` (group 2 the host), after an optional collector
#: timestamp (group 1, kept)
_NCCL_HOST = r"^((?:[^\[]{0,40}?\s)?)([A-Za-z0-9][A-Za-z0-9._-]*):\d+:\d+ \[\d+\] "
#: a per-task file: the stem ends in the task number (``%t``), e.g. ``job-1234_7`` or ``out.7``
_TASK_STEM = re.compile(r"(?:^|[._-])(\d+)$")
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


@dataclass(frozen=True)
class Layout:
    """How task and rank numbers map onto node names (all optional)."""

    nodes: tuple[str, ...] = ()
    tasks_per_node: int | None = None
    ranks_per_node: int | None = None


@dataclass
class LogFile:
    """One file's lines: ``node`` (str), ``line`` (1-based), ``text`` (prefix stripped)."""

    path: Path
    frame: pl.DataFrame
    nodes: list[str] = field(default_factory=list)


def discover(paths: Sequence[str | Path]) -> list[Path]:
    """The log files named by ``paths`` (files, or directories searched one level deep)."""
    found: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix in LOG_SUFFIXES)
            if not files:
                raise NoDataError(f"no log files (*.log, *.out, *.err, *.txt) in {p}")
            found.extend(files)
        elif p.is_file():
            found.append(p)
        else:
            raise InputError(f"no such log file or directory: {p}")
    return found


def _node_for(index: int, per: int | None, layout: Layout, kind: str) -> str:
    if per:
        k = index // per
        if k < len(layout.nodes):
            return layout.nodes[k]
        return f"node#{k}"
    if layout.nodes and kind == "task" and len(layout.nodes) > index:
        # one task per node is srun's default when nothing else is known
        return layout.nodes[index]
    return f"{kind}{index}"


def read_file(
    path: Path, layout: Layout, node_hint: str | None = None, fallback: str | None = None
) -> LogFile:
    """Read one file; attribute each line to a node.

    ``node_hint``: the file is that node's.  ``fallback``: the node when the file's prefixes
    cannot be mapped (a per-node file in a directory, read without the job's node list).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    # every digit as 0: the line's *shape*.  The masks treat all digits alike, so masking the
    # shape gives the same result as masking the line, and shapes repeat where lines do not:
    # the masks then run once per distinct shape (parse.annotate).  Only ASCII digits change,
    # so both split into the same lines.
    df = pl.DataFrame(
        {"text": _lines(data), "shape": _lines(data.translate(_DIGITS_TO_ZERO))}
    ).with_row_index("line", offset=1)
    # which prefixes occur at all is decided on the distinct shapes (a few hundred), so a file
    # without them pays for none of the per-line regexes below
    shapes = df["shape"].unique()
    any_label = bool(shapes.str.contains(_SRUN_LABEL).any())
    # after an srun label is stripped: a rank prefix, or a local one alone
    after_label = shapes.str.replace(_SRUN_LABEL, "")
    any_rank = bool(
        (after_label.str.contains(_RANK_PREFIX) | after_label.str.contains(_LOCAL_PREFIX)).any()
    )
    any_host = bool(after_label.str.contains(_NCCL_HOST).any())
    label = pl.col("text").str.extract(_SRUN_LABEL, 1).cast(pl.Int64, strict=False)
    df = df.with_columns(label.alias("task") if any_label else pl.lit(None, pl.Int64).alias("task"))
    has_labels = any_label and df["task"].null_count() < df.height
    task_node = (
        _map_index(df, "task", layout.tasks_per_node, layout, "task") if has_labels else None
    )
    if has_labels:
        df = df.with_columns(pl.col("text", "shape").str.replace(_SRUN_LABEL, ""))
        # a file named after one node (``-o %j-%N.out`` of a batch job names the batch host)
        # whose labels are several nodes' tasks is a combined file: labels win
        if (
            node_hint is not None
            and layout.tasks_per_node
            and layout.nodes
            and df.select(task_node).to_series().drop_nulls().n_unique() > 1
        ):
            node_hint = None
    if fallback is not None and not layout.nodes:
        node_hint = node_hint or fallback
    rank = pl.col("text").str.extract(_RANK_PREFIX, 2).cast(pl.Int64, strict=False)
    df = df.with_columns(rank.alias("rank") if any_rank else pl.lit(None, pl.Int64).alias("rank"))
    if any_rank:
        # strip the rank and local-rank prefixes (``[default3]:[rank3]: ...``), keep what a
        # collector put in front: templates must not split on the rank
        df = df.with_columns(
            pl.col("text", "shape")
            .str.replace(_RANK_PREFIX, "$1")
            .str.replace(_LOCAL_PREFIX, "")
            .str.replace(_LOCAL_PREFIX, "")
        )
    has_ranks = layout.ranks_per_node is not None and df["rank"].null_count() < df.height
    # NCCL's host prefix only matters where no file name names the node (a directory of
    # per-node files pays for no per-line host regex)
    any_host = any_host and node_hint is None
    df = df.with_columns(
        _extract_where(df, df["shape"].unique(), _NCCL_HOST, 2).alias("host")
        if any_host
        else pl.lit(None, pl.String).alias("host")
    )
    # a file whose NCCL lines name one host is that host's own file (``%N.log``, a node's
    # Epilog summarizing its slice): it keeps its name; two or more hosts mean a combined file
    has_hosts = any_host and df["host"].drop_nulls().n_unique() > 1
    known_hosts = any_host and (has_labels or has_ranks) and bool(layout.nodes)
    if has_hosts or known_hosts:
        # the host, pid and thread differ per process: the event is what follows
        df = df.with_columns(pl.col("text", "shape").str.replace(_NCCL_HOST, "$1"))
    if node_hint is not None:
        node = pl.lit(node_hint)
    elif task_node is not None:
        node = task_node
    elif has_ranks:
        node = _map_index(df, "rank", layout.ranks_per_node, layout, "rank")
    elif has_hosts:
        node = pl.col("host")
    else:
        node = pl.lit(path.stem)
    if known_hosts:
        # NCCL lines without a label/rank of their own: their host, if it is one of the job's
        # nodes (without the node list, rank units and host names would mix)
        known = pl.col("host").is_in(list(layout.nodes))
        node = pl.coalesce(node, pl.when(known).then(pl.col("host")))
    df = df.with_columns(node.alias("node"))
    if node_hint is None and (has_labels or has_ranks or has_hosts):
        # unprefixed lines (srun's own messages, launcher output) belong to the job, not a node:
        # keep them under the batch host's name so they are still searched.
        df = df.with_columns(pl.col("node").fill_null(pl.lit(f"{path.stem}{UNLABELLED}")))
    frame = df.select("node", "line", "text", "shape")
    return LogFile(path=path, frame=frame, nodes=frame["node"].unique().sort().to_list())


def _extract_where(df: pl.DataFrame, shapes: pl.Series, pattern: str, group: int) -> pl.Series:
    """``text``'s ``pattern`` group on the lines whose shape matches it, null elsewhere.

    The match is decided on the distinct shapes, so the regex runs only on the lines that carry
    the prefix (NCCL's lines are a few thousand of millions), not on every line of the file.
    """
    hit = shapes.filter(shapes.str.contains(pattern))
    rows = df.filter(pl.col("shape").is_in(hit.implode())).select(
        "line", pl.col("text").str.extract(pattern, group).alias("value")
    )
    return df.select("line").join(rows, on="line", how="left", maintain_order="left")["value"]


def _lines(data: bytes) -> pl.Series:
    """The lines of a file, blank lines kept (as ""), invalid UTF-8 replaced.

    polars' CSV reader with a control character as the separator and no quoting splits lines
    about 3x faster than ``str.split``; a line holding that character (0x1f, unit separator) is
    cut there.
    """
    if not data:
        return pl.Series("text", [], dtype=pl.String)
    try:
        df = pl.read_csv(
            io.BytesIO(data),
            has_header=False,
            separator="\x1f",
            quote_char=None,
            new_columns=["text"],
            schema_overrides={"text": pl.String},
            truncate_ragged_lines=True,
            extra_columns="ignore",
            encoding="utf8-lossy",
        )
        return df.get_column("text").fill_null("")
    except pl.exceptions.PolarsError:
        # binary junk and other shapes the CSV reader refuses: the slow, sure way
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return pl.Series("text", lines, dtype=pl.String)


def _map_index(df: pl.DataFrame, col: str, per: int | None, layout: Layout, kind: str) -> pl.Expr:
    values = df[col].drop_nulls().unique().sort().to_list()
    many = bool(values) and values[-1] >= len(layout.nodes)
    if per is None and kind == "task" and layout.nodes and many:
        # more tasks than nodes and no layout given: srun's default block distribution (task t
        # on node t // ceil(tasks / nodes)), not one task per node, which would blame node k
        # for task k's lines
        per = -(-(int(values[-1]) + 1) // len(layout.nodes))
    mapping = {v: _node_for(int(v), per, layout, kind) for v in values}
    return pl.col(col).replace_strict(mapping, default=None, return_dtype=pl.String)


def node_hint_for(path: Path, layout: Layout) -> str | None:
    """The node a file belongs to from its name: ``<node>.log``, ``<job>-<node>.log``, or a
    ``%t`` task file."""
    stem = path.stem
    if layout.nodes and stem in layout.nodes:
        return stem
    if layout.nodes:
        # ``--output=%j-%N.log``: the node's name is a delimited part of the file name
        named = [
            n
            for n in layout.nodes
            if re.search(rf"(?:^|[^A-Za-z0-9]){re.escape(n)}(?:$|[^A-Za-z0-9])", stem)
        ]
        if named:
            return max(named, key=len)
    m = _TASK_STEM.search(stem)
    if m and layout.tasks_per_node and layout.nodes:
        task = int(m.group(1))
        if task < layout.tasks_per_node * len(layout.nodes):  # not a job id (slurm-4242.out)
            return _node_for(task, layout.tasks_per_node, layout, "task")
    return None


def read_logs(paths: Sequence[str | Path], layout: Layout | None = None) -> Iterator[LogFile]:
    """Every file named by ``paths``, one at a time (one file's lines in memory at once).

    A file whose lines carry no prefix is one node's file, named by its stem (``node17.log``) or,
    for per-task files, by the task layout.
    """
    layout = layout or Layout()
    files = discover(paths)
    for path in files:
        hint = node_hint_for(path, layout) if len(files) > 1 else None
        # several files and no node list: one file per node, named after it
        fallback = path.stem if len(files) > 1 else None
        yield read_file(path, layout, node_hint=hint, fallback=fallback)
