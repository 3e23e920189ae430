"""Every command of the CLI, fed hostile input, answers with one line and a documented exit code.

Hostile: a directory that is not a store, missing and garbage files, bad numbers, bad dates.
Whatever the command, no traceback may reach the user: a domain error is one line
``aegis-slurm: error: ...`` with exit 1, 3 or 4; a bad command line is click's usage error (2).
Commands owned by the accounting layer (ingest, store, simulate, cbd) are also held to the exact
exit code and must never report an internal error.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from aegis_slurm.cli import COMMANDS, main
from aegis_slurm.errors import EXIT_CHECK_FAILED, EXIT_ERROR, EXIT_NO_DATA, EXIT_OK, EXIT_USAGE

FIX = Path(__file__).parent / "fixtures" / "sacct"
DOCUMENTED = {EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CHECK_FAILED, EXIT_NO_DATA}
ANALYTICS = ["taxonomy", "failure-rate", "mttf", "goodput", "requeue-loops", "lemon-nodes"]
ANALYTICS += ["measured-ettr"]
MODEL = "--gpus 8 --rf 0.0065 --restart-min 5"

#: (command line, exit code when the command is ours, else None)
CASES: list[tuple[str, int | None]] = [
    *((f"{c} --store NOTSTORE", None) for c in ANALYTICS),
    *((f"{c} --store MISSING", EXIT_USAGE) for c in ANALYTICS),
    *((f"{c} --store STORE --events GARBAGE", None) for c in ANALYTICS),
    *((f"{c} --store STORE --signals GARBAGE", None) for c in ANALYTICS),
    *((f"{c} --store STORE --events MISSING", EXIT_USAGE) for c in ANALYTICS),
    ("mttf --store STORE --project 16k", None),
    ("mttf --store STORE --method median", EXIT_USAGE),
    ("failure-rate --store STORE --window-days 0", None),
    ("failure-rate --store STORE --min-gpus lots", EXIT_USAGE),
    ("requeue-loops --store STORE --window-hours -1", None),
    ("lemon-nodes --store STORE --window-days 0", None),
    ("measured-ettr --store STORE --min-hours nan", None),
    (f"ettr {MODEL} --ckpt-interval-min 0", None),
    (f"ettr {MODEL} --ckpt-interval-min -5", None),
    ("ettr --gpus -8 --rf 0.0065 --restart-min 5 --ckpt-interval-min 60", None),
    ("ettr --gpus 8 --rf nan --restart-min 5 --ckpt-interval-min 60", None),
    ("ettr --gpus 8 --rf inf --restart-min 5 --ckpt-interval-min 60", None),
    ("ettr --gpus eight --rf 1 --restart-min 5 --ckpt-interval-min 60", EXIT_USAGE),
    (f"checkpoint-plan {MODEL} --target-ettr 2", None),
    ("checkpoint-plan --gpus 0 --rf 0.0065 --restart-min 5", None),
    ("checkpoint-plan --gpus 8 --rf -1 --restart-min 5", None),
    ("report --store NOTSTORE --out OUT", None),
    ("report --store STORE --out OUT --month 2026-13", None),
    ("report --store STORE --out GARBAGE", None),
    ("report --store STORE --out OUT --events GARBAGE", None),
    ("diagnose 12 --spool GARBAGE", None),
    ("diagnose 12 --store NOTSTORE", None),
    ("diagnose 12 --spool MISSING", EXIT_USAGE),
    ("diagnose 12", EXIT_USAGE),
    ("diagnose 12 --spool NOTSTORE --run -1", None),
    ("signals collect --spool GARBAGE --store OUT/signals", None),
    ("signals collect --spool MISSING --store OUT", EXIT_USAGE),
    ("demo --out GARBAGE", None),
    ("demo --out OUT --nodes -5", None),
    ("demo --out OUT --days nan", None),
    # Ours: exact codes.
    ("ingest GARBAGE --store OUT", EXIT_ERROR),
    ("ingest BINARY --store OUT", EXIT_ERROR),
    ("ingest EMPTY --store OUT", EXIT_OK),
    ("ingest MISSING --store OUT", EXIT_USAGE),
    ("ingest GARBAGE --store GARBAGE", EXIT_USAGE),
    ("ingest HEADERLESS --store OUT --fields JobID,State", EXIT_ERROR),
    ("ingest HEADERLESS --store OUT --fields ,,", EXIT_USAGE),
    ("ingest HEADERLESS --store OUT --delimiter ''", EXIT_USAGE),
    ("ingest GARBAGE --store OUT --tz Mars/Olympus", EXIT_USAGE),
    ("ingest GARBAGE --store NOTSTORE_META", EXIT_ERROR),
    ("ingest JSONGARBAGE --store OUT", EXIT_ERROR),
    ("ingest NOTSTORE --store OUT", EXIT_USAGE),  # a directory where a file is expected
    ("ingest EXPORT --store /dev/null", EXIT_ERROR),
    ("ingest EXPORT --store NONUTF8", EXIT_ERROR),
    ("taxonomy --store NONUTF8", None),
    ("store check --store /dev/null", EXIT_ERROR),
    ("ingest --sacct --start 2026-13-01 --end 2026-12-01 --store OUT", EXIT_USAGE),
    ("ingest --sacct --start 2026-12-01 --end 2026-11-01 --store OUT", EXIT_USAGE),
    ("ingest --sacct --start 2026-11-01 --store OUT", EXIT_USAGE),
    ("ingest --store OUT", EXIT_USAGE),
    ("NOSACCT ingest --sacct --start 2026-11-01 --end 2026-11-02 --store OUT", EXIT_ERROR),
    ("store check --store NOTSTORE", EXIT_ERROR),
    ("store check --store NOTSTORE_META", EXIT_CHECK_FAILED),
    ("store check --store STORE", EXIT_OK),
    ("store check", EXIT_USAGE),
    ("simulate --out OUT/new/x --nodes 0", EXIT_USAGE),
    ("simulate --out OUT/new/x --days -1", EXIT_USAGE),
    ("simulate --out OUT/new/x --rf -0.1", EXIT_USAGE),
    ("simulate --out OUT/new/x --lemons -1", EXIT_USAGE),
    ("simulate --out GARBAGE/x --nodes 2 --days 0.2", EXIT_ERROR),
    ("cbd --config MISSING", EXIT_USAGE),
    ("cbd --config GARBAGE", EXIT_ERROR),
    ("cbd --config BADPOLICY", EXIT_ERROR),
    ("cbd --check gpu_cnt", EXIT_USAGE),
    ("cbd --profile huge", EXIT_USAGE),
    ("no-such-command", EXIT_USAGE),
    # the monthly check, availability, log and metrics diagnosis
    ("check --store NOTSTORE", None),
    ("check --store STORE --max-rf -1", EXIT_USAGE),
    ("check --store STORE --textfile GARBAGE/x.prom", None),
    ("availability --store NOTSTORE", None),
    ("availability --store STORE --events GARBAGE", None),
    ("logs MISSING", None),
    ("logs BINARY", None),
    ("logs NOTSTORE", None),
    ("logs GARBAGE --tasks-per-node 0", EXIT_USAGE),
    ("logs --job 'x;rm -rf /'", None),
    ("minder detect GARBAGE --json", None),
    ("minder detect BINARY", None),
    ("minder detect MISSING", None),
    ("minder detect --prometheus http://127.0.0.1:9 --job 12 --nodes n[1-2]", None),
    ("minder fit GARBAGE", None),
    ("minder watch --prometheus http://127.0.0.1:9 --interval -1 --once", EXIT_USAGE),
    ("minder watch --prometheus http://127.0.0.1:9 --interval 0", EXIT_USAGE),
    ("diagnose 12 --logs GARBAGE --spool NOTSTORE", None),
    ("diagnose 12 --prometheus http://127.0.0.1:9 --spool NOTSTORE --nodes n[1-2]", None),
]


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("hostile")
    (root / "notstore").mkdir()
    (root / "notstore_meta").mkdir()
    (root / "notstore_meta" / "meta.json").write_text("{not json")
    (root / "garbage.txt").write_bytes(b"garbage\nmore garbage\n")
    (root / "binary.bin").write_bytes(bytes(range(256)) * 10)
    (root / "empty.txt").write_bytes(b"")
    (root / "json.json").write_bytes(b'{"jobs": [1, 2' + b"[" * 10)
    (root / "badpolicy.toml").write_text('[policy.xid]\nfail = "explode"\n')
    store = root / "store"
    result = CliRunner().invoke(
        main, ["ingest", str(FIX / "sacct-22.05.8_wide_steps_header.txt"), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    return {
        "NOTSTORE_META": str(root / "notstore_meta"),
        "NOTSTORE": str(root / "notstore"),
        "MISSING": str(root / "missing.toml"),
        "GARBAGE": str(root / "garbage.txt"),
        "BINARY": str(root / "binary.bin"),
        "EMPTY": str(root / "empty.txt"),
        "JSONGARBAGE": str(root / "json.json"),
        "BADPOLICY": str(root / "badpolicy.toml"),
        "HEADERLESS": str(FIX / "sacct-22.05.8_alloc.txt"),
        "EXPORT": str(FIX / "sacct-22.05.8_wide_steps_header.txt"),
        "STORE": str(store),
        "OUT": str(root / "out"),
        "NONUTF8": os.fsdecode(bytes(root / "b") + b"\xff"),  # a name Parquet I/O cannot use
    }


def command_line(template: str, places: dict[str, str]) -> list[str]:
    words = shlex.split(template.removeprefix("NOSACCT "))
    for key in sorted(places, key=len, reverse=True):
        words = [w.replace(key, places[key]) for w in words]
    return words


@pytest.mark.parametrize(("template", "expected"), CASES, ids=[c for c, _ in CASES])
def test_hostile_input_gets_one_line_and_a_documented_exit_code(template, expected, places):
    # NOSACCT: no sacct on PATH (a login node without slurm-client).
    env = {"PATH": places["NOTSTORE"]} if template.startswith("NOSACCT ") else None
    result = CliRunner().invoke(main, command_line(template, places), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert result.exit_code in DOCUMENTED
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    if result.exit_code == EXIT_USAGE:
        assert errors and errors[-1].startswith("Error:"), result.stderr
    elif result.exit_code == EXIT_ERROR:
        assert len(errors) == 1, result.stderr
        assert errors[0].startswith("aegis-slurm: error: ")
    elif result.exit_code != EXIT_OK:  # a failed check or no data may say so on stdout only
        assert len(errors) <= 1, result.stderr
        assert all(line.startswith("aegis-slurm: error: ") for line in errors)
    if expected is not None:
        assert result.exit_code == expected, result.output
        assert "internal error" not in result.stderr, result.stderr


def test_every_command_is_attacked():
    attacked = {shlex.split(template.removeprefix("NOSACCT "))[0] for template, _ in CASES}
    assert set(COMMANDS) <= attacked


def test_no_traceback_from_the_real_entry_point(places):
    """The installed entry point, not CliRunner: what an admin's shell really shows."""
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "aegis_slurm.cli",
            "store",
            "check",
            "--store",
            places["NOTSTORE_META"],
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == EXIT_CHECK_FAILED
    assert "Traceback" not in res.stderr
    assert (
        res.stderr.strip().startswith("aegis-slurm: error: ") and len(res.stderr.splitlines()) == 1
    )


