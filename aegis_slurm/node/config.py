"""CBD configuration: defaults (``cbd_default.toml``) merged with the site file, per node type."""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from pathlib import Path
from typing import Any

DEFAULT_PATH = Path(__file__).with_name("cbd_default.toml")
SITE_PATH = Path("/etc/aegis-slurm/cbd.toml")
ENV_VAR = "AEGIS_CBD_CONFIG"
ACTIONS = ("drain", "alert", "log", "ignore")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def load(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Defaults merged with ``path`` (or $AEGIS_CBD_CONFIG, or /etc/aegis-slurm/cbd.toml)."""
    with DEFAULT_PATH.open("rb") as f:
        cfg = tomllib.load(f)
    site = (
        Path(path)
        if path
        else Path(os.environ[ENV_VAR])
        if os.environ.get(ENV_VAR)
        else (SITE_PATH if SITE_PATH.exists() else None)
    )
    if site is not None:
        with site.open("rb") as f:
            cfg = _merge(cfg, tomllib.load(f))
    for check, pol in cfg.get("policy", {}).items():
        for verdict in ("fail", "warn", "probe_error"):
            if verdict in pol and pol[verdict] not in ACTIONS:
                raise ValueError(f"policy.{check}.{verdict} = {pol[verdict]!r}; use {ACTIONS}")
    return cfg


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm-style host list: ``node[1-3,7],gpu[001-002]`` -> names."""
    out: list[str] = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?[^,]*", expr):
        m = re.match(r"^(.*?)\[([^\]]*)\](.*)$", part)
        if not m:
            out.append(part)
            continue
        pre, body, post = m.groups()
        for rng in body.split(","):
            lo, _, hi = rng.partition("-")
            if hi:
                out += [f"{pre}{i:0{len(lo)}d}{post}" for i in range(int(lo), int(hi) + 1)]
            else:
                out.append(f"{pre}{lo}{post}")
    return out


def host_matches(host: str, pattern: str) -> bool:
    """NHC-style host mask: ``/regex/``, a Slurm node range ``gpu[01-16]``, or a glob."""
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return re.search(pattern[1:-1], host) is not None
    if "[" in pattern and re.search(r"\[\d", pattern):
        return host in expand_hostlist(pattern)
    return fnmatch.fnmatchcase(host, pattern)


def expectations(cfg: dict[str, Any], host: str) -> dict[str, Any]:
    """``[expect]`` overridden by every ``[[nodetype]]`` whose ``match`` covers ``host``."""
    exp = dict(cfg.get("expect", {}))
    for nt in cfg.get("nodetype", []):
        if any(host_matches(host, p) for p in nt.get("match", [])):
            exp.update({k: v for k, v in nt.items() if k != "match"})
    return exp


def policy(cfg: dict[str, Any], check: str) -> dict[str, Any]:
    """Policy row for ``check``: ``policy.default`` overridden by ``policy.<check>``."""
    pol = cfg.get("policy", {})
    return {**pol.get("default", {}), **pol.get(check, {})}


def slurm_conf_values(slurm_conf_text: str, key: str) -> list[str]:
    """Upper-cased comma-separated values of the last ``key=`` line in slurm.conf ([] if none)."""
    vals: list[str] = []
    for line in slurm_conf_text.splitlines():
        m = re.match(rf"(?i)\s*{re.escape(key)}\s*=\s*(\S+)", line.split("#", 1)[0])
        if m:
            vals = [v.strip().upper() for v in m.group(1).split(",") if v.strip()]
    return vals


def _gres_gpus(gres: str) -> int:
    total = 0
    for item in gres.split(","):
        f = item.split("(")[0].split(":")
        if f[0] == "gpu":
            total += int(f[-1]) if len(f) > 1 and f[-1].isdigit() else 1
    return total


def slurm_gpu_count(slurm_conf_text: str, node: str) -> int | None:
    """GPU count Slurm believes ``node`` has, from ``Gres=gpu[:type]:N`` on its NodeName line.

    Walks the file in order, as slurmctld does: a ``NodeName=DEFAULT Gres=...`` line applies
    only to the node lines *after* it (until the next DEFAULT changes it); a node line's own
    ``Gres=`` wins.  None when the node is not listed or has no Gres at all.
    """
    default: int | None = None
    found = None
    for line in slurm_conf_text.splitlines():
        line = line.split("#", 1)[0].strip()
        m = re.match(r"(?i)NodeName=(\S+)", line)
        if not m:
            continue
        g = re.search(r"(?i)\bGres=(\S+)", line)
        if m.group(1).upper() == "DEFAULT":
            if g:
                default = _gres_gpus(g.group(1))
        elif node in expand_hostlist(m.group(1)):
            found = _gres_gpus(g.group(1)) if g else default
    return found
