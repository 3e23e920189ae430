"""Every light/full check on real recorded outputs: healthy, and broken (edited copies of the
same real output, or a recorded broken output)."""

from __future__ import annotations

from aegis_slurm.node import checks
from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import (
    parse_gpu_burn,
    parse_ibstat,
    parse_meminfo,
    parse_nccl_tests,
    parse_nvidia_smi_q,
    parse_nvlink_status,
)

from ._fixtures import drop_gpu, edit_gpu, fixture_text

H100 = {"gpus": 8}


def smi(text: str):
    return parse_nvidia_smi_q(text)


def test_parse_h100_header(h100_text):
    q = smi(h100_text)
    assert (q.driver_version, q.cuda_version, q.attached, len(q.gpus)) == (
        "535.161.08",
        "12.2",
        8,
        8,
    )


def test_gpu_count_healthy_and_fallen_off_bus(h100_text):
    assert checks.gpu_count(smi(h100_text), H100).state == "pass"
    v = checks.gpu_count(smi(drop_gpu(h100_text, 4)), H100)
    assert (v.state, v.evidence) == ("fail", "7 GPUs visible, 8 expected")


def test_unconfigured_node_without_nvidia_smi_is_not_failed():
    # no nvidia-smi, no GPUs expected: every GPU check skips with the reason as evidence
    for fn in (
        checks.gpu_count,
        checks.driver_version,
        checks.ecc_uncorrectable,
        checks.row_remap,
        checks.pcie_link,
        checks.clocks_thermal,
    ):
        v = fn(None, {"gpus": None})
        assert v.state == "skip" and "no GPUs expected" in v.evidence
    v = checks.gpu_count(None, {"gpus": 8})
    assert (v.state, v.evidence) == ("fail", "nvidia-smi not found but 8 GPUs expected")


def test_driver_version(h100_text):
    assert checks.driver_version(smi(h100_text), {"driver_version": "535.161.08"}).state == "pass"
    v = checks.driver_version(smi(h100_text), {"driver_version": "550.54.15"})
    assert v.state == "fail" and "535.161.08 != expected 550.54.15" in v.evidence
    # GSP firmware left at the old version after a driver upgrade on one GPU
    bad = edit_gpu(
        h100_text,
        2,
        "GSP Firmware Version                  : 535.161.08",
        "GSP Firmware Version                  : 535.154.05",
    )
    assert checks.driver_version(smi(bad), {}).state == "fail"


def test_ecc_uncorrectable_volatile(h100_text):
    assert checks.ecc_uncorrectable(smi(h100_text), H100).state == "pass"
    bad = edit_gpu(
        h100_text, 3, "DRAM Uncorrectable            : 0", "DRAM Uncorrectable            : 2"
    )
    v = checks.ecc_uncorrectable(smi(bad), H100)
    assert (v.state, v.evidence) == ("fail", "GPU3 2 uncorrectable volatile")
    # the same count in the Aggregate (lifetime) section alone is not a volatile error
    agg = h100_text.split("\nGPU 0000")
    assert "Aggregate" in agg[4]


def test_row_remap_pending_and_failure(h100_text):
    assert checks.row_remap(smi(h100_text), H100).state == "pass"
    pend = edit_gpu(
        h100_text,
        1,
        "Pending                           : No",
        "Pending                           : Yes",
    )
    v = checks.row_remap(smi(pend), H100)
    assert v.state == "fail" and "GPU1 row-remap pending" in v.evidence
    failed = edit_gpu(
        h100_text,
        6,
        "Remapping Failure Occurred        : No",
        "Remapping Failure Occurred        : Yes",
    )
    assert "GPU6 row-remap failure" in checks.row_remap(smi(failed), H100).evidence


def test_retired_pages_recorded_bad_table(h100_text):
    # H100 reports N/A (row remapping instead) -> pass
    assert checks.retired_pages(smi(h100_text), H100).state == "pass"
    v = checks.retired_pages(
        smi(fixture_text("azurehpc-health-checks/bad_nvsmi8_output.txt")), H100
    )
    assert v.state == "fail"
    assert "GPU0 retired sbe=60 dbe=5" in v.evidence  # table nearly full
    assert "GPU1 retired sbe=2 dbe=61 pending=yes" in v.evidence


