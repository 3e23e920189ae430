"""Hook configuration: typed, validated settings for the Prolog and the Epilog.  Stdlib only.

The default files (``cbd_default.toml``, ``epilog_default.toml``) are the one source of defaults
and of the schema (:mod:`aegis_slurm.node.typedtoml`): a key added there with its default is
known, typed and validated at once.  The site file (``/etc/aegis-slurm/cbd.toml`` or
``$AEGIS_CBD_CONFIG``) is merged over them; an unknown key or a wrong type is a
:class:`~aegis_slurm.errors.ConfigError` (the hooks fail open and say why, 10.6).  Only the
exceptions a default value cannot express are declared here (:data:`DECLARED`).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import sys
from pathlib import Path
from typing import Any

from aegis_slurm.errors import ConfigError
from aegis_slurm.node import typedtoml as tt

DEFAULT_PATH = Path(__file__).with_name("cbd_default.toml")
EPILOG_DEFAULT_PATH = Path(__file__).with_name("epilog_default.toml")
SITE_PATH = Path("/etc/aegis-slurm/cbd.toml")
ENV_VAR = "AEGIS_CBD_CONFIG"
ACTIONS = ("drain", "alert", "log", "ignore")
DEFAULT_STATE_DIR = "/var/lib/aegis-slurm"  # cbd_default.toml's; also where a broken config counts
_ARGV = tt.ListOf(tt.Scalar(str))

#: what the default values cannot say (dotted paths; ``[]`` = list element)
DECLARED: dict[str, tt.Spec] = {
    "expect.gpus": tt.Union((tt.Scalar(int, 0), tt.Choice(("slurm",)))),
    "expect.time_sync": tt.Choice(("require", "warn", "off")),
    "expect.xid_ignore": tt.ListOf(tt.Scalar(int, 0)),
    "expect.nics": tt.ListOf(tt.Scalar(str)),
    "expect.mounts": tt.ListOf(tt.Scalar(str)),
    "expect.services": tt.ListOf(tt.Scalar(str)),
    "expect.vbios_versions": tt.ListOf(tt.Scalar(str)),
    "expect.kernel_modules": tt.ListOf(tt.Scalar(str)),
    "expect.swap_max_gib": tt.Scalar(float, -1),  # -1 = any amount of swap
    "guard.max_drained_share": tt.Scalar(float, 0, False, 1),
    "epilog.ctld_spool_dirs": tt.ListOf(tt.Scalar(str)),
    "epilog.min_nodes_auto": tt.Scalar(int, 1),
    "loop_guard.ignore_exit_signals": tt.ListOf(tt.Scalar(int, 1, False, 255)),
    "probes": tt.MapOf(_ARGV),  # probe name -> argv
}


def _policy_row(defaults: dict[str, Any]) -> tt.Spec:
    row = tt.derive(defaults["policy"]["default"], "policy.default")
    assert isinstance(row, tt.Table)
    keys = dict(row.keys)
    for verdict in ("fail", "warn", "probe_error"):
        keys[verdict] = tt.Choice(ACTIONS)
    return tt.Table(keys)


@functools.cache
def defaults() -> dict[str, Any]:
    """The two default files merged (read once per process; they live in the package)."""
    return tt.merge(tt.read(DEFAULT_PATH), tt.read(EPILOG_DEFAULT_PATH))


@functools.cache
def schema() -> tt.Table:
    """The site file's schema, derived from :func:`defaults` plus :data:`DECLARED`."""
    d = defaults()
    declared = dict(DECLARED)
    declared["policy"] = tt.MapOf(_policy_row(d))  # policy.<check>: rows like policy.default
    base = tt.derive(d, "", declared)
    assert isinstance(base, tt.Table)
    expect = base.keys["expect"]
    assert isinstance(expect, tt.Table)
    # [[nodetype]]: any [expect] key, plus the hosts it matches and per-type probe argv
    nodetype = tt.Table(
        {**expect.keys, "match": tt.ListOf(tt.Scalar(str)), "probes": declared["probes"]}
    )
    lg = base.keys["loop_guard"]
    assert isinstance(lg, tt.Table)
    keys = dict(base.keys)
    keys["nodetype"] = tt.ListOf(nodetype)
    keys["loop_guard"] = tt.Table({**lg.keys, "partition": tt.MapOf(tt.Table(dict(lg.keys)))})
    return tt.Table(keys)


