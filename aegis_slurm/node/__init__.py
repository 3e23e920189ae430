"""Compute-node side of aegis-slurm: the Slurm Prolog/HealthCheck and Epilog hooks.

Standard library only (proved over every module here by an allow-list test): this package is
imported on every job start and end, as root.  Layout, one responsibility each:

* shared mechanisms: ``config`` + ``typedtoml`` (typed settings derived from the default TOML
  files), ``runtime`` (watchdog armed first, node name, the drained exit), ``files`` (private
  dirs, the atomic durable write, locked JSON state with shape validation, counter files),
  ``klog`` (kernel/sys log read from a saved position), ``slurm`` (one Slurm client and the one
  guarded drain: ownership, storm guard, second look), ``policy`` (verdict -> action);
* checks: ``probes`` (how to read the machine, injectable), ``parse`` (probe text -> data),
  ``checks`` (data + expectations -> Verdict), ``xid`` (catalog), ``cbd`` (parallel runner);
* Prolog: ``prolog`` (the hook entry point), ``export`` (metrics file, syslog);
* Epilog: ``epilog`` (entry point), ``epilog_node`` (capture, spool record), ``epilog_ctld``
  (tag, crash-loop guard, auto-drain), ``signals`` (kernel messages -> failure signals, the
  AdminComment tag), ``spool`` (durable per-node records), ``diagnose`` (Aegis Algorithm 1).
"""
