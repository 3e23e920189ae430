"""The ``aegis-slurm`` command line.

Commands are registered by import path and loaded only when invoked, so ``aegis-slurm cbd`` on a
compute node never imports polars, scipy or matplotlib.  Add a command by adding one line to
``COMMANDS``; the module holds a ``click.Command`` named in the path.
"""

from __future__ import annotations

import importlib

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


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target.split(":")
        return getattr(importlib.import_module(module_name), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aegis-slurm")
def main() -> None:
    """Health checks and reliability analytics for Slurm GPU clusters."""