def test_pcie_capability_and_width_under_load(h100_text):
    assert checks.pcie_link(smi(h100_text), H100).state == "pass"
    narrow = edit_gpu(
        h100_text, 2, "Current                   : 16x", "Current                   : 8x"
    )
    # the recorded GPUs are idle (0 %): a narrower current link is power saving, not a fault
    assert checks.pcie_link(smi(narrow), H100).state == "pass"
    busy = edit_gpu(narrow, 2, r"Gpu                               : 0 %", "Gpu : 97 %")
    v = checks.pcie_link(smi(busy), H100)
    assert (v.state, v.evidence) == ("fail", "GPU2 PCIe x8 < x16 under load (97%)")
    assert checks.pcie_link(smi(h100_text), {"pcie_gen": 6}).state == "fail"


def test_clocks_hw_slowdown_recorded_and_temperature(h100_text):
    # the recorded dump really has HW Power Brake Slowdown active on its GPUs
    v = checks.clocks_thermal(smi(h100_text), H100)
    assert v.state == "warn" and "HW Power Brake Slowdown" in v.evidence
    calm = h100_text.replace(": Active", ": Not Active")
    assert checks.clocks_thermal(smi(calm), H100).state == "pass"
    hot = edit_gpu(
        calm,
        5,
        r"GPU Current Temp                  : \d+ C",
        "GPU Current Temp                  : 93 C",
    )
    v = checks.clocks_thermal(smi(hot), H100)
    assert (v.state, v.evidence) == ("fail", "GPU5 93C > 85C")


#: An nvidia-smi -q process entry: a job's python still holding GPU memory.
LEFTOVER_PROCESS = (
    "Processes\n"
    "        GPU instance ID                   : N/A\n"
    "        Compute instance ID               : N/A\n"
    "        Process ID                        : 424242\n"
    "        Type                              : C\n"
    "        Name                              : python\n"
    "        Used GPU Memory                   : 30000 MiB"
)


def test_gpu_processes_left_behind(h100_text):
    assert checks.gpu_processes(smi(h100_text), H100).state == "pass"
    bad = edit_gpu(h100_text, 0, "Processes                             : None", LEFTOVER_PROCESS)
    v = checks.gpu_processes(smi(bad), H100)
    assert (v.state, v.evidence) == ("fail", "leftover GPU0 pids 424242")
    assert checks.gpu_processes(smi(bad), {"gpu_processes_allowed": True}).state == "skip"


def test_gpu_processes_and_heat_judged_only_on_the_jobs_gpus(h100_text):
    # job A runs on GPU0 (minor number 0, hot, with a process); job B's Prolog gets GPUs 2,3
    busy = edit_gpu(
        h100_text.replace(": Active", ": Not Active"),
        0,
        "Processes                             : None",
        LEFTOVER_PROCESS,
    )
    busy = edit_gpu(
        busy,
        0,
        r"GPU Current Temp                  : \d+ C",
        "GPU Current Temp                  : 91 C",
    )
    q = smi(busy)
    job_b = {**H100, "gpu_scope": "job", "job_gpus": ["2", "3"]}
    assert checks.gpu_processes(q, job_b).state == "pass"
    assert checks.clocks_thermal(q, job_b).state == "pass"
    job_a = {**H100, "gpu_scope": "job", "job_gpus": ["0", "1"]}
    v = checks.gpu_processes(q, job_a)
    assert (v.state, v.evidence) == ("fail", "leftover GPU0 pids 424242 (job GPUs 0,1)")
    assert checks.clocks_thermal(q, job_a).state == "fail"
    # by UUID (CUDA_VISIBLE_DEVICES may hold UUIDs); a job without GPUs judges none
    uuid0 = q.gpus[0]["GPU UUID"]
    assert checks.gpu_processes(q, {**job_a, "job_gpus": [uuid0]}).state == "fail"
    assert checks.gpu_processes(q, {**job_a, "job_gpus": []}).state == "skip"
    # healthcheck on a node that may be running jobs: processes not judged, heat only warns
    hc = {**H100, "gpu_scope": "busy"}
    assert checks.gpu_processes(q, hc).state == "skip"
    v = checks.clocks_thermal(q, hc)
    assert v.state == "warn" and "GPU0 91C > 85C" in v.evidence
    idle = {**H100, "gpu_scope": "node"}
    assert checks.gpu_processes(q, idle).state == checks.clocks_thermal(q, idle).state == "fail"


