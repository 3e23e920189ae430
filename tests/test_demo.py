"""The README's first command: `aegis-slurm demo` end to end (simulate -> ingest -> analytics)."""

from __future__ import annotations

import json

from click.testing import CliRunner

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
