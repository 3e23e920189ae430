"""The ``aegis-slurm`` command line.

Commands are registered by import path and loaded only when invoked, so ``aegis-slurm cbd`` on a
compute node never imports polars, scipy or matplotlib.  Add a command by adding one line to
``COMMANDS``; the module holds a ``click.Command`` named in the path.
"""

from __future__ import annotations

import importlib
import os

import click

from aegis_slurm import __version__

#: command name -> "module:attribute" of a click.Command
COMMANDS: dict[str, str] = {
    "ingest": "aegis_slurm.cli.ingest_cmd:ingest",
    "demo": "aegis_slurm.cli.demo_cmd:demo",
    "taxonomy": "aegis_slurm.cli.analytics_cmd:taxonomy",
    "failure-rate": "aegis_slurm.cli.analytics_cmd:failure_rate_cmd",
    "mttf": "aegis_slurm.cli.analytics_cmd:mttf",
    "ettr": "aegis_slurm.cli.analytics_cmd:ettr",
    "checkpoint-plan": "aegis_slurm.cli.analytics_cmd:checkpoint_plan_cmd",
    "goodput": "aegis_slurm.cli.analytics_cmd:goodput",
    "requeue-loops": "aegis_slurm.cli.analytics_cmd:requeue_loops_cmd",
    "lemon-nodes": "aegis_slurm.cli.analytics_cmd:lemon_nodes_cmd",
    "simulate": "aegis_slurm.cli.simulate_cmd:simulate",
    "measured-ettr": "aegis_slurm.cli.analytics_cmd:measured_ettr_cmd",
    "cbd": "aegis_slurm.cli.cbd_cmd:cbd",
    "signals": "aegis_slurm.cli.signals_cmd:signals",
    "diagnose": "aegis_slurm.cli.signals_cmd:diagnose",
    "report": "aegis_slurm.cli.report_cmd:report",
}


#: polars allocates through its own jemalloc, set up to hand freed pages back to the kernel
#: after half a second; a batch command that frees and re-allocates ~30 MB per piece then spends
#: a sixth of its time in page faults.  Keeping freed pages for a few seconds made a 4M-record
#: ingest ~7% faster for ~200 MB more peak RSS (benchmarks/bench_ingest.py).  polars reads this
#: variable when it loads (appending it to its own defaults), so it is set before any command
#: module imports polars; an admin's own setting wins.
_POLARS_ALLOCATOR = ("_RJEM_MALLOC_CONF", "dirty_decay_ms:5000,muzzy_decay_ms:5000")


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        os.environ.setdefault(*_POLARS_ALLOCATOR)
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aegis-slurm")
def main() -> None:
    """Health checks and reliability analytics for Slurm GPU clusters."""
