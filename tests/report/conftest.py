"""Session fixture: the one-month simulated store and its report (see report_store.py)."""

from __future__ import annotations

import pytest
from report_store import MONTH, Built, make_store

from aegis_slurm.report.builder import build_report
from aegis_slurm.simulate.history import SimConfig


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("report")
    b = make_store(root, SimConfig(nodes=160, days=31, seed=7, crash_loops=2, lemons=2))
    b.report = build_report(b.store, MONTH, b.out, [b.events], b.signals)
    return b
