"""The catalog uses the metric names and types the exporters really ship (recorded fixtures)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from aegis_slurm.metrics.catalog import (
    BY_NAME,
    CARRIER_FLAPPING,
    CLOCKSOURCE_SLOW,
    DEFAULT_METRICS,
    HARDWARE_XIDS,
    HW_SLOWDOWN,
    LINK_FLAPPING,
    NIC_SPEED,
    NVLINK5_COUNTERS,
    NVLINK_ERROR_COUNTERS,
    NVLINK_MIN,
    NVLINK_RATE_FIELD,
    PAUSE_SENT,
    SLOW_CLOCKSOURCES,
    is_name_pattern,
    source_matches,
    spec_for,
)
from aegis_slurm.metrics.priority import default_priority

FIX = Path(__file__).parents[1] / "fixtures" / "metrics"
NVLINK_BW = "DCGM_FI_DEV_NVLINK_BANDWIDTH_"  # rate-valued fields the CSV types as counters

#: a DCGM profiling field dcgm-exporter serves when a site lists it in its counters CSV; it is
#: not in the shipped default-counters.csv (the issue names it; DCGM field id 1011)
NOT_IN_DEFAULT_CSV = {
    "DCGM_FI_PROF_NVLINK_TX_BYTES",
    # NVLink 5's counters (DCGM fields 1212-1214, 1219, both names): go-dcgm-nvlink5-fields.txt
    *(name for name, _, _ in NVLINK5_COUNTERS),
    # the PCIe link's current width and generation (DCGM fields 238, 237): PROVENANCE.md
    "DCGM_FI_DEV_PCIE_LINK_WIDTH",
    "DCGM_FI_DEV_PCIE_LINK_GEN",
}


#: listed in the shipped CSV commented out, as the NVLink error counters are: a site enables them
OPT_IN = {
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_RETIRED_DBE",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
}

#: node_exporter exposes /proc/vmstat and /proc/net/snmp fields untyped; oom_kill and TCP's
#: retransmitted segments are counts since boot
UNTYPED_COUNTERS = {"node_vmstat_oom_kill", "node_netstat_Tcp_RetransSegs"}


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


def dcgm_opt_in_types() -> dict[str, str]:
    """The fields the shipped CSV lists commented out: a site enables them by uncommenting."""
    out = {}
    for line in (FIX / "dcgm-exporter-default-counters.csv").read_text().splitlines():
        row = [c.strip() for c in line.lstrip("# ").split(",")]
        if line.startswith("#") and len(row) >= 2 and row[0].startswith("DCGM_FI_"):
            out[row[0]] = row[1]
    return out


def test_dcgm_metrics_are_enabled_by_default_with_the_same_type() -> None:
    shipped, opt_in = dcgm_types(), dcgm_opt_in_types()
    for m in DEFAULT_METRICS:
        if m.source == "dcgm" and m.name not in NOT_IN_DEFAULT_CSV and m.derived is None:
            if m.name in NVLINK_ERROR_COUNTERS or m.name in OPT_IN:  # commented out: opt in
                assert m.name not in shipped and opt_in.get(m.name) == m.kind, m.name
            else:
                assert shipped.get(m.name) == m.kind, m.name
    assert set(NVLINK_ERROR_COUNTERS) <= set(opt_in)


def test_node_exporter_metrics_exist_with_the_same_type() -> None:
    shipped = node_types()
    for m in DEFAULT_METRICS:
        if m.source == "node" and m.name in shipped:
            want = "untyped" if m.name in UNTYPED_COUNTERS else m.kind
            assert shipped[m.name] == want, m.name
    # mlx5's hw_counters (node_exporter >= 1.11): counters, per its collector's source
    hw = (FIX / "node-exporter-infiniband-hw-counters.txt").read_text()
    for m in DEFAULT_METRICS:
        short = m.name.removeprefix("node_infiniband_")
        if m.name.startswith("node_infiniband") and m.name not in shipped:
            assert f'pushCounter(ch, "{short}"' in hw and m.kind == "counter", m.name
    ib = [m.name for m in DEFAULT_METRICS if m.name.startswith("node_infiniband")]
    assert ib and all(n in shipped or n.removeprefix("node_infiniband_") in hw for n in ib)
    for name in ("node_edac_correctable_errors_total", "node_softnet_dropped_total"):
        assert shipped[name] == BY_NAME[name].kind == "counter"
    ethernet = [m.name for m in DEFAULT_METRICS if m.name.startswith("node_network")]
    assert len(ethernet) == 4 and all(n in shipped for n in ethernet)
    assert shipped["node_vmstat_oom_kill"] == "untyped" and BY_NAME[
        "node_vmstat_oom_kill"
    ].kind == ("counter")
    # the filesystem collector's device_error: a gauge, 1 for a mount that failed or hung
    fs = (FIX / "node-exporter-filesystem-device-error.txt").read_text()
    assert 'BuildFQName(namespace, subsystem, "device_error")' in fs
    assert (
        "c.deviceErrorDesc, prometheus.GaugeValue" in fs
        and 'deviceError = "mountpoint timeout"' in fs
    )
    assert BY_NAME["node_filesystem_device_error"].kind == "gauge"
    # every plain node_exporter series of the catalog is in a recorded source
    plain = {m.name for m in DEFAULT_METRICS if m.source == "node" and m.derived is None}
    unrecorded = {n for n in plain if n not in shipped and not n.startswith("node_infiniband")}
    assert unrecorded == {
        "node_filesystem_device_error",
        "node_ethtool_transmitted_pause_storm_error_events",  # mlx5-ethtool-pfc-stat-names.txt
        # meminfo names each /proc/meminfo field; the e2e fixture's meminfo predates MemAvailable
        "node_memory_MemAvailable_bytes",
    }


def test_virtual_interfaces_are_left_out_of_the_link_series() -> None:
    """A container host's veths and bridges come and go with jobs: the PromQL leaves them out
    of the count of links up and of the carrier changes, and keeps the machine's NICs."""
    import re

    from aegis_slurm.metrics.prometheus import query_expr

    up = BY_NAME["node_network_up"]
    q = query_expr(up, "instance", ["gpu1:9100"], 22.5)
    assert q.startswith("sum by (instance) (last_over_time(node_network_up{instance=~")
    assert f',device!~"{up.exclude_devices}"}}' in q
    virtual = re.compile(f"(?:{up.exclude_devices})")
    for name in ("lo", "veth685b499d", "docker0", "br-lan", "virbr0", "cali60e575ce8db"):
        assert virtual.fullmatch(name), name
    for name in ("eth0", "eno1", "ens1f0np0", "ib0", "bond0", "enp4s0"):
        assert not virtual.fullmatch(name), name
    # other metrics keep the node matcher alone
    assert "device!~" not in query_expr(BY_NAME["node_load1"], "instance", ["gpu1:9100"], 22.5)


