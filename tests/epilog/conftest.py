"""Epilog unit tests: never touch the live test cluster."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_live_slurm(monkeypatch, tmp_path):
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))
