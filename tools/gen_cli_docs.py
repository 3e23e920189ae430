"""Write docs/cli.md from the CLI's own ``--help`` (``python tools/gen_cli_docs.py``).

The page is generated, never edited by hand; ``tests/test_cli_errors.py`` fails when the
committed page differs from what this prints, so help text and docs cannot drift apart.
``--check`` exits 1 when the file is stale instead of writing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from aegis_slurm.cli import main

OUT = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
WIDTH = 100
HELP = ["-h", "--help"]

HEADER = """\
# aegis-slurm command line

Generated from `--help` by `tools/gen_cli_docs.py`; do not edit by hand.

## Exit codes

Every command follows one convention (`aegis_slurm/errors.py`).  An error is one line on stderr,
`aegis-slurm: error: <what is wrong and how to fix it>`, never a traceback (`AEGIS_DEBUG=1`
shows the traceback for a bug report).

| code | meaning |
|-----:|---------|
| 0 | success |
| 1 | error: unreadable input, damaged store, unreachable service, bad config, internal error |
| 2 | usage: the command line is wrong (unknown option, bad value, missing argument) |
| 3 | a check failed: `cbd` found a failing check or a probe error; `store check` found a problem |
| 4 | no data: nothing to compute on (e.g. `diagnose` found no record of the job) |
"""


def _help(command: click.Command, path: list[str], parent: click.Context | None) -> str:
    ctx = click.Context(
        command,
        info_name=path[-1],
        parent=parent,
        terminal_width=WIDTH,
        max_content_width=WIDTH,
        help_option_names=HELP,
    )
    return command.get_help(ctx)


def render() -> str:
    parts = [HEADER]
    root = click.Context(
        main, info_name="aegis-slurm", terminal_width=WIDTH, help_option_names=HELP
    )
    parts.append(f"## aegis-slurm\n\n```text\n{main.get_help(root)}\n```\n")
    for name in main.list_commands(root):
        command = main.get_command(root, name)
        assert command is not None
        parts.append(f"## aegis-slurm {name}\n\n```text\n{_help(command, [name], root)}\n```\n")
        if isinstance(command, click.Group):
            group_ctx = click.Context(
                command, info_name=name, parent=root, terminal_width=WIDTH, help_option_names=HELP
            )
            for sub_name in command.list_commands(group_ctx):
                sub = command.get_command(group_ctx, sub_name)
                assert sub is not None
                text = _help(sub, [name, sub_name], group_ctx)
                parts.append(f"### aegis-slurm {name} {sub_name}\n\n```text\n{text}\n```\n")
    return "\n".join(parts)


def main_() -> int:
    text = render()
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is stale: run python tools/gen_cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main_())
