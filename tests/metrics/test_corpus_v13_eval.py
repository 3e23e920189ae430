"""The detectors on corpus v13 (``corpus_v13.py``), written blind in session 14: its author read
neither the detector, its priority table, the simulator, the docs nor corpora v2-v11 (v12's
corpus, sanity tests and README as the model of a corpus; its blindness record lists what else
it saw), and never ran a detector on it.  Scored by ``blind_eval`` with shipped defaults;
nothing is tuned here.
"""

from __future__ import annotations

import pytest

from . import blind_eval, corpus_v13


@pytest.fixture(scope="module")
def tallies() -> dict[str, blind_eval.Tally]:
    return blind_eval.evaluate_jobs(corpus_v13.jobs(0), corpus_v13.aggregate)


def test_minder_on_corpus_v13(tallies: dict[str, blind_eval.Tally]) -> None:
    blind_eval.assert_minder_floor(tallies, FLOOR["minder"])


def test_minder_against_the_naive_rules_on_corpus_v13(
    tallies: dict[str, blind_eval.Tally],
) -> None:
    blind_eval.assert_fewer_false_alarms_than_the_naive_rules(tallies)


#: the blind runs (2026-11-28, seed 0, 120 jobs: 60 with culprits, 64 culprit nodes, 60 healthy
#: jobs), each once in a worktree of its commit with only corpus_v13.py copied in.  Round 15
#: (a9aeae9, designed on v12) and its review's fixes (8f93c0e, coded before v13 was read), the
#: same: Minder precision 0.833, recall 0.703 (45 of 64), median delay 5.5 min, 5 of 60 healthy
#: jobs with a false alarm (all spot_reclaim_node_swap_restart: the reclaimed node's silence and
#: the replacement's absence before it joined, on power); λ+2δ 0.039 / 0.531 / 9.8 min (44 of
#: 60 healthy alarmed); z-score 0.062 / 0.500 / 3.6 min (33 of 60).  Round 14 (0b36df0), for
#: comparison: 0.782 / 0.672 / 5.3 min, 6 of 60.  Missed (8f93c0e):
#: nic_irq_pinned_core_softirq_hot 4, hbm_sbe_rate_climb_no_slowdown 4,
#: bios_powersave_governor_low_cpufreq 3, hca_pcie_downtrain_xmit_wait_v13 3,
#: nvlink_link_inactive_after_recovery 3, hbm_hot_spot_memclk_derate_v13 1,
#: pfs_client_eviction_reads_hang 1.  ~2.5 min.  v13 is seen from here on; round 16 was
#: designed on it.  Seen, after round 16 and its review (c1f5dc5 and the continuity of a
#: rising counter a window longer): 0.865 / 0.703 (45 of 64) / 4.5 min (5.5 before), 5 of 60
#: healthy jobs alarmed -- spot_reclaim_node_swap_restart again: a node whose series stop for good
#: mid-job is a machine gone under Slurm, whose jobs keep their node list; the replacement
#: rule that quiets it (0 of 60 with ``replacements = true``) is opt-in for elastic launchers.
#: Floors a little under the seen figures: precision, recall, median delay (min).
FLOOR = {"minder": (0.84, 0.68, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v13_eval
    import sys

    for name, t in blind_eval.evaluate_jobs(corpus_v13.jobs(0), corpus_v13.aggregate).items():
        print(name, t.summary(), file=sys.stderr)
