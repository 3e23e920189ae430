"""The detectors on corpus v10 (``corpus_v10.py``), written blind in session 12: its author read
neither the detector, its priority table, the simulator, the docs nor corpora v2-v8 (v9's
corpus, sanity tests and README as the model of a corpus; its blindness record lists what else
it saw), and never ran a detector on it.  Scored by ``blind_eval`` with shipped defaults;
nothing is tuned here.
"""

from __future__ import annotations

import pytest

from . import blind_eval, corpus_v10


@pytest.fixture(scope="module")
def tallies() -> dict[str, blind_eval.Tally]:
    return blind_eval.evaluate_jobs(corpus_v10.jobs(0), corpus_v10.aggregate)


def test_minder_on_corpus_v10(tallies: dict[str, blind_eval.Tally]) -> None:
    blind_eval.assert_minder_floor(tallies, FLOOR["minder"])


def test_minder_against_the_naive_rules_on_corpus_v10(
    tallies: dict[str, blind_eval.Tally],
) -> None:
    blind_eval.assert_fewer_false_alarms_than_the_naive_rules(tallies)


#: the blind runs (2026-11-28, seed 0, 120 jobs: 64 with culprits, 68 culprit nodes, 56
#: healthy jobs), each run once in a worktree of its commit with only corpus_v10.py copied in:
#: round 12 (137eb3e, designed on v9: the GPUs' memory clock, PSI full io) and the session-12
#: review (7319eee, coded before v10 arrived: what the job can cause is no machine evidence)
#: gave the same figures: Minder precision 1.000, recall 0.824 (56 of 68), median delay
#: 3.8 min, 0 of 56 healthy jobs with a false alarm; λ+2δ 0.038 / 0.618 / 9.6 min (51 of 56
#: healthy jobs alarmed); z-score 0.093 / 0.588 / 3.6 min (38 of 56).  Missed:
#: thp_compaction_memory_stall 6, hca_port_bounce_loop 3, nic_autoneg_speed_fallback 2,
#: lustre_ost_evict_reconnect 1; no false alarm.  90-95 s, 1.2 GB.  v10 is seen from here on.
#: Floors a little under: precision, recall, median delay (min).
#: Round 13 (session 12, designed on v10: seen, not blind; a link down twice in half an hour,
#: the NICs' summed speed, PSI full memory): 1.000 / 0.912 (62 of 68) / 3.8 min, 0 of 56.
#: Still missed: thp_compaction_memory_stall 5 (its stall share under the guessed floor),
#: lustre_ost_evict_reconnect 1.
#: Round 14 (session 13, designed on v11; with the session-13 reviews' fixes): 1.000 / 0.926
#: (63 of 68) / 3.8 min, 0 of 56 -- the Lustre eviction found as a recurring failure state;
#: still missed: thp_compaction_memory_stall 5.
FLOOR = {"minder": (0.97, 0.90, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v10_eval
    import sys

    for name, t in blind_eval.evaluate_jobs(corpus_v10.jobs(0), corpus_v10.aggregate).items():
        print(name, t.summary(), file=sys.stderr)
