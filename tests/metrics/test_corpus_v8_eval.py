"""The detectors on corpus v8 (``corpus_v8.py``), written blind in session 10: its author read
neither the detector, its priority table, the simulator, the docs nor corpora v2-v7 (but v7's
README as a model of a corpus description), and never ran a detector on it.  Scored by
``blind_eval`` with shipped defaults; nothing is tuned here.
"""

from __future__ import annotations

import pytest

from . import blind_eval, corpus_v8


@pytest.fixture(scope="module")
def tallies() -> dict[str, blind_eval.Tally]:
    return blind_eval.evaluate_jobs(corpus_v8.jobs(0), corpus_v8.aggregate)


def test_minder_on_corpus_v8(tallies: dict[str, blind_eval.Tally]) -> None:
    blind_eval.assert_minder_floor(tallies, FLOOR["minder"])


def test_minder_against_the_naive_rules_on_corpus_v8(
    tallies: dict[str, blind_eval.Tally],
) -> None:
    blind_eval.assert_fewer_false_alarms_than_the_naive_rules(tallies)


#: the blind runs (2026-11-27, seed 0, 120 jobs, 64 culprits, 60 healthy jobs), each run once:
#: round 8 (aegis_slurm/metrics as of 3c76338, the detector shipped at the session's start) and
#: round 9 (f45ef38, designed from the exporters' sources before v8 was read: the link layer's
#: error counters and the IB ports' state, the latch scale, row-remap failure, hung mounts)
#: gave the same figures: Minder precision 0.761, recall 0.797 (51 of 64), median delay
#: 4.4 min, 3 of 60 healthy jobs with a false alarm; λ+2δ 0.037 / 0.781 / 9.6 min (47 of 60);
#: z-score 0.067 / 0.734 / 3.7 min (36 of 60).  Missed: clocksource_hpet_fallback 6,
#: nvlink_symbol_ber_climb 3, psu_fail_brake_duty 2, gpu_lost_exporter_crashloop 2; false
#: (16): ib_port_polling_abort's ring neighbours whose ranks aborted with it (SM clock 8,
#: MemAvailable 1), compile_cache_skew's cold-cache nodes (GPU utilisation 5, pause sent 2).
#: 162-183 s, 1.1-1.2 GB.  v8 is seen from here on.  Floors a little under: precision, recall,
#: median delay (min).
#: Round 10 (session 10, designed on v8: seen, not blind): 0.952 / 0.938 (60 of 64) / 4.3 min,
#: 0 of 60 healthy jobs alarmed (ranks that stopped with another node's hardware fault listed
#: as collateral; a launch judged from the job's first run; NVLink 5's counters and the
#: kernel's clock source read; hardware state gauges against the node's best state).  Still
#: missed: psu_fail_brake_duty 2, gpu_lost_exporter_crashloop 2; false: 3 ring neighbours on
#: the V100 site, which exports no GPU utilisation.
#: Rounds 11 and 12 (session 11): 0.955 / 0.984 (63 of 64) / 4.2 min, 0 of 60: both crash-
#: looping exporters found (a hardware state held through the exporter's gaps); still missed:
#: psu_fail_brake_duty 1 (V100, no clock-event field); still false: the 3 V100 ring neighbours.
FLOOR = {"minder": (0.93, 0.96, 5.0)}

if __name__ == "__main__":  # python -m tests.metrics.test_corpus_v8_eval
    import sys

    for name, t in blind_eval.evaluate_jobs(corpus_v8.jobs(0), corpus_v8.aggregate).items():
        print(name, t.summary(), file=sys.stderr)
