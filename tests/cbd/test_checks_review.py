"""Regression tests from the hostile review of issue 11, on recorded real outputs
(provenance: tests/fixtures/hostsignals/README.md)."""

from __future__ import annotations

import pytest

from aegis_slurm.node import checks, probes
from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import (
    new_sel_entries,
    parse_cpu_topology,
    parse_nvidia_smi_q,
    parse_proc_modules,
    parse_proc_snapshot,
)

from ._fixtures import FIX, edit_gpu, fixture_text

V100 = "gls/V100_x8.nvidia-smi-q.txt"


def test_volta_double_bit_ecc_is_read():
    # Driver 550 still prints Volta's ECC as "Single Bit"/"Double Bit" sub-sections with a
    # "Total"; the checks only summed "...Uncorrectable" keys and so never saw a V100's DBE.
    text = fixture_text(V100)
    assert checks.ecc_uncorrectable(parse_nvidia_smi_q(text), {"gpus": 8}).state == "pass"
    # one volatile double-bit error on GPU 3 (the block's first "Total" under "Double Bit")
    bad = edit_gpu(text, 3, r"(Double Bit\s*\n(?:.*\n){7}\s*Total\s*: )0", r"\g<1>1")
    v = checks.ecc_uncorrectable(parse_nvidia_smi_q(bad), {"gpus": 8})
    assert v.state == "fail" and "GPU3 1 uncorrectable volatile" in v.evidence


def test_volta_lifetime_and_correctable_counts_are_read():
    text = fixture_text(V100)
    # aggregate (lifetime) DBE total: the second "Double Bit" section of the block
    bad = edit_gpu(
        text, 5, r"(Aggregate\s*\n(?:.*\n)*?\s*Double Bit\s*\n(?:.*\n){7}\s*Total\s*: )0",
        r"\g<1>12",
    )  # fmt: skip
    v = checks.ecc_health(parse_nvidia_smi_q(bad), {"gpus": 8})
    assert v.state == "warn" and "GPU5 12 uncorrectable lifetime" in v.evidence


def test_ecc_errors_not_a_section_is_no_crash():
    # consumer boards without ECC print "ECC Errors : N/A" on some drivers: a check must not
    # raise (a raise is an aegis bug verdict), just find nothing
    text = fixture_text("gls/GTX680.nvidia-smi-q.txt")
    q = parse_nvidia_smi_q(text)
    q.gpus[0]["ECC Errors"] = "N/A"
    assert checks.ecc_uncorrectable(q, {"gpus": 1}).state == "pass"
    assert checks.ecc_health(q, {"gpus": 1}).state == "pass"


def test_xid_lines_with_caller_tag_or_without_hostname_are_read():
    # dmesg on CONFIG_PRINTK_CALLER kernels ("[ 130.456250] [ T1946] NVRM: ...", RTX 5090
    # report) and journalctl without the host name ("kernel: NVRM: ...", forum NVLink report):
    # both were silently dropped, so a fatal NVLink Xid 74 never drained the node
    (ev,) = xidcat.parse_xids(fixture_text("bugreports/xid_ogkm_1030_mmu.log"))
    assert (ev.code, ev.pci) == (31, "0000:2b:00")
    evs = xidcat.parse_xids(fixture_text("bugreports/xid_nvforum_292539_nvlink.log"))
    v = checks.xid_events(evs, {})
    assert v.state == "fail" and "Xid 74 on 0000:c1:00" in v.evidence
    (ev,) = xidcat.parse_xids("Feb 23 16:30:00 kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has")
    assert ev.code == 79
    # the anchoring still holds: another syslog tag, or text before "kernel:", is not the kernel
    assert not xidcat.parse_xids("Feb 23 16:30:00 gpu1 evil: NVRM: Xid (PCI:0000:3b:00): 79, x")
    assert not xidcat.parse_xids("evil kernel: NVRM: Xid (PCI:0000:3b:00): 79, x")


