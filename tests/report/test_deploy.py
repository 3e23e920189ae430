"""deploy/: the runner the systemd units and cron call, the units themselves, install.sh."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from report_store import Built

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
RUNNER = DEPLOY / "aegis-slurm-run"


def _stub(tmp: Path) -> Path:
    """An AEGIS_BIN that prints its arguments one per line."""
    stub = tmp / "stub"
    stub.write_text('#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done\n')
    stub.chmod(0o755)
    return stub


def _run(what: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", str(RUNNER), what],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runner_builds_each_command_line(tmp_path: Path):
    env = {
        "AEGIS_BIN": str(_stub(tmp_path)),
        "AEGIS_STORE": "/srv/store",
        "AEGIS_REPORTS": "/srv/reports",
        "AEGIS_EVENTS": "/srv/events.txt",
        "AEGIS_TEXTFILE": "/srv/tf/aegis.prom",
        "AEGIS_MAX_RF": "8",
    }
    today = datetime.now(UTC).date()
    ingest = _run("ingest", env).stdout.split("\n")
    assert ingest[:4] == ["ingest", "--sacct", "--store", "/srv/store"]
    # a week back by default: fetched closed days are skipped, missed nights are caught up
    assert ingest[ingest.index("--start") + 1] == (today - timedelta(days=7)).isoformat()
    assert ingest[ingest.index("--end") + 1] == today.isoformat()
    month_back = _run("ingest", {**env, "AEGIS_INGEST_DAYS": "31"}).stdout.split("\n")
    assert month_back[month_back.index("--start") + 1] == (today - timedelta(days=31)).isoformat()
    hostile = _run("ingest", {**env, "AEGIS_INGEST_DAYS": "1; rm -rf /"})
    assert hostile.returncode == 2 and "whole number" in hostile.stderr
    report = _run("report", env).stdout.split("\n")
    last = today.replace(day=1) - timedelta(days=1)
    month = f"{last.year:04d}-{last.month:02d}"
    assert report[report.index("--month") + 1] == month
    assert report[report.index("--out") + 1] == f"/srv/reports/{month}"
    assert report[report.index("--events") + 1] == "/srv/events.txt"
    check = _run("check", env).stdout.split("\n")
    assert check[0] == "check" and check[check.index("--max-rf") + 1] == "8"
    assert check[check.index("--textfile") + 1] == "/srv/tf/aegis.prom"
    bad = _run("frobnicate", env)
    assert bad.returncode == 2 and "usage" in bad.stderr
    assert _run("ingest", {"AEGIS_BIN": env["AEGIS_BIN"]}).returncode != 0  # no store: refuse


def test_runner_check_against_a_real_store_reports_no_data(built: Built, tmp_path: Path):
    """The store holds January 2024 only: the last 30 days have no run -> exit 4, one line."""
    aegis = Path(sys.executable).parent / "aegis-slurm"
    res = _run("check", {"AEGIS_BIN": str(aegis), "AEGIS_STORE": str(built.store)})
    assert res.returncode == 4, res.stderr
    assert res.stderr.strip().startswith("aegis-slurm: error: no run ended")


def test_units_parse_and_point_at_the_runner(tmp_path: Path):
    for svc in sorted((DEPLOY / "systemd").glob("*.service")):
        cp = configparser.ConfigParser(strict=True, interpolation=None)
        cp.optionxform = str  # type: ignore[assignment,method-assign]
        cp.read(svc)
        what = svc.stem.removeprefix("aegis-slurm-")
        assert cp["Service"]["ExecStart"] == f"/usr/local/libexec/aegis-slurm-run {what}"
        assert cp["Service"]["Type"] == "oneshot"
        # the user's state directory holds the env file's default store and reports
        assert cp["Service"]["User"] == "aegis" and cp["Service"]["StateDirectory"] == "aegis-slurm"
        defaults = (DEPLOY / "aegis-slurm.env").read_text()
        assert "AEGIS_STORE=/var/lib/aegis-slurm/" in defaults
        timer = configparser.ConfigParser(strict=True, interpolation=None)
        timer.read(svc.with_suffix(".timer"))
        assert timer["Timer"]["OnCalendar"] and timer["Install"]["WantedBy"] == "timers.target"


def test_install_stages_everything_with_sane_modes(tmp_path: Path):
    dest = tmp_path / "root"
    env = {"PATH": os.environ["PATH"], "DESTDIR": str(dest)}
    subprocess.run(["/bin/sh", str(DEPLOY / "install.sh")], env=env, check=True, timeout=60)
    runner = dest / "usr/local/libexec/aegis-slurm-run"
    assert runner.stat().st_mode & 0o777 == 0o755
    units = sorted(p.name for p in (dest / "etc/systemd/system").iterdir())
    assert len(units) == 6 and all(
        (p.stat().st_mode & 0o022) == 0 for p in (dest / "etc/systemd/system").iterdir()
    )
    envf = dest / "etc/aegis-slurm/analytics.env"
    envf.write_text("AEGIS_STORE=/mine\n")
    subprocess.run(["/bin/sh", str(DEPLOY / "install.sh")], env=env, check=True, timeout=60)
    assert envf.read_text() == "AEGIS_STORE=/mine\n"  # an admin's settings are kept
    assert shutil.which("sh")
