"""The detectors on corpus v2 (``corpus_v2.py``), a labelled corpus written blind: its author read
neither the detector, its priority table, the simulator nor corpus v1.

Each job's raw per-device series are reduced per node by the catalog's own aggregation and
limited to the catalog's metrics, as ``minder --prometheus`` would fetch them; the detectors run
with their shipped defaults.  Nothing is tuned here: the floors are what the first run observed
(docs/minder.md, "Corpus v2"), rounded down: a regression guard, not a target.

Scoring: a culprit flagged at or after its onset is a true positive (one per culprit; a job may
have two); any other node flagged, or a culprit flagged before its onset, is a false positive.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import polars as pl
import pytest

from aegis_slurm.metrics.align import align
from aegis_slurm.metrics.catalog import DEFAULT_METRICS, spec_for
from aegis_slurm.metrics.detect import Params, detect, lambda_2delta, zscore_baseline
from aegis_slurm.metrics.evaluate import Score
from aegis_slurm.metrics.priority import default_priority

from . import corpus_v2

DETECTORS = {
    "minder": lambda a, pri: detect(a, pri, Params()),
    "lambda2delta": lambda a, pri: lambda_2delta(a, pri),
    "zscore": lambda a, pri: zscore_baseline(a, pri),
}


@dataclass
class Tally(Score):
    """The scorer's counts plus how many healthy jobs raised any alarm."""

    fp_jobs: int = 0
    healthy_jobs: int = 0

    def summary(self) -> str:
        return (
            f"{self.line()}; healthy jobs with a false alarm {self.fp_jobs}/{self.healthy_jobs}"
            f"; missed {dict(Counter(self.misses))}; false {dict(Counter(self.false))}"
        )


def per_node_table(job: corpus_v2.Job) -> pl.DataFrame:
    wanted = [m.name for m in DEFAULT_METRICS]
    raw = job.raw.filter(pl.col("metric").is_in(wanted))
    return corpus_v2.aggregate(raw, lambda m: spec_for(m).agg)


def evaluate(seed: int = 0) -> dict[str, Tally]:
    pri = default_priority()
    out = {name: Tally() for name in DETECTORS}
    for job in corpus_v2.jobs(seed):
        aligned = align(per_node_table(job), nodes=list(job.nodes))
        onsets = {node: t.timestamp() for node, t in job.culprits.items()}
        for name, run in DETECTORS.items():
            t = out[name]
            found: set[str] = set()
            false = 0
            for f in run(aligned, pri).faulty:
                onset = onsets.get(f.node)
                if onset is not None and f.first_detected >= onset and f.node not in found:
                    found.add(f.node)
                    t.delays.append(f.first_detected - onset)
                else:
                    false += 1
                    t.false.append(f"{job.kind}:{f.metric}")
            t.tp += len(found)
            t.fn += len(onsets) - len(found)
            t.misses += [job.kind] * (len(onsets) - len(found))
            t.fp += false
            if not onsets:
                t.healthy_jobs += 1
                t.fp_jobs += false > 0
    return out


@pytest.fixture(scope="module")
def tallies() -> dict[str, Tally]:
    return evaluate()


def test_minder_on_corpus_v2(tallies: dict[str, Tally]) -> None:
    t = tallies["minder"]
    print("minder", t.summary())
    lo_p, lo_r, hi_d = FLOOR["minder"]
    assert t.precision >= lo_p and t.recall >= lo_r and t.median_delay / 60 <= hi_d


def test_minder_against_the_naive_rules_on_corpus_v2(tallies: dict[str, Tally]) -> None:
    for name in ("lambda2delta", "zscore"):
        print(name, tallies[name].summary())
    m = tallies["minder"]
    # what the similarity + continuity design is for: fewer false alarms than either naive rule
    assert m.fp < tallies["zscore"].fp and m.fp < tallies["lambda2delta"].fp


#: first run, see docs/minder.md ("Corpus v2"); precision, recall, median delay (min)
FLOOR = {"minder": (0.0, 0.0, 99.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v2_eval
    import sys

    for name, t in evaluate().items():
        print(name, t.line(), file=sys.stderr)