def site_path(path: str | os.PathLike[str] | None = None) -> Path | None:
    """``path``, else $AEGIS_CBD_CONFIG, else /etc/aegis-slurm/cbd.toml when it exists."""
    if path:
        return Path(path)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return SITE_PATH if SITE_PATH.exists() else None


def load(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Defaults merged with the validated site file (``path``, $AEGIS_CBD_CONFIG, /etc/...)."""
    return tt.load(defaults(), schema(), site_path(path))


def state_dir(cfg: dict[str, Any]) -> Path:
    """[runtime] state_dir of a loaded configuration (per-node and ctld state live below it)."""
    return Path(cfg.get("runtime", {}).get("state_dir", DEFAULT_STATE_DIR))


def raw_state_dir(argv: list[str] | None) -> str:
    """state_dir of the site file without validation (where to count a crash when the config
    or the arguments are broken); "" when unknown.  Called after the watchdog is armed."""
    args = sys.argv[1:] if argv is None else argv
    path = next((a.split("=", 1)[1] for a in args if a.startswith("--config=")), None)
    if path is None and "--config" in args[:-1]:
        path = args[args.index("--config") + 1]
    try:
        site = site_path(path)
        raw = tt.read(site) if site else {}
        value = raw.get("runtime", {}).get("state_dir", "")
        return value if isinstance(value, str) else ""
    except Exception:
        return ""


__all__ = ["ConfigError", "expand_hostlist", "expectations", "load", "policy"]


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm host list: ``node[1-3,7],gpu[01-02]-ib[1-2]`` -> names (10.18).

    python-hostlist's semantics, stdlib only: every bracket group of a name multiplies (the
    leftmost varies slowest), a range keeps the width of its low bound (``[009-11]`` ->
    ``009 010 011``), duplicates are dropped keeping the first.  A malformed expression
    (unbalanced bracket, reversed range, non-numeric range) raises ValueError.
    """
    out: list[str] = []
    for part in _split_top(expr):
        for name in _expand_one(part):
            out.append(name)
    return list(dict.fromkeys(out))


def _split_top(expr: str) -> list[str]:
    """Split on commas outside brackets."""
    parts, cur, depth = [], [], 0
    for c in expr:
        if c == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"nested bracket in host list {expr!r}")
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced bracket in host list {expr!r}")
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if depth:
        raise ValueError(f"unbalanced bracket in host list {expr!r}")
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def _expand_one(part: str) -> list[str]:
    m = re.match(r"^([^\[]*)\[([^\]]*)\](.*)$", part)
    if not m:
        return [part]
    pre, body, post = m.groups()
    items: list[str] = []
    for rng in body.split(","):
        lo, dash, hi = rng.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"bad range [{body}] in host list {part!r}")
        if not dash:
            items.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"reversed range [{body}] in host list {part!r}")
        items += [f"{i:0{len(lo)}d}" for i in range(int(lo), int(hi) + 1)]
    rest = _expand_one(post)
    return [f"{pre}{i}{r}" for i in items for r in rest]


def host_matches(host: str, pattern: str) -> bool:
    """NHC-style host mask: ``/regex/``, a Slurm node range ``gpu[01-16]``, or a glob."""
    if len(pattern) > 1 and pattern.startswith("/") and pattern.endswith("/"):
        return re.search(pattern[1:-1], host) is not None
    if "[" in pattern and re.search(r"\[\d", pattern):
        try:
            return host in expand_hostlist(pattern)
        except ValueError:
            return False
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


def _names(expr: str) -> list[str]:
    try:
        return expand_hostlist(expr)
    except ValueError:
        return []


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
        elif node in _names(m.group(1)):
            found = _gres_gpus(g.group(1)) if g else default
    return found
