"""The README's first command: `aegis-slurm demo` end to end (simulate -> ingest -> analytics)."""

from __future__ import annotations

import json

import polars as pl
from click.testing import CliRunner

from aegis_slurm.accounting import load_runs
from aegis_slurm.cli import main


def test_demo_recovers_what_it_planted(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path), "--nodes", "128"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    truth = summary["planted_truth"]
    assert summary["ingest"]["rows_kept"] == truth["records"]
    assert summary["ingest"]["rows_rejected"] == 0
    found = {loop["job_id"] for loop in summary["requeue_loops"]}
    assert found == {str(loop["job_id_raw"]) for loop in truth["crash_loops"]}
    assert (tmp_path / "store" / "meta.json").exists()
    assert "summary:" in result.output


def test_demo_writes_the_monthly_report(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--out", str(tmp_path), "--nodes", "160"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "report.json").read_text())
    # Two simulated months: the report is on the second and compares it with the first.
    assert report["month"] == "2024-01"
    assert report["previous_month"]["month"] == "2023-12"
    assert report["month_over_month"]
    assert report["summary"]["runs"] > 1000
    # The planted crash loops that ended in the month are in the report.
    truth = json.loads((tmp_path / "summary.json").read_text())["planted_truth"]
    runs = load_runs(tmp_path / "store")
    in_month = set()
    for loop in truth["crash_loops"]:
        ends = runs.filter(pl.col("job_id_raw") == loop["job_id_raw"])["end_time"]
        if ends.min().strftime("%Y-%m") == ends.max().strftime("%Y-%m") == "2024-01":
            in_month.add(str(loop["job_id_raw"]))
    assert in_month  # the default seed plants at least one loop in January
    found = {loop["job_id"] for loop in report["requeue_loops"]["loops"]}
    assert in_month <= found
    for f in report["figures"].values():
        assert "missing" not in f
        assert (tmp_path / f["png"]).exists() and (tmp_path / f["svg"]).exists()
    html = (tmp_path / "index.html").read_text()
    assert "<h1>GPU cluster reliability, 2024-01</h1>" in html
    assert f"open {(tmp_path / 'index.html').resolve()}" in result.output
