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
import contextlib
import json
import os
import socket
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from aegis_slurm.node import cbd, config, export, probes, slurm
from aegis_slurm.node.verdict import FAIL, PASS, PROBE_ERROR, WARN, Verdict

EXIT_REQUEUE = 1  # run_hook's "node drained, requeue the job" (what Slurm sees, via the wrapper)
EXIT_DRAIN = 42  # the process exit code for EXIT_REQUEUE; the only one the wrapper passes on
_SCONTROL_ERRORS = (
    probes.ProbeMissing,
    probes.ProbeTimeout,
    probes.ProbeFailed,
    OSError,
    ValueError,
)


def host_name() -> str:
    """Slurm's node name (SLURMD_NODENAME, several slurmds may share a host), else hostname."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def actions_for(verdicts: list[Verdict], cfg: dict[str, Any]) -> dict[str, list[Verdict]]:
    """Apply the policy table: verdict -> drain/alert/log/ignore.  Internal errors never drain."""
    acts: dict[str, list[Verdict]] = {"drain": [], "alert": [], "log": [], "ignore": []}
    for v in verdicts:
        if v.state not in (FAIL, WARN, PROBE_ERROR):
            continue
        act = config.policy(cfg, v.check).get(v.state, "log")
        if v.internal and act == "drain":
            act = "alert"
        acts.setdefault(act, []).append(v)
    return acts


def update_passes(state: dict[str, Any], verdicts: list[Verdict]) -> dict[str, int]:
    """Consecutive-pass counters per check (hysteresis for resume)."""
    passes = state.setdefault("passes", {})
    for v in verdicts:
        passes[v.check] = passes.get(v.check, 0) + 1 if v.state == PASS else 0
    return passes


def gpu_context(
    mode: str, env: dict[str, str] | os._Environ[str], slurm_conf: str | None
) -> dict[str, Any]:
    """Which GPUs the job-state-sensitive checks (gpu_processes, clocks_thermal) may judge.

    * prolog: only this job's GPUs (``SLURM_JOB_GPUS``, else ``CUDA_VISIBLE_DEVICES``: minor
      numbers or UUIDs); on a shared node the other jobs' processes and heat are not ours.
    * healthcheck: the node may be running jobs unless slurm.conf says
      ``HealthCheckNodeState=IDLE`` (Slurm's default is ANY), so leftover processes are not
      judged and a hot GPU is only a warning.
    """
    if mode == "prolog":
        raw = env.get("SLURM_JOB_GPUS") or env.get("CUDA_VISIBLE_DEVICES") or ""
        return {"gpu_scope": "job", "job_gpus": [t.strip() for t in raw.split(",") if t.strip()]}
    states = set(config.slurm_conf_values(slurm_conf or "", "HealthCheckNodeState"))
    return {"gpu_scope": "node" if states - {"CYCLE"} == {"IDLE"} else "busy"}


def _bump(state: dict[str, Any], name: str, n: int = 1) -> None:
    c = state.setdefault("counters", {})
    c[name] = c.get(name, 0) + n


def _count_internal_error(cfg: dict[str, Any], host: str) -> float:
    """Best-effort persistent count of internal errors (separate file: state may be broken)."""
    try:
        d = cbd.private_dir(
            Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm")) / host
        )
        fd = os.open(
            d / "internal_errors", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(fd, "r+") as f:
            n = int(f.read() or 0) + 1
            f.seek(0)
            f.truncate()
            f.write(str(n))
        return float(n)
    except Exception:
        return -1.0


def run_hook(
    mode: str, cfg: dict[str, Any], host: str, overrides: dict[str, cbd.ProbeFn] | None = None
) -> int:
    """One Prolog/HealthCheck run: checks, policy, drain/resume, metrics.  Returns exit code."""
    rt = cfg.get("runtime", {})
    who = f"{host} job={os.environ.get('SLURM_JOB_ID', '-')} {mode}"
    use_syslog = bool(rt.get("syslog", True))
    to = float(rt.get("scontrol_timeout_s", 5))
    t0 = time.monotonic()
    rc = 0
    storm: list[str] = []
    storm_unknown: list[str] = []
    with cbd.node_state(rt.get("state_dir", "/var/lib/aegis-slurm"), host) as state:
        ctx = gpu_context(mode, os.environ, cbd.slurm_conf_text())
        verdicts = cbd.run(
            cfg, host, "light", overrides=overrides, state=state, context=ctx, commit_xids=False
        )
        passes = update_passes(state, verdicts)
        acts = actions_for(verdicts, cfg)
        # checks that are never auto-resumed (xid) first: theirs is the reason worth keeping
        acts["drain"].sort(key=lambda v: bool(config.policy(cfg, v.check).get("resume", True)))
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
        if acts["drain"]:
            rc, storm, storm_unknown, xid_acted = _drain(
                mode, cfg, host, state, acts["drain"], now, who, to, use_syslog
            )
        elif mode == "healthcheck":
            _maybe_resume(cfg, host, state, passes, to, use_syslog)
        if xid_acted:
            cbd.mark_xids_seen(state)
        dur = time.monotonic() - t0
        if rt.get("textfile_dir"):
            counters = {k: float(v) for k, v in state.get("counters", {}).items()}
            state_dir = Path(rt.get("state_dir", "/var/lib/aegis-slurm"))
            crash_file = state_dir / host / "internal_errors"
            with contextlib.suppress(OSError, ValueError):  # crashes counted outside the state
                counters["internal_crashes"] = float(crash_file.read_text() or 0)
            export.write_atomic(
                rt["textfile_dir"],
                f"aegis_cbd_{host}.prom",
                export.prom_text(
                    verdicts,
                    host=host,
                    profile="light",
                    duration_s=dur,
                    timestamp=time.time(),
                    counters=counters,
                    storm=storm,
                    guard_unavailable=storm_unknown,
                ),
            )
        state["last"] = {
            "verdicts": [v.to_dict() for v in verdicts],
            "rc": rc,
            "at": now.isoformat(timespec="seconds"),
            "mode": mode,
        }
    return rc


def _drain(
    mode: str,
    cfg: dict[str, Any],
    host: str,
    state: dict[str, Any],
    failing: list[Verdict],
    now: datetime,
    who: str,
    to: float,
    use_syslog: bool,
) -> tuple[int, list[str], list[str], bool]:
    """Drain path: guard, drain, second look at the guard.  Returns (rc, checks stopped by the
    guard, checks whose guard could not be evaluated, whether the xid verdict was acted on).

    Fails open: when slurmctld cannot be read (the guard cannot be evaluated) or the drain
    itself fails, nothing is drained, the exit code is 0, and it is counted and alerted.
    """
    want = EXIT_REQUEUE if mode == "prolog" else 0
    checks = [v.check for v in failing]
    guard = cfg.get("guard", {})
    try:
        nodes = slurm.show_nodes(to)
        if not nodes:
            raise ValueError("scontrol listed no nodes")
    except _SCONTROL_ERRORS as e:
        _bump(state, "guard_unavailable")
        export.log(
            "alert",
            f"{who} would drain for {', '.join(checks)} but cannot read node "
            f"states ({e}): drain-storm guard unavailable, NOT draining",
            use_syslog,
        )
        return 0, [], checks, False
    plan = slurm.plan_drain(failing, host, nodes, guard, now)
    if plan.action == "keep":
        export.log("warning", f"{who} {plan.detail}", use_syslog)
        owner = slurm.NodeInfo(host, "", plan.reason)
        return want, [], [], not owner.ours or owner.aegis_check() == "xid"
    if plan.action == "storm":
        _bump(state, "storm_guard_trips")
        export.log("alert", f"{who} drain-storm guard: NOT draining: {plan.detail}", use_syslog)
        return 0, checks, [], False
    try:
        slurm.drain(host, plan.reason, to)
    except _SCONTROL_ERRORS as e:
        _bump(state, "drain_failures")
        export.log("alert", f"{who} scontrol drain failed ({e}): NOT draining", use_syslog)
        return 0, [], [plan.check], False
    # second look: Prologs that failed at the same instant all passed the guard; the ones
    # ranked beyond it (reason time, then name) undo their own drain
    try:
        over, why = slurm.storm_overshoot(plan.check, host, slurm.show_nodes(to), guard, now)
    except _SCONTROL_ERRORS as e:
        over, why = False, ""
        export.log("warning", f"{who} drained; could not re-check the guard: {e}", use_syslog)
    if over:
        try:
            slurm.resume(host, to)
        except _SCONTROL_ERRORS as e:
            export.log("err", f"{who} drain-storm guard: undrain failed: {e}", use_syslog)
        else:
            _bump(state, "storm_guard_trips")
            export.log("alert", f"{who} drain-storm guard: undrained again: {why}", use_syslog)
            return 0, [plan.check], [], False
    _bump(state, "drains")
    state["drained"] = {
        "check": plan.check,
        "reason": plan.reason,
        "at": now.isoformat(timespec="seconds"),
    }
    export.log("crit", f"{who} drained: {plan.reason}", use_syslog)
    return want, [], [], plan.check == "xid"


def _maybe_resume(
    cfg: dict[str, Any],
    host: str,
    state: dict[str, Any],
    passes: dict[str, int],
    to: float,
    use_syslog: bool,
) -> None:
    try:
        me = next(
            (
                n
                for n in slurm.parse_scontrol_nodes(
                    probes.run_argv(["scontrol", "show", "node", "-o", host], to)
                )
                if n.name == host
            ),
            None,
        )
    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed):
        return
    if me is None or not me.ours:
        return
    check = me.aegis_check() or ""
    need = int(cfg.get("runtime", {}).get("resume_after_passes", 3))
    if slurm.should_resume(me, passes, bool(config.policy(cfg, check).get("resume", True)), need):
        try:
            slurm.resume(host, to)
        except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
            export.log("err", f"{host} scontrol resume failed: {e}", use_syslog)
            return
        _bump(state, "resumes")
        state.pop("drained", None)
        export.log(
            "notice",
            f"{host} resumed: {check} passed {passes.get(check)}x (was: {me.reason})",
            use_syslog,
        )


def _raw_config(path: str | None) -> dict[str, Any]:
    """The site TOML without validation, to find state_dir when loading the config failed."""
    try:
        import tomllib

        p = path or os.environ.get(config.ENV_VAR) or str(config.SITE_PATH)
        with open(p, "rb") as f:
            return tomllib.load(f)
    except Exception:
        return {}


def _start_watchdog(seconds: float, cfg: dict[str, Any], host: str) -> threading.Timer:
    """Last line of defence: kill every probe process group and exit 0 (fail open, counted)."""

    def fire() -> None:
        probes.kill_live_children()
        _count_internal_error(cfg, host)
        export.log("alert", f"{host} aegis watchdog fired after {seconds:g}s; exiting 0")
        os._exit(0)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return t


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="aegis-prolog", description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("prolog", "healthcheck"), default="prolog")
    ap.add_argument("--config", help="TOML (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/)")
    ap.add_argument("--print", action="store_true", help="print verdicts as JSON on stdout")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Process exit code: :data:`EXIT_DRAIN` when the node was drained in prolog mode, else 0."""
    cfg: dict[str, Any] = {}
    host = "?"
    args = argparse.Namespace(config=None)
    try:
        host = host_name()
        args = _parse_args(argv)
        cfg = config.load(args.config)
        rt = cfg.get("runtime", {})
        _start_watchdog(
            float(rt.get("watchdog_s", 25)) + float(rt.get("watchdog_grace_s", 5)), cfg, host
        )
        rc = run_hook(args.mode, cfg, host)
        if args.print:
            print(json.dumps({"host": host, "rc": rc}))
        return EXIT_DRAIN if rc == EXIT_REQUEUE else 0
    except (Exception, SystemExit) as e:  # SystemExit: argparse on bad arguments
        if isinstance(e, SystemExit) and e.code in (0, None):  # --help
            return 0
        n = _count_internal_error(cfg or _raw_config(args.config), host)
        export.log("err", f"{host} aegis internal error #{n:g} (exit 0, node untouched): {e!r}")
        print(f"aegis-prolog: internal error, ignored: {e!r}", file=sys.stderr)
        return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # don't wait for abandoned probe threads
