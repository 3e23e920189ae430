"""aegis-slurm: Check-Before-Delivery health checks and reliability analytics for Slurm.

Data flows one way: ``node/`` (prolog/epilog, stdlib only) -> spool -> ``accounting/`` (sacct ->
typed job-run table) -> ``analytics/`` (pure functions over that table) -> ``report/``.
"""

__version__ = "0.1.0"
