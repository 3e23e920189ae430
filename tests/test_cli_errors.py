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


def test_docs_cli_md_is_generated_from_the_current_help() -> None:
    """docs/cli.md is `tools/gen_cli_docs.py`'s output: regenerate it after changing a command."""
    root = Path(__file__).resolve().parent.parent
    res = subprocess.run(
        [sys.executable, str(root / "tools" / "gen_cli_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        cwd=root,
    )
    assert res.returncode == 0, res.stderr
    text = (root / "docs" / "cli.md").read_text(encoding="utf-8")
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |"):
        assert code in text


def test_options_of_the_accounting_commands_all_have_help() -> None:
    import click

    from aegis_slurm.cli import main

    ctx = click.Context(main)
    missing = []
    for name in ("ingest", "simulate", "cbd", "store"):
        command = main.get_command(ctx, name)
        commands = (
            list(command.commands.values()) if isinstance(command, click.Group) else [command]
        )
        for cmd in commands:
            missing += [
                f"{name} {p.name}" for p in cmd.params if isinstance(p, click.Option) and not p.help
            ]
    assert missing == []


def test_json_output_never_prints_nan() -> None:
    import json
    import math

    from aegis_slurm.cli import to_json

    text = to_json({"r": math.nan, "x": [1.5, math.inf, {"y": -math.inf}], "ok": 2})
    assert "NaN" not in text and "Infinity" not in text and "\n" not in text
    assert json.loads(text) == {"r": None, "x": [1.5, None, {"y": None}], "ok": 2}
