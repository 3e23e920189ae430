"""Policy: what a verdict does (drain/alert/log/ignore) and the resume hysteresis.  Pure, stdlib.

Used by the Prolog/HealthCheck hook, the Epilog and ``aegis-slurm cbd``; the table itself is
``[policy.*]`` in ``cbd_default.toml`` (merged with the site file, see :mod:`.config`).
"""

from __future__ import annotations

import os
from typing import Any

from aegis_slurm.node import config
from aegis_slurm.node.verdict import FAIL, PASS, PROBE_ERROR, WARN, Verdict


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


def drain_first(failing: list[Verdict], cfg: dict[str, Any]) -> list[Verdict]:
    """Checks that are never auto-resumed (xid) first: theirs is the reason worth keeping."""
    return sorted(failing, key=lambda v: bool(config.policy(cfg, v.check).get("resume", True)))
