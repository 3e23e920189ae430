"""Issue 13 items 5, 6: on a store with collected Epilog records, report.json equals each
command's ``--json`` (by construction: both are the sections layer), the records attribute the
runs they belong to, and ``--signals STORE/signals/records.parquet`` works."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from report_store import MONTH, make_store
from test_report_json import same

from aegis_slurm.accounting import load_runs
from aegis_slurm.accounting.signals import RECORDS, collect
from aegis_slurm.cli import main
from aegis_slurm.node import spool
from aegis_slurm.report.builder import build_report
from aegis_slurm.simulate.history import SimConfig

SECTIONS = {
    "taxonomy": "taxonomy",
    "failure_rate": "failure-rate",
    "mttf": "mttf",
    "goodput": "goodput",
    "requeue_loops": "requeue-loops",
    "lemon_nodes": "lemon-nodes",
    "measured_ettr": "measured-ettr",
}


def cli_json(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[int]]:
    root = tmp_path_factory.mktemp("collected")
    b = make_store(root, SimConfig(nodes=48, days=31, seed=11, crash_loops=1, lemons=1))
    runs = load_runs(b.store)
    # Epilog records of ten FAILED multi-GPU runs that nothing else attributes: an XID 79 on
    # their first node, captured a second after the end (as the Epilog does).
    failed = (
        runs.filter(
            (pl.col("state") == "FAILED")
            & (pl.col("admin_comment").fill_null("") == "")
            & (pl.col("gpus") > 128)
        )
        .sort("end_time")
        .head(10)
    )
    assert failed.height >= 3
    sp = root / "spool"
    for r in failed.iter_rows(named=True):
        spool.append(
            sp,
            {
                "v": 1,
                "node": r["nodes"][0],
                "job_id": str(r["job_id_raw"]),
                "run": int(r["run_index"]),
                "cluster": r["cluster"],
                "captured_at": r["end_time"].isoformat(),
                "signals": [
                    {"signal": "xid79", "kind": "critical", "critical": True, "detail": "XID 79"}
                ],
            },
        )
    assert collect([sp], b.store)["added"] == failed.height
    return b.store, failed["job_id_raw"].to_list()


def test_report_equals_commands_on_a_store_with_collected_records(store, tmp_path: Path):
    st, jobs = store
    rep = build_report(st, MONTH, tmp_path / "r")
    assert rep["inputs"]["collected_epilog_records"] is True
    assert not any("No node-signal table" in n for n in rep["notes"])
    for key, cmd in SECTIONS.items():
        same(rep[key], cli_json(cmd, "--store", str(st), "--month", MONTH), key)
    # The records attributed exactly the runs they belong to, as their own record.
    sources = rep["taxonomy"]["attribution_sources"]
    assert sources["node_signal"]["FAILED"] == len(jobs)
    assert rep["data_quality"]["infra_failures_by_source"]["node_signal"] == len(jobs)
    # One partition in the simulator: its breakdown row is the whole month.
    (part,) = rep["breakdowns"]["partition"]
    assert (
        part["runs"] == rep["summary"]["runs"]
        and part["rf_failures"] == rep["failure_rate"]["failures"]
    )
    # Every table as CSV, readable back with the same rows.
    mttf = pl.read_csv(tmp_path / "r" / rep["csv"]["mttf_by_size"])
    assert mttf["gpus"].to_list() == [b["gpus"] for b in rep["mttf"]["buckets"]]
    loops = pl.read_csv(tmp_path / "r" / rep["csv"]["crash_loops"])
    assert loops.height == len(rep["requeue_loops"]["loops"])
    assert 'href="csv/mttf_by_size.csv"' in (tmp_path / "r" / "index.html").read_text()


def test_store_records_file_as_signals_option(store, tmp_path: Path):
    st, jobs = store
    records = st / RECORDS
    res = CliRunner().invoke(
        main,
        [
            "report",
            "--store",
            str(st),
            "--month",
            MONTH,
            "--out",
            str(tmp_path / "r"),
            "--signals",
            str(records),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads(res.output)
    # Read once, not twice: the same attribution as without the option.
    assert rep["taxonomy"]["attribution_sources"]["node_signal"]["FAILED"] == len(jobs)
    same(
        rep["failure_rate"],
        cli_json("failure-rate", "--store", str(st), "--month", MONTH, "--signals", str(records)),
    )


def test_signal_table_without_the_needed_columns_is_one_line_error(store, tmp_path: Path):
    st, _ = store
    bad = tmp_path / "bad.csv"
    bad.write_text("host,when\nn1,2024-01-02\n")
    res = CliRunner().invoke(main, ["taxonomy", "--store", str(st), "--signals", str(bad)])
    assert res.exit_code == 1
    assert "missing node, time, signal, critical" in res.output
    assert "Traceback" not in res.output


def test_site_config_sets_the_parameters_the_page_prints(store, tmp_path: Path):
    st, _ = store
    cfg = tmp_path / "aegis.toml"
    cfg.write_text("[analytics]\ngpus_per_node = 4\nrestart_min = 7.5\nckpt_write_min = 1.0\n")
    out = tmp_path / "r"
    res = CliRunner().invoke(
        main,
        ["report", "--store", str(st), "--month", MONTH, "--out", str(out), "--config", str(cfg)],
    )
    assert res.exit_code == 0, res.output
    rep = json.loads((out / "report.json").read_text())
    p = rep["parameters"]
    assert (p["gpus_per_node"], p["gpus_per_node_source"], p["restart_min"]) == (
        4,
        "site config",
        7.5,
    )
    plan = rep["ettr_planning"]
    assert plan["gpus_per_node"] == 4 and plan["u0_min"] == 7.5 and plan["ckpt_write_min"] == 1.0
    assert all(c["n_nodes"] == -(-c["gpus"] // 4) for c in plan["curves"])
    assert all(0 < c["optimal_min"] < 240 for c in plan["curves"])  # a real optimum with w > 0
    assert rep["mttf"]["gpus_per_node"] == 4
    bad = tmp_path / "bad.toml"
    bad.write_text("[analytics]\ngpus_per_nod = 4\n")
    res = CliRunner().invoke(
        main,
        ["report", "--store", str(st), "--month", MONTH, "--out", str(out), "--config", str(bad)],
    )
    assert res.exit_code == 1 and "unknown key analytics.gpus_per_nod" in res.output
