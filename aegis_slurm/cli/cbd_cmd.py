"""``aegis-slurm cbd``: run Check-Before-Delivery on this node and print the verdicts.

Read-only with respect to node state: XIDs shown here are still "new" for the next Prolog run,
and nothing is drained.  The Prolog itself does not go through click (``prolog/aegis-prolog``).
"""

from __future__ import annotations

import copy
import time

import click

from aegis_slurm.cli import echo_json
from aegis_slurm.errors import EXIT_CHECK_FAILED, EXIT_OK
from aegis_slurm.node.cbd import SPECS  # standard library only: cheap on a compute node


@click.command("cbd")
@click.option(
    "--profile",
    type=click.Choice(["light", "full"]),
    default="light",
    show_default=True,
    help="light = Prolog checks (seconds); full = + dcgmi diag, gpu-burn, NCCL, "
    "data read (minutes; never on job start).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(exists=True, dir_okay=False),
    help="TOML config (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/cbd.toml).",
)
@click.option("--node", default=None, help="Node name for expectations (default: this host).")
@click.option(
    "--check",
    "only",
    multiple=True,
    type=click.Choice([spec.name for spec in SPECS]),
    help="Run only this check (repeatable).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def cbd(
    profile: str, config_path: str | None, node: str | None, only: tuple[str, ...], as_json: bool
) -> None:
    """Run CBD checks and print pass/warn/fail/probe_error/skip with evidence.

    Exit status: 0 when nothing failed, 3 when a check failed or a probe errored, 1 when cbd
    itself could not run (bad config), 2 for a bad command line.
    """
    from aegis_slurm.errors import ConfigError
    from aegis_slurm.node import cbd as runner
    from aegis_slurm.node import config
    from aegis_slurm.node.prolog import actions_for, host_name
    from aegis_slurm.node.verdict import FAIL, PROBE_ERROR, STATES

    try:
        cfg = config.load(config_path)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        where = config_path or "the CBD config"
        raise ConfigError(f"{where}: {exc}; fix the file (see docs/cbd.md)") from exc
    host = node or host_name()
    state = _peek_state(cfg, host)
    t0 = time.monotonic()
    verdicts = runner.run(cfg, host, profile, state=state, only=list(only) or None)
    wall = time.monotonic() - t0
    acts = actions_for(verdicts, cfg)
    counts = {s: sum(v.state == s for v in verdicts) for s in STATES}
    if as_json:
        echo_json(
            {
                "host": host,
                "profile": profile,
                "wall_s": round(wall, 4),
                "counts": counts,
                "would_drain": [v.check for v in acts["drain"]],
                "verdicts": [v.to_dict() for v in verdicts],
            }
        )
    else:
        for v in verdicts:
            click.echo(f"{v.state:<12} {v.check:<18} {v.evidence}")
        click.echo(
            f"-- {host} {profile}: "
            + ", ".join(f"{n} {s}" for s, n in counts.items() if n)
            + f" in {wall:.2f}s; would drain: "
            + (", ".join(v.check for v in acts["drain"]) or "nothing")
        )
    bad = any(v.state in (FAIL, PROBE_ERROR) for v in verdicts)
    # The verdicts on stdout say which check failed; no extra error line.
    raise SystemExit(EXIT_CHECK_FAILED if bad else EXIT_OK)


def _peek_state(cfg: dict, host: str) -> dict:
    """A copy of the node's persisted state (never written back)."""
    import json as _json

    from aegis_slurm.node import config

    p = config.state_dir(cfg) / host / "state.json"
    try:
        return copy.deepcopy(_json.loads(p.read_text()))
    except (OSError, ValueError):
        return {}
