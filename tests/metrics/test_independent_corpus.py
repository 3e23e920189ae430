"""Minder, λ+2δ and the z-score baseline on corpus v1 (independent_corpus.py).

Corpus v1 was written without reading the simulator, and its first run (shipped Minder 0.463 /
0.704 / 3.8 min) was an independent measurement.  The detector was then reworked after its
misses were analysed (docs/minder.md, "Evaluation"): v1 is **no longer independent**; these
figures are a regression guard, rounded down from what was observed, not evidence of accuracy.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.detect import Params, detect, lambda_2delta, zscore_baseline
from aegis_slurm.metrics.priority import default_priority

from .independent_corpus import corpus, job


@dataclass
class Tally:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    fp_jobs: int = 0
    idle_flagged: int = 0
    delays: list[float] = field(default_factory=list)
    missed: Counter = field(default_factory=Counter)
    false: Counter = field(default_factory=Counter)

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def median_delay_min(self) -> float:
        return float(np.median(self.delays)) / 60 if self.delays else float("nan")

    def line(self) -> str:
        return (
            f"precision {self.precision:.3f} recall {self.recall:.3f} "
            f"median delay {self.median_delay_min:.1f} min (tp {self.tp} fp {self.fp} fn {self.fn}"
            f", healthy jobs with a false alarm {self.fp_jobs}, idle-GPU nodes flagged "
            f"{self.idle_flagged}) missed {dict(self.missed)} false {dict(self.false)}"
        )


DETECTORS = {
    "minder": lambda a, pri: detect(a, pri, Params()),
    "lambda2delta": lambda a, pri: lambda_2delta(a, pri),
    "zscore": lambda a, pri: zscore_baseline(a, pri),
    "minder-no-reference": lambda a, pri: detect(a, pri, Params(baseline=0.0)),
    # the scales' own effect, like for like without corroboration (which no longer convicts v1's
    # throughput-only NVLink faults whatever the scale)
    "minder-uncorroborated": lambda a, pri: detect(a, pri, Params(corroborate=False)),
    "minder-physical-scales": lambda a, pri: detect(
        a, pri, Params(scales=False, corroborate=False)
    ),
}


def evaluate(jobs: list[tuple[str, int]]) -> dict[str, Tally]:
    pri = default_priority()
    out = {name: Tally() for name in DETECTORS}
    for kind, seed in jobs:
        df, label = job(seed, kind)
        aligned = align(df)
        for name, run in DETECTORS.items():
            t = out[name]
            res = run(aligned, pri)
            hit, false = False, 0
            for f in res.faulty:
                if kind == "idle_gpu":
                    t.idle_flagged += f.node == label.node
                    false += f.node != label.node
                elif f.node == label.node and label.onset and f.first_detected >= label.onset:
                    hit = True
                    t.delays.append(f.first_detected - label.onset)
                else:
                    false += 1
                    t.false[f"{kind}:{f.metric}"] += 1
            t.fp += false
            t.fp_jobs += kind == "healthy" and false > 0
            if label.onset is not None:
                t.tp += hit
                t.fn += not hit
                if not hit:
                    t.missed[kind] += 1
    return out


@pytest.fixture(scope="module")
def tallies() -> dict[str, Tally]:
    return evaluate(corpus())


def test_minder_on_the_independent_corpus(tallies: dict[str, Tally]) -> None:
    t = tallies["minder"]
    print("minder", t.line())
    assert t.precision >= FLOOR["minder"][0] and t.recall >= FLOOR["minder"][1]
    assert t.median_delay_min <= FLOOR["minder"][2]


def test_the_per_node_reference_removes_offsets_and_idle_by_design_gpus(
    tallies: dict[str, Tally],
) -> None:
    m, b = tallies["minder"], tallies["minder-no-reference"]
    print("minder-no-reference", b.line())
    # what it is for: fewer healthy jobs with a false alarm, no idle-by-design GPU flagged
    assert m.fp_jobs < b.fp_jobs and m.idle_flagged < b.idle_flagged


def test_the_per_metric_scales_find_the_small_faults(tallies: dict[str, Tally]) -> None:
    m, p = tallies["minder-uncorroborated"], tallies["minder-physical-scales"]
    print("minder-physical-scales", p.line())
    # PCIe downgrade (replays), NVLink at 30-70 % on one GPU: invisible on 0..32 GB/s, 0..300
    # GB/s and 0..50 replays/s
    assert m.recall > p.recall
    for kind in ("pcie_downgrade", "nvlink_errors"):
        assert m.missed[kind] < p.missed[kind]


def test_minder_against_the_baselines(tallies: dict[str, Tally]) -> None:
    for name in ("lambda2delta", "zscore"):
        print(name, tallies[name].line())
    z, m = tallies["zscore"], tallies["minder"]
    # the comparison observed: Minder's similarity + continuity raises fewer false alarms
    assert m.fp <= z.fp


#: observed (seed 2027, 55 jobs).  First run, the detector as first shipped: 0.463 / 0.704 /
#: 3.8 min.  After the rework (docs/minder.md, "Accuracy"): minder 1.000 / 0.889 / 4.0 min (the
#: three one-IB-port-of-eight jobs missed: v1 carries only the summed port counter); λ+2δ 0.218 /
#: 0.815 / 10.1 min; z-score 0.191 / 0.667 / 4.0 min.  Floors: a little under what was seen
#: (precision, recall, median delay in minutes).  Lowered on purpose (2026-11-23, session 5):
#: recall 0.889 -> 0.778 with corroboration on (docs/minder.md, "Corroboration"): v1's three
#: ``nvlink_errors`` jobs show only on NVLink *throughput* (no error counter, no Xid 74), which
#: a coupled series alone no longer convicts; precision stays 1.000.  Floor 0.85 -> 0.75.
#: Lowered on purpose again (2026-11-27, session 9, round 8): recall 0.778 -> 0.741 (20 of
#: 27).  NVIDIA DCGM's health limit (more than 8 PCIe replays a minute) is now the floor of
#: the replay counter, and one of v1's PCIe downgrades (seed 3068) replays 6.7 a minute: within
#: that limit, and otherwise visible only on its PCIe throughput (coupled).  Floor 0.75 -> 0.74.
FLOOR = {"minder": (0.95, 0.74, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_independent_corpus (docs/minder.md)
    import sys

    for name, t in evaluate(corpus()).items():
        print(name, t.line(), file=sys.stderr)