def test_nvlink_recorded_healthy_and_inactive():
    good = parse_nvlink_status(fixture_text("gpud/nvidia-smi.nvlink.status.a100"))
    assert len(good) == 8 and all(len(g.links) == 12 for g in good)
    assert checks.nvlink(good, {"gpus": 8, "nvlink_links": 12}).state == "pass"
    bad = parse_nvlink_status(fixture_text("azurehpc-health-checks/bad_nvlink_status.txt"))
    v = checks.nvlink(bad, {"gpus": 1, "nvlink_links": 12})
    assert (v.state, v.evidence) == ("fail", "GPU6 all links inactive")
    assert checks.nvlink(None, {"nvlink_links": 0}).state == "skip"


def test_xid_catalog_on_recorded_dmesg():
    gsp = xidcat.parse_xids(fixture_text("gpud/dmesg-with-xid-119.log"))
    assert gsp and {e.code for e in gsp} == {119} and gsp[0].pci == "0000:9b:00"
    v = checks.xid_events(gsp, {})
    assert v.state == "fail" and "Xid 119" in v.evidence and "GSP" in v.evidence
    # user-application XIDs 13/43 in --time-format iso output must not drain
    app = xidcat.parse_xids(fixture_text("gpud/dmesg.decode.iso.log"))
    assert {e.code for e in app} == {13, 43}
    assert checks.xid_events(app, {}).state == "pass"
    assert checks.xid_events(gsp, {"xid_ignore": [119]}).state == "pass"


def test_xid_recorded_dmesg_formats_still_parse():
    # every NVRM: Xid line of the recorded real logs is found, whatever the dmesg format
    for rel in ("gpud/dmesg-with-xid-119.log", "gpud/dmesg.decode.iso.log"):
        text = fixture_text(rel)
        want = [line.strip() for line in text.splitlines() if "NVRM: Xid" in line]
        assert want and [e.line for e in xidcat.parse_xids(text)] == want
    # the same real message behind each prefix we accept
    msg = "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, name=, GPU has fallen off the bus."
    for prefix in (
        "4,3990,306764307,-;",
        "[  206.764307] ",
        "[Sun Feb 23 16:30:00 2025] ",
        "kern  :warn  : 2025-01-21T04:41:44,283302+00:00 ",
        "Feb 23 16:30:00 gpu001 kernel: ",
        "Feb 23 16:30:00 gpu001 kernel: [ 206.7] ",
        "2025-02-23T16:30:00.123456+00:00 gpu001 kernel: ",
        "",
    ):
        (ev,) = xidcat.parse_xids(prefix + msg)
        assert (ev.code, ev.pci) == (79, "0000:3b:00"), prefix


def test_xid_user_controlled_text_is_not_an_xid():
    # the kernel quotes a crashing user binary's/library's names verbatim
    segv = (
        "6,5012,912345678,-;evil[4242]: segfault at 0 ip 00007f1c2a3b4c5d sp 00007ffd1e2f3a40 "
        "error 4 in NVRM: Xid (PCI:0000:3b:00): 79, pwn.so[7f1c2a3b0000+5000]"
    )
    traps = (
        "[ 812.123456] traps: NVRM: Xid (PCI:0000:3b:00): 79,[4242] trap invalid opcode "
        "ip:401000 sp:7ffd error:0 in a.out[401000+1000]"
    )
    # any user can log this under their own syslog tag, or in the middle of a message
    forged = [
        "Feb 23 16:30:00 gpu001 alice: NVRM: Xid (PCI:0000:3b:00): 79, x",
        "[  206.764307] evil: NVRM: Xid (PCI:0000:3b:00): 79, x",
        '4,3990,306764307,-;audit: comm="NVRM: Xid (PCI:0000:3b:00): 79,"',
    ]
    for line in (segv, traps, *forged):
        assert xidcat.parse_xids(line) == [], line
    assert checks.xid_events(xidcat.parse_xids(segv + "\n" + traps), {}).state == "pass"


def test_ib_ports_recorded_ibstat():
    roce = {"ib_ports": 8, "ib_rate_gbps": 400, "ib_link_layer": "Ethernet"}
    ok = parse_ibstat(fixture_text("gpud/ibstat.47.0.h100.all.active.0"))
    assert checks.ib_ports(ok, roce).state == "pass"
    down = parse_ibstat(fixture_text("gpud/ibstat.47.0.h100.some.down.with.polling.1"))
    v = checks.ib_ports(down, roce)
    assert v.state == "fail" and v.evidence.startswith("6/8 ports up")
    assert "DOWN/Polling 40G" in v.evidence
    # the ibpanic run printed 8 valid HDR blocks before dying
    part = parse_ibstat(fixture_text("gpud/ibstat.39.0.a100.failed.ibpanic.exit-255.0"))
    assert checks.ib_ports(part, {"ib_ports": 8, "ib_rate_gbps": 200}).state == "pass"
    assert checks.ib_ports(part, {"ib_ports": 8, "ib_rate_gbps": 400}).state == "fail"
    assert checks.ib_ports(None, {"ib_ports": 0}).state == "skip"
    assert checks.ib_ports(None, {"ib_ports": 8}).state == "fail"


