"""Slurm hook entry point: ``python3 -m aegis_slurm.node.prolog [--mode prolog|healthcheck]``.

Standard library only, no click.  ``prolog`` mode (slurm.conf ``Prolog=``): run the light CBD;
if a check whose policy is "drain" fails, drain this node with ``aegis: <check>: <evidence>``
(unless someone else's reason is already there, or the drain-storm guard tripped) and exit 1 so
Slurm requeues the job.  ``healthcheck`` mode (``HealthCheckProgram=`` or cron): same checks,
drains the same way but always exits 0, and resumes nodes aegis drained once the draining
check has passed ``resume_after_passes`` times in a row.

Any internal error is caught, logged to syslog, counted in the textfile metric, and the exit
code is 0: a bug in aegis never drains a node.
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

EXIT_REQUEUE = 1


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


def _bump(state: dict[str, Any], name: str, n: int = 1) -> None:
    c = state.setdefault("counters", {})
    c[name] = c.get(name, 0) + n


def _count_internal_error(cfg: dict[str, Any], host: str) -> float:
    """Best-effort persistent count of internal errors (separate file: state may be broken)."""
    try:
        d = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm")) / host
        d.mkdir(parents=True, exist_ok=True)
        p = d / "internal_errors"
        n = int(p.read_text() or 0) + 1 if p.exists() else 1
        p.write_text(str(n))
        return float(n)
    except Exception:
        return -1.0


def run_hook(mode: str, cfg: dict[str, Any], host: str,
             overrides: dict[str, cbd.ProbeFn] | None = None) -> int:
    """One Prolog/HealthCheck run: checks, policy, drain/resume, metrics.  Returns exit code."""
    rt = cfg.get("runtime", {})
    who = f"{host} job={os.environ.get('SLURM_JOB_ID', '-')} {mode}"
    use_syslog = bool(rt.get("syslog", True))
    to = float(rt.get("scontrol_timeout_s", 5))
    t0 = time.monotonic()
    rc = 0
    storm: list[str] = []
    with cbd.node_state(rt.get("state_dir", "/var/lib/aegis-slurm"), host) as state:
        verdicts = cbd.run(cfg, host, "light", overrides=overrides, state=state)
        passes = update_passes(state, verdicts)
        acts = actions_for(verdicts, cfg)
        _bump(state, "runs")
        _bump(state, "probe_errors", sum(v.state == PROBE_ERROR for v in verdicts))
        _bump(state, "internal_errors", sum(v.internal for v in verdicts))
        for v in acts["log"] + acts["alert"]:
            export.log("alert" if v in acts["alert"] else "warning",
                       f"{who} {v.check} {v.state}: {v.evidence}", use_syslog)
        now = datetime.now()
        if acts["drain"]:
            rc = EXIT_REQUEUE if mode == "prolog" else 0
            try:
                nodes = slurm.show_nodes(to)
            except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
                nodes = []
                export.log("err", f"{who} cannot read node states ({e}); "
                           "leaving the drain to Slurm's Prolog-error handling", use_syslog)
            if nodes:
                plan = slurm.plan_drain(acts["drain"], host, nodes, cfg.get("guard", {}), now)
                if plan.action == "drain":
                    try:
                        slurm.drain(host, plan.reason, to)
                    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
                        export.log("err", f"{who} scontrol drain failed: {e}", use_syslog)
                    _bump(state, "drains")
                    state["drained"] = {"check": plan.check, "reason": plan.reason,
                                        "at": now.isoformat(timespec="seconds")}
                    export.log("crit", f"{who} drained: {plan.reason}", use_syslog)
                elif plan.action == "storm":
                    rc = 0
                    storm.append(plan.check)
                    _bump(state, "storm_guard_trips")
                    export.log("alert", f"{who} drain-storm guard: NOT draining: "
                               f"{plan.detail}", use_syslog)
                else:
                    export.log("warning", f"{who} {plan.detail}", use_syslog)
        elif mode == "healthcheck":
            _maybe_resume(cfg, host, state, passes, to, use_syslog)
        dur = time.monotonic() - t0
        if rt.get("textfile_dir"):
            counters = {k: float(v) for k, v in state.get("counters", {}).items()}
            state_dir = Path(rt.get("state_dir", "/var/lib/aegis-slurm"))
            crash_file = state_dir / host / "internal_errors"
            with contextlib.suppress(OSError, ValueError):  # crashes counted outside the state
                counters["internal_crashes"] = float(crash_file.read_text() or 0)
            export.write_atomic(rt["textfile_dir"], f"aegis_cbd_{host}.prom", export.prom_text(
                verdicts, host=host, profile="light", duration_s=dur, timestamp=time.time(),
                counters=counters, storm=storm))
        state["last"] = {"verdicts": [v.to_dict() for v in verdicts], "rc": rc,
                         "at": now.isoformat(timespec="seconds"), "mode": mode}
    return rc


def _maybe_resume(cfg: dict[str, Any], host: str, state: dict[str, Any],
                  passes: dict[str, int], to: float, use_syslog: bool) -> None:
    try:
        me = next((n for n in slurm.parse_scontrol_nodes(probes.run_argv(
            ["scontrol", "show", "node", "-o", host], to)) if n.name == host), None)
    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed):
        return
    if me is None or not me.ours:
        return
    check = me.aegis_check() or ""
    need = int(cfg.get("runtime", {}).get("resume_after_passes", 3))
    if slurm.should_resume(me, passes, bool(config.policy(cfg, check).get("resume", True)),
                           need):
        try:
            slurm.resume(host, to)
        except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
            export.log("err", f"{host} scontrol resume failed: {e}", use_syslog)
            return
        _bump(state, "resumes")
        state.pop("drained", None)
        export.log("notice", f"{host} resumed: {check} passed {passes.get(check)}x "
                   f"(was: {me.reason})", use_syslog)


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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="aegis-prolog", description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("prolog", "healthcheck"), default="prolog")
    ap.add_argument("--config", help="TOML (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/)")
    ap.add_argument("--print", action="store_true", help="print verdicts as JSON on stdout")
    args = ap.parse_args(argv)
    cfg: dict[str, Any] = {}
    host = host_name()
    try:
        cfg = config.load(args.config)
        rt = cfg.get("runtime", {})
        _start_watchdog(float(rt.get("watchdog_s", 25)) + float(rt.get("watchdog_grace_s", 5)),
                        cfg, host)
        rc = run_hook(args.mode, cfg, host)
        if args.print:
            print(json.dumps({"host": host, "rc": rc}))
        return rc
    except Exception as e:
        n = _count_internal_error(cfg or _raw_config(args.config), host)
        export.log("err", f"{host} aegis internal error #{n:g} (exit 0, node untouched): {e!r}")
        print(f"aegis-prolog: internal error, ignored: {e!r}", file=sys.stderr)
        return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # don't wait for abandoned probe threads
