"""A cluster's CPU-only jobs fail too (found on the real test cluster): their GPU-hours bucket is
"none", one row, never bucket 0 — which crashed the report's goodput figure (``1 << -1``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from aegis_slurm.accounting import ingest_files
from aegis_slurm.cli import main

HEADER = (
    "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|AllocTRES"
)
FMT = "%Y-%m-%dT%H:%M:%S"


def _line(raw: int, state: str, start: datetime, nodes: str, n: int, tres: str) -> str:
    end = start + timedelta(hours=5)
    return (
        f"{raw}|{raw}|c|{state}|{int(state != 'COMPLETED')}:0|{start.strftime(FMT)}|"
        f"{start.strftime(FMT)}|{end.strftime(FMT)}|18000|{n}|{nodes}|{tres}"
    )


def test_cpu_only_node_failures_in_goodput_and_the_report(tmp_path: Path) -> None:
    t0 = datetime(2026, 3, 2, tzinfo=UTC)
    lines = [
        _line(1, "NODE_FAIL", t0, "c[01-02]", 2, "cpu=64,node=2"),  # CPU-only
        _line(2, "NODE_FAIL", t0 + timedelta(days=1), "c[03-04]", 2, "cpu=64,node=2"),
        _line(3, "NODE_FAIL", t0 + timedelta(days=2), "g[01-02]", 2, "cpu=64,gres/gpu=16,node=2"),
    ]
    lines += [
        _line(
            10 + d, "COMPLETED", t0 + timedelta(days=d), "g[01-04]", 4, "cpu=64,gres/gpu=32,node=4"
        )
        for d in range(3, 20)
    ]
    export = tmp_path / "a.txt"
    export.write_text("\n".join([HEADER, *lines]) + "\n")
    store = tmp_path / "store"
    ingest_files([export], store)

    r = CliRunner().invoke(main, ["goodput", "--store", str(store), "--month", "2026-03", "--json"])
    assert r.exit_code == 0, r.output
    buckets = [row["gpu_bucket"] for row in json.loads(r.stdout)["by_size"]]
    assert 0 not in buckets and buckets.count(None) <= 1
    assert 16 in buckets

    out = tmp_path / "report"
    r = CliRunner().invoke(
        main, ["report", "--store", str(store), "--month", "2026-03", "--out", str(out)]
    )
    assert r.exit_code == 0, r.output
    assert (out / "index.html").exists() and (out / "figures").is_dir()
