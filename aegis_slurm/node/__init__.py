"""Compute-node side of aegis-slurm: Check-Before-Delivery (CBD) for Slurm Prolog/HealthCheck.

Standard library only (NVML bindings optional): this package is imported on every job start.
Layout: ``parse`` (probe text -> data), ``checks`` (data + expectations -> Verdict), ``probes``
(how to read the machine, injectable), ``cbd`` (parallel runner with timeouts and a watchdog),
``slurm`` (drain/resume, reason ownership, drain-storm guard), ``prolog`` (the hook entry point).
Epilog side: ``signals`` (probe output -> failure signals, AdminComment tag), ``spool`` (durable
per-node records), ``diagnose`` (Aegis Algorithm 1), ``epilog`` (the Epilog/EpilogSlurmctld
entry point and crash-loop guard).
"""