def test_xid_45_follows_the_xid_it_names():
    # open-gpu-kernel-modules #1150: only the Xid 45 cleanups of an NVLink failure were in the
    # log ("caused by previous Xid 149/145").  NVIDIA: "Not Solo: IGNORE (follow other Xid)".
    # Without the 149/145 line its sub-code is unknown, so this warns (never a guessed drain).
    evs = xidcat.parse_xids(fixture_text("bugreports/xid_ogkm_1150_cascade.log"))
    v = checks.xid_events(evs, {})
    assert v.state == "warn" and "cleanup after Xid 149" in v.evidence
    fatal = "NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=p, Ch 00000001 caused by previous Xid 79"
    assert checks.xid_events(xidcat.parse_xids(fatal), {}).state == "fail"
    # a solo 45, or one after an application fault, stays ignored
    app = "NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=p, Ch 00000001 caused by previous Xid 13"
    assert checks.xid_events(xidcat.parse_xids(app), {}).state == "pass"


def test_app_clocks_raised_by_the_site_pass_lowered_warn():
    # V100: default application clocks 1312/877 MHz, max 1530 MHz.  Setting -ac 877,1530 is
    # NVIDIA's GPU Boost advice (and cloud images do it at boot): a warning on every run of
    # every such node would be noise; a leftover lowered clock is what slows the next job.
    text = fixture_text(V100)
    assert checks.app_clocks(parse_nvidia_smi_q(text), {"gpus": 8}).state == "pass"
    raised = edit_gpu(text, 2, r"(Applications Clocks\s*\n\s*Graphics\s*: )1312", r"\g<1>1530")
    v = checks.app_clocks(parse_nvidia_smi_q(raised), {"gpus": 8})
    assert v.state == "pass" and "raised" in v.evidence
    lowered = edit_gpu(text, 2, r"(Applications Clocks\s*\n\s*Graphics\s*: )1312", r"\g<1>1005")
    v = checks.app_clocks(parse_nvidia_smi_q(lowered), {"gpus": 8})
    assert v.state == "warn" and "GPU2 Graphics 1005 vs default 1312" in v.evidence


def test_cpu_sockets_unknown_on_aarch64_is_not_a_missing_socket():
    # archspec-json #41: /proc/cpuinfo of an Ampere aarch64 server has no "physical id" line.
    # With cpu_sockets configured the check failed "None sockets, 1 expected" and drained
    # every ARM node (Grace/GH200 included) before any job ran.
    raw = {
        "online": "0-4\n",
        "smt": None,
        "governors": [],
        "cpuinfo": fixture_text("bugreports/cpuinfo.archspec_json_41.aarch64"),
    }
    cpu = parse_cpu_topology(raw)
    assert cpu["sockets"] is None
    v = checks.cpu_config(cpu, {"cpu_sockets": 1, "cpu_count": 5})
    assert v.state == "pass" and "not judged" in v.evidence
    assert checks.cpu_config(cpu, {"cpu_sockets": 1, "cpu_count": 8}).state == "fail"
    # sysfs physical_package_id wins when the kernel knows it (-1 = unknown)
    assert parse_cpu_topology({**raw, "packages": ["0\n", "1\n", "1\n"]})["sockets"] == 2
    assert parse_cpu_topology({**raw, "packages": ["-1\n"] * 5})["sockets"] is None


def test_cpu_topology_probe_reads_package_ids(tmp_path):
    cpu = tmp_path / "sys/devices/system/cpu"
    for n, pkg in ((0, "0"), (1, "1")):
        (cpu / f"cpu{n}/topology").mkdir(parents=True)
        (cpu / f"cpu{n}/topology/physical_package_id").write_text(pkg + "\n")
    (cpu / "online").write_text("0-1\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        fixture_text("bugreports/cpuinfo.archspec_json_41.aarch64")
    )
    raw = probes.cpu_topology(probes.ProbeContext(exp={}, root=tmp_path))
    assert parse_cpu_topology(raw)["sockets"] == 2