def test_shipped_priority_covers_the_catalog() -> None:
    assert sorted(default_priority()) == sorted(m.name for m in DEFAULT_METRICS)
    doc = json.loads(
        (Path(__file__).parents[2] / "aegis_slurm/metrics/priority_default.json").read_text()
    )
    assert doc["importance"][doc["priority"][0]] == max(doc["importance"].values())


def test_derived_metrics_read_a_shipped_series() -> None:
    # the lowest per-port IB rate and per-GPU NVLink rate are computed in PromQL from the
    # exporters' per-device counters, as they ship them (dcgm-exporter: in its default CSV)
    # (a rate of a counter; DCGM's NVLink bandwidth, a rate the CSV calls a counter, is read
    # as it is); the device counts count a shipped per-device series (any type)
    derived = [m for m in DEFAULT_METRICS if m.derived is not None]
    assert len(derived) == 10
    for m in derived:
        source, expr = m.derived
        if m.name in (LINK_FLAPPING, CARRIER_FLAPPING):  # a port down twice in half an hour
            assert node_types().get(source) == "counter" and m.hardware and m.agg == "max"
            above = 1.5 if m.name == LINK_FLAPPING else 2.5  # carrier: a loss and a return
            assert expr == f"increase({{sel}}[1800s]) > bool {above}"
            continue
        if m.name == NIC_SPEED:  # the physical NICs' speed, an unknown one (-1 Mb/s) as 0
            assert node_types().get(source) == "gauge" and m.hardware and m.healthy_high
            assert expr.startswith("clamp_min(last_over_time({sel}") and m.exclude_devices
            continue
        if m.name == HW_SLOWDOWN:  # DCGM field 112 under either name, NVML's hardware bits
            assert source_matches(source, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")
            assert source_matches(source, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
            assert not source_matches(source, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS_X")
            assert all(f"/ {bit}) % 2" in expr for bit in (8, 64, 128))  # no 0x4, no 0x20
            assert "< 1.4e14" in expr and expr.startswith("avg_over_time(")
            assert m.hardware and m.agg == "max" and (m.lo, m.hi) == (0, 1)
            continue
        if is_name_pattern(source):  # the NICs' pause: see the test below
            assert m.name == PAUSE_SENT and expr.startswith("rate(")
            continue
        if m.name == CLOCKSOURCE_SLOW:  # an info series: 1 for a slow clock source, else 0
            assert node_types().get(source) == "gauge" and m.hardware and m.agg == "max"
            assert f'clocksource=~"{SLOW_CLOCKSOURCES}"' in expr and " or 0 * " in expr
            continue
        shipped = dcgm_types() if m.source == "dcgm" else node_types()
        if m.agg == "count":
            assert source in shipped and expr == "{sel}" and m.scale == "devices", m.name
        elif source == NVLINK_RATE_FIELD:
            assert shipped.get(source) == "counter" and not expr.startswith("rate("), expr
        else:
            assert shipped.get(source) == "counter" and expr.startswith("rate("), source
        assert "{sel}" in expr and m.kind == "gauge"


def test_dcgm_nvlink_bandwidth_is_read_as_the_rate_it_is() -> None:
    """DCGM field 449 is MiB/s computed by DCGM from NVML's cumulative counters (dcgm-exporter
    PR #658; KempnerPulse #10: values 16721, 24531, 24493, 12129 between ticks on an H200).
    rate() would read each dip as a counter reset; the query reads the value."""
    from aegis_slurm.metrics.prometheus import query_expr

    q = query_expr(BY_NAME[NVLINK_MIN], "Hostname", ["gpu1"], 22.5)
    assert q == (
        'min by (Hostname) (last_over_time(DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{Hostname=~"gpu1"}'
        "[22s]))"
    )
    for name in (
        NVLINK_RATE_FIELD,
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L17",
    ):
        assert spec_for(name).kind == "gauge", name


def test_counter_names_are_read_case_deliberately() -> None:
    # Prometheus: exactly a lower-case ``_total``; DCGM: its upper-case ``*_TOTAL`` fields are
    # counters in dcgm-exporter's CSV, but for the memory capacities
    shipped = dcgm_types()
    assert spec_for("my_job_steps_total").kind == "counter"
    assert spec_for("my_job_steps_Total").kind == "gauge"
    assert spec_for("node_foo_TOTAL").kind == "gauge"  # not a DCGM field: case-sensitive
    for name in ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"):
        assert spec_for(name).kind == "counter"
    assert spec_for("DCGM_FI_DEV_FB_TOTAL").kind == "gauge"
    assert spec_for("DCGM_FI_DEV_BAR1_TOTAL").kind == "gauge"
    # every field the shipped CSV lists (commented or not) is typed as it types it, if it is
    # not in the catalog already
    text = (FIX / "dcgm-exporter-default-counters.csv").read_text().splitlines()
    for line in text:
        row = [c.strip() for c in line.lstrip("# ").split(",")]
        typed = len(row) >= 2 and row[1] in ("gauge", "counter")
        total = row[0].startswith("DCGM_FI_") and row[0].endswith(("_TOTAL", "_total"))
        if typed and total and row[0] not in BY_NAME and not row[0].startswith(NVLINK_BW):
            assert spec_for(row[0]).kind == row[1], row[0]
    assert shipped["DCGM_FI_DEV_XID_ERRORS"] == "gauge"


def test_hardware_xids_exclude_the_application_codes() -> None:
    assert {48, 74, 79, 94}.issubset(HARDWARE_XIDS)
    assert not {13, 31, 43, 45} & HARDWARE_XIDS


def node_exporter_ethtool_name(stat: str) -> str:
    """node_exporter's ethtool collector's name for a driver statistic (PROVENANCE.md):
    lower-cased, sanitised, ``rx``/``tx`` as a whole word spelt out."""
    import re

    name = re.sub(r"[^a-zA-Z0-9_:]", "_", stat).lower().lstrip("_")
    name = re.sub(r"(^|_)rx(_|$)", r"\1received\2", name)
    name = re.sub(r"(^|_)tx(_|$)", r"\1transmitted\2", name)
    return "node_ethtool_" + name


def test_the_pause_a_nic_sends_reads_mlx5s_own_counters() -> None:
    stats = [
        line.strip()
        for line in (FIX / "mlx5-ethtool-pfc-stat-names.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    names = [node_exporter_ethtool_name(s) for s in stats]
    source, _ = BY_NAME[PAUSE_SENT].derived
    read = {n for n in names if source_matches(source, n)}
    # the pause *sent*, per PFC priority and global; never the pause received (the network's
    # congestion), nor pause counts, transitions or traffic
    assert read == {
        "node_ethtool_transmitted_prio3_pause_duration",
        "node_ethtool_transmitted_global_pause_duration",
    }
    assert "node_ethtool_transmitted_pause_storm_error_events" in names
    assert "node_ethtool_transmitted_pause_storm_error_events" in BY_NAME
    # a plain name is matched as itself, never as a pattern
    assert not is_name_pattern("node_load1") and source_matches("node_load1", "node_load1")
    assert not source_matches("node_load1", "node_load15")


def test_nvlink5_counters_are_dcgm_fields_by_both_names() -> None:
    """DCGM 4.6 renamed NVLink 5's counters and kept the old names as aliases of the same
    field ids: the catalog reads either, each as an error counter on the events scale."""
    text = (FIX / "go-dcgm-nvlink5-fields.txt").read_text()
    ids = {}
    for name, _, _ in NVLINK5_COUNTERS:
        line = next(ln for ln in text.splitlines() if f'"{name}":' in ln)
        ids[name] = int(line.split(":")[1].strip().rstrip(","))
        assert BY_NAME[name].kind == "counter" and BY_NAME[name].scale == "events"
    assert sorted(set(ids.values())) == [1212, 1213, 1214, 1219]
    assert len(ids) == 8
    assert "NVLink5+ only. Returns aggregate value across all links." in text
