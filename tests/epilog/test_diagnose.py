"""Aegis Algorithm 1 on signal sets built from recorded outputs (the real parsers' output)."""

from __future__ import annotations

from datetime import UTC, datetime

from cbd._fixtures import fixture_text

from aegis_slurm.node import klog
from aegis_slurm.node import signals as sg
from aegis_slurm.node.diagnose import diagnose, root_diag

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC).timestamp()
NODES = [f"gpu{i:02d}" for i in range(1, 9)]


def _xid119() -> list[dict]:
    lines, _ = klog.since(fixture_text("gpud/dmesg-with-xid-119.log"), None)
    return sg.collapse(sg.kernel_signals(lines, 0.0, NOW))


def _flap() -> list[dict]:
    lines, _ = klog.since(fixture_text("azurehpc-health-checks/1dev_6flap_syslog"), None)
    return sg.link_flaps(lines, 2, NOW)


def _app_xids() -> list[dict]:
    lines, _ = klog.since(fixture_text("gpud/dmesg.decode.iso.log"), None)
    return sg.kernel_signals(lines, 0.0, NOW)


def _nccl(peer: str) -> list[dict]:
    line = f"[ 99.0] NCCL WARN NET/IB : Got completion with error 12, remote {peer}"
    return sg.kernel_signals([line], 0.0, NOW)


def recs(**by_node: list[dict]) -> list[dict]:
    out = [{"node": n, "signals": by_node.get(n, [])} for n in NODES]
    return out


def test_critical_error_isolates_exactly_that_node_even_amid_distributed_noise():
    noise = {n: _flap() for n in NODES[:5]}
    d = diagnose(NODES, recs(**noise, gpu06=_xid119() + _app_xids()))
    assert d.verdict == "critical" and d.nodes == ["gpu06"]
    assert "drain" in d.actions["gpu06"] and "reboot" in d.actions["gpu06"]
    assert any("xid119" in e and "0000:9b:00" in e for e in d.evidence)


def test_application_xids_alone_are_not_a_hardware_verdict():
    d = diagnose(NODES, recs(**{n: _app_xids() for n in NODES}))
    assert d.verdict == "no-signals" and d.nodes == []


def test_distributed_errors_on_two_hosts_isolate_both():
    d = diagnose(NODES, recs(gpu02=_flap(), gpu07=_flap()))
    assert d.verdict == "distributed-few" and d.nodes == ["gpu02", "gpu07"]


def test_root_diag_finds_the_common_destination_inside_the_job():
    by = {n: _nccl("gpu05") for n in NODES if n != "gpu05"}
    d = diagnose(NODES, recs(**by))
    assert d.verdict == "root-cause" and d.nodes == ["gpu05"]
    assert "7 of 7" in d.detail


def test_root_diag_outside_the_job_is_not_host_side():
    lines = ["[ 9.0] nfs: server nas01 not responding, still trying"]
    by = {n: sg.kernel_signals(lines, 0.0, NOW) for n in NODES[:6]}
    d = diagnose(NODES, recs(**by))
    assert d.verdict == "external" and d.nodes == [] and "nas01" in d.action


def test_no_common_endpoint_is_a_distributed_problem():
    by = {n: _flap() for n in NODES[:4]}
    d = diagnose(NODES, recs(**by))
    assert d.verdict == "distributed" and d.nodes == []
    assert "no single culprit" in d.action


def test_split_peers_do_not_make_a_culprit():
    by = {
        "gpu01": _nccl("gpu05"),
        "gpu02": _nccl("gpu05"),
        "gpu03": _nccl("gpu06"),
        "gpu04": _nccl("gpu06"),
    }
    assert root_diag({n: s for n, s in by.items()}, NODES)[0] is None


def test_repeat_offender_is_sent_for_repair_after_three_relapses():
    r = recs(gpu03=_xid119())
    assert "repair" not in diagnose(NODES, r, history={"gpu03": 2}).actions["gpu03"]
    d = diagnose(NODES, r, history={"gpu03": 3})
    assert "send for repair" in d.actions["gpu03"] and d.action.startswith("send for repair")


def test_node_fail_without_a_record_blames_the_silent_node():
    r = [x for x in recs() if x["node"] != "gpu04"]
    d = diagnose(NODES, r, job_state="NODE_FAIL")
    assert d.verdict == "critical" and d.nodes == ["gpu04"] and d.missing == ["gpu04"]
    assert diagnose(NODES, r, job_state="FAILED").verdict == "no-signals"
