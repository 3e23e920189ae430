"""The done-when measurement of issue 11: every recorded *healthy* node passes every light check
(warn allowed, never fail), and every recorded *broken* output fails the check that should catch
it.  Only recordings as they were captured count here (no edited copies); ``corpus_table``
is also what the report's counts are computed from (``pytest -s`` prints it)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from aegis_slurm.node import checks
from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import (
    new_sel_entries,
    parse_dcgm_diag,
    parse_edac,
    parse_gpu_burn,
    parse_ibstat,
    parse_meminfo,
    parse_nccl_tests,
    parse_nvbandwidth,
    parse_nvidia_smi_q,
    parse_nvlink_status,
    parse_proc_modules,
    parse_smartctl,
    parse_stream,
)

from ._fixtures import FIX, fixture_text

#: recorded nvidia-smi -q of healthy nodes -> expectations an admin of that node type would set
#: (recordings with GPU processes were taken on nodes running jobs: judged as a HealthCheck on a
#: busy node would judge them, gpu_scope "busy")
BUSY = {"gpus": 8, "gpu_scope": "busy"}
SMI_HEALTHY = {
    "gpud/nvidia-smi-query.535.161.08.out.0.valid": {"gpus": 8},
    "gpud/nvidia-smi-query.535.183.01.out.0.valid": BUSY,
    "gpud/nvidia-smi-query.535.154.05.out.0.valid": BUSY,
    "gpud/nvidia-smi-query.535.154.05.out.0.valid.4090": BUSY,
    "gpud/nvidia-smi-query.535.154.05.out.1.valid": BUSY,
    "gpud/nvidia-smi-query.535.154.05.out.2.valid": BUSY,
    "gpud/nvidia-smi-query.535.154.05.out.3.valid": BUSY,
    "gpud/nvidia-smi-query.560.35.03.out.0.valid": {"gpus": 1, "gpu_scope": "busy"},
    # machines recorded by other people that nobody here tuned on (review of issue 11)
    "blog/xuesongtap-a100x8.nvidia-smi-q.txt": {"gpus": 8},
    "gls/A10.nvidia-smi-q.txt": {"gpus": 1},
    "gls/GH200.nvidia-smi-q.txt": {"gpus": 1},
    "gls/GTX680.nvidia-smi-q.txt": {"gpus": 1},
    "gls/H100NVLx2.nvidia-smi-q.txt": {"gpus": 2},
    "gls/H100SXMx8.nvidia-smi-q.txt": {"gpus": 8},
    "gls/H200.nvidia-smi-q.txt": {"gpus": 1},
    "gls/L4.nvidia-smi-q.txt": {"gpus": 1},
    "gls/L40S.nvidia-smi-q.txt": {"gpus": 1},
    "gls/RTX5090.nvidia-smi-q.txt": {"gpus": 1},
    "gls/RTX_A6000_x9.nvidia-smi-q.txt": {"gpus": 9},
    "gls/V100_x8.nvidia-smi-q.txt": {"gpus": 8},
    # "nvidia-smi -q -i 1" of an 8x V100 node (driver 470): one GPU block, so no GPU count
    "blog/bsyonline-v100-470.nvidia-smi-q-i1.txt": {},
}
#: recordings broken for some checks and healthy for the others (label: what NVIDIA's docs say
#: the recorded state means, not what our check says)
PARTLY_BROKEN = {
    # 4 uncorrectable DRAM errors and a row remap pending
    "gpud/nvidia-smi-query.535.129.03.out.0.valid.a10": ({"gpus": 1}, {"row_remap"}),
    # GPU1 "Remapped Rows: Pending: Yes" after a correctable error: NVIDIA's memory error
    # management guide says a pending remap takes effect only after a GPU reset
    "gls/A100SXMx4.nvidia-smi-q.txt": ({"gpus": 4}, {"row_remap"}),
    # nvidia-smi refusing after a driver upgrade without reboot (a Slurm node whose jobs could
    # not get GPUs; an Ubuntu 22.04 node with the 570 driver): broken, no GPU data at all
    "bugreports/nvidia-smi.shine_cluster_30.mismatch.txt": ({"gpus": 4}, {"gpu_count"}),
    "bugreports/nvidia-smi.tinygrad_ogkm_47.mismatch.txt": ({"gpus": 1}, {"gpu_count"}),
}
SMI_CHECKS = [
    checks.gpu_count,
    checks.driver_version,
    checks.ecc_uncorrectable,
    checks.row_remap,
    checks.retired_pages,
    checks.pcie_link,
    checks.clocks_thermal,
    checks.gpu_processes,
    checks.persistence_mode,
    checks.vbios,
    checks.ecc_health,
    checks.gpu_reset_required,
    checks.app_clocks,
]


def _xids(rel: str) -> list[xidcat.XidEvent]:
    return xidcat.parse_xids(fixture_text(rel))


def _smart(rel_dir: str) -> dict:
    return parse_smartctl({p.stem: p.read_text() for p in sorted((FIX / rel_dir).glob("*.json"))})


def _edac_listing(rel: str) -> dict:
    """A pasted ``path`` / ``value`` listing of EDAC sysfs files -> what the edac probe reads
    (``mcN/{ce,ue}_count`` only; the csrow files are per-DIMM detail)."""
    lines = fixture_text(rel).split()
    raw: dict = {}
    for path, value in zip(lines[::2], lines[1::2], strict=True):
        parts = path.split("/")
        if len(parts) == 7 and parts[-1] in ("ce_count", "ue_count"):
            raw.setdefault(parts[5], {})[parts[-1][:2]] = value
    return parse_edac(raw)


def _edac() -> dict:
    mc = FIX / "node_exporter/sys/devices/system/edac/mc/mc0"
    return parse_edac(
        {"mc0": {"ce": (mc / "ce_count").read_text(), "ue": (mc / "ue_count").read_text()}}
    )


# (check function, recording, parse, expectations, "healthy" | "broken")
Case = tuple[Callable[[Any, dict], Any], str, Callable[[], Any], dict, str]
OTHER: list[Case] = [
    (checks.nvlink, "gpud/nvidia-smi.nvlink.status.a100",
     lambda: parse_nvlink_status(fixture_text("gpud/nvidia-smi.nvlink.status.a100")),
     {"gpus": 8, "nvlink_links": 12}, "healthy"),
    (checks.nvlink, "azurehpc-health-checks/bad_nvlink_status.txt",
     lambda: parse_nvlink_status(fixture_text("azurehpc-health-checks/bad_nvlink_status.txt")),
     {"gpus": 1, "nvlink_links": 12}, "broken"),
    (checks.nvlink, "nvidia/nvlink_b200_all_inactive.txt",
     lambda: parse_nvlink_status(fixture_text("nvidia/nvlink_b200_all_inactive.txt")),
     {"gpus": 1, "nvlink_links": 18}, "broken"),
    (checks.ib_ports, "gpud/ibstat.47.0.h100.all.active.0",
     lambda: parse_ibstat(fixture_text("gpud/ibstat.47.0.h100.all.active.0")),
     {"ib_ports": 8, "ib_rate_gbps": 400, "ib_link_layer": "Ethernet"}, "healthy"),
    (checks.ib_ports, "gpud/ibstat.47.0.h100.some.down.with.polling.1",
     lambda: parse_ibstat(fixture_text("gpud/ibstat.47.0.h100.some.down.with.polling.1")),
     {"ib_ports": 8, "ib_rate_gbps": 400, "ib_link_layer": "Ethernet"}, "broken"),
    (checks.retired_pages, "azurehpc-health-checks/bad_nvsmi8_output.txt",
     lambda: parse_nvidia_smi_q(fixture_text("azurehpc-health-checks/bad_nvsmi8_output.txt")),
     {"gpus": 8}, "broken"),
    (checks.xid_events, "gpud/dmesg.decode.iso.log",
     lambda: _xids("gpud/dmesg.decode.iso.log"), {}, "healthy"),
    (checks.xid_events, "gpud/dmesg-with-xid-119.log",
     lambda: _xids("gpud/dmesg-with-xid-119.log"), {}, "broken"),
    (checks.xid_events, "nvidia/xid_driver_examples.log",
     lambda: _xids("nvidia/xid_driver_examples.log"), {}, "broken"),
    (checks.xid_events, "nvidia/xid_gpud_examples.log",
     lambda: _xids("nvidia/xid_gpud_examples.log"), {}, "broken"),
    # Xid lines pasted in public bug reports (tests/fixtures/hostsignals/README.md): broken when
    # the report is a hardware failure, healthy when the thread is an application fault
    *(
        (checks.xid_events, rel, (lambda rel=rel: _xids(rel)), {}, label)
        for rel, label in (
            ("bugreports/xid_gpu_operator_1146.log", "broken"),
            ("bugreports/xid_nvforum_292539_nvlink.log", "broken"),
            ("bugreports/xid_nvforum_49452_bus.log", "broken"),
            ("bugreports/xid_ogkm_461_arm64.log", "broken"),
            ("bugreports/xid_nvforum_47210_app.log", "healthy"),
            ("bugreports/xid_ogkm_1030_mmu.log", "healthy"),
        )
    ),
    (checks.kernel_modules, "gpud/lsmod.peermem.h100",
     lambda: parse_proc_modules(fixture_text("gpud/lsmod.peermem.h100")),
     {"kernel_modules": ["nvidia_peermem", "nvidia"]}, "healthy"),
    (checks.swap, "node_exporter/proc/meminfo",
     lambda: parse_meminfo(fixture_text("node_exporter/proc/meminfo")), {}, "healthy"),
    (checks.memory, "node_exporter/proc/meminfo",
     lambda: parse_meminfo(fixture_text("node_exporter/proc/meminfo")), {}, "healthy"),
    (checks.edac, "node_exporter/sys/devices/system/edac/mc/mc0", _edac, {}, "broken"),
    *(
        (checks.edac, rel, (lambda rel=rel: _edac_listing(rel)), {}, "healthy")
        for rel in (
            "bugreports/edac.netdata_1508_server_a.txt",
            "bugreports/edac.netdata_1508_server_b.txt",
        )
    ),
    (checks.ipmi_sel, "ipmitool/sel_list.openbmc_issue273_mce.txt",
     lambda: new_sel_entries(fixture_text("ipmitool/sel_list.openbmc_issue273_mce.txt"),
                             {"sel_seen": []}), {}, "broken"),
    (checks.ipmi_sel, "ipmitool/sel_list.opbuild_issue594_boot.txt",
     lambda: new_sel_entries(fixture_text("ipmitool/sel_list.opbuild_issue594_boot.txt"),
                             {"sel_seen": []}), {}, "healthy"),
    (checks.ipmi_sel, "ipmitool/sel_elist.sos_issue2015.txt",
     lambda: new_sel_entries(fixture_text("ipmitool/sel_elist.sos_issue2015.txt"),
                             {"sel_seen": []}), {}, "healthy"),
    # full profile
    (checks.nvme_smart, "gcm/smartctl_dumps/cache_good",
     lambda: _smart("gcm/smartctl_dumps/cache_good"), {}, "healthy"),
    (checks.nvme_smart, "gcm/smartctl_dumps/learn_bad_nvme9",
     lambda: _smart("gcm/smartctl_dumps/learn_bad_nvme9"), {}, "broken"),
    (checks.dcgm_diag, "gcm/dcgmi_diag_pass.json",
     lambda: parse_dcgm_diag(fixture_text("gcm/dcgmi_diag_pass.json")), {}, "healthy"),
    (checks.dcgm_diag, "gcm/dcgmi_diag_fail.json",
     lambda: parse_dcgm_diag(fixture_text("gcm/dcgmi_diag_fail.json")), {}, "broken"),
    (checks.nccl_allreduce, "nccl-tests/ztan-NCCL-test-result",
     lambda: parse_nccl_tests(fixture_text("nccl-tests/ztan-NCCL-test-result")),
     {"nccl_min_busbw_gbps": 300}, "healthy"),
    (checks.nccl_allreduce, "superbenchmark/nccl_allreduce.log",
     lambda: parse_nccl_tests(fixture_text("superbenchmark/nccl_allreduce.log")),
     {"nccl_min_busbw_gbps": 200}, "healthy"),
    (checks.pcie_bandwidth, "superbenchmark/nvbandwidth_results.log",
     lambda: parse_nvbandwidth(fixture_text("superbenchmark/nvbandwidth_results.log")), {},
     "healthy"),
    (checks.cpu_stream, "superbenchmark/streamResultZen.log",
     lambda: parse_stream(fixture_text("superbenchmark/streamResultZen.log")), {}, "healthy"),
    (checks.cpu_stream, "superbenchmark/streamResultNeo.log",
     lambda: parse_stream(fixture_text("superbenchmark/streamResultNeo.log")), {}, "healthy"),
    (checks.gpu_burn, "superbenchmark/gpu_burn.log",
     lambda: parse_gpu_burn(fixture_text("superbenchmark/gpu_burn.log")), {}, "healthy"),
]  # fmt: skip


def corpus_table() -> list[tuple[str, str, str, str, str]]:
    """(check, recording, label, verdict state, evidence) for every recorded output."""
    rows = []
    for rel, exp in SMI_HEALTHY.items():
        q = parse_nvidia_smi_q(fixture_text(rel))
        for fn in SMI_CHECKS:
            v = fn(q, exp)
            rows.append((v.check, rel, "healthy", v.state, v.evidence))
    for rel, (exp, broken_for) in PARTLY_BROKEN.items():
        q = parse_nvidia_smi_q(fixture_text(rel))
        for fn in SMI_CHECKS:
            v = fn(q, exp)
            label = "broken" if v.check in broken_for else "healthy"
            rows.append((v.check, rel, label, v.state, v.evidence))
    for fn, rel, load, exp, label in OTHER:
        v = fn(load(), exp)
        rows.append((v.check, rel, label, v.state, v.evidence))
    return rows


def test_no_healthy_recording_fails_and_every_broken_one_is_caught():
    rows = corpus_table()
    wrong = [
        r
        for r in rows
        if (r[2] == "healthy" and r[3] not in ("pass", "warn", "skip"))
        or (r[2] == "broken" and r[3] != "fail")
    ]
    assert not wrong, wrong
    counts = Counter((r[0], r[2]) for r in rows)
    for (check, label), n in sorted(counts.items()):
        print(f"{check:20s} {label:8s} {n}")
    assert sum(n for (_, label), n in counts.items() if label == "broken") == 19
    assert len({r[1] for r in rows}) >= 48


def test_truncated_mangled_nvidia_smi_never_crashes_a_check():
    # gpud's recorded invalid dump: "Attached GPUs : 8" but one truncated GPU block with mangled
    # keys.  Every GPU check still returns a verdict (a raise would be an aegis bug), and the
    # GPUs that are not accounted for fail gpu_count.
    q = parse_nvidia_smi_q(fixture_text("gpud/nvidia-smi-query.535.183.01.out.0.invalid"))
    states = {fn(q, {"gpus": 8}).check: fn(q, {"gpus": 8}).state for fn in SMI_CHECKS}
    assert len(states) == len(SMI_CHECKS) and states["gpu_count"] == "fail"
