"""Step 1 of L4: lines to events (templates).

Training logs repeat the same few hundred line shapes millions of times with different numbers.
So every line is first *masked* in polars (vectorized regex kernels): timestamps, paths, hex ids,
addresses, ranks and numbers become placeholders.  The masked lines are de-duplicated, and only
the distinct ones go to drain3's template miner, so the miner's cost grows with distinct lines,
not bytes.  Timestamps and iteration numbers are extracted in the same pass for the temporal step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from aegis_slurm.errors import ConfigError

#: (pattern, placeholder), applied in order: the wider shapes first, so a timestamp is not
#: half-eaten by the number rule.
MASKS: tuple[tuple[str, str], ...] = (
    (r"\d{4}-\d{2}-\d{2}[ T_]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?", "<TS>"),
    # glog as PyTorch's c10 prints it: (month+1)*100+day, unpadded: E321 02:07:08.408271257
    (r"\b[EWIF]\d{3,4} \d{2}:\d{2}:\d{2}(?:\.\d+)?", "<TS>"),
    (r"\b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?", "<TS>"),
    (r"(?:[A-Za-z]:)?(?:/[\w.+@=~-]+){2,}/?", "<PATH>"),
    (r"\b0x[0-9a-fA-F]+\b", "<HEX>"),
    (r"\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b", "<MAC>"),
    (r"\b(?:\d{1,3}\.){3}\d{1,3}(?::\d+)?\b", "<IP>"),
    (
        r"\b[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\d[0-9a-fA-F]*\b|\b[0-9a-fA-F]*\d[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\b",
        "<HEX>",
    ),
    # "Rank 3", "rank=3", "GPU 0", "cuda:1" -- but not a host name such as gpu302 (the number
    # rule below makes that gpu<N>, one token like any other host's)
    (r"(?i)\b(rank|local_rank|device|gpu|cuda)(?:\s*[:=]\s*|\s+)\d+", "$1 <N>"),
    (r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?", "<N>"),
    (r"\s+", " "),
)

#: ISO date-times (also ``2023-05-19_16:39:58`` from torchrun's failure summary)
_ISO_TS = r"(\d{4}-\d{2}-\d{2})[ T_](\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)"
#: glog (PyTorch C++): ``[E321 02:07:08.408271257 ...``: c10 prints ``month * 100 + day``, so
#: March 21 is ``321`` and November 22 ``1122``; the year is not printed
_GLOG_TS = r"\b[EWIF](\d{1,2})(\d{2}) (\d{2}:\d{2}:\d{2})(?:\.(\d+))?"
#: iteration counters: Megatron ``iteration      122/  250000``, ``step 12``, ``global_step=12``
ITERATION = r"(?i)\b(?:iteration|global_step|step)\s*[:=]?\s*(\d+)"


def mask_expr(col: str = "text") -> pl.Expr:
    """The masked form of a line (vectorized)."""
    e = pl.col(col)
    for pattern, repl in MASKS:
        e = e.str.replace_all(pattern, repl)
    return e.str.strip_chars()


_ISO_RE = re.compile(_ISO_TS)
_GLOG_RE = re.compile(_GLOG_TS)
_ITER_RE = re.compile(ITERATION)


def _offsets(
    shape: str,
) -> tuple[int | None, int | None, int | None, int | None, int | None, int | None]:
    """Where a shape's ISO time, glog time and iteration number sit (offsets and lengths)."""
    iso = _ISO_RE.search(shape)
    glog = _GLOG_RE.search(shape)
    it = _ITER_RE.search(shape)
    return (
        iso.start(1) if iso else None,
        iso.end(2) - iso.start(1) if iso else None,
        glog.start(1) if glog else None,
        glog.end() - glog.start(1) if glog else None,
        it.start(1) if it else None,
        it.end(1) - it.start(1) if it else None,
    )


def shape_info(shapes: pl.Series) -> pl.DataFrame:
    """Per distinct shape: its masked text and where the time and iteration fields sit."""
    rows = [_offsets(x) for x in shapes.to_list()]
    names = ("iso_at", "iso_len", "glog_at", "glog_len", "it_at", "it_len")
    cols = list(zip(*rows, strict=True)) if rows else [[]] * len(names)
    return pl.DataFrame(
        {
            "shape": shapes,
            **{n: pl.Series(n, c, dtype=pl.Int64) for n, c in zip(names, cols, strict=True)},
        }
    ).with_columns(mask_expr("shape").alias("masked"))


