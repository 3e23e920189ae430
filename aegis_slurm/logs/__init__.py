"""Log-based diagnosis of failed multi-node jobs, after L4 (FSE'25); see docs/logs.md.

Needs the ``diagnosis`` extra (drain3, scikit-learn, dtaidistance).
"""

from __future__ import annotations

from aegis_slurm.logs.diagnose import ALL_NODES, LogVerdict, diagnose_logs
from aegis_slurm.logs.job import diagnose_job_logs
from aegis_slurm.logs.sources import Layout

__all__ = ["ALL_NODES", "Layout", "LogVerdict", "diagnose_job_logs", "diagnose_logs"]
