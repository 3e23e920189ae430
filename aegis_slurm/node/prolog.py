"""Slurm hook entry point: ``python3 -m aegis_slurm.node.prolog [--mode prolog|healthcheck]``.

Standard library only, no click.  ``prolog`` mode (slurm.conf ``Prolog=``): run the light CBD;
if a check whose policy is "drain" fails, drain this node with ``aegis: <check>: <evidence>``
(unless someone else's reason is already there, or the drain-storm guard tripped) and exit 1 so
Slurm requeues the job.  ``healthcheck`` mode (``HealthCheckProgram=`` or cron): same checks,
drains the same way but always exits 0, and resumes nodes aegis drained once the draining
check has passed ``resume_after_passes`` times in a row.

Any internal error is caught, logged to syslog, counted in the textfile metric, and the exit
code is 0: a bug in aegis never drains a node.  The process exits :data:`EXIT_DRAIN` (42) only
when it drained the node and wants the job requeued; ``prolog/aegis-prolog`` maps that to 1 and
every other non-zero exit (interpreter or import failure, anything before ``main()``) to 0.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aegis_slurm.node import cbd, config, export, files, policy, runtime, slurm
from aegis_slurm.node.policy import actions_for, gpu_context, update_passes
from aegis_slurm.node.runtime import node_name as host_name
from aegis_slurm.node.verdict import PROBE_ERROR, Verdict

__all__ = ["actions_for", "gpu_context", "host_name", "main", "run_hook", "update_passes"]

EXIT_REQUEUE = 1  # run_hook's "node drained, requeue the job" (what Slurm sees, via the wrapper)
EXIT_DRAIN = 42  # the process exit code for EXIT_REQUEUE; the only one the wrapper passes on
HOOK = "aegis-prolog"
#: state.json keys and their shapes (a key of another shape is dropped and counted, 10.7)
SHAPE: dict[str, Any] = {
    "passes": {str: int},
    "counters": {str: float},
    "last": dict,
    "drained": dict,
    "xid_pos": dict,
    "xid_pending": dict,
    "boot_id": str,
    "ib_counters": {str: {str: int}},
}
#: what the probe run may change in the state (folded back in under the lock)
_RUN_KEYS = ("boot_id", "xid_pos", "xid_pending", "ib_counters")


def _bump(state: dict[str, Any], name: str, n: int = 1) -> None:
    c = state.setdefault("counters", {})
    c[name] = c.get(name, 0) + n


def _state_dir(cfg: dict[str, Any]) -> str:
    return str(config.state_dir(cfg))


def run_hook(
    mode: str, cfg: dict[str, Any], host: str, overrides: dict[str, cbd.ProbeFn] | None = None
) -> int:
    """One Prolog/HealthCheck run: checks, policy, drain/resume, metrics.  Returns exit code.

    The per-node state lock is held only to read the state and, after the probes, to update
    it; Prologs of jobs starting together on one node probe concurrently (10.14).
    """
    rt = cfg.get("runtime", {})
    who = f"{host} job={os.environ.get('SLURM_JOB_ID', '-')} {mode}"
    use_syslog = bool(rt.get("syslog", True))
    to = float(rt.get("scontrol_timeout_s", 5))
    t0 = time.monotonic()
    path = Path(_state_dir(cfg)) / files.safe_name(host) / "state.json"
    with files.locked_json(path, SHAPE) as lk:
        snap = copy.deepcopy(lk.data)
        repaired = lk.repaired
        if repaired:
            _bump(lk.data, "state_repaired", len(repaired))
    for r in repaired:
        runtime.say(HOOK, "warning", f"{host}: {r}", use_syslog)
    ctx = gpu_context(mode, os.environ, cbd.slurm_conf_text())
    verdicts = cbd.run(
        cfg, host, "light", overrides=overrides, state=snap, context=ctx, commit_xids=False
    )
    rc = 0
    storm: list[str] = []
    storm_unknown: list[str] = []
    with files.locked_json(path, SHAPE) as lk:
        state = lk.data
        for k in _RUN_KEYS:
            if k in snap:
                state[k] = snap[k]
            else:
                state.pop(k, None)
        passes = update_passes(state, verdicts)
        acts = actions_for(verdicts, cfg)
        acts["drain"] = policy.drain_first(acts["drain"], cfg)
        _bump(state, "runs")
        _bump(state, "probe_errors", sum(v.state == PROBE_ERROR for v in verdicts))
        _bump(state, "internal_errors", sum(v.internal for v in verdicts))
        for v in acts["log"] + acts["alert"]:
            export.log(
                "alert" if v in acts["alert"] else "warning",
                f"{who} {v.check} {v.state}: {v.evidence}",
                use_syslog,
            )
        now = datetime.now()
        xid_acted = not any(v.check == "xid" for v in acts["drain"])
        client = slurm.Client(to)
        if acts["drain"]:
            rc, storm, storm_unknown, xid_acted = _drain(
                mode, cfg, client, host, state, acts["drain"], now, who, use_syslog
            )
        elif mode == "healthcheck":
            _maybe_resume(cfg, client, host, state, passes, use_syslog)
        if xid_acted:
            cbd.mark_xids_seen(state)
        state["last"] = {
            "verdicts": [v.to_dict() for v in verdicts],
            "rc": rc,
            "at": now.isoformat(timespec="seconds"),
            "mode": mode,
        }
        counters = {k: float(v) for k, v in state.get("counters", {}).items()}
    if rt.get("textfile_dir"):
        counters["internal_crashes"] = float(files.read_counter(path.parent, "internal_errors"))
        try:
            export.write_atomic(
                rt["textfile_dir"],
                f"aegis_cbd_{host}.prom",
                export.prom_text(
                    verdicts,
                    host=host,
                    profile="light",
                    duration_s=time.monotonic() - t0,
                    timestamp=time.time(),
                    counters=counters,
                    storm=storm,
                    guard_unavailable=storm_unknown,
                ),
            )
        except OSError as e:  # the metrics file is a side output: never changes the outcome
            files.bump_counter(path.parent, "textfile_errors")
            runtime.say(HOOK, "err", f"{who} cannot write the metrics file: {e}", use_syslog)
    return rc


def _drain(
    mode: str,
    cfg: dict[str, Any],
    client: slurm.Client,
    host: str,
    state: dict[str, Any],
    failing: list[Verdict],
    now: datetime,
    who: str,
    use_syslog: bool,
) -> tuple[int, list[str], list[str], bool]:
    """The guarded drain (:func:`slurm.guarded_drain`) and its bookkeeping.  Returns (rc, checks
    stopped by the guard, checks whose guard could not be evaluated, whether the xid verdict was
    acted on).  Fails open: slurmctld unreadable or the drain failing -> nothing drained, rc 0.
    """
    want = EXIT_REQUEUE if mode == "prolog" else 0
    checks = [v.check for v in failing]

    def drained() -> None:  # from here on any exit requeues the job (10.9)
        if mode == "prolog":
            runtime.OUTCOME.drained_exit = EXIT_DRAIN

    res = slurm.guarded_drain(client, host, failing, cfg.get("guard", {}), now, drained)
    if res.action == "guard_unavailable":
        _bump(state, "guard_unavailable")
        runtime.say(
            HOOK,
            "alert",
            f"{who} would drain for {', '.join(checks)} but {res.detail}: drain-storm guard "
            "unavailable, NOT draining",
            use_syslog,
        )
        return 0, [], checks, False
    if res.action == "kept":
        export.log("warning", f"{who} {res.detail}", use_syslog)
        owner = slurm.NodeInfo(host, "", res.reason)
        return want, [], [], not owner.ours or owner.aegis_check() == "xid"
    if res.action == "storm":
        _bump(state, "storm_guard_trips")
        runtime.say(
            HOOK, "alert", f"{who} drain-storm guard: NOT draining: {res.detail}", use_syslog
        )
        return 0, checks, [], False
    if res.action == "drain_failed":
        _bump(state, "drain_failures")
        runtime.say(HOOK, "alert", f"{who} {res.detail}: NOT draining", use_syslog)
        return 0, [], [res.check], False
    if res.action == "undrained":
        runtime.OUTCOME.drained_exit = None
        _bump(state, "storm_guard_trips")
        runtime.say(
            HOOK, "alert", f"{who} drain-storm guard: undrained again: {res.detail}", use_syslog
        )
        return 0, [res.check], [], False
    if res.detail:
        export.log("warning", f"{who} drained; {res.detail}", use_syslog)
    _bump(state, "drains")
    state["drained"] = {
        "check": res.check,
        "reason": res.reason,
        "at": now.isoformat(timespec="seconds"),
    }
    runtime.say(HOOK, "crit", f"{who} drained: {res.reason}", use_syslog)
    return want, [], [], res.check == "xid"


def _maybe_resume(
    cfg: dict[str, Any],
    client: slurm.Client,
    host: str,
    state: dict[str, Any],
    passes: dict[str, int],
    use_syslog: bool,
) -> None:
    try:
        me = next((n for n in client.show_nodes(host) if n.name == host), None)
    except slurm.ERRORS:
        return
    if me is None or not me.ours:
        return
    check = me.aegis_check() or ""
    need = int(cfg.get("runtime", {}).get("resume_after_passes", 3))
    if slurm.should_resume(me, passes, bool(config.policy(cfg, check).get("resume", True)), need):
        try:
            client.resume(host)
        except slurm.ERRORS as e:
            export.log("err", f"{host} scontrol resume failed: {e}", use_syslog)
            return
        _bump(state, "resumes")
        state.pop("drained", None)
        export.log(
            "notice",
            f"{host} resumed: {check} passed {passes.get(check)}x (was: {me.reason})",
            use_syslog,
        )


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="aegis-prolog", description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("prolog", "healthcheck"), default="prolog")
    ap.add_argument("--config", help="TOML (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/)")
    ap.add_argument("--print", action="store_true", help="print verdicts as JSON on stdout")
    return ap.parse_args(argv)


def _budget(cfg: dict[str, Any]) -> float:
    rt = cfg["runtime"]
    return float(rt["watchdog_s"]) + float(rt["watchdog_grace_s"])


def main(argv: list[str] | None = None) -> int:
    """Process exit code: :data:`EXIT_DRAIN` when the node was drained in prolog mode, else 0."""
    host = "?"
    state_dir = ""
    counted = False

    def count_crash() -> None:
        nonlocal counted
        if state_dir and host != "?" and not counted:
            counted = True
            files.bump_counter(Path(state_dir) / host, "internal_errors")

    # armed before anything can block: the default budget, from the package's own defaults
    dog = runtime.Watchdog(HOOK, count_crash)
    try:
        dog.arm(_budget(config.defaults()))
        state_dir = _state_dir(config.defaults())
        host = host_name()
        state_dir = config.raw_state_dir(argv) or state_dir
        args = _parse_args(argv)
        cfg = config.load(args.config)
        state_dir = _state_dir(cfg)
        dog.rearm(_budget(cfg))
        rc = run_hook(args.mode, cfg, host)
        if args.print:
            print(json.dumps({"host": host, "rc": rc}))
        return EXIT_DRAIN if rc == EXIT_REQUEUE else 0
    except (Exception, SystemExit) as e:  # SystemExit: argparse on bad arguments
        if isinstance(e, SystemExit) and e.code in (0, None):  # --help
            return 0
        rc = runtime.OUTCOME.drained_exit or 0
        kind = "config error" if isinstance(e, config.ConfigError) else "internal error"
        count_crash()
        detail = str(e) if isinstance(e, config.ConfigError) else repr(e)
        runtime.say(
            HOOK,
            "err",
            f"{host} {kind} (exit {rc}, "
            + ("node drained, job requeued" if rc else "node untouched")
            + f"): {detail}",
        )
        return rc


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # don't wait for abandoned probe threads
