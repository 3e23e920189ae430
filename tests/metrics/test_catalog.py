"""The catalog uses the metric names and types the exporters really ship (recorded fixtures)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from aegis_slurm.metrics.catalog import DEFAULT_METRICS
from aegis_slurm.metrics.priority import default_priority

FIX = Path(__file__).parents[1] / "fixtures" / "metrics"

#: a DCGM profiling field dcgm-exporter serves when a site lists it in its counters CSV; it is
#: not in the shipped default-counters.csv (the issue names it; DCGM field id 1011)
NOT_IN_DEFAULT_CSV = {"DCGM_FI_PROF_NVLINK_TX_BYTES"}


def dcgm_types() -> dict[str, str]:
    out = {}
    with open(FIX / "dcgm-exporter-default-counters.csv") as fh:
        for row in csv.reader(fh):
            if len(row) >= 2 and row[0].strip() and not row[0].lstrip().startswith("#"):
                out[row[0].strip()] = row[1].strip()
    return out


def node_types() -> dict[str, str]:
    out = {}
    for line in (FIX / "node-exporter-e2e-output-excerpt.txt").read_text().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out[name] = kind
    return out


def test_dcgm_metrics_are_enabled_by_default_with_the_same_type() -> None:
    shipped = dcgm_types()
    for m in DEFAULT_METRICS:
        if m.source == "dcgm" and m.name not in NOT_IN_DEFAULT_CSV and m.derived is None:
            assert shipped.get(m.name) == m.kind, m.name


def test_node_exporter_metrics_exist_with_the_same_type() -> None:
    shipped = node_types()
    for m in DEFAULT_METRICS:
        if m.source == "node" and m.name in shipped:
            assert shipped[m.name] == m.kind, m.name
    ib = [m.name for m in DEFAULT_METRICS if m.name.startswith("node_infiniband")]
    assert ib and all(n in shipped for n in ib)


def test_shipped_priority_covers_the_catalog() -> None:
    assert sorted(default_priority()) == sorted(m.name for m in DEFAULT_METRICS)
    doc = json.loads(
        (Path(__file__).parents[2] / "aegis_slurm/metrics/priority_default.json").read_text()
    )
    assert doc["importance"][doc["priority"][0]] == max(doc["importance"].values())


def test_derived_metrics_read_a_shipped_series() -> None:
    # the lowest per-port IB rate and per-GPU NVLink rate are computed in PromQL from the
    # exporters' per-device counters, as they ship them (dcgm-exporter: in its default CSV)
    derived = [m for m in DEFAULT_METRICS if m.derived is not None]
    assert len(derived) == 2
    for m in derived:
        source, expr = m.derived
        shipped = dcgm_types() if m.source == "dcgm" else node_types()
        assert shipped.get(source) == "counter", source
        assert "{sel}" in expr and m.kind == "gauge"
