"""The coverage checks (docs/cbd.md "Coverage") on recorded real outputs: the recording as it
is (healthy, or broken where the recording is), and an edited copy for the other side."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from aegis_slurm.node import cbd, checks, probes
from aegis_slurm.node.parse import (
    new_sel_entries,
    parse_cpu_topology,
    parse_edac,
    parse_meminfo,
    parse_nvbandwidth,
    parse_nvidia_smi_q,
    parse_proc_modules,
    parse_proc_snapshot,
    parse_smartctl,
    parse_stream,
)

from ._fixtures import FIX, edit_gpu, fixture_text

GPUD = "gpud/nvidia-smi-query."
H100 = GPUD + "535.161.08.out.0.valid"
TITAN_V = GPUD + "560.35.03.out.0.valid"
RTX4090 = GPUD + "535.154.05.out.0.valid"
NE = FIX / "node_exporter"


def smi(rel: str):
    return parse_nvidia_smi_q(fixture_text(rel))


def test_persistence_mode_recorded_disabled_titan_v():
    assert checks.persistence_mode(smi(H100), {}).state == "pass"
    v = checks.persistence_mode(smi(TITAN_V), {})
    assert (v.state, v.evidence) == ("warn", "persistence mode disabled on GPU0")
    assert checks.persistence_mode(smi(TITAN_V), {"persistence_mode": "require"}).state == "fail"
    assert checks.persistence_mode(smi(TITAN_V), {"persistence_mode": "off"}).state == "skip"


def test_vbios_consistency_and_expected_version():
    v = checks.vbios(smi(H100), {})
    assert (v.state, v.evidence) == ("pass", "VBIOS 96.00.74.00.0D on 8 GPUs")
    mixed = edit_gpu(
        fixture_text(H100),
        5,
        "VBIOS Version                         : 96.00.74.00.0D",
        "VBIOS Version                         : 96.00.74.00.01",
    )
    v = checks.vbios(parse_nvidia_smi_q(mixed), {})
    assert v.state == "warn" and "96.00.74.00.01, 96.00.74.00.0D" in v.evidence
    # the other recorded H100 node runs .01 everywhere: wrong for a site pinned to .0D
    v = checks.vbios(smi(GPUD + "535.183.01.out.0.valid"), {"vbios_versions": ["96.00.74.00.0D"]})
    assert v.state == "fail" and "GPU0 VBIOS 96.00.74.00.01 not in" in v.evidence


def test_ecc_health_sram_threshold_correctable_and_mode():
    text = fixture_text(H100)
    assert checks.ecc_health(parse_nvidia_smi_q(text), {}).state == "pass"
    # ECC N/A (TITAN V consumer board): not a failure
    assert checks.ecc_health(smi(TITAN_V), {}).state == "pass"
    sram = edit_gpu(
        text,
        4,
        "SRAM Threshold Exceeded       : No",
        "SRAM Threshold Exceeded       : Yes",
    )
    v = checks.ecc_health(parse_nvidia_smi_q(sram), {})
    assert (v.state, v.evidence) == ("fail", "GPU4 SRAM uncorrectable threshold exceeded")
    ce = edit_gpu(
        text, 2, "DRAM Correctable              : 0", "DRAM Correctable              : 25000"
    )
    v = checks.ecc_health(parse_nvidia_smi_q(ce), {})
    assert (v.state, v.evidence) == ("warn", "GPU2 25000 correctable volatile")
    off = edit_gpu(
        text,
        1,
        r"ECC Mode\n        Current                           : Enabled",
        "ECC Mode\n        Current                           : Disabled",
    )
    v = checks.ecc_health(parse_nvidia_smi_q(off), {"ecc_mode_required": True})
    assert v.evidence == "GPU1 ECC mode disabled"
    # recorded RTX 4090 nodes run with ECC off by choice: not a failure unless required
    assert checks.ecc_health(smi(RTX4090), {}).state == "pass"


def test_gpu_reset_required():
    text = fixture_text(H100)
    assert checks.gpu_reset_required(parse_nvidia_smi_q(text), {}).state == "pass"
    bad = edit_gpu(
        text, 6, "Reset Required                    : No", "Reset Required                    : Yes"
    )
    v = checks.gpu_reset_required(parse_nvidia_smi_q(bad), {})
    assert (v.state, v.evidence) == ("fail", "GPU6 reset required")


def test_app_clocks():
    for rel in (H100, RTX4090, TITAN_V):
        assert checks.app_clocks(smi(rel), {}).state == "pass", rel
    low = edit_gpu(
        fixture_text(H100),
        0,
        r"Applications Clocks\n        Graphics                          : 1980 MHz",
        "Applications Clocks\n        Graphics                          : 1410 MHz",
    )
    v = checks.app_clocks(parse_nvidia_smi_q(low), {})
    assert (v.state, v.evidence) == ("warn", "lowered: GPU0 Graphics 1410 vs default 1980")


def test_swap_recorded_meminfo():
    mi = parse_meminfo((NE / "proc" / "meminfo").read_text())  # 4 GiB swap, ~1 GiB used
    v = checks.swap(mi, {})
    assert v.state == "pass" and v.evidence.startswith("4.0 GiB swap")
    assert checks.swap(mi, {"swap_max_gib": 0}).state == "fail"
    assert checks.swap(mi, {"swap_used_warn_pct": 20}).state == "warn"


def _snapshot(extra: list[str] | None = None) -> dict:
    stats = [(NE / "proc" / p / "stat").read_text() for p in ("1", "10", "11")]
    return {
        "stat": stats + (extra or []),
        "loadavg": (NE / "proc" / "loadavg").read_text(),
        "online": (NE / "sys/devices/system/cpu/online").read_text(),
    }


def test_processes_dstate_zombie_load():
    snap = parse_proc_snapshot(_snapshot())
    assert snap["ncpu"] == 4 and snap["load5"] == 0.37
    assert snap["states"][1] == ("systemd", "S") and snap["states"][11][1] == "I"
    assert checks.processes(snap, {}).state == "pass"
    # the same record shape with a D-state process whose name holds ") Z (" (names are the
    # user's: the state is the field after the *last* parenthesis)
    stuck = "4242 (python) Z (x) D 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 29\n"
    v = checks.processes(parse_proc_snapshot(_snapshot([stuck])), {})
    assert (v.state, v.evidence) == ("warn", "1 in D state: 4242(python) Z (x)")
    busy = {**_snapshot(), "loadavg": "12.0 11.5 10.0 9/719 19737\n"}
    v = checks.processes(parse_proc_snapshot(busy), {})
    assert v.state == "warn" and "load5 11.5 > 2 x 4 CPUs" in v.evidence
    # other jobs may cause that load: a shared node, or a healthcheck on a busy node
    assert (
        checks.processes(parse_proc_snapshot(busy), {"gpu_processes_allowed": True}).state == "pass"
    )
    assert checks.processes(parse_proc_snapshot(busy), {"gpu_scope": "busy"}).state == "skip"


def test_kernel_modules_recorded_lsmod():
    loaded = parse_proc_modules(fixture_text("gpud/lsmod.peermem.h100"))
    assert {"nvidia_peermem", "ib_core", "nvidia"} <= loaded
    want = {"kernel_modules": ["nvidia_peermem", "nvidia"]}
    assert checks.kernel_modules(loaded, want).state == "pass"
    v = checks.kernel_modules(loaded - {"nvidia_peermem"}, want)
    assert (v.state, v.evidence) == ("fail", "not loaded: nvidia_peermem")
    assert checks.kernel_modules(None, {}).state == "skip"


def test_disk_inodes():
    ok = {"/tmp": (50, 100, 900, 1000)}
    assert checks.disk_inodes(ok, {}).state == "pass"
    v = checks.disk_inodes({"/scratch": (50, 100, 10, 1000)}, {})
    assert (v.state, v.evidence) == ("fail", "/scratch 1.0% inodes free (< 5%)")
    # a missing path is disk_space's verdict, and filesystems without inode counts skip
    assert checks.disk_inodes({"/x": "does not exist", "/y": (1, 2, 0, 0)}, {}).state == "skip"
    assert checks.disk_space(ok, {}).state == "pass"  # 4-tuples still read as space


def test_disk_probe_reads_inodes_of_a_real_filesystem(tmp_path: Path):
    ctx = probes.ProbeContext(exp={"disk_paths": [str(tmp_path)]}, timeout=10)
    res = probes.disk_usage(ctx)[str(tmp_path)]
    assert len(res) == 4 and res[1] > 0 and res[3] >= res[2] >= 0


def test_nvme_sysfs_and_smart_recorded():
    devs = {"nvme0": (NE / "sys/class/nvme/nvme0/state").read_text().strip()}
    assert checks.nvme(devs, {"nvme_count": 1}).state == "pass"
    v = checks.nvme(devs, {"nvme_count": 2})
    assert (v.state, v.evidence) == ("fail", "1/2 NVMe live")
    assert checks.nvme({"nvme0": "live", "nvme1": "dead"}, {"nvme_count": 2}).state == "fail"
    good_dir = FIX / "gcm/smartctl_dumps/cache_good"
    good = parse_smartctl({p.stem: p.read_text() for p in sorted(good_dir.glob("*.json"))})
    assert len(good) == 12 and checks.nvme_smart(good, {}).state == "pass"
    bad = {"nvme9": fixture_text("gcm/smartctl_dumps/learn_bad_nvme9/nvme9.json")}
    v = checks.nvme_smart(parse_smartctl(bad), {})
    assert (v.state, v.evidence) == ("fail", "nvme9 spare 0% < 11%")


def test_edac_recorded_counters():
    base = NE / "sys/devices/system/edac/mc/mc0"
    raw = {"mc0": {"ce": (base / "ce_count").read_text(), "ue": (base / "ue_count").read_text()}}
    v = checks.edac(parse_edac(raw), {})
    assert (v.state, v.evidence) == ("fail", "uncorrectable: mc0 5")
    clean = parse_edac({"mc0": {**raw["mc0"], "ue": "0\n"}})
    assert checks.edac(clean, {}).state == "pass"
    assert checks.edac(clean, {"edac_ce_warn": 1}).state == "warn"
    assert checks.edac(None, {}).state == "skip"


def test_cpu_config_recorded_topology(tmp_path: Path):
    root = tmp_path / "root"
    shutil.copytree(NE / "sys", root / "sys")
    (root / "proc").mkdir()
    shutil.copy(NE / "proc/cpuinfo", root / "proc/cpuinfo")
    raw = probes.cpu_topology(probes.ProbeContext(exp={}, root=root))
    cpu = parse_cpu_topology(raw)
    assert cpu == {"online": 4, "sockets": 1, "smt": None, "governors": ["powersave"]}
    want = {"cpu_count": 4, "cpu_sockets": 1}
    assert checks.cpu_config(cpu, want).state == "pass"
    v = checks.cpu_config(cpu, {"cpu_count": 8})
    assert (v.state, v.evidence) == ("fail", "4 CPUs online, 8 expected")
    v = checks.cpu_config(cpu, {**want, "cpu_governor": "performance"})
    assert (v.state, v.evidence) == ("warn", "governor powersave, performance expected")
    assert checks.cpu_config(cpu, {}).state == "skip"


def test_coverage_checks_registered_and_never_fail_an_unconfigured_node():
    # this machine (no GPU, no EDAC, no NVMe, nothing configured): nothing fails or errors
    names = {
        "persistence_mode", "vbios", "ecc_health", "gpu_reset_required", "app_clocks",
        "swap", "processes", "kernel_modules", "disk_inodes", "nvme", "edac", "cpu_config",
        "ipmi_sel",
    }  # fmt: skip
    assert names <= {s.name for s in cbd.SPECS if s.profile == "light"}
    cfg = {"runtime": {}, "expect": {"gpus": 0, "disk_paths": [], "time_sync": "off"}}
    out = cbd.run(cfg, "n1", "light", only=sorted(names), root="/")
    assert {v.check for v in out} == names
    assert all(v.state in ("skip", "pass", "warn") for v in out), [(v.check, v.state) for v in out]
    assert {v.check for v in out if v.state == "skip"} >= {"vbios", "nvme", "cpu_config"}


def test_smartctl_probe_runs_per_controller(tmp_path: Path):
    (tmp_path / "sys/class/nvme/nvme0").mkdir(parents=True)
    (tmp_path / "sys/class/nvme/nvme0/state").write_text("live\n")
    dump = FIX / "gcm/smartctl_dumps/learn_bad_nvme9/nvme9.json"
    # smartctl exits with a bit mask (here 4) and still prints its JSON
    fake = tmp_path / "smartctl"
    fake.write_text(f"#!/bin/sh\ncat {dump}\nexit 4\n")
    fake.chmod(0o755)
    ctx = probes.ProbeContext(exp={}, root=tmp_path, argv={"nvme_smart": [str(fake)]})
    raw = probes.nvme_smart(ctx)
    assert list(raw) == ["nvme0"] and json.loads(raw["nvme0"])["smart_status"]["passed"]


def test_pcie_bandwidth_nvbandwidth_recorded():
    # superbenchmark's recorded nvbandwidth v0.6 output (GH200; its test data has 2-3 columns)
    text = fixture_text("superbenchmark/nvbandwidth_results.log")
    res = parse_nvbandwidth(text)
    assert res["host_to_device_memcpy_ce"] == {0: 369.36, 1: 299.33, 2: 412.11}
    assert res["device_to_host_memcpy_ce"] == {0: 295.15, 1: 312.11}
    assert checks.pcie_bandwidth(res, {}).state == "pass"
    # GPU1 at its best 269 GB/s (row 0) once its row-1 path drops
    slow = parse_nvbandwidth(text.replace("299.33    312.11", "150.20    312.11"))
    v = checks.pcie_bandwidth(slow, {})
    assert (v.state, v.evidence) == ("fail", "GPU1 h2d 269.3 < 0.8 x median 369.4 GB/s")
    v = checks.pcie_bandwidth(res, {"pcie_min_gbps": 300})
    assert v.state == "fail" and "GPU1 h2d 299.3 < 300 GB/s" in v.evidence
    assert checks.pcie_bandwidth(None, {}).evidence.startswith("unavailable")
    assert checks.pcie_bandwidth({"host_device_latency_sm": {0: 772.0}}, {}).state == "probe_error"


def test_ipmi_sel_new_records_only():
    mce = fixture_text("ipmitool/sel_list.openbmc_issue273_mce.txt")
    ce = fixture_text("ipmitool/sel_elist.ipmitool_issue385_ce.txt")
    boot = fixture_text("ipmitool/sel_list.opbuild_issue594_boot.txt")
    power = fixture_text("ipmitool/sel_elist.sos_issue2015.txt")
    state: dict = {}
    # first reading: baseline only, old records never judge the node
    assert new_sel_entries(mce, state) == [] and len(state["sel_seen"]) == 3
    assert checks.ipmi_sel(new_sel_entries(mce, state), {}).state == "pass"
    # healthy recorded SELs (boot progress, power cycle) add nothing critical
    for text in (boot, power):
        assert checks.ipmi_sel(new_sel_entries(text, state), {}).state == "pass"
    v = checks.ipmi_sel(new_sel_entries(ce, state), {})
    assert (v.state, v.evidence) == ("warn", "Memory #0x88: Correctable ECC (CPU0_G1)")
    fresh: dict = {"sel_seen": []}
    v = checks.ipmi_sel(new_sel_entries(mce, fresh), {})
    assert (v.state, v.evidence) == (
        "fail",
        "Processor #0x40: Uncorrectable machine check exception",
    )
    assert checks.ipmi_sel(None, {}).state == "skip"


def test_cpu_stream_recorded():
    zen = parse_stream(fixture_text("superbenchmark/streamResultZen.log"))
    neo = parse_stream(fixture_text("superbenchmark/streamResultNeo.log"))
    assert (zen["Triad"], zen["validates"], neo["Triad"]) == (363208.7, True, 105256.0)
    assert checks.cpu_stream(zen, {"cpu_stream_min_mbps": 300000}).state == "pass"
    v = checks.cpu_stream(neo, {"cpu_stream_min_mbps": 300000})
    assert (v.state, v.evidence) == ("fail", "Triad 105256 MB/s, validated < 300000")
    broken = fixture_text("superbenchmark/streamResultZen.log").replace(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays",
        "Failed Validation on array a[], AvgRelAbsErr > epsilon (1.000000e-13)",
    )
    v = checks.cpu_stream(parse_stream(broken), {})
    assert v.state == "fail" and "did not validate" in v.evidence
    assert checks.cpu_stream(None, {}).evidence.startswith("unavailable")
