"""The ``aegis-slurm`` command line.

Commands are registered by import path and loaded only when invoked, so ``aegis-slurm cbd`` on a
compute node never imports polars, scipy or matplotlib.  Add a command by adding one line to
``COMMANDS``; the module holds a ``click.Command`` named in the path.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import sys
from typing import Any

import click

from aegis_slurm import __version__
from aegis_slurm.errors import EXIT_ERROR, AegisError

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
    "diagnose": "aegis_slurm.cli.diagnose_cmd:diagnose",
    "report": "aegis_slurm.cli.report_cmd:report",
    "store": "aegis_slurm.cli.store_cmd:store",
    "check": "aegis_slurm.cli.check_cmd:check",
    "availability": "aegis_slurm.cli.analytics_cmd:availability",
    "minder": "aegis_slurm.cli.minder_cmd:minder",
    "logs": "aegis_slurm.cli.logs_cmd:logs",
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

    def invoke(self, ctx: click.Context) -> object:
        """Run the subcommand; map every error to one line on stderr and a documented exit code.

        click's own exceptions (usage errors: exit 2) and ``SystemExit`` pass through unchanged.
        ``AEGIS_DEBUG=1`` re-raises instead, so a bug report can carry the traceback.
        """
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if os.environ.get("AEGIS_DEBUG") == "1":
                raise
            message, code = describe_error(exc)
            click.echo(f"aegis-slurm: error: {message}", err=True)
            ctx.exit(code)


def describe_error(exc: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an exception reaching the CLI."""
    if isinstance(exc, AegisError):
        return _one_line(str(exc)), exc.exit_code
    if isinstance(exc, BrokenPipeError):
        # `aegis-slurm ... | head`: the reader left; nothing more to say.
        sys.stderr.close()
        return "output pipe closed", EXIT_ERROR
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return _one_line(f"{exc.strerror or exc}{where}"), EXIT_ERROR
    return (
        _one_line(
            f"internal error ({type(exc).__name__}: {exc}); this is a bug in aegis-slurm, "
            "please report it with the output of the same command run with AEGIS_DEBUG=1"
        ),
        EXIT_ERROR,
    )


def to_json(value: Any) -> str:
    """The one ``--json`` style of every command: one line, NaN/Infinity as null, dates as text.

    JSON has no NaN; Python's encoder would print a bare ``NaN`` that jq and every other strict
    parser refuse, so non-finite numbers become null (unknown), recursively.
    """
    return json.dumps(_finite(value), default=str, ensure_ascii=False)


def echo_json(value: Any) -> None:
    """Print ``value`` as one ``--json`` line on stdout."""
    click.echo(to_json(value))


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _one_line(text: str, limit: int = 500) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="aegis-slurm")
def main() -> None:
    """Health checks and reliability analytics for Slurm GPU clusters."""
