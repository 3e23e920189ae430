"""The offline input: one Parquet file per job, a long table ``time, node, metric, value``."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from aegis_slurm.errors import InputError


def read_table(path: str | Path) -> pl.DataFrame:
    """Read a job's metrics Parquet file; missing or not Parquet: an :class:`InputError`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"metrics file {p} does not exist or is not a file")
    try:
        return pl.read_parquet(p, columns=None)
    except (pl.exceptions.ComputeError, OSError, ValueError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"{p}: not a readable Parquet file ({first})") from e