ENDLESS = [
    pytest.param(["ingest", "/dev/zero"], id="ingest-dev-zero"),
    pytest.param(["ingest", "/dev/stdin"], id="ingest-endless-pipe-of-nul"),
]


@pytest.mark.parametrize("words", ENDLESS)
def test_endless_binary_input_is_refused_at_once(words, tmp_path):
    """/dev/zero is seekable and endless: taken for UTF-16, it was read whole (7.5 GB in 25 s)."""
    stdin = open("/dev/zero", "rb")  # noqa: SIM115 - closed below
    try:
        res = subprocess.run(
            [sys.executable, "-m", "aegis_slurm.cli", *words, "--store", str(tmp_path / "s")],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        stdin.close()
    assert res.returncode == EXIT_ERROR
    assert res.stderr.splitlines() == [
        "aegis-slurm: error: binary data (NUL bytes) on the first line: not a sacct export"
    ]


def test_json_output_into_a_closed_pipe_is_quiet(tmp_path):
    """``ingest --json | head -c 1``: the reader goes away; no BrokenPipeError traceback."""
    export = FIX / "sacct-22.05.8_wide_steps_header.txt"
    cmd = [sys.executable, "-m", "aegis_slurm.cli", "ingest", str(export)]
    cmd += ["--store", str(tmp_path / "s"), "--json"]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
    assert "Traceback" not in err
    assert proc.returncode in DOCUMENTED
