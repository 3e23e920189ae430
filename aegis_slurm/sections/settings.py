"""The defaults every published section uses, and the site config that may change them.

One place: the analytics commands, the report, ``demo`` and the notebooks read their defaults
from :data:`DEFAULTS` (or a :class:`Settings` loaded from ``aegis.toml``), so a section printed by
a command and the same section on the page are computed with the same parameters.

Site config (``--config PATH``, else ``/etc/aegis-slurm/aegis.toml`` when it exists)::

    [analytics]
    min_gpus = 128            # r_f population: runs with MORE than this many GPUs
    gpus_per_node = 8         # omit: taken from the data (AllocTRES GPUs / NNodes)
    restart_min = 5.0         # u0, minutes
    queue_min = 0.0           # expected queue wait after an interruption, minutes
    ckpt_write_min = 0.0      # blocking checkpoint write, minutes
    ckpt_interval_min = 60.0  # the interval the page evaluates E[ETTR] at

Unknown tables or keys and wrongly typed values are a :class:`~aegis_slurm.errors.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_slurm.errors import ConfigError

SITE_CONFIG = Path("/etc/aegis-slurm/aegis.toml")


@dataclass(frozen=True)
class Settings:
    """Parameters of the published sections (HPCA'25 values unless the site says otherwise)."""

    min_gpus: int = 128  # HPCA'25 §V: r_f over jobs with more than 128 GPUs
    window_days: int = 30  # rolling r_f window (HPCA'25 Fig. 5)
    gpus_per_node: int | None = None  # None: from the data (AllocTRES GPUs / NNodes)
    restart_min: float = 5.0  # u0 (HPCA'25 §V)
    queue_min: float = 0.0
    ckpt_write_min: float = 0.0  # non-blocking writes
    ckpt_interval_min: float = 60.0  # Δt_cp (HPCA'25 §V)
    project_sizes: tuple[int, ...] = (16384, 131072)
    mttf_method: str = "chi2"
    loop_min_failed_runs: int = 3
    loop_window_hours: float = 24.0
    loop_short_min: float = 30.0
    lemon_window_days: int = 28
    lemon_min_node_fails: int = 3
    measured_min_hours: float = 24.0
    #: The page's "largest common job size" needs this many runs in a GPU bucket.
    common_size_min_runs: int = 10
    #: A node with this many aegis drains in the period is worth a look.
    drain_watch: int = 2

    def public(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


DEFAULTS = Settings()

_TOML_KEYS: dict[str, tuple[str, type | tuple[type, ...]]] = {
    "min_gpus": ("min_gpus", int),
    "gpus_per_node": ("gpus_per_node", int),
    "restart_min": ("restart_min", (int, float)),
    "queue_min": ("queue_min", (int, float)),
    "ckpt_write_min": ("ckpt_write_min", (int, float)),
    "ckpt_interval_min": ("ckpt_interval_min", (int, float)),
    "window_days": ("window_days", int),
}


def load_settings(path: Path | None) -> Settings:
    """Settings from ``path`` (``[analytics]`` table), the site file when ``path`` is None and it
    exists, else :data:`DEFAULTS`.  Strict: unknown keys, wrong types and out-of-range values are
    errors naming the key."""
    if path is None:
        if not SITE_CONFIG.is_file():
            return DEFAULTS
        path = SITE_CONFIG
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    unknown = set(data) - {"analytics"}
    if unknown:
        raise ConfigError(f"{path}: unknown table(s) {sorted(unknown)}; expected [analytics]")
    table = data.get("analytics", {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: analytics must be a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in _TOML_KEYS:
            raise ConfigError(
                f"{path}: unknown key analytics.{key}; known: {', '.join(sorted(_TOML_KEYS))}"
            )
        field, typ = _TOML_KEYS[key]
        if isinstance(value, bool) or not isinstance(value, typ):
            raise ConfigError(f"{path}: analytics.{key} must be a number, got {value!r}")
        if value < 0 or (
            key in ("gpus_per_node", "ckpt_interval_min", "window_days") and not value
        ):
            raise ConfigError(f"{path}: analytics.{key} must be positive, got {value!r}")
        values[field] = int(value) if typ is int else float(value)
    return dataclasses.replace(DEFAULTS, **values)
