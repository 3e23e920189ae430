"""`signals collect` into a store, automatic attribution in taxonomy, and `diagnose`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from aegis_slurm.accounting import ingest_files
from aegis_slurm.cli import main
from aegis_slurm.node import spool

HEADER = "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName"
RUNS = [
    # job 11: FAILED on 4 nodes, gpu03 had an XID 79 (the Epilog saw it)
    "11|11|c|FAILED|1:0|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T12:00:00|7195|4|"
    "gpu[01-04]|train",
    # job 12: FAILED, no hardware signal: a user failure
    "12|12|c|FAILED|1:0|2026-11-02T10:00:00|2026-11-02T10:00:05|2026-11-02T11:00:00|3595|2|"
    "gpu[05-06]|train",
]


def records(spool_dir: Path) -> None:
    xid = {
        "signal": "xid79",
        "kind": "critical",
        "critical": True,
        "time": "2025-02-23T16:24:18+00:00",
        "detail": "XID 79 on 0000:9b:00",
        "pci": "0000:9b:00",
    }
    for n in ("gpu01", "gpu02", "gpu03", "gpu04"):
        spool.append(
            spool_dir,
            {
                "v": 1,
                "node": n,
                "job_id": "11",
                "run": 0,
                "cluster": "c",
                "captured_at": "2026-11-02T12:00:01+00:00",
                "signals": [xid] if n == "gpu03" else [],
            },
        )
    for n in ("gpu05", "gpu06"):
        spool.append(
            spool_dir,
            {
                "v": 1,
                "node": n,
                "job_id": "12",
                "run": 0,
                "cluster": "c",
                "captured_at": "2026-11-02T11:00:01+00:00",
                "signals": [],
            },
        )


def invoke(*args: str) -> dict:
    r = CliRunner().invoke(main, [*args, "--json"])
    assert r.exit_code in (0, 4), r.output  # 4: no record of the job (no data)
    return json.loads(r.output)


def test_collect_is_idempotent_and_taxonomy_attributes_to_hardware(tmp_path):
    store = tmp_path / "store"
    export = tmp_path / "e.txt"
    export.write_text("\n".join([HEADER, *RUNS]) + "\n")
    ingest_files([export], store)
    before = invoke("taxonomy", "--store", str(store))
    assert before["attribution_sources"] == {}

    records(tmp_path / "spool")
    rep = invoke("signals", "collect", "--spool", str(tmp_path / "spool"), "--store", str(store))
    assert (rep["records_read"], rep["added"], rep["updated"]) == (6, 6, 0)
    parquet = store / "signals" / "records.parquet"
    mtime, content = parquet.stat().st_mtime_ns, parquet.read_bytes()
    again = invoke("signals", "collect", "--spool", str(tmp_path / "spool"), "--store", str(store))
    assert (again["added"], again["updated"], again["unchanged"]) == (0, 0, 6)
    assert parquet.stat().st_mtime_ns == mtime and parquet.read_bytes() == content

    after = invoke("taxonomy", "--store", str(store))
    assert after["attribution_sources"] == {"node_signal": {"FAILED": 1}}
    by_cat = {c["category"]: c["runs"] for c in after["by_category"]}
    assert by_cat == {"infra_failure": 1, "user_failure": 1}


def test_diagnose_names_the_node_and_reads_nodes_from_the_store(tmp_path):
    store = tmp_path / "store"
    export = tmp_path / "e.txt"
    export.write_text("\n".join([HEADER, *RUNS]) + "\n")
    ingest_files([export], store)
    records(tmp_path / "spool")
    d = invoke("diagnose", "11", "--spool", str(tmp_path / "spool"), "--store", str(store))
    assert d["verdict"] == "critical" and d["nodes"] == ["gpu03"]
    assert d["job_state"] == "FAILED" and d["job_nodes"] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert any("xid79" in e for e in d["evidence"])
    ok = invoke("diagnose", "12", "--spool", str(tmp_path / "spool"))
    assert ok["verdict"] == "no-signals"
    none = invoke("diagnose", "999", "--spool", str(tmp_path / "spool"))
    assert none["verdict"] == "no-records"
    human = CliRunner().invoke(main, ["diagnose", "11", "--spool", str(tmp_path / "spool")])
    assert "culprit: gpu03" in human.output


def test_explicit_signals_file_still_works_beside_collected_ones(tmp_path):
    store = tmp_path / "store"
    export = tmp_path / "e.txt"
    export.write_text("\n".join([HEADER, *RUNS]) + "\n")
    ingest_files([export], store)
    csv = tmp_path / "sig.csv"
    csv.write_text("node,time,signal,critical\ngpu05,2026-11-02T10:58:00,ecc_dbe,true\n")
    res = invoke("taxonomy", "--store", str(store), "--signals", str(csv))
    assert res["attribution_sources"] == {"node_signal": {"FAILED": 1}}
    records(tmp_path / "spool")
    invoke("signals", "collect", "--spool", str(tmp_path / "spool"), "--store", str(store))
    res = invoke("taxonomy", "--store", str(store), "--signals", str(csv))
    assert res["attribution_sources"] == {"node_signal": {"FAILED": 2}}