def annotate_ids(frame: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """Add ``sid`` (the line's distinct shape), ``ts`` and ``iteration``; return the masked text
    of each shape id too.  Lines carry a small integer, not a copy of their masked text.

    The regexes run once per distinct *shape* (the line with every digit 0); each line then only
    has its fields sliced out at the offsets its shape gives.  glog lines carry no year: they
    take the year of the node's nearest ISO timestamp (else 2000), so PyTorch's C++ lines and
    Python's lines order correctly.
    """
    info = shape_info(frame["shape"].unique(maintain_order=True)).with_row_index("sid")
    masked = info["masked"].to_list()
    df = frame.join(info.drop("masked"), on="shape", how="left", maintain_order="left")
    iso = (
        pl.col("text")
        .str.slice(pl.col("iso_at"), pl.col("iso_len"))
        .str.replace(r"[T_]", " ")
        .str.replace(",", ".")
        .str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    )
    df = df.with_columns(
        (iso.dt.epoch("us").cast(pl.Float64) / 1e6).alias("_iso"),
        pl.col("text")
        .str.slice(pl.col("it_at"), pl.col("it_len"))
        .cast(pl.Int64, strict=False)
        .alias("iteration"),
    )
    # glog lines take the year of the node's nearest ISO line (else 2000) as their own, so a
    # leap year's February 29 shifts nothing; "321 02:07:08.4" -> "0321 ...": c10 does not pad
    year = (
        pl.from_epoch(pl.col("_iso"), time_unit="s")
        .dt.year()
        .forward_fill()
        .backward_fill()
        .over("node")
        .fill_null(2000)
    )
    month_day_time = (
        pl.col("text")
        .str.slice(pl.col("glog_at"), pl.col("glog_len"))
        .str.replace(r"^(\d{3}) ", "0${1} ")
    )
    glog = pl.concat_str([year.cast(pl.String), month_day_time]).str.to_datetime(
        "%Y%m%d %H:%M:%S%.f", strict=False, time_unit="us"
    )
    df = df.with_columns(
        pl.coalesce(pl.col("_iso"), glog.dt.epoch("us").cast(pl.Float64) / 1e6)
        .forward_fill()
        .over("node")
        .alias("ts")
    ).drop("_iso", "iso_at", "iso_len", "glog_at", "glog_len", "it_at", "it_len", "shape")
    return df, masked


def annotate(frame: pl.DataFrame) -> pl.DataFrame:
    """``annotate_ids`` with each line's masked text as a column (small inputs, summaries)."""
    df, masked = annotate_ids(frame)
    return df.with_columns(
        pl.col("sid")
        .replace_strict(list(range(len(masked))), masked, return_dtype=pl.String)
        .alias("masked")
    )


@dataclass
class Templates:
    """Distinct masked lines mapped to drain3 cluster ids, and each cluster's template."""

    ids: dict[str, int]
    text: dict[int, str]


def need(module: str):
    """Import a ``diagnosis`` extra's module, or say in one line how to install it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"aegis-slurm logs needs {module.split('.')[0]} ({exc}); install the diagnosis "
            "extra: pip install 'aegis-slurm[diagnosis]'"
        ) from exc


def new_miner(sim_th: float = 0.7):
    """A drain3 miner; masking already removed the variables, so templates need high similarity."""
    miner_cls = need("drain3").TemplateMiner
    config_cls = need("drain3.template_miner_config").TemplateMinerConfig

    config = config_cls()
    config.drain_sim_th = sim_th
    config.drain_depth = 4
    config.profiling_enabled = False
    return miner_cls(config=config)


def mine(distinct: list[str], miner=None) -> Templates:
    """Give each distinct masked line to drain3; return line -> cluster id and the templates."""
    miner = miner or new_miner()
    ids: dict[str, int] = {}
    for line in distinct:
        ids[line] = miner.add_log_message(line or "<EMPTY>")["cluster_id"]
    text = {c.cluster_id: c.get_template() for c in miner.drain.clusters}
    return Templates(ids=ids, text=text)


def event_ids(masked: pl.Series, templates: Templates) -> np.ndarray:
    """The event (cluster id) of each line."""
    return (
        masked.replace_strict(templates.ids, default=-1, return_dtype=pl.Int64)
        .to_numpy()
        .astype(np.int64)
    )
