"""Slurm Epilog hooks: ``python3 -m aegis_slurm.node.epilog --mode node|ctld|hold-watch``.

Standard library only, no click.  The entry point only: ``node`` (slurm.conf ``Epilog=``, every
node of the job) is :mod:`.epilog_node`; ``ctld`` (``EpilogSlurmctld=``, once per job) and
``hold-watch`` (spawned detached by ``ctld``) are :mod:`.epilog_ctld`.

Fail open: any internal error or config error is logged to syslog and stderr, counted, and the
hook exits 0; the process watchdog is armed before anything else (with the packaged default
budget, then the configured one) and exits 0 at the latest after ``watchdog_s +
watchdog_grace_s``.  Job teardown never waits longer and is never failed by us.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from aegis_slurm.node import config, files, runtime
from aegis_slurm.node.epilog_ctld import (
    GUARDED_DRAIN_COMMANDS,
    auto_drain,
    current_admin_comment,
    hold_watch,
    loop_decision,
    loop_limits,
    run_ctld,
    run_failed,
    write_tag,
)
from aegis_slurm.node.epilog_node import EPILOG_CHECKS, capture, job_env, last_cbd, run_node

__all__ = [
    "EPILOG_CHECKS",
    "auto_drain",
    "capture",
    "current_admin_comment",
    "hold_watch",
    "job_env",
    "last_cbd",
    "load_config",
    "loop_decision",
    "loop_limits",
    "main",
    "run_ctld",
    "run_failed",
    "run_node",
    "write_tag",
]
HOOK = "aegis-epilog"

load_config = config.load  # the one loader: Prolog and Epilog defaults, typed and validated


def _budget(cfg: dict[str, Any], mode: str) -> float:
    ep = cfg["epilog"]
    if mode == "node":
        return float(ep["watchdog_s"]) + float(ep["watchdog_grace_s"])
    if mode == "ctld":
        # the record wait, one scontrol read (task layout or NODE_FAIL state), the tag, and
        # one whole guarded drain; auto_drain starts no drain it could not finish in time
        commands = 2 + GUARDED_DRAIN_COMMANDS
        return float(ep["ctld_wait_s"]) + commands * float(ep["command_timeout_s"])
    return float(cfg["loop_guard"]["hold_wait_s"]) + 2 * float(ep["command_timeout_s"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="aegis-epilog", description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("node", "ctld", "hold-watch"), default="node")
    ap.add_argument("--config", help="TOML (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/)")
    ap.add_argument("--job", default="")
    ap.add_argument("--restarts", type=int, default=0)
    ap.add_argument("--why", default="")
    ap.add_argument("--print", action="store_true", help="print the result as JSON")
    host = "ctld"
    state_dir = str(config.defaults()["runtime"]["state_dir"])

    def count(name: str) -> None:
        with_host = host if host else "unknown"
        files.bump_counter(Path(state_dir) / with_host, f"epilog_{name}")

    dog = runtime.Watchdog(HOOK, lambda: count("watchdog"))
    try:
        dog.arm(_budget(config.defaults(), "node"))  # before anything that can block (10.8)
        # a broken config still names where its own counters belong (as the Prolog does)
        state_dir = config.raw_state_dir(argv) or state_dir
        args = ap.parse_args(argv)
        dog.rearm(_budget(config.defaults(), args.mode))
        host = runtime.node_name() if args.mode == "node" else "ctld"
        cfg = load_config(args.config)
        state_dir = str(cfg["runtime"]["state_dir"])
        dog.rearm(_budget(cfg, args.mode))
        if args.mode == "node":
            res: Any = run_node(cfg, host)
        elif args.mode == "ctld":
            res = run_ctld(cfg, config_path=args.config, deadline=dog.deadline)
        else:
            res = hold_watch(cfg, args.job, args.restarts, args.why)
        if args.print:
            print(json.dumps(res, default=str))
        return 0
    except (Exception, SystemExit) as e:
        if isinstance(e, SystemExit) and e.code in (0, None):
            return 0
        kind = "config error" if isinstance(e, config.ConfigError) else "internal error"
        count("config_errors" if kind == "config error" else "internal_errors")
        detail = str(e) if kind == "config error" else repr(e)
        runtime.say(HOOK, "err", f"{host} {kind}, ignored (exit 0, nothing changed): {detail}")
        return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # don't wait for abandoned probe threads
