"""The detectors on corpus v16 (``corpus_v16.py``), written blind in session 15: its author read
neither the detector, its priority table, the simulator, the docs nor corpora v2-v14 (v14's
corpus, sanity tests and README as the model of a corpus; its blindness record lists what else
it saw), and never ran a detector on it.  Scored by ``blind_eval`` with shipped defaults;
nothing is tuned here.
"""

from __future__ import annotations

import pytest

from . import blind_eval, corpus_v16


@pytest.fixture(scope="module")
def tallies() -> dict[str, blind_eval.Tally]:
    return blind_eval.evaluate_jobs(corpus_v16.jobs(0), corpus_v16.aggregate)


def test_minder_on_corpus_v16(tallies: dict[str, blind_eval.Tally]) -> None:
    blind_eval.assert_minder_floor(tallies, FLOOR["minder"])


def test_minder_against_the_naive_rules_on_corpus_v16(
    tallies: dict[str, blind_eval.Tally],
) -> None:
    blind_eval.assert_fewer_false_alarms_than_the_naive_rules(tallies)


#: the blind run (2026-11-28, seed 0, 120 jobs: 60 with culprits, 65 culprit nodes, 60 healthy
#: jobs), once in a worktree of its commit with only corpus_v16.py copied in.  Round 18 with the
#: second review's fixes (3fcc527, coded before v16 was read; the clocks still one-sided there):
#: Minder precision 0.909, recall 0.769 (50 of 65), median delay 3.7 min, 5 of 60 healthy jobs
#: with a false alarm (all rank0_eval_peers_idle_gloo_barrier: power 3, utilisation 1, SM clock
#: 1); λ+2δ 0.043 / 0.569 / 9.4 min (37 of 60 healthy alarmed); z-score 0.069 / 0.585 / 3.4 min
#: (28 of 60).  Missed: port_cable_swap_half_rate_from_boot 5 (from the first sample),
#: nvswitch_fabric_degraded_nvlink_bw_node 4, gpu_memclk_stuck_low_pstate_v16 3,
#: row_remap_event_xid63_no_slowdown_v16 2, runaway_daemon_cpu_straggler_host_v16 1.  ~3 min.
#: v16 is seen from here on.
#: Floors a little under: precision, recall, median delay (min).
FLOOR = {"minder": (0.88, 0.74, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v16_eval
    import sys

    for name, t in blind_eval.evaluate_jobs(corpus_v16.jobs(0), corpus_v16.aggregate).items():
        print(name, t.summary(), file=sys.stderr)