def test_ib_counters_deltas():
    assert checks.ib_counters({}, {}).state == "skip"
    assert (
        checks.ib_counters({"mlx5_0/1": {"link_downed": 0, "symbol_error": 3}}, {}).state == "pass"
    )
    v = checks.ib_counters({"mlx5_0/1": {"link_downed": 2}}, {})
    assert (v.state, v.evidence) == ("warn", "mlx5_0/1 link_downed+2")


def test_memory_and_services_and_time():
    mi = parse_meminfo("MemTotal:       2113612 kB\nMemFree:  100 kB\n")
    assert checks.memory(mi, {"mem_gib": 2}).state == "pass"
    assert checks.memory(mi, {"mem_gib": 4}).state == "fail"
    assert checks.services({"chronyd", "munged"}, {"services": ["munged"]}).state == "pass"
    v = checks.services({"chronyd"}, {"services": ["munged", "nvidia-fabricmanager"]})
    assert v.evidence == "not running: munged, nvidia-fabricmanager"
    synced = {"state": 0, "status": 0x2001, "maxerror_us": 12000}
    assert checks.time_sync(synced, {}).state == "pass"
    unsynced = {"state": 5, "status": 0x40, "maxerror_us": 16000000}
    assert checks.time_sync(unsynced, {}).state == "warn"
    assert checks.time_sync(unsynced, {"time_sync": "require"}).state == "fail"


def test_disk_space():
    assert checks.disk_space({"/tmp": (50, 100)}, {}).state == "pass"
    v = checks.disk_space({"/tmp": (50, 100), "/scratch": "does not exist"}, {})
    assert (v.state, v.evidence) == ("fail", "/scratch: does not exist")
    v = checks.disk_space({"/tmp": (2, 100), "/scratch": (90, 100)}, {"disk_min_free_pct": 5})
    assert (v.state, v.evidence) == ("fail", "/tmp 2.0% free (< 5%)")


def test_nccl_tests_recorded():
    r = parse_nccl_tests(fixture_text("superbenchmark/nccl_allreduce.log"))
    assert (r.avg_busbw_gbps, r.max_busbw_gbps, r.out_of_bounds, r.n_gpus) == (
        68.4048,
        235.26,
        0,
        8,
    )
    assert checks.nccl_allreduce(r, {"nccl_min_busbw_gbps": 200}).state == "pass"
    assert checks.nccl_allreduce(r, {"nccl_min_busbw_gbps": 300}).state == "fail"
    assert checks.nccl_allreduce(None, {}).evidence.startswith("unavailable")


def test_gpu_burn_recorded():
    text = fixture_text("superbenchmark/gpu_burn.log")
    r = parse_gpu_burn(text)
    assert sorted(r.tested) == list(range(8)) and set(r.tested.values()) == {"OK"}
    assert max(r.max_temp_c) == 62 and all(g > 10000 for g in r.gflops)
    assert checks.gpu_burn(r, {}).state == "pass"
    bad = parse_gpu_burn(text.replace("GPU 3: OK", "GPU 3: FAULTY"))
    assert checks.gpu_burn(bad, {}).evidence == "GPU3 FAULTY"
    assert checks.gpu_burn(None, {}).evidence.startswith("unavailable")


def test_dcgm_diag_json_shape():
    doc = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "1", "status": "Fail"},
                            ],
                        }
                    ],
                },
                {
                    "category": "Integration",
                    "tests": [{"name": "PCIe", "results": [{"gpu_id": "0", "status": "Pass"}]}],
                },
            ]
        }
    }
    v = checks.dcgm_diag({"exit_code": 226, "result": doc}, {})
    assert (v.state, v.evidence) == ("fail", "failed: GPU Memory")
    doc["DCGM GPU Diagnostic"]["test_categories"][0]["tests"][0]["results"][1]["status"] = "Pass"
    assert checks.dcgm_diag({"exit_code": 0, "result": doc}, {}).state == "pass"
