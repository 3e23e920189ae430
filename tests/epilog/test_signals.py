"""Signal extraction on recorded real outputs (tests/fixtures/hostsignals/, see its README)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import polars as pl
from cbd._fixtures import H100_Q, drop_gpu, edit_gpu, fixture_text

from aegis_slurm.analytics.attribution import parse_aegis_tag
from aegis_slurm.node import checks, klog
from aegis_slurm.node import signals as sg
from aegis_slurm.node.parse import parse_nvidia_smi_q

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp()


def test_xid_119_dmesg_gives_one_critical_signal_with_pci_and_kernel_time():
    lines, seen = klog.since(fixture_text("gpud/dmesg-with-xid-119.log"), None)
    got = sg.collapse(sg.kernel_signals(lines, 0.0, NOW))
    xids = [s for s in got if s["signal"].startswith("xid")]
    assert len(xids) == 1
    s = xids[0]
    assert s["signal"] == "xid119" and s["critical"] and s["kind"] == "critical"
    assert s["pci"] == "0000:9b:00"
    assert s["count"] == 5  # five XID 119 lines in the recording
    # dmesg -T stamp, host-local time (the test process runs with the machine's TZ)
    want = datetime.strptime("Sun Feb 23 16:24:18 2025", "%a %b %d %H:%M:%S %Y").timestamp()
    assert s["time"] == sg.iso(want)
    assert seen["n"] == len([x for x in lines if x.strip()]) and len(seen["tail"]) == 4


def test_application_xids_are_info_and_iso_stamps_are_parsed():
    got = sg.kernel_signals(
        klog.since(fixture_text("gpud/dmesg.decode.iso.log"), None)[0], 0.0, NOW
    )
    xids = {s["signal"] for s in got if s["signal"].startswith("xid")}
    assert xids == {"xid13", "xid43"}
    assert all(s["kind"] == "info" and not s["critical"] for s in got)
    assert all(s["time"] and s["time"].startswith("20") for s in got)


def test_epilog_judges_message_decided_xids_by_their_line_as_the_prolog_does():
    # Xid 154 names its own recovery action: "GPU Reset Required" is critical, "None" is not
    # (NVIDIA's Xid catalog); the Epilog must read the line, not the bare code.
    head = "[  100.000000] NVRM: Xid (PCI:0000:9b:00): 154, GPU recovery action changed from "
    reset = head + "0x0 (None) to 0x1 (GPU Reset Required)"
    cleared = head + "0x1 (GPU Reset Required) to 0x0 (None)"
    for line, critical in ((reset, True), (cleared, False)):
        got = [s for s in sg.kernel_signals([line], 0.0, NOW) if s["signal"] == "xid154"]
        assert len(got) == 1 and got[0]["critical"] is critical, line


def test_lines_seen_by_the_previous_epilog_are_not_reported_again():
    text = fixture_text("gpud/dmesg-with-xid-119.log")
    first, seen = klog.since(text, None)
    again, seen2 = klog.since(text, seen)
    assert first and again == [] and seen2 == seen
    more = (
        text + "\n[Sun Feb 23 17:00:00 2025] NVRM: Xid (PCI:0000:1b:00): 79, pid=1, GPU has "
        "fallen off the bus.\n"
    )
    new, _ = klog.since(more, seen)
    assert [s["signal"] for s in sg.kernel_signals(new, 0.0, NOW)] == ["xid79"]


def test_kmsg_monotonic_stamps_use_boot_time():
    boot = NOW - 1000.0
    line = "4,3964,206764307,-;NVRM: Xid (PCI:0000:9b:00): 79, pid=1, GPU has fallen off the bus."
    (s,) = sg.kernel_signals([line], boot, NOW)
    assert s["signal"] == "xid79" and s["time"] == sg.iso(boot + 206.764307)


def test_syslog_link_flaps_count_repeated_identical_lines():
    text = fixture_text("azurehpc-health-checks/1dev_6flap_syslog")
    lines, _ = klog.since(text, None)
    (flap,) = sg.link_flaps(lines, 2, NOW)
    assert flap["signal"] == "link_flap" and flap["kind"] == "distributed"
    assert flap["detail"] == "ib6 lost carrier 6x" and flap["iface"] == "ib6"
    assert sg.link_flaps(lines, 7, NOW) == []


def test_kernel_patterns_with_peers():
    lines = [
        "[  10.0] nfs: server storage01 not responding, still trying",
        "[  11.0] mlx5_core 0000:0c:00.0: mlx5_port_module_event: Port 1 link down",
        "[  12.0] NVRM: GPU at PCI:0000:1b:00: GPU has fallen off the bus.",
        "[  13.0] {1}[Hardware Error]: PCIe Bus Error: severity=Corrected, type=Physical",
    ]
    got = {s["signal"]: s for s in sg.kernel_signals(lines, 0.0, NOW)}
    assert got["nfs_timeout"]["peer"] == "storage01"
    assert got["nfs_timeout"]["kind"] == "distributed"
    assert got["ib_link_down"]["kind"] == "distributed"
    assert got["gpu_lost"]["critical"]
    assert got["pcie_aer"]["kind"] == "info"


def test_failed_checks_at_job_end_become_critical_signals():
    exp = {"gpus": 8}
    smi = parse_nvidia_smi_q(drop_gpu(H100_Q.read_text(), 4))
    verdicts = [checks.gpu_count(smi, exp), checks.ecc_uncorrectable(smi, exp)]
    got = sg.verdict_signals(verdicts, NOW)
    assert [s["signal"] for s in got] == ["gpu_lost"]
    assert got[0]["critical"] and "7 GPUs visible, 8 expected" in got[0]["detail"]


def test_ecc_and_row_remap_counter_growth():
    base = sg.gpu_counters(parse_nvidia_smi_q(H100_Q.read_text()))
    assert len(base) == 8 and all(v["ecc_uncorr"] == 0 for v in base.values())
    text = edit_gpu(H100_Q.read_text(), 2, r"DRAM Uncorrectable\s+: 0", "DRAM Uncorrectable : 2")
    text = edit_gpu(text, 2, r"Correctable Error\s+: 0", "Correctable Error : 1")
    cur = sg.gpu_counters(parse_nvidia_smi_q(text))
    got = sg.gpu_counter_signals(base, cur, NOW)
    kinds = {(s["signal"], s["kind"]) for s in got}
    assert ("ecc_uncorrectable", "critical") in kinds
    assert ("ecc_correctable", "info") in kinds
    assert {s["pci"] for s in got} == {list(cur)[2]}
    assert sg.gpu_counter_signals(cur, cur, NOW) == []  # no growth, no signal
    assert sg.gpu_counter_signals({}, cur, NOW) == []  # first reading: nothing to compare


def test_ib_counter_growth():
    got = sg.ib_counter_signals(
        {"mlx5_0/1": {"link_downed": 2, "symbol_error": 40}, "mlx5_1/1": {"symbol_error": 3}},
        10,
        NOW,
    )
    assert [(s["signal"], s["port"]) for s in got] == [
        ("ib_link_flap", "mlx5_0/1"),
        ("ib_errors", "mlx5_0/1"),
    ]


def test_tag_round_trips_through_the_analytics_parser():
    recs = [
        {"node": "node3", "signals": [{"signal": "ib_link_flap", "kind": "distributed"}]},
        {
            "node": "node2",
            "signals": [
                {"signal": "xid13", "kind": "info"},
                {"signal": "xid79", "kind": "critical"},
            ],
        },
    ]
    tag = sg.make_tag(sg.tag_pairs(recs))
    # Only critical signals are tagged: node3's link flap alone is no hardware failure.
    assert tag == "aegis:v1;hw=node2:xid79"
    assert sg.tag_pairs(recs[:1]) == []
    comment = sg.merge_comment("ticket 4711", tag)
    assert comment == "ticket 4711 aegis:v1;hw=node2:xid79"
    cause, nodes = parse_aegis_tag(pl.col("c"))
    out = pl.DataFrame({"c": [comment]}).select(cause.alias("cause"), nodes.alias("nodes"))
    assert out.row(0) == ("xid79", ["node2"])
    # re-tagging replaces our own tag, keeps the admin's text
    assert (
        sg.merge_comment(comment, "aegis:v1;hw=node9:gpu_lost")
        == "ticket 4711 aegis:v1;hw=node9:gpu_lost"
    )


def test_tag_stays_short():
    pairs = [(f"gpu{i:04d}", "xid79") for i in range(300)]
    tag = sg.make_tag(pairs, max_len=120)
    assert len(tag) <= 120 and tag.endswith(tuple(f";+{n}" for n in range(280, 300)))
    cause, nodes = parse_aegis_tag(pl.col("c"))
    out = pl.DataFrame({"c": [tag]}).select(cause.alias("cause"), nodes.alias("nodes"))
    assert out["cause"][0] == "xid79" and out["nodes"][0][0] == "gpu0000"
    # hostile node names never reach the tag
    assert sg.make_tag([("a b;c", "xid79")]) == ""


def test_line_time_formats():
    now = time.time()
    assert sg.line_time("no stamp here", 0.0, now) is None
    assert sg.line_time("[   5.500000] x", 100.0, now) == 105.5


def test_tag_round_trips_through_the_diagnose_parser():
    tag = sg.make_tag([("node3", "xid79"), ("node8", "node_fail")])
    assert sg.parse_tag(f"admin note\n{tag}") == {"node3": "xid79", "node8": "node_fail"}
    assert sg.parse_tag("no tag here") == {}
