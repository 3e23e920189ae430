"""Metric priority, learnt as Minder does: a decision tree over max Z-scores of labelled windows.

Each window of a job gives one instance: for every metric ``j``, ``max_i Z_ij`` over the nodes
``i`` of the node's distance to its peers in that window (Minder §4.2).  A window is labelled
faulty when it lies after the onset of a labelled fault of that job.  The tree's feature
importances order the metrics; metrics the tree did not use keep their catalog order after them.

The shipped default (``priority_default.json``) was learnt this way from the simulator's tuning
split (:func:`aegis_slurm.simulate.metrics.corpus` seed 1); a site re-learns it from its own
labelled history with ``aegis-slurm minder fit``.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from importlib import resources
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.errors import ConfigError, InputError
from aegis_slurm.metrics.align import Aligned, align
from aegis_slurm.metrics.catalog import DEFAULT_METRICS
from aegis_slurm.metrics.detect import Params, deviation, window_distance


def default_priority() -> list[str]:
    """The shipped priority order."""
    text = resources.files("aegis_slurm.metrics").joinpath("priority_default.json").read_text()
    return load_priority_text(text, "the shipped priority_default.json")


def load_priority(path: str | Path) -> list[str]:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"cannot read priority file {path}: {e.strerror or e}") from e
    return load_priority_text(text, str(path))


def load_priority_text(text: str, where: str) -> list[str]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"{where}: not JSON ({e.msg} at line {e.lineno})") from e
    unknown = set(doc) - {"priority", "importance", "learnt_from"} if isinstance(doc, dict) else {}
    if not isinstance(doc, dict) or unknown:
        raise ConfigError(f"{where}: expected an object with key 'priority' (unknown: {unknown})")
    pri = doc.get("priority")
    if not isinstance(pri, list) or not pri or not all(isinstance(m, str) for m in pri):
        raise ConfigError(f"{where}: 'priority' must be a non-empty list of metric names")
    return pri


def window_features(
    aligned: Aligned, metrics: list[str], p: Params | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """One row per judged window: ``max_i Z_ij`` for each metric ``j``; and the window end times.

    Windows do not overlap (one every ``p.window`` seconds) so neighbouring instances are not
    copies of each other.
    """
    p = p or Params()
    w = max(round(p.window / aligned.step), 1)
    cols = []
    for m in metrics:
        if m not in aligned.data:
            cols.append(np.zeros(aligned.times.size))
            continue
        dev, _, _ = deviation(aligned, m, p)
        d = window_distance(dev, w)
        with np.errstate(all="ignore"):
            z = (d - d.mean(axis=0)) / d.std(axis=0)
        cols.append(np.nan_to_num(np.nanmax(np.where(np.isnan(z), -np.inf, z), axis=0), neginf=0))
    F = np.stack(cols, axis=1)
    idx = np.arange(w - 1, aligned.times.size, w)
    warm = aligned.times[idx] >= aligned.times[0] + p.warmup
    idx = idx[warm]
    return F[idx], aligned.times[idx]


def fit_priority(
    labelled: Iterable[tuple[Aligned, float | None]], metrics: list[str], seed: int = 0
) -> tuple[list[str], dict[str, float]]:
    """Learn the metric order from jobs labelled with their fault onset (None: healthy)."""
    from sklearn.tree import DecisionTreeClassifier  # the `minder` extra

    Fs, ys = [], []
    for aligned, onset in labelled:
        F, t = window_features(aligned, metrics)
        Fs.append(F)
        ys.append(t >= onset if onset is not None else np.zeros(t.size, bool))
    if not Fs:
        raise InputError("no labelled job to learn the metric priority from")
    X, y = np.concatenate(Fs), np.concatenate(ys)
    if y.all() or not y.any():
        raise InputError(
            "the labelled history needs both faulty and healthy windows to learn a priority"
        )
    tree = DecisionTreeClassifier(max_depth=4, class_weight="balanced", random_state=seed)
    tree.fit(X, y)
    imp = dict(zip(metrics, (float(v) for v in tree.feature_importances_), strict=True))
    order = sorted(metrics, key=lambda m: (-imp[m], metrics.index(m)))
    return order, imp


def read_labels(path: str | Path) -> list[tuple[Path, str | None, float | None]]:
    """A labels CSV: ``file,node,onset`` (onset ISO-8601 UTC; node and onset empty: healthy)."""
    base = Path(path).parent
    out = []
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            header = reader.fieldnames or []
    except OSError as e:
        raise InputError(f"cannot read labels {path}: {e.strerror or e}") from e
    except (UnicodeDecodeError, csv.Error) as e:
        raise InputError(f"labels {path} is not a UTF-8 CSV ({type(e).__name__})") from e
    missing = [c for c in ("file", "node", "onset") if c not in header]
    if rows and missing:
        raise InputError(f"labels {path} lacks column(s) {', '.join(missing)} (file,node,onset)")
    for n, row in enumerate(rows, start=2):
        if not row.get("file"):
            raise InputError(f"{path}:{n}: 'file' is empty (columns: file,node,onset)")
        onset = None
        if row.get("onset"):
            try:
                onset = pl.Series([row["onset"]]).str.to_datetime(time_zone="UTC")[0].timestamp()
            except Exception as e:
                raise InputError(f"{path}:{n}: onset {row['onset']!r} is not ISO-8601") from e
        out.append((base / row["file"], row.get("node") or None, onset))
    return out


def fit_from_labels(path: str | Path) -> dict[str, object]:
    """``aegis-slurm minder fit``: the priority document learnt from a labels CSV."""
    from aegis_slurm.metrics.table import read_table

    metrics = [m.name for m in DEFAULT_METRICS]
    jobs = [(align(read_table(f)), onset) for f, _node, onset in read_labels(path)]
    order, imp = fit_priority(jobs, metrics)
    return {"priority": order, "importance": imp, "learnt_from": str(path)}
