"""Regression tests for issue 11's defects 1 and 4-8, on recorded real outputs
(provenance: tests/fixtures/hostsignals/README.md)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from aegis_slurm.node import cbd, checks, probes
from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import (
    parse_dcgm_diag,
    parse_nccl_tests,
    parse_nvidia_smi_q,
    parse_nvlink_status,
)

from ._fixtures import FIX, edit_gpu, fixture_text

CRIT, WARN, IGN = xidcat.XidSeverity.CRITICAL, xidcat.XidSeverity.WARN, xidcat.XidSeverity.IGNORE


# ---- 1. MIG-attributed Xid lines -------------------------------------------------------------


def test_mig_attributed_xid_lines_are_parsed():
    # NVIDIA's driver source documents this exact line (kern_gpu_error_cont_ga100.c)
    text = fixture_text("nvidia/xid_driver_examples.log")
    evs = xidcat.parse_xids(text)
    assert [(e.code, e.pci) for e in evs] == [(94, "0000:01:00")] * 2 + [(95, "0000:01:00")]
    assert (evs[0].mig, evs[1].mig) == ("GPU-I:05", "")
    # the driver's printf with both instance ids (kernel_rc.c): "(PCI:%04x:%02x:%02x GPU-I:%02u
    # GPU-CI:%02u): %d, pid=%s, name=%s, %s", behind every log prefix we accept
    line = "NVRM: Xid (PCI:0000:3b:00 GPU-I:01 GPU-CI:02): 79, pid=0, name=, GPU has fallen off"
    for prefix in ("", "[  206.764307] ", "4,3990,306764307,-;", "Feb 23 16:30:00 gpu001 kernel: "):
        (ev,) = xidcat.parse_xids(prefix + line)
        assert (ev.code, ev.pci) == (79, "0000:3b:00")
    v = checks.xid_events(xidcat.parse_xids(line), {})
    assert v.state == "fail" and "Xid 79 on 0000:3b:00 GPU-I:01 GPU-CI:02" in v.evidence


# ---- 8. Xid catalog as data -------------------------------------------------------------------


def test_catalog_file_has_source_date_and_an_action_for_every_entry():
    cat = json.loads(xidcat.CATALOG_FILE.read_text())
    assert "docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html" in cat["source"]
    assert cat["catalog_date"] == "2025-10-29"
    assert len(cat["xids"]) == 172 and set(cat["xids"]) == {str(c) for c in range(1, 173)}
    allowed = set(cat["severities"])
    for code, e in cat["xids"].items():
        assert e["severity"] in allowed, code
        assert e["action"].strip(), f"Xid {code} has no action"
        # a deliberate difference from NVIDIA's column, or no NVIDIA action at all, says why
        if not e["nvidia_immediate"] or code in ("63", "92", "94", "109"):
            assert e.get("why"), f"Xid {code} needs its reason written down"
    for row in cat["nvlink_decode"]:
        assert row["severity"] in ("critical", "warn", "ignore") and row["units"]
    # every code classifies (with and without its message) to a real severity and an action
    for code in range(1, 180):
        info = xidcat.classify(code)
        assert info.severity in (CRIT, WARN, IGN) and info.action


def test_catalog_follows_nvidias_resolution_column():
    c = xidcat.classify
    assert c(79).severity == c(48).severity == c(64).severity == CRIT
    assert c(13).severity == c(31).severity == c(43).severity == c(45).severity == IGN
    assert c(63).severity == c(92).severity == WARN  # logged for trending, never a drain
    assert c(9999).severity == WARN  # unknown: log, don't drain
    # 65's old label belongs to 60; 65 is NVIDIA's unused NVENC1 code
    assert c(60).meaning == "Video processor exception"
    assert c(65).meaning == "ROBUST_CHANNEL_NVENC1_ERROR" and c(65).severity == WARN
    # unused on Ampere+, hardware errors in NVIDIA's catalog for Volta and older GPUs
    assert c(56).severity == c(57).severity == c(58).severity == c(61).severity == CRIT
    assert "Volta" in xidcat.catalog()["xids"]["61"]["why"]
    # 109: NVIDIA says RESET_GPU (gcm disagrees; the reason is in the catalog)
    assert c(109).severity == CRIT
    # the codes newer than the old table
    assert c(159).severity == WARN
    assert c(167).severity == c(168).severity == c(169).severity == CRIT
    assert c(171).severity == c(172).severity == CRIT
    assert c(160).severity == c(161).severity == c(162).severity == IGN


def _by_code(rel: str) -> dict[tuple[int, str], xidcat.XidInfo]:
    return {
        (e.code, e.pci): xidcat.classify(e.code, e.line)
        for e in xidcat.parse_xids(fixture_text(rel))
    }


def test_xid_154_follows_its_named_recovery_action():
    got = _by_code("nvidia/xid_gpud_examples.log")
    assert got[(154, "0009:01:00")].severity == CRIT  # -> 0x4 (Drain and Reset)
    assert got[(154, "0019:01:00")].severity == CRIT  # -> 0x1 (GPU Reset Required)
    assert "GPU Reset Required" in got[(154, "0019:01:00")].meaning
    head = "NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from "
    none = head + "0x1 (GPU Reset Required) to 0x0 (None)"
    p2p = head + "0x0 (None) to 0x3 (Drain P2P)"
    assert xidcat.classify(154, none).severity == IGN
    assert xidcat.classify(154, p2p).severity == WARN
    # a process name cannot smuggle in a recovery action: the driver's text ends the line
    forged = "NVRM: Xid (PCI:0009:01:00): 154, pid=1, name=to 0x1 (x), GPU recovery action changed"
    assert xidcat.classify(154, forged).severity == WARN


def test_xid_94_contained_drains_only_when_the_driver_asks_for_a_reset():
    text = fixture_text("nvidia/xid_driver_examples.log")
    evs = xidcat.parse_xids(text)
    assert [xidcat.classify(e.code, e.line).severity for e in evs] == [WARN, WARN, CRIT]
    assert checks.xid_events(evs[:2], {}).state == "warn"  # restart the app, keep the node
    reset = evs[0].line.replace("RST: No, D-RST: No", "RST: Yes, D-RST: No")
    assert xidcat.classify(94, reset).severity == CRIT
    drain_reset = evs[0].line.replace("RST: No, D-RST: No", "RST: No, D-RST: Yes")
    assert xidcat.classify(94, drain_reset).severity == CRIT


def test_xid_144_150_decoded_by_subcode():
    got = _by_code("nvidia/xid_gpud_examples.log")
    assert got[(149, "0019:01:00")].severity == CRIT  # NETIR Fatal -> RESET_GPU
    assert got[(149, "0000:00:00")].severity == CRIT  # NETIR_LINK_EVT Fatal
    assert got[(145, "0018:01:00")].severity == IGN  # RLW_RXPIPE status 0x8: IGNORE
    assert got[(144, "0000:01:00")].severity == IGN  # SAW_MVB status 0x8: IGNORE
    fatal = "NVRM: Xid (PCI:0000:01:00): 144, SAW_MVB Fatal XC0 i0 Link 0 (0x00000001 0x00000002)"
    assert xidcat.classify(144, fatal).severity == CRIT  # status 0x2: RESET_GPU
    unknown_unit = "NVRM: Xid (PCI:0000:01:00): 147, NEW_UNIT Nonfatal XC0 i0 Link 0 (0x1 0x2)"
    assert xidcat.classify(147, unknown_unit).severity == WARN
    # an undecodable line is NVIDIA's reset workflow; no line at all (a caller that passes only
    # the code, e.g. the Epilog's signal classifier today) is never a guessed blame
    assert xidcat.classify(149, "NVRM: Xid (PCI:0000:01:00): 149, garbled").severity == CRIT
    assert xidcat.classify(149).severity == xidcat.classify(94).severity == WARN
    assert xidcat.classify(154).severity == WARN
    v = checks.xid_events(xidcat.parse_xids(fixture_text("nvidia/xid_gpud_examples.log")), {})
    assert v.state == "fail" and "Xid 149" in v.evidence and "Xid 144" not in v.evidence


# ---- 4. dcgmi diag exit 205 -------------------------------------------------------------------


def test_dcgm_isolate_exit_205_drains_like_226():
    fail = fixture_text("gcm/dcgmi_diag_fail.json")
    ok = fixture_text("gcm/dcgmi_diag_pass.json")
    assert checks.dcgm_diag(parse_dcgm_diag(ok), {}).state == "pass"
    v = checks.dcgm_diag(parse_dcgm_diag({"exit_code": 226, "output": fail}), {})
    assert (v.state, v.evidence) == ("fail", "failed: Persistence Mode")
    v = checks.dcgm_diag(parse_dcgm_diag({"exit_code": 205, "output": fail}), {})
    assert v.state == "fail" and v.evidence.startswith("DCGM isolate error (exit 205)")
    # gcm's own 205 sample has every test passing: DCGM's exit code still says isolate
    v = checks.dcgm_diag(parse_dcgm_diag({"exit_code": 205, "output": ok}), {})
    assert v.state == "fail"


def test_dcgm_probe_keeps_exit_205_and_its_json(tmp_path: Path):
    fake = tmp_path / "dcgmi"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\n"
        f"sys.stdout.write(open({str(FIX / 'gcm/dcgmi_diag_fail.json')!r}).read())\n"
        "sys.exit(205)\n"
    )
    fake.chmod(0o755)
    ctx = probes.ProbeContext(exp={}, argv={"dcgm_diag": [str(fake)]}, timeout=20)
    raw = probes.dcgm_diag(ctx)
    assert raw["exit_code"] == 205 and json.loads(raw["output"])
    v = cbd.run(
        {"runtime": {}, "expect": {"gpus": 0}},
        "n1",
        "full",
        only=["dcgm_diag"],
        overrides={"dcgm_diag": lambda c: raw},
    )
    assert [(x.check, x.state) for x in v] == [("dcgm_diag", "fail")]


# ---- 5. nccl-tests columns by header --------------------------------------------------------


def test_nccl_tests_busbw_read_by_header_with_root_column():
    # 2 x 8 H100, nccl-tests with the "root" column: peak out-of-place busbw 338.82 GB/s
    # (position 6 is algbw there: 180.71)
    r = parse_nccl_tests(fixture_text("nccl-tests/ztan-NCCL-test-result"))
    assert (r.max_busbw_gbps, r.avg_busbw_gbps, r.out_of_bounds) == (338.82, 70.742, 0)
    assert checks.nccl_allreduce(r, {"nccl_min_busbw_gbps": 300}).state == "pass"
    # the older layout without "root" still reads the same column
    old = parse_nccl_tests(fixture_text("superbenchmark/nccl_allreduce.log"))
    assert old.max_busbw_gbps == 235.26


# ---- 6. pcie_link: capability in the light profile, current link only under load --------------


def test_idle_gpu_with_downtrained_link_passes_light_profile():
    # recorded RTX 4090 node: idle GPUs report "Current : 1" (gen) against max gen 4
    idle = fixture_text("gpud/nvidia-smi-query.535.154.05.out.0.valid.4090")
    q = parse_nvidia_smi_q(idle)
    assert {g["PCI"]["GPU Link Info"]["PCIe Generation"]["Current"] for g in q.gpus} == {"1"}
    assert checks.pcie_link(q, {"gpus": 8}).state == "pass"
    # an idle GPU that also drops its width is still fine
    narrow = edit_gpu(idle, 3, "Current                   : 16x", "Current                   : 4x")
    assert checks.pcie_link(parse_nvidia_smi_q(narrow), {"gpus": 8}).state == "pass"
    # capability below what the node type expects fails even when idle
    v = checks.pcie_link(q, {"pcie_gen": 5})
    assert v.state == "fail" and "GPU0 PCIe max gen4 < gen5" in v.evidence


def test_loaded_gpu_with_degraded_link_fails():
    # recorded RTX 4090 node with two GPUs busy (100 % and 91 %) at gen4 x16
    text = fixture_text("gpud/nvidia-smi-query.535.154.05.out.0.valid")
    q = parse_nvidia_smi_q(text)
    v = checks.pcie_link(q, {})
    assert v.state == "pass" and "2 GPUs under load" in v.evidence
    bad = edit_gpu(text, 1, "Current                   : 16x", "Current                   : 8x")
    v = checks.pcie_link(parse_nvidia_smi_q(bad), {})
    assert (v.state, v.evidence) == ("fail", "GPU1 PCIe x8 < x16 under load (100%)")
    assert checks.pcie_link_load(parse_nvidia_smi_q(bad), {}).state == "fail"
    idle = parse_nvidia_smi_q(fixture_text("gpud/nvidia-smi-query.535.154.05.out.0.valid.4090"))
    assert checks.pcie_link_load(idle, {}).state == "skip"


# ---- 7. nvlink "inActive" ---------------------------------------------------------------------


def test_nvlink_all_links_inactive_b200_spelling():
    # gpud issue #1085: real B200 output
    links = parse_nvlink_status(fixture_text("nvidia/nvlink_b200_all_inactive.txt"))
    assert [(g.index, g.all_inactive) for g in links] == [(2, True)]
    v = checks.nvlink(links, {"gpus": 1, "nvlink_links": 18})
    assert (v.state, v.evidence) == ("fail", "GPU2 all links inactive")
