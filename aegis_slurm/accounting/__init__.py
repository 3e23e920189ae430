"""sacct history -> the typed job-run table (see ``schema.py``) in a Parquet store."""

from aegis_slurm.accounting.ingest import ingest_files, parse_export
from aegis_slurm.accounting.schema import RUN_SCHEMA, SCHEMA_VERSION
from aegis_slurm.accounting.store import job_runs, load_job_runs, load_runs

__all__ = [
    "RUN_SCHEMA",
    "SCHEMA_VERSION",
    "ingest_files",
    "job_runs",
    "load_job_runs",
    "load_runs",
    "parse_export",
]
