"""Precision, recall and detection delay of a detector on a labelled corpus of jobs.

A job's planted culprit flagged at or after its onset is a true positive; every other flagged node
(and the culprit flagged *before* the fault began) is a false positive.  Recall is over faulty jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from aegis_slurm.metrics.align import Aligned, align
from aegis_slurm.metrics.detect import Result
from aegis_slurm.simulate.metrics import Truth


@dataclass
class Score:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    delays: list[float] = field(default_factory=list)  # seconds, onset -> first_detected
    misses: list[str] = field(default_factory=list)  # fault kinds not found
    false: list[str] = field(default_factory=list)  # "<fault or healthy>:<metric>" of each FP

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def median_delay(self) -> float:
        return float(np.median(self.delays)) if self.delays else float("nan")

    def line(self) -> str:
        return (
            f"precision {self.precision:.3f}  recall {self.recall:.3f}  "
            f"median delay {self.median_delay / 60:.1f} min  (tp {self.tp}, fp {self.fp}, "
            f"fn {self.fn})"
        )


def score(jobs: Iterable[tuple[pl.DataFrame, Truth]], run: Callable[[Aligned], Result]) -> Score:
    s = Score()
    for df, truth in jobs:
        res = run(align(df))
        hit = False
        for f in res.faulty:
            if truth.node == f.node and truth.onset is not None and f.first_detected >= truth.onset:
                hit = True
                s.delays.append(f.first_detected - truth.onset)
            else:
                s.fp += 1
                s.false.append(f"{truth.fault or 'healthy'}:{f.metric}")
        if truth.node is not None:
            if hit:
                s.tp += 1
            else:
                s.fn += 1
                s.misses.append(str(truth.fault))
    return s


def learn_default_priority(seed: int = 1) -> dict[str, object]:
    """How ``priority_default.json`` was made: the tree fitted on the simulator's tuning split."""
    from aegis_slurm.metrics.catalog import DEFAULT_METRICS
    from aegis_slurm.metrics.priority import fit_priority
    from aegis_slurm.simulate.metrics import corpus

    metrics = [m.name for m in DEFAULT_METRICS]
    jobs = [(align(df), truth.onset) for df, truth in corpus(seed, 3, 8)]
    order, imp = fit_priority(jobs, metrics)
    return {
        "priority": order,
        "importance": {m: round(v, 4) for m, v in imp.items()},
        "learnt_from": f"aegis_slurm.metrics.evaluate.learn_default_priority(seed={seed})",
    }
