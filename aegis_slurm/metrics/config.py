"""``minder.toml``: typed, validated settings; an unknown key or a wrong type is a ConfigError.

Sections (all optional): ``[prometheus]`` (:class:`~aegis_slurm.metrics.prometheus.PromConfig`
without ``url``), ``[detector]`` (:class:`~aegis_slurm.metrics.detect.Params`) with
``[detector.floors]`` (metric = a site's evidence floor: :func:`check_floors`), ``[watch]``
(:class:`WatchConfig`) and ``[watch.guard]`` (the drain-storm guard, as in cbd.toml).
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from math import isfinite
from pathlib import Path
from typing import Any

from aegis_slurm.errors import ConfigError
from aegis_slurm.metrics.catalog import BY_NAME
from aegis_slurm.metrics.detect import FLOOR_SCALES, Params
from aegis_slurm.metrics.prometheus import PromConfig


@dataclass(frozen=True)
class WatchConfig:
    interval: float = 60.0  # seconds between passes
    lookback: float = 600.0  # seconds of metrics each pass reads (at most the job's age)
    min_nodes: int = 3  # a job needs this many nodes to have peers to compare with
    drain: bool = False  # drain a persistent outlier after its job (through the storm guard)
    syslog: bool = True
    textfile_dir: str = "/var/lib/prometheus/node-exporter"
    state_file: str = "/var/lib/aegis-slurm/minder-watch.json"
    slurm_timeout: float = 30.0
    guard: dict[str, float] = field(
        default_factory=lambda: {
            "window_minutes": 60.0,
            "max_drained_share": 0.05,
            "max_drained_nodes": 3.0,
        }
    )


@dataclass(frozen=True)
class MinderConfig:
    prometheus: dict[str, Any] = field(default_factory=dict)
    detector: Params = field(default_factory=Params)
    watch: WatchConfig = field(default_factory=WatchConfig)

    def prom(self, url: str) -> PromConfig:
        return PromConfig(url=url, **self.prometheus)


_GUARD_KEYS = {"window_minutes", "max_drained_share", "max_drained_nodes"}


def check_floors(floors: object) -> dict[str, float]:
    """A site's ``[detector.floors]``, checked: each key a catalog metric on a floor scale
    (:data:`~aegis_slurm.metrics.detect.FLOOR_SCALES`), each value a finite number from 0 to
    under the scale's top ``hi`` (events; up to the shipped floor where that is the top:
    NVLink CRC errors count from their full scale) or between 0 and ``hi`` exclusive (decades,
    a logarithm's floor); else ConfigError."""
    if not isinstance(floors, dict):
        raise ConfigError(f"[detector.floors] must be a table of metric = floor, got {floors!r}")
    out = {}
    for metric, value in floors.items():
        spec = BY_NAME.get(metric)
        if spec is None or spec.scale not in FLOOR_SCALES:
            known = sorted(m.name for m in BY_NAME.values() if m.scale in FLOOR_SCALES)
            raise ConfigError(
                f"[detector.floors] {metric!r} has no evidence floor; those that do: "
                + ", ".join(known)
            )
        logarithmic = spec.scale == "decades"
        ok = isinstance(value, int | float) and not isinstance(value, bool) and isfinite(value)
        top = spec.hi or 0.0
        if ok and logarithmic:
            ok = 0 < value < top
        elif ok:  # at or above the scale's top (its own floor aside) no reading is evidence:
            # a PSI share's floor written as the percent /proc/pressure prints (10 for 10 %)
            # would switch the metric off (session-13 review)
            ok = value >= 0 and (value < top or value <= (spec.lo or 0.0))
        if not ok:
            bound = f"> 0 and < {top:g}" if logarithmic else f">= 0 and < {top:g}"
            raise ConfigError(
                f"[detector.floors] {metric} must be a finite number {bound}, got {value!r}"
            )
        out[metric] = float(value)
    return out


def _typed(cls: type, section: str, raw: dict[str, Any], skip: set[str] = frozenset()) -> dict:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.name not in skip}
    out = {}
    for k, v in raw.items():
        if k not in fields:
            raise ConfigError(f"[{section}] unknown key {k!r}; known: {', '.join(sorted(fields))}")
        default = getattr(cls(**({"url": "http://x"} if cls is PromConfig else {})), k)
        want = type(default)
        ok = isinstance(v, want) or (
            want is float and isinstance(v, int) and not isinstance(v, bool)
        )
        if not ok:
            raise ConfigError(f"[{section}] {k} must be {want.__name__}, got {v!r}")
        out[k] = float(v) if want is float else v
    return out


def load_config(path: str | Path | None) -> MinderConfig:
    """Defaults, overridden by the TOML file at ``path`` (None: defaults only)."""
    if path is None:
        return MinderConfig()
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from e
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML ({e})") from e
    unknown = set(raw) - {"prometheus", "detector", "watch"}
    if unknown:
        raise ConfigError(f"{path}: unknown section(s) {', '.join(sorted(unknown))}")
    prom = _typed(PromConfig, "prometheus", raw.get("prometheus", {}), skip={"url"})
    PromConfig(url="http://localhost", **prom)  # validates the templates now
    detector = dict(raw.get("detector", {}))
    floors = check_floors(detector.pop("floors", {}))
    params = Params(**_typed(Params, "detector", detector, skip={"floors"}), floors=floors)
    w = dict(raw.get("watch", {}))
    guard = w.pop("guard", {})
    bad = set(guard) - _GUARD_KEYS
    if bad or not all(isinstance(v, int | float) for v in guard.values()):
        raise ConfigError(f"[watch.guard] keys are {', '.join(sorted(_GUARD_KEYS))} (numbers)")
    watch = WatchConfig(**_typed(WatchConfig, "watch", w, skip={"guard"}))
    # a zero interval spins the loop; a zero lookback or timeout reads nothing and acts on it
    for key in ("interval", "lookback", "slurm_timeout"):
        if getattr(watch, key) <= 0:
            raise ConfigError(f"[watch] {key} must be > 0, got {getattr(watch, key)}")
    if watch.min_nodes < 2:
        raise ConfigError(
            f"[watch] min_nodes must be >= 2 (a node needs peers), got {watch.min_nodes}"
        )
    if guard:
        watch = dataclasses.replace(watch, guard={**watch.guard, **guard})
    return MinderConfig(prom, params, watch)
