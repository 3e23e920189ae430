"""Split ``sacct --parsable``/``--parsable2`` text into records of raw string fields.

Three modules, one job each: ``layout`` (field names, delimiter, header), ``pieces`` (cutting a
stream into pieces and the one-pass split of clean ones), ``repair`` (line-by-line splitting that
repairs or rejects broken records).  This module re-exports their public names.
"""

from aegis_slurm.accounting.layout import (
    ExportFormatError,
    Layout,
    SplitResult,
    detect_layout,
    starts_record,
    unique_columns,
)
from aegis_slurm.accounting.pieces import count_bytes, iter_pieces, read_clean_piece, read_lines
from aegis_slurm.accounting.repair import split_records

__all__ = [
    "ExportFormatError",
    "Layout",
    "SplitResult",
    "count_bytes",
    "detect_layout",
    "iter_pieces",
    "read_clean_piece",
    "read_lines",
    "split_records",
    "starts_record",
    "unique_columns",
]