def test_builtin_kernel_module_counts_as_loaded(tmp_path):
    # /proc/modules lists loadable modules only; a driver built into the kernel shows as
    # /sys/module/<name>.  Recorded lsmod of an H100 node (gpud) + a fake /sys/module tree.
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/modules").write_text(fixture_text("gpud/lsmod.peermem.h100"))
    for name in ("ib_uverbs", "nvidia_peermem"):
        (tmp_path / "sys/module" / name).mkdir(parents=True)
    raw = probes.proc_modules(probes.ProbeContext(exp={}, root=tmp_path))
    loaded = parse_proc_modules(raw)
    want = {"kernel_modules": ["nvidia_peermem", "ib_uverbs"]}
    assert checks.kernel_modules(loaded, want).state == "pass"
    v = checks.kernel_modules(loaded, {"kernel_modules": ["ib_umad"]})
    assert v.state == "fail" and "ib_umad" in v.evidence


def test_gsp_version_unreadable_is_not_a_driver_mismatch():
    # H100 NVL recording (driver 550.54.14, GSP 550.54.14); an "Unknown Error" field, as this
    # driver prints for the V100's "Host Max", must not become "GSP firmware != driver"
    text = fixture_text("gls/H100NVLx2.nvidia-smi-q.txt")
    assert checks.driver_version(parse_nvidia_smi_q(text), {"gpus": 2}).state == "pass"
    odd = edit_gpu(text, 1, r"(GSP Firmware Version\s*: )550\.54\.14", r"\g<1>Unknown Error")
    assert checks.driver_version(parse_nvidia_smi_q(odd), {"gpus": 2}).state == "pass"
    old = edit_gpu(text, 1, r"(GSP Firmware Version\s*: )550\.54\.14", r"\g<1>535.129.03")
    v = checks.driver_version(parse_nvidia_smi_q(old), {"gpus": 2})
    assert v.state == "fail" and "GSP firmware" in v.evidence


def _proc_tree(root, extra: dict[str, str]):
    # the recorded node_exporter /proc (systemd S, khungtaskd S, rcu_preempt I) + extra pids
    src = FIX / "node_exporter" / "proc"
    for pid in ("1", "10", "11"):
        (root / "proc" / pid).mkdir(parents=True)
        (root / "proc" / pid / "stat").write_text((src / pid / "stat").read_text())
    (root / "proc/loadavg").write_text((src / "loadavg").read_text())
    for pid, stat in extra.items():
        (root / "proc" / pid).mkdir()
        (root / "proc" / pid / "stat").write_text(stat)


def test_dstate_counts_only_when_still_stuck_on_a_second_look(tmp_path, monkeypatch):
    # a process reading from disk is in D for milliseconds: one snapshot on a node doing I/O
    # (the job's own data staging, an NFS home) raised an alert at every job start
    reader = "4242 (dd) D 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 29\n"
    hung = "4343 (ls) D 1 4343 4343 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 29\n"
    _proc_tree(tmp_path, {"4242": reader, "4343": hung})

    def io_done(_s: float) -> None:  # while the probe waits, dd's read completes
        (tmp_path / "proc/4242/stat").write_text(reader.replace(") D ", ") R "))

    monkeypatch.setattr(probes.time, "sleep", io_done)
    snap = parse_proc_snapshot(probes.proc_snapshot(probes.ProbeContext(exp={}, root=tmp_path)))
    v = checks.processes(snap, {})
    assert v.state == "warn" and v.evidence.startswith("1 in D state: 4343(ls)")


def test_no_dstate_no_pause(tmp_path, monkeypatch):
    _proc_tree(tmp_path, {})
    slept = []
    monkeypatch.setattr(probes.time, "sleep", slept.append)
    snap = parse_proc_snapshot(probes.proc_snapshot(probes.ProbeContext(exp={}, root=tmp_path)))
    assert checks.processes(snap, {}).state == "pass" and slept == []


