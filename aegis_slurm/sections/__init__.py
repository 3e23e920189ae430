"""The sections layer: between the metrics (``aegis_slurm.analytics``) and everything that prints
them (the analytics commands, ``report``, ``demo``, ``check`` and the notebooks).

* :mod:`.settings` – the defaults and the site config (``aegis.toml``);
* :mod:`.inputs` – load runs, node events and signals once for a period (with context);
* :mod:`.compute` – each published section as a dict; the commands' ``--json`` and
  ``report.json`` hold these very dicts;
* :func:`clean` – the JSON form both write (ISO 8601 times, inf/NaN as null).
"""

from __future__ import annotations

import math
from datetime import date, datetime
from typing import Any

from aegis_slurm.sections.inputs import Inputs, Month, Period, load_inputs, read_signal_table
from aegis_slurm.sections.settings import DEFAULTS, Settings, load_settings

__all__ = [
    "DEFAULTS",
    "Inputs",
    "Month",
    "Period",
    "Settings",
    "clean",
    "load_inputs",
    "load_settings",
    "read_signal_table",
]


def clean(o: Any) -> Any:
    """JSON-safe: datetimes to ISO 8601, inf/NaN to null, tuples to lists."""
    if isinstance(o, dict):
        return {str(k): clean(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [clean(v) for v in o]
    if isinstance(o, float) and (math.isinf(o) or math.isnan(o)):
        return None
    if isinstance(o, datetime | date):
        return o.isoformat()
    return o
