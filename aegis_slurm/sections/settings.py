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

Read with the one typed TOML loader the hooks use (:mod:`aegis_slurm.node.typedtoml`): unknown
tables or keys, wrongly typed and out-of-range values are a :class:`~aegis_slurm.errors.ConfigError`
(one line naming the file and the dotted key).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aegis_slurm.node import typedtoml as tt

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

#: The ``[analytics]`` keys a site may set; their types come from :data:`DEFAULTS` (the node
#: hooks' typed TOML mechanism, :mod:`aegis_slurm.node.typedtoml`), numbers are >= 0.
SITE_KEYS = (
    "min_gpus",
    "gpus_per_node",
    "restart_min",
    "queue_min",
    "ckpt_write_min",
    "ckpt_interval_min",
    "window_days",
)
#: What a default value cannot say: gpus_per_node defaults to "from the data" (no TOML value),
#: and an interval or a window of zero means nothing.
_DECLARED: dict[str, tt.Spec] = {
    "analytics.gpus_per_node": tt.Scalar(int, 0, True),
    "analytics.ckpt_interval_min": tt.Scalar(float, 0, True),
    "analytics.window_days": tt.Scalar(int, 0, True),
}


def site_schema() -> tt.Spec:
    """The site file's schema: one ``[analytics]`` table of :data:`SITE_KEYS`."""
    given = {k: getattr(DEFAULTS, k) for k in SITE_KEYS if getattr(DEFAULTS, k) is not None}
    return tt.derive({"analytics": given}, "", _DECLARED)


def load_settings(path: Path | None) -> Settings:
    """Settings from ``path`` (``[analytics]`` table), the site file when ``path`` is None and it
    exists, else :data:`DEFAULTS`.  Strict: unknown keys, wrong types and out-of-range values are
    one-line :class:`ConfigError` messages naming the file and the dotted key."""
    if path is None:
        if not SITE_CONFIG.is_file():
            return DEFAULTS
        path = SITE_CONFIG
    values = tt.load({}, site_schema(), path).get("analytics", {})
    return dataclasses.replace(DEFAULTS, **values)