def test_ecc_mode_read_under_the_470_driver_name():
    # driver 470 prints "Ecc Mode" (later "ECC Mode"): ecc_mode_required never saw it disabled
    rel = "blog/bsyonline-v100-470.nvidia-smi-q-i1.txt"
    text = fixture_text(rel)
    assert checks.ecc_health(parse_nvidia_smi_q(text), {"ecc_mode_required": True}).state == "pass"
    off = edit_gpu(text, 0, r"(Ecc Mode\s*\n\s*Current\s*: )Enabled", r"\g<1>Disabled")
    v = checks.ecc_health(parse_nvidia_smi_q(off), {"ecc_mode_required": True})
    assert v.state == "fail" and "GPU0 ECC mode disabled" in v.evidence


def test_correctable_machine_check_sel_record_only_warns():
    # ipmitool's event text for processor sensor offset 0x0c is "Correctable machine check
    # error" (include/ipmitool/ipmi_sel.h); "machine check" made it a failure (an alert on
    # every such node).  Line shape as in the recorded facebook/openbmc #273 SEL.
    line = (
        "  2a | 05/14/2026 | 20:40:26 | Processor #0x40 | Correctable machine check error"
        " | Asserted"
    )
    v = checks.ipmi_sel(new_sel_entries(line, {"sel_seen": []}), {})
    assert v.state == "warn" and "Correctable machine check error" in v.evidence
    rec = fixture_text("ipmitool/sel_list.openbmc_issue273_mce.txt")
    assert checks.ipmi_sel(new_sel_entries(rec, {"sel_seen": []}), {}).state == "fail"


def test_unread_module_list_is_a_probe_error_not_a_drain():
    v = checks.kernel_modules(None, {"kernel_modules": ["nvidia_peermem"]})
    assert v.state == "probe_error"


def test_driver_library_mismatch_fails_gpu_count_instead_of_probe_error(tmp_path):
    # lyulyul/shine-cluster #30: after an unattended upgrade of the driver's libraries nvidia-smi
    # answers "Failed to initialize NVML: Driver/library version mismatch" with a non-zero exit.
    # That was a probe error for all 13 GPU checks, so Slurm kept sending jobs to a node that
    # could not give them a GPU.  The real probe code, nvidia-smi replaced by the recording.
    rec = FIX / "bugreports" / "nvidia-smi.shine_cluster_30.mismatch.txt"
    fake = ["sh", "-c", f"cat '{rec}'; exit 18"]
    ctx = probes.ProbeContext(exp={}, root=tmp_path, argv={"nvidia_smi_q": fake})
    q = parse_nvidia_smi_q(probes.nvidia_smi_q(ctx))
    v = checks.gpu_count(q, {"gpus": 4})
    assert v.state == "fail" and "Driver/library version mismatch" in v.evidence
    assert checks.ecc_uncorrectable(q, {"gpus": 4}).state == "skip"
    # any other non-zero exit stays a probe failure (never a drain on the checker's guess)
    other = ["sh", "-c", "echo 'Segmentation fault'; exit 139"]
    ctx = probes.ProbeContext(exp={}, root=tmp_path, argv={"nvidia_smi_q": other})
    with pytest.raises(probes.ProbeFailed):
        probes.nvidia_smi_q(ctx)
    # and text that is neither -q output nor a known refusal is unparseable (probe_error)
    with pytest.raises(ValueError):
        parse_nvidia_smi_q("Segmentation fault\n")


def test_no_devices_found_fails_only_where_gpus_are_expected():
    q = parse_nvidia_smi_q("No devices were found\n")
    assert checks.gpu_count(q, {"gpus": 8}).state == "fail"
    assert checks.gpu_count(q, {}).state == "skip"  # a CPU node with the driver in its image
