"""The one CLI error convention: a one-line message on stderr and a documented exit code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from aegis_slurm.errors import EXIT_ERROR

CLI = [sys.executable, "-m", "aegis_slurm.cli"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, check=False)


def test_domain_error_is_one_line_without_traceback(tmp_path: Path) -> None:
    res = run_cli("taxonomy", "--store", str(tmp_path))
    assert res.returncode == EXIT_ERROR
    assert "Traceback" not in res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("aegis-slurm: error: ")
    assert "not an aegis-slurm store" in lines[0]


def test_usage_error_keeps_click_exit_code() -> None:
    res = run_cli("taxonomy", "--no-such-option")
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
