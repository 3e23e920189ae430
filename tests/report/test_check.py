"""``aegis-slurm check``: thresholds, exit codes (0 ok, 3 crossed, 4 no data) and the
node_exporter textfile, on the simulated January store (two planted crash loops, lemons)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from report_store import MONTH, Built

from aegis_slurm.cli import main


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, ["check", *args])
    return res.exit_code, res.output


def test_thresholds_crossed_exit_3_with_each_reason(built: Built, tmp_path: Path):
    st = [
        "--store",
        str(built.store),
        "--events",
        str(built.events),
        "--signals",
        str(built.signals),
        "--month",
        MONTH,
    ]
    code, out = run(*st, "--json")
    assert code == 3, out
    res = json.loads(out.splitlines()[0])
    assert res["crash_loops"] == len(built.report["requeue_loops"]["loops"]) > 0
    assert "crash loops (limit 0)" in out and "aegis-slurm: error:" in out
    # The same numbers as the report's sections.
    assert res["rf_per_1000_node_days"] == built.report["summary"]["rf_per_1000_node_days"]


def test_within_thresholds_exit_0_and_textfile(built: Built, tmp_path: Path):
    prom = tmp_path / "tf" / "aegis_slurm.prom"
    code, out = run(
        "--store",
        str(built.store),
        "--events",
        str(built.events),
        "--signals",
        str(built.signals),
        "--month",
        MONTH,
        "--max-crash-loops",
        "100",
        "--max-lemon-nodes",
        "100",
        "--max-rf",
        "1000",
        "--textfile",
        str(prom),
    )
    assert code == 0, out
    text = prom.read_text()
    assert oct(prom.stat().st_mode & 0o777) == "0o644"
    values = {
        line.split(" ")[0]: float(line.split(" ")[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }
    assert values["aegis_slurm_check_failed"] == 0.0
    assert values["aegis_slurm_crash_loops"] == len(built.report["requeue_loops"]["loops"])
    rf = built.report["summary"]["rf_per_1000_node_days"]
    assert abs(values["aegis_slurm_rf_per_1000_node_days"] - rf) < 1e-9
    assert "# TYPE aegis_slurm_rf_per_1000_node_days gauge" in text


def test_rf_threshold_needs_evidence_not_a_point_estimate(built: Built):
    rf = built.report["summary"]["rf_per_1000_node_days"]
    lo = built.report["summary"]["rf_ci90_per_1000"][0]
    base = [
        "--store",
        str(built.store),
        "--events",
        str(built.events),
        "--signals",
        str(built.signals),
        "--month",
        MONTH,
        "--max-crash-loops",
        "100",
        "--max-lemon-nodes",
        "100",
    ]
    # Between the lower bound and the estimate: not significant, no alert.
    assert run(*base, "--max-rf", str((lo + rf) / 2))[0] == 0
    code, out = run(*base, "--max-rf", str(lo * 0.9))
    assert code == 3 and "r_f" in out


def test_no_run_in_the_period_is_exit_4(built: Built):
    code, out = run("--store", str(built.store), "--month", "2030-01")
    assert code == 4 and "no run ended" in out
