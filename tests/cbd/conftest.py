"""Pytest fixtures for the CBD tests (helpers live in ``_fixtures.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ._fixtures import H100_Q, write_text


@pytest.fixture(autouse=True)
def _no_live_slurm(monkeypatch, tmp_path):
    """Unit tests must never read or drain the live test cluster's nodes."""
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "no-slurm.conf"))


@pytest.fixture
def h100_text() -> str:
    return H100_Q.read_text()


@pytest.fixture
def cfg(tmp_path: Path) -> dict:
    """Default config with state/textfile redirected into tmp."""
    from aegis_slurm.node import config

    c = config.load(write_text(tmp_path / "c.toml", ""))
    c["runtime"]["state_dir"] = str(tmp_path / "state")
    c["runtime"]["textfile_dir"] = str(tmp_path / "prom")
    c["runtime"]["syslog"] = False
    return c
