"""The detectors on corpus v9 (``corpus_v9.py``), written blind in session 11: its author read
neither the detector, its priority table, the simulator, the docs nor corpora v2-v7 (but v8's
README as a model of a corpus description; its blindness record lists what else it saw), and
never ran a detector on it.  Scored by ``blind_eval`` with shipped defaults; nothing is tuned
here.
"""

from __future__ import annotations

import pytest

from . import blind_eval, corpus_v9


@pytest.fixture(scope="module")
def tallies() -> dict[str, blind_eval.Tally]:
    return blind_eval.evaluate_jobs(corpus_v9.jobs(0), corpus_v9.aggregate)


def test_minder_on_corpus_v9(tallies: dict[str, blind_eval.Tally]) -> None:
    blind_eval.assert_minder_floor(tallies, FLOOR["minder"])


def test_minder_against_the_naive_rules_on_corpus_v9(
    tallies: dict[str, blind_eval.Tally],
) -> None:
    blind_eval.assert_fewer_false_alarms_than_the_naive_rules(tallies)


#: the blind runs (2026-11-27, seed 0, 120 jobs, 64 culprits, 60 healthy jobs), each run once
#: in a worktree of its commit with only corpus_v9.py copied in: round 10 (47a05bd, the
#: detector shipped at the session's start) and round 11 (ae67083, designed from DCGM's
#: documentation on two of v8's misses and frozen before v9 arrived: a hardware state held
#: through an exporter's gaps, the GPUs' hardware-slowdown share) gave the same figures:
#: Minder precision 1.000, recall 0.688 (44 of 64), median delay 4.1 min, 0 of 60 healthy
#: jobs with a false alarm; λ+2δ 0.035 / 0.656 / 9.7 min (52 of 60 healthy jobs alarmed);
#: z-score 0.074 / 0.609 / 3.7 min (39 of 60).  Missed: mem_clock_pstate_stuck 6,
#: nvme_ctrl_timeout_stall 6, nvlink_bridge_absent_p2p 5, pcie_gen2_stuck_link 2,
#: xid109_stuck_ctx 1; no false alarm.  231-244 s, 1.2 GB.  v9 is seen from here on.  Floors
#: a little under: precision, recall, median delay (min).
#: Round 12 (session 11, designed on v9: seen, not blind; the GPUs' memory clock and PSI full
#: io): 1.000 / 0.844 (54 of 64) / 4.0 min, 0 of 60.  Still missed: nvlink_bridge_absent_p2p 5
#: (absent from the job's start: the node is its own reference), nvme_ctrl_timeout_stall 2,
#: pcie_gen2_stuck_link 2 (efa: no link-generation field), xid109_stuck_ctx 1.
FLOOR = {"minder": (0.97, 0.82, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v9_eval
    import sys

    for name, t in blind_eval.evaluate_jobs(corpus_v9.jobs(0), corpus_v9.aggregate).items():
        print(name, t.summary(), file=sys.stderr)
