"""Checks: one small pure function per check, (parsed probe output, expectations) -> Verdict.

No I/O here.  ``None`` data means "the probe's tool is not installed on this node"; each check
decides whether that is fine (nothing expected -> skip) or a failure (hardware expected but the
tool to see it is missing).  Expectations (``exp``) come from :mod:`aegis_slurm.node.config`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import (
    GpuBurnResult,
    IbPort,
    NcclResult,
    NvidiaSmiQuery,
    NvlinkGpu,
    as_int,
    tree_get,
)
from aegis_slurm.node.verdict import FAIL, PASS, PROBE_ERROR, SKIP, WARN, Verdict

Exp = dict[str, Any]


def _gpu_names(smi: NvidiaSmiQuery) -> Iterable[tuple[int, dict]]:
    return enumerate(smi.gpus)


def scoped_gpus(smi: NvidiaSmiQuery, exp: Exp) -> list[tuple[int, dict]]:
    """The GPUs a job-state-sensitive check may judge (``exp["gpu_scope"]``).

    ``"job"`` (Prolog): only the GPUs Slurm gave this job, ``exp["job_gpus"]`` tokens from
    ``SLURM_JOB_GPUS``/``CUDA_VISIBLE_DEVICES`` matched against each GPU's Minor Number (the
    /dev/nvidiaN index gres.conf uses) or GPU UUID; another job's GPUs are not ours to judge.
    Anything else: every GPU.
    """
    gpus = list(_gpu_names(smi))
    if exp.get("gpu_scope") != "job":
        return gpus
    want = {str(t).strip() for t in exp.get("job_gpus", [])}
    return [
        (i, g)
        for i, g in gpus
        if str(g.get("Minor Number", "")).strip() in want
        or str(g.get("GPU UUID", "")).strip() in want
    ]


def _scope_note(exp: Exp) -> str:
    if exp.get("gpu_scope") == "job":
        return f" (job GPUs {','.join(map(str, exp.get('job_gpus', []))) or 'none'})"
    return ""


def _join(bad: list[str], limit: int = 4) -> str:
    more = f" (+{len(bad) - limit} more)" if len(bad) > limit else ""
    return "; ".join(bad[:limit]) + more


def _no_gpu(check: str, smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict | None:
    """Shared guard: skip GPU checks when no GPU is expected or nvidia-smi is absent."""
    if smi is None:
        why = "no GPUs expected" if not exp.get("gpus") else "nvidia-smi absent (see gpu_count)"
        return Verdict(check, SKIP, why)
    if smi.failure:
        return Verdict(check, SKIP, "nvidia-smi reported no GPU data (see gpu_count)")
    return None


def gpu_count(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """GPUs visible to the driver vs what Slurm/config says the node has.

    A GPU that fell off the bus (XID 79) disappears from nvidia-smi; Slurm would still schedule 8.
    Source: gcm check_nvidia_smi gpu_num, AzHC azure_gpu_count.nhc.
    """
    want = exp.get("gpus")
    if smi is None:
        if not want:
            return Verdict("gpu_count", SKIP, "no GPUs expected and nvidia-smi absent")
        return Verdict("gpu_count", FAIL, f"nvidia-smi not found but {want} GPUs expected")
    if smi.failure:  # "Driver/library version mismatch", "No devices were found"
        if not want:
            return Verdict("gpu_count", SKIP, f"no GPUs expected; nvidia-smi: {smi.failure}")
        return Verdict("gpu_count", FAIL, f"nvidia-smi: {smi.failure}; {want} GPUs expected")
    have = len(smi.gpus) or smi.attached
    if want is None:
        return Verdict("gpu_count", PASS, f"{have} GPUs (no expectation configured)")
    if have != want:
        return Verdict("gpu_count", FAIL, f"{have} GPUs visible, {want} expected")
    return Verdict("gpu_count", PASS, f"{have}/{want} GPUs")


_VERSION = re.compile(r"\d+\.\d+")


def driver_version(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Driver/CUDA versions present and as configured (a half-upgraded node breaks NCCL jobs).

    Source: gcm package-version; k8s-device-plugin #1431 (driver/library mismatch).
    """
    skip = _no_gpu("driver_version", smi, exp)
    if skip:
        return skip
    assert smi is not None
    # only version-like values: "N/A" (GSP off), "[Unknown Error]", "Not Supported" say
    # nothing about a firmware/driver mismatch
    gsp = {v for g in smi.gpus if _VERSION.match(v := tree_get(g, "GSP Firmware Version"))}
    bad = []
    if not smi.driver_version:
        bad.append("driver version missing")
    if exp.get("driver_version") and smi.driver_version != exp["driver_version"]:
        bad.append(f"driver {smi.driver_version} != expected {exp['driver_version']}")
    if exp.get("cuda_version") and smi.cuda_version != exp["cuda_version"]:
        bad.append(f"CUDA {smi.cuda_version} != expected {exp['cuda_version']}")
    if len(gsp) > 1 or (gsp and smi.driver_version not in gsp):
        bad.append(f"GSP firmware {sorted(gsp)} != driver {smi.driver_version}")
    if bad:
        return Verdict("driver_version", FAIL, _join(bad))
    return Verdict("driver_version", PASS, f"driver {smi.driver_version} CUDA {smi.cuda_version}")


def ecc_uncorrectable(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Volatile (since driver load) uncorrectable ECC errors > threshold (default 0).

    An uncorrected error since the last reset means corrupted results or a crash soon.
    Source: gcm ecc_uncorrected_volatile_total (threshold 0); AzHC azure_gpu_ecc.nhc.
    """
    skip = _no_gpu("ecc_uncorrectable", smi, exp)
    if skip:
        return skip
    assert smi is not None
    limit = int(exp.get("ecc_uncorrectable_max", 0))
    bad = []
    for i, g in _gpu_names(smi):
        errs = g.get("ECC Errors", {})
        n = _ecc_sum(errs.get("Volatile") if isinstance(errs, dict) else None, "Uncorrectable")
        if n > limit:
            bad.append(f"GPU{i} {n} uncorrectable volatile")
    if bad:
        return Verdict("ecc_uncorrectable", FAIL, _join(bad))
    return Verdict("ecc_uncorrectable", PASS, f"0 uncorrectable volatile ECC on {len(smi.gpus)}")


def row_remap(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Ampere+ row remapping: failure -> fail (RMA); pending -> fail (needs GPU reset first).

    Pending remaps take effect only after a GPU reset; until then the bad row is still used.
    XID 63 alone is not a drain; this state is what decides.  Source: gcm row_remap_{pending,
    failed}; AzHC azure_gpu_ecc.nhc; survey §4 on XID 63/64.
    """
    skip = _no_gpu("row_remap", smi, exp)
    if skip:
        return skip
    assert smi is not None
    bad = []
    for i, g in _gpu_names(smi):
        if tree_get(g, "Remapped Rows", "Remapping Failure Occurred") == "Yes":
            bad.append(f"GPU{i} row-remap failure")
        if tree_get(g, "Remapped Rows", "Pending") == "Yes":
            bad.append(f"GPU{i} row-remap pending (reset needed)")
    if bad:
        return Verdict("row_remap", FAIL, _join(bad))
    return Verdict("row_remap", PASS, "no remap pending or failed")


def retired_pages(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Pre-Ampere page retirement: pending blacklist or a near-full table (>= 60 of 64).

    Source: gcm gpu_retired_pages; AzHC check_SDBE_ecc (>=62 & pending); NVIDIA dynamic page
    retirement docs (64-page limit).
    """
    skip = _no_gpu("retired_pages", smi, exp)
    if skip:
        return skip
    assert smi is not None
    fail_at = int(exp.get("retired_pages_fail", 60))
    warn_at = int(exp.get("retired_pages_warn", 10))
    bad, warn = [], []
    for i, g in _gpu_names(smi):
        sbe = as_int(tree_get(g, "Retired Pages", "Single Bit ECC")) or 0
        dbe = as_int(tree_get(g, "Retired Pages", "Double Bit ECC")) or 0
        pending = tree_get(g, "Retired Pages", "Pending Page Blacklist") == "Yes"
        if pending or sbe + dbe >= fail_at:
            bad.append(f"GPU{i} retired sbe={sbe} dbe={dbe} pending={'yes' if pending else 'no'}")
        elif sbe + dbe >= warn_at:
            warn.append(f"GPU{i} retired sbe={sbe} dbe={dbe}")
    if bad:
        return Verdict("retired_pages", FAIL, _join(bad))
    if warn:
        return Verdict("retired_pages", WARN, _join(warn))
    return Verdict("retired_pages", PASS, "retired pages below limits")


def _gpu_util(g: dict) -> int | None:
    return as_int(tree_get(g, "Utilization", "Gpu"))


def pcie_link(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """PCIe link capability as expected; the current link only on GPUs under load.

    nvidia-smi: "The current link generation and width. These may be reduced when the GPU is
    not in use" and the Prolog always sees idle GPUs, so the *current* width/generation is
    judged only on GPUs whose utilisation is >= ``pcie_load_util_pct`` (the full profile's
    ``pcie_link_load`` samples while gpu_burn runs).  Always judged: the *max* generation and
    width ("possible with this GPU and system configuration") against ``pcie_gen`` /
    ``pcie_width`` when configured.  Source: gcm check_pci (sysfs link vs manifest), gpud
    pcie component; defect report issue 11 item 6.
    """
    skip = _no_gpu("pcie_link", smi, exp)
    if skip:
        return skip
    assert smi is not None
    want_gen = int(exp.get("pcie_gen", 0))
    want_width = int(exp.get("pcie_width", 0))
    busy_at = int(exp.get("pcie_load_util_pct", 50))
    bad, loaded = [], 0
    for i, g in _gpu_names(smi):
        info = ("PCI", "GPU Link Info")
        max_w = as_int(tree_get(g, *info, "Link Width", "Max"))
        max_gen = as_int(tree_get(g, *info, "PCIe Generation", "Max"))
        if want_width and max_w is not None and max_w < want_width:
            bad.append(f"GPU{i} PCIe max x{max_w} < x{want_width}")
        if want_gen and max_gen is not None and max_gen < want_gen:
            bad.append(f"GPU{i} PCIe max gen{max_gen} < gen{want_gen}")
        util = _gpu_util(g)
        if util is None or util < busy_at:
            continue  # idle: current link is allowed to be down-trained
        loaded += 1
        cur_w = as_int(tree_get(g, *info, "Link Width", "Current"))
        cur_gen = as_int(tree_get(g, *info, "PCIe Generation", "Current"))
        need_w = want_width or max_w
        need_gen = want_gen or max_gen
        if cur_w is not None and need_w and cur_w < need_w:
            bad.append(f"GPU{i} PCIe x{cur_w} < x{need_w} under load ({util}%)")
        if cur_gen is not None and need_gen and cur_gen < need_gen:
            bad.append(f"GPU{i} PCIe gen{cur_gen} < gen{need_gen} under load ({util}%)")
    if bad:
        return Verdict("pcie_link", FAIL, _join(bad))
    how = f"{loaded} GPUs under load at full link" if loaded else "current link not judged (idle)"
    return Verdict("pcie_link", PASS, f"PCIe capability as expected; {how}")


def pcie_link_load(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Full profile: :func:`pcie_link` on an nvidia-smi sample taken while gpu_burn runs."""
    v = pcie_link(smi, exp)
    if v.state == PASS and "not judged" in v.evidence:
        return Verdict("pcie_link_load", SKIP, "no GPU under load when sampled (gpu_burn absent?)")
    return Verdict("pcie_link_load", v.state, v.evidence)


_THROTTLE_BAD = (
    "HW Slowdown",
    "HW Thermal Slowdown",
    "HW Power Brake Slowdown",
    "SW Thermal Slowdown",
)


def clocks_thermal(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Hardware slowdown / thermal clock-event reasons and GPU temperature.

    HW slowdown or power-brake at idle means a PSU/cooling fault: every synchronous training
    step would run at the slowest GPU's speed.  Temperature above ``max_gpu_temp_c`` fails.
    Source: gpud hw-slowdown/temperature components; AzHC azure_gpu_clock_throttling.nhc.
    """
    skip = _no_gpu("clocks_thermal", smi, exp)
    if skip:
        return skip
    assert smi is not None
    tmax = int(exp.get("max_gpu_temp_c", 85))
    gpus = scoped_gpus(smi, exp)
    if exp.get("gpu_scope") == "job" and not gpus:
        return Verdict("clocks_thermal", SKIP, "no GPUs allocated to this job" + _scope_note(exp))
    hot, slow = [], []
    for i, g in gpus:
        reasons = g.get("Clocks Event Reasons") or g.get("Clocks Throttle Reasons") or {}
        if isinstance(reasons, dict):
            flat = dict(reasons)
            hw = flat.get("HW Slowdown")
            if isinstance(hw, dict):  # older layout nests sub-reasons
                flat.update(hw)
            active = [k for k in _THROTTLE_BAD if flat.get(k) == "Active"]
            if active:
                slow.append(f"GPU{i} {'+'.join(active)}")
        t = as_int(tree_get(g, "Temperature", "GPU Current Temp"))
        if t is not None and t > tmax:
            hot.append(f"GPU{i} {t}C > {tmax}C")
    if hot and exp.get("gpu_scope") == "busy":  # healthcheck on a node that may be running jobs
        return Verdict("clocks_thermal", WARN, _join(hot + slow) + " (node may be busy)")
    if hot:
        return Verdict("clocks_thermal", FAIL, _join(hot + slow) + _scope_note(exp))
    if slow:
        return Verdict("clocks_thermal", WARN, _join(slow) + _scope_note(exp))
    return Verdict("clocks_thermal", PASS, "no HW slowdown, temperatures OK" + _scope_note(exp))


def gpu_processes(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Compute processes left on the GPUs before the job starts (leftover memory/contexts).

    In the Prolog only this job's GPUs are judged (``gpu_scope = "job"``): on a shared node the
    other jobs' processes are legitimate.  In healthcheck mode on a node that may be running jobs
    (``gpu_scope = "busy"``: HealthCheckNodeState is not IDLE) nothing is judged.
    ``gpu_processes_allowed = true`` turns the check off.  Source: gcm running_procs /
    gpu_mem_usage.
    """
    skip = _no_gpu("gpu_processes", smi, exp)
    if skip:
        return skip
    assert smi is not None
    if exp.get("gpu_processes_allowed"):
        return Verdict("gpu_processes", SKIP, "node is shared (gpu_processes_allowed)")
    if exp.get("gpu_scope") == "busy":
        return Verdict(
            "gpu_processes",
            SKIP,
            "healthcheck: node may be running jobs (HealthCheckNodeState != IDLE)",
        )
    gpus = scoped_gpus(smi, exp)
    if exp.get("gpu_scope") == "job" and not gpus:
        return Verdict("gpu_processes", SKIP, "no GPUs allocated to this job" + _scope_note(exp))
    bad = []
    for i, g in gpus:
        procs = g.get("Processes")
        if isinstance(procs, dict) and procs:
            pids = [v for k, v in _walk(procs) if k == "Process ID"]
            bad.append(f"GPU{i} pids {','.join(pids) or '?'}")
    if bad:
        return Verdict("gpu_processes", FAIL, "leftover " + _join(bad) + _scope_note(exp))
    return Verdict("gpu_processes", PASS, "no GPU processes" + _scope_note(exp))


def _walk(tree: dict) -> Iterable[tuple[str, str]]:
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from _walk(v)
        else:
            yield k, v


def pci_links(data: dict[str, Any] | None, exp: Exp) -> Verdict:
    """Every device of the node manifest present with its expected PCIe link speed and width.

    Manifest = gcm's per-node-type JSON (``"pci": {bdf: {dev, link_speed: [..], link_width,
    topology_critical}}``), so sites with gcm manifests reuse them.  A degraded NVSwitch or HCA
    link (x16 -> x8, gen4 -> gen1) halves bandwidth without any error.  Devices marked
    ``topology_critical`` fail; others warn.  Source: gcm check_pci.
    """
    if data is None:
        return Verdict("pci_links", SKIP, "no pci_manifest configured")
    crit, warn = [], []
    for bdf, want in sorted(data["manifest"].items()):
        have = data["sysfs"].get(bdf)
        name = want.get("dev", bdf)
        speeds = want.get("link_speed", [])
        speeds = [speeds] if isinstance(speeds, str) else speeds
        if have is None:
            problem = f"{name} ({bdf}) missing"
        elif want.get("link_width") and (as_int(have["width"]) or 0) < int(want["link_width"]):
            problem = f"{name} x{have['width']} < x{want['link_width']}"
        elif speeds and have["speed"] not in speeds:
            problem = f"{name} {have['speed']} not in {speeds}"
        else:
            continue
        critical = str(want.get("topology_critical", "false")).lower() == "true"
        (crit if critical else warn).append(problem)
    if crit:
        return Verdict("pci_links", FAIL, _join(crit + warn))
    if warn:
        return Verdict("pci_links", WARN, _join(warn))
    return Verdict("pci_links", PASS, f"{len(data['manifest'])} PCIe devices at expected links")


def nvlink(links: list[NvlinkGpu] | None, exp: Exp) -> Verdict:
    """Every NVLink of every GPU active (an inactive link silently halves all-reduce bandwidth).

    ``nvlink_expected``: links per GPU (0 = NVLink not expected).  Source: AzHC
    azure_gpu_nvlink.nhc; gcm dcgmi nvlink; GCP prolog only looked at GPU 0.
    """
    want = int(exp.get("nvlink_links", 0))
    if not want:
        return Verdict("nvlink", SKIP, "no NVLink expected")
    if links is None:
        return Verdict("nvlink", FAIL, "nvidia-smi absent, NVLink expected")
    bad = []
    if len(links) < int(exp.get("gpus") or 0):
        bad.append(f"nvlink status for {len(links)} GPUs, {exp.get('gpus')} expected")
    for g in links:
        if g.all_inactive:
            bad.append(f"GPU{g.index} all links inactive")
            continue
        up = [n for n, s in g.links.items() if "inactive" not in s.lower()]
        if len(up) < want:
            bad.append(f"GPU{g.index} {len(up)}/{want} links active")
    if bad:
        return Verdict("nvlink", FAIL, _join(bad))
    return Verdict("nvlink", PASS, f"{len(links)} GPUs x {want} links active")


def xid_events(new: list[xidcat.XidEvent] | None, exp: Exp) -> Verdict:
    """XIDs logged since the last check, classified by :mod:`aegis_slurm.node.xid`.

    Only *new* lines count, so a past XID does not keep a repaired node drained (the gcm
    whole-ring-buffer problem, Azure/azurehpc PR #648).
    """
    if new is None:
        return Verdict("xid", SKIP, "kernel log unreadable/absent")
    crit, warn = [], []
    for ev in new:
        info = xidcat.classify(ev.code, ev.line)
        if info.code in exp.get("xid_ignore", ()):
            continue
        where = f"{ev.pci} {ev.mig}" if ev.mig else ev.pci
        tag = f"Xid {ev.code} on {where} ({info.meaning})"
        if info.severity == xidcat.XidSeverity.CRITICAL:
            crit.append(tag)
        elif info.severity == xidcat.XidSeverity.WARN:
            warn.append(tag)
    if crit:
        return Verdict("xid", FAIL, _join(sorted(set(crit))))
    if warn:
        return Verdict("xid", WARN, _join(sorted(set(warn))))
    return Verdict("xid", PASS, f"{len(new)} new XIDs, none critical")


def ib_ports(ports: list[IbPort] | None, exp: Exp) -> Verdict:
    """At least ``ib_ports`` InfiniBand ports ACTIVE/LinkUp at >= ``ib_rate_gbps``.

    Ethernet-layer (RoCE/front-end) ports are counted only with ``ib_link_layer = "Ethernet"``.
    Source: NHC check_hw_ib; gcm check_iblink; gpud AtLeastPorts/AtLeastRate.
    """
    want = int(exp.get("ib_ports", 0))
    layer = exp.get("ib_link_layer", "InfiniBand")
    if ports is None:
        if want:
            return Verdict("ib_ports", FAIL, f"no IB devices found, {want} ports expected")
        return Verdict("ib_ports", SKIP, "no IB ports expected")
    rate = float(exp.get("ib_rate_gbps", 0))
    mine = [p for p in ports if p.link_layer == layer or not p.link_layer]
    good = [
        p for p in mine if p.state == "ACTIVE" and p.phys_state == "LinkUp" and p.rate_gbps >= rate
    ]
    # ports that are up but slower than ib_rate_gbps (e.g. 100G front-end NICs next to 400G
    # fabric ports) only matter when they make the count fall short
    down = [p for p in mine if not (p.state == "ACTIVE" and p.phys_state == "LinkUp")]
    slow = [p for p in mine if p not in good and p not in down]
    bad = [f"{p.device}/{p.port} {p.state}/{p.phys_state} {p.rate_gbps:g}G" for p in down]
    if len(good) < want:
        bad += [f"{p.device}/{p.port} {p.rate_gbps:g}G < {rate:g}G" for p in slow]
    if len(good) < want:
        return Verdict("ib_ports", FAIL, f"{len(good)}/{want} ports up; " + _join(bad))
    if bad:
        return Verdict("ib_ports", WARN, f"{len(good)} up; " + _join(bad))
    return Verdict(
        "ib_ports",
        PASS,
        f"{len(good)} {layer} ports active" + (f" at >= {rate:g} Gb/s" if rate else ""),
    )


#: sysfs counter -> default max increase between two checks
IB_COUNTER_LIMITS = {
    "link_downed": 0,
    "symbol_error": 100,
    "port_rcv_errors": 100,
    "link_error_recovery": 10,
    "excessive_buffer_overrun_errors": 0,
    "local_link_integrity_errors": 0,
}


def ib_counters(deltas: dict[str, dict[str, int]] | None, exp: Exp) -> Verdict:
    """Increase of IB error counters since the last check beyond per-counter limits -> warn.

    Counters are cumulative; the runner stores the previous reading and passes deltas.  Link
    flaps (link_downed) and symbol errors precede NCCL timeouts.  Source: gcm PR #119,
    AzHC azure_ib_link_flapping.nhc.
    """
    if not deltas:
        return Verdict("ib_counters", SKIP, "no IB counters (no ports or first reading)")
    limits = {**IB_COUNTER_LIMITS, **exp.get("ib_counter_limits", {})}
    bad = [
        f"{port} {name}+{d}"
        for port, ctr in sorted(deltas.items())
        for name, d in sorted(ctr.items())
        if name in limits and d > limits[name]
    ]
    if bad:
        return Verdict("ib_counters", WARN, _join(bad))
    return Verdict("ib_counters", PASS, f"error counters steady on {len(deltas)} ports")


def nics(present: dict[str, str] | None, exp: Exp) -> Verdict:
    """Expected network interfaces exist and are operstate up.  Source: NHC check_hw_eth."""
    want = list(exp.get("nics", []))
    if not want:
        return Verdict("nics", SKIP, "no NICs expected")
    present = present or {}
    bad = [
        f"{n} missing" if n not in present else f"{n} {present[n]}"
        for n in want
        if present.get(n) != "up"
    ]
    if bad:
        return Verdict("nics", FAIL, _join(bad))
    return Verdict("nics", PASS, f"{len(want)} NICs up")


def mounts(status: dict[str, dict[str, Any]] | None, exp: Exp) -> Verdict:
    """Required filesystems mounted AND answering a timed stat+read in a child process.

    /proc/mounts alone lets a stale NFS/GPFS mount pass (NHC #77).  ``status`` is per mount:
    ``{"mounted": bool, "ok": bool, "detail": str}``.
    """
    want = list(exp.get("mounts", []))
    if not want:
        return Verdict("mounts", SKIP, "no mounts required")
    status = status or {}
    bad = []
    for m in want:
        s = status.get(m, {"mounted": False, "ok": False, "detail": "not probed"})
        if not s["mounted"]:
            bad.append(f"{m} not mounted")
        elif not s["ok"]:
            bad.append(f"{m} unresponsive: {s['detail']}")
    if bad:
        return Verdict("mounts", FAIL, _join(bad))
    return Verdict("mounts", PASS, f"{len(want)} mounts responsive")


def disk_space(usage: dict[str, tuple[int, ...] | str] | None, exp: Exp) -> Verdict:
    """Free space on configured paths (bytes free, bytes total) >= ``disk_min_free_pct``.

    A configured path that does not exist (or cannot be statfs'ed: the probe's error text) fails:
    a missing local scratch is as bad as a full one.  Source: gcm disk-usage, NHC check_fs_free.
    A full /tmp or local scratch kills jobs at the first checkpoint.
    """
    if not usage:
        return Verdict("disk_space", SKIP, "no paths configured")
    pct = float(exp.get("disk_min_free_pct", 5))
    gone, bad, ok = [], [], []
    for path, res in sorted(usage.items()):
        if isinstance(res, str):
            gone.append(f"{path}: {res}")
            continue
        free, total = res[0], res[1]
        share = 100.0 * free / total if total else 0.0
        (bad if share < pct else ok).append(f"{path} {share:.1f}% free")
    if gone or bad:
        return Verdict("disk_space", FAIL, _join(gone + bad) + (f" (< {pct:g}%)" if bad else ""))
    return Verdict("disk_space", PASS, _join(ok))


def memory(meminfo: dict[str, int] | None, exp: Exp) -> Verdict:
    """MemTotal within ``mem_tolerance_pct`` of ``mem_gib`` (a failed DIMM shrinks it).

    Source: NHC check_hw_physmem; gcm check-mem-size.
    """
    if meminfo is None or "MemTotal" not in meminfo:
        return Verdict("memory", SKIP, "/proc/meminfo unavailable")
    have = meminfo["MemTotal"] / 2**20
    want = float(exp.get("mem_gib", 0))
    if not want:
        return Verdict("memory", PASS, f"{have:.1f} GiB (no expectation)")
    tol = float(exp.get("mem_tolerance_pct", 5))
    if have < want * (1 - tol / 100):
        return Verdict("memory", FAIL, f"{have:.1f} GiB < {want:g} GiB -{tol:g}%")
    return Verdict("memory", PASS, f"{have:.1f} GiB")


def time_sync(tx: dict[str, int] | None, exp: Exp) -> Verdict:
    """Kernel clock synchronised (adjtimex: not TIME_ERROR/STA_UNSYNC, maxerror bounded).

    Skewed clocks break Kerberos/munge and make multi-node logs unreadable; none of the surveyed
    tools check it.  ``time_sync``: "require" (fail), "warn" (default) or "off".
    """
    mode = exp.get("time_sync", "warn")
    if mode == "off":
        return Verdict("time_sync", SKIP, "disabled")
    if tx is None:
        return Verdict("time_sync", SKIP, "adjtimex unavailable")
    max_ms = float(exp.get("time_max_error_ms", 100))
    synced = tx["state"] != 5 and not tx["status"] & 0x40  # TIME_ERROR, STA_UNSYNC
    err_ms = tx["maxerror_us"] / 1000
    if synced and err_ms <= max_ms:
        return Verdict("time_sync", PASS, f"synchronised, maxerror {err_ms:.1f} ms")
    ev = (
        f"clock unsynchronised (maxerror {err_ms:.0f} ms)"
        if not synced
        else f"maxerror {err_ms:.0f} ms > {max_ms:g} ms"
    )
    return Verdict("time_sync", FAIL if mode == "require" else WARN, ev)


def services(running: set[str] | None, exp: Exp) -> Verdict:
    """Required daemons running (by process name, systemd not assumed).

    E.g. nvidia-fabricmanager on NVSwitch systems, nvidia-persistenced, munged, chronyd.
    Source: NHC check_ps_service; gcm service-status.
    """
    want = list(exp.get("services", []))
    if not want:
        return Verdict("services", SKIP, "no services required")
    missing = [s for s in want if s not in (running or set())]
    if missing:
        return Verdict("services", FAIL, "not running: " + ", ".join(missing))
    return Verdict("services", PASS, f"{len(want)} services running")


# ---- full profile -------------------------------------------------------------------------


def nccl_allreduce(res: NcclResult | None, exp: Exp) -> Verdict:
    """Single-node nccl-tests all_reduce_perf: peak busbw >= ``nccl_min_busbw_gbps``.

    Source: gcm check_nccl, AzHC azure_nccl_allreduce.nhc.
    """
    if res is None:
        return Verdict("nccl_allreduce", SKIP, "unavailable: all_reduce_perf not installed")
    if res.out_of_bounds:
        return Verdict("nccl_allreduce", FAIL, f"{res.out_of_bounds} out-of-bounds values")
    want = float(exp.get("nccl_min_busbw_gbps", 0))
    ev = f"peak busbw {res.max_busbw_gbps:.1f} GB/s, avg {res.avg_busbw_gbps:.1f}"
    if want and res.max_busbw_gbps < want:
        return Verdict("nccl_allreduce", FAIL, ev + f" < {want:g}")
    return Verdict("nccl_allreduce", PASS, ev)


def gpu_burn(res: GpuBurnResult | None, exp: Exp) -> Verdict:
    """gpu-burn: every GPU OK, no compute errors, no GPU far below its peers' Gflop/s.

    ``burn_min_ratio`` (default 0.8): slowest GPU's final Gflop/s over the median.
    """
    if res is None:
        return Verdict("gpu_burn", SKIP, "unavailable: gpu_burn not installed")
    bad = [f"GPU{i} {s}" for i, s in sorted(res.tested.items()) if s != "OK"]
    bad += [f"GPU{i} {e} errors" for i, e in enumerate(res.max_errors) if e]
    rates = sorted(g for g in res.gflops if g > 0)
    if rates:
        med = rates[len(rates) // 2]
        ratio = float(exp.get("burn_min_ratio", 0.8))
        bad += [
            f"GPU{i} {g:.0f} Gflop/s < {ratio:g}x median {med:.0f}"
            for i, g in enumerate(res.gflops)
            if g < ratio * med
        ]
    if bad:
        return Verdict("gpu_burn", FAIL, _join(bad))
    return Verdict("gpu_burn", PASS, f"{len(res.tested)} GPUs OK, max temp {max(res.max_temp_c)}C")


#: dcgmi exit code for DCGM_ST_NVVS_ISOLATE_ERROR (256 - 51)
DCGM_ISOLATE_RC = 205


def dcgm_diag(diag: dict[str, Any] | None, exp: Exp) -> Verdict:
    """``dcgmi diag -r N -j``: any test whose result is Fail -> fail; Warn -> warn.

    Exit code 205 (``DCGM_ST_NVVS_ISOLATE_ERROR``: "the diagnostic returned an error that
    indicates the need for isolation", e.g. a volatile double-bit ECC error) fails whatever the
    per-test results say; gcm treats 205 as non-fatal when every test passed, DCGM's own
    definition is what we follow.  ``diag`` is :func:`parse.parse_dcgm_diag` output.
    """
    if diag is None:
        return Verdict("dcgm_diag", SKIP, "unavailable: dcgmi not installed")
    fails, warns = [], []
    for name, status in _dcgm_results(diag["result"]):
        if status.lower() == "fail":
            fails.append(name)
        elif status.lower() == "warn":
            warns.append(name)
    if diag["exit_code"] == DCGM_ISOLATE_RC:
        what = ("failed: " + _join(fails)) if fails else "no failing test in the JSON"
        return Verdict("dcgm_diag", FAIL, f"DCGM isolate error (exit 205), {what}")
    if fails:
        return Verdict("dcgm_diag", FAIL, "failed: " + _join(fails))
    if warns:
        return Verdict("dcgm_diag", WARN, "warnings: " + _join(warns))
    return Verdict("dcgm_diag", PASS, "all DCGM diagnostics passed")


def _dcgm_results(obj: Any) -> Iterable[tuple[str, str]]:
    # DCGM 3.x JSON: {"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name",
    # "results": [{"status": "Pass"}...]}]}]}}; walk generically to survive schema drift.
    if isinstance(obj, dict):
        if "name" in obj and "results" in obj and isinstance(obj["results"], list):
            for r in obj["results"]:
                if isinstance(r, dict) and "status" in r:
                    yield str(obj["name"]), str(r["status"])
        for v in obj.values():
            yield from _dcgm_results(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _dcgm_results(v)


def data_read(res: dict[str, float] | None, exp: Exp) -> Verdict:
    """Dataset/checkpoint read test: MB/s reading ``data_read_path`` >= ``data_read_min_mbps``."""
    if res is None:
        return Verdict("data_read", SKIP, "unavailable: no data_read_path configured")
    want = float(exp.get("data_read_min_mbps", 0))
    ev = f"read {res['mbytes']:.0f} MB at {res['mbps']:.0f} MB/s"
    if want and res["mbps"] < want:
        return Verdict("data_read", FAIL, ev + f" < {want:g}")
    return Verdict("data_read", PASS, ev)


CheckFn = Callable[[Any, Exp], Verdict]


# ---- coverage: checks two or more of Aegis/gpud/AzHC/gcm/NHC have (docs/cbd.md) -----------


def persistence_mode(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Persistence mode on every GPU (nvidia-persistenced or ``nvidia-smi -pm 1``).

    Without it the driver tears GPU state down between jobs: slow first CUDA call, lost
    application clocks.  ``persistence_mode``: "require" (fail), "warn" (default), "off".
    Source: gpud persistence-mode component, gcm check_nvidia_smi (fails), AzHC.
    """
    mode = exp.get("persistence_mode", "warn")
    skip = _no_gpu("persistence_mode", smi, exp)
    if skip or mode == "off":
        return skip or Verdict("persistence_mode", SKIP, "disabled")
    assert smi is not None
    off = [f"GPU{i}" for i, g in _gpu_names(smi) if g.get("Persistence Mode") == "Disabled"]
    if off:
        ev = "persistence mode disabled on " + _join(off, 8)
        return Verdict("persistence_mode", FAIL if mode == "require" else WARN, ev)
    return Verdict("persistence_mode", PASS, f"enabled on {len(smi.gpus)} GPUs")


def vbios(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """VBIOS version the same on every GPU of a model, and as configured (``vbios_versions``).

    A GPU swapped in by RMA often carries another VBIOS; mixed VBIOS on one node is a known
    cause of NCCL/NVLink trouble.  Mixed -> warn; not in the configured list -> fail.
    Source: AzHC azure_gpu_vbios.nhc, gcm check_nvidia_smi vbios, gpud info.
    """
    skip = _no_gpu("vbios", smi, exp)
    if skip:
        return skip
    assert smi is not None
    allowed = exp.get("vbios_versions") or []
    allowed = [allowed] if isinstance(allowed, str) else list(allowed)
    by_model: dict[str, set[str]] = {}
    bad = []
    for i, g in _gpu_names(smi):
        ver = str(g.get("VBIOS Version", ""))
        by_model.setdefault(str(g.get("Product Name", "?")), set()).add(ver)
        if allowed and ver not in allowed:
            bad.append(f"GPU{i} VBIOS {ver} not in {allowed}")
    if bad:
        return Verdict("vbios", FAIL, _join(bad))
    mixed = [f"{m}: {', '.join(sorted(v))}" for m, v in sorted(by_model.items()) if len(v) > 1]
    if mixed:
        return Verdict("vbios", WARN, "mixed VBIOS " + _join(mixed))
    vers = sorted({v for vs in by_model.values() for v in vs})
    return Verdict("vbios", PASS, f"VBIOS {', '.join(vers)} on {len(smi.gpus)} GPUs")


#: pre-Ampere layout (still printed for Volta by driver 550): "Single Bit" / "Double Bit"
#: sub-sections whose "Total" is the corrected / uncorrected count
_ECC_OLD = {"Correctable": "Single Bit", "Uncorrectable": "Double Bit"}


def _ecc_sum(tree: Any, word: str) -> int:
    """ECC error count of one timescale (``Volatile``/``Aggregate`` subtree), ``word``
    "Correctable" or "Uncorrectable": the SRAM/DRAM keys (Ampere+) or the Volta-era
    ``Single Bit``/``Double Bit`` ``Total``."""
    if not isinstance(tree, dict):
        return 0
    n = sum(as_int(v) or 0 for k, v in tree.items() if word in k and isinstance(v, str))
    old = tree.get(_ECC_OLD[word])
    if isinstance(old, dict):
        n += as_int(str(old.get("Total", ""))) or 0
    return n


def ecc_health(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """ECC mode, SRAM threshold, correctable and lifetime (aggregate) ECC counts.

    Fails: ECC mode disabled when ``ecc_mode_required`` (default false: GeForce/RTX nodes run
    with ECC off by choice, e.g. the recorded 8x RTX 4090 nodes), or "SRAM Threshold
    Exceeded: Yes" (NVIDIA: the GPU needs replacing).  Warns: volatile
    correctable >= ``ecc_correctable_volatile_warn`` (10000) or aggregate uncorrectable >=
    ``ecc_aggregate_uncorrectable_warn`` (10): trend material, the drain decision is
    row_remap / ecc_uncorrectable.  Source: gcm ecc_corrected_volatile_total / aggregate,
    AzHC azure_gpu_ecc.nhc, gpud ecc component, NVIDIA memory error management docs.
    """
    skip = _no_gpu("ecc_health", smi, exp)
    if skip:
        return skip
    assert smi is not None
    need_mode = exp.get("ecc_mode_required", False)
    ce_warn = int(exp.get("ecc_correctable_volatile_warn", 10000))
    agg_warn = int(exp.get("ecc_aggregate_uncorrectable_warn", 10))
    bad, warn = [], []
    for i, g in _gpu_names(smi):
        # "Ecc Mode" up to driver 470, "ECC Mode" after
        mode = tree_get(g, "ECC Mode", "Current") or tree_get(g, "Ecc Mode", "Current")
        if need_mode and mode == "Disabled":
            bad.append(f"GPU{i} ECC mode disabled")
        errs = g.get("ECC Errors", {})
        if not isinstance(errs, dict):
            continue
        agg = errs.get("Aggregate", {})
        if isinstance(agg, dict) and agg.get("SRAM Threshold Exceeded") == "Yes":
            bad.append(f"GPU{i} SRAM uncorrectable threshold exceeded")
        ce = _ecc_sum(errs.get("Volatile"), "Correctable")
        if ce >= ce_warn:
            warn.append(f"GPU{i} {ce} correctable volatile")
        ue = _ecc_sum(agg, "Uncorrectable")
        if ue >= agg_warn:
            warn.append(f"GPU{i} {ue} uncorrectable lifetime")
    if bad:
        return Verdict("ecc_health", FAIL, _join(bad + warn))
    if warn:
        return Verdict("ecc_health", WARN, _join(warn))
    return Verdict("ecc_health", PASS, f"ECC counts below limits on {len(smi.gpus)} GPUs")


def gpu_reset_required(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """The driver's own verdict: "GPU Reset Status: Reset Required / Drain and Reset
    Recommended: Yes" (set after Xid 94/95/154-class events, cleared by a GPU reset).

    Source: NVIDIA nvidia-smi -q (GPU Reset Status), gpud (GPU recovery action), DCGM.
    """
    skip = _no_gpu("gpu_reset_required", smi, exp)
    if skip:
        return skip
    assert smi is not None
    bad = []
    for i, g in _gpu_names(smi):
        st = g.get("GPU Reset Status", {})
        if not isinstance(st, dict):
            continue
        if st.get("Reset Required") == "Yes":
            bad.append(f"GPU{i} reset required")
        elif st.get("Drain and Reset Recommended") == "Yes":
            bad.append(f"GPU{i} drain and reset recommended")
    if bad:
        return Verdict("gpu_reset_required", FAIL, _join(bad))
    return Verdict("gpu_reset_required", PASS, "no GPU asks for a reset")


def app_clocks(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Application clocks not below their defaults (a job that ran ``nvidia-smi -ac`` and left
    them lowered slows every later job).  Lowered -> warn.  Raised is a site's tuning, not a
    fault: NVIDIA's GPU Boost guidance has admins set application clocks above the default to
    use the power headroom, and cloud GPU images do the same at boot.  Source: gcm clock
    checks, AzHC azure_gpu_app_clocks, Aegis (clock configuration before delivery).
    """
    skip = _no_gpu("app_clocks", smi, exp)
    if skip:
        return skip
    assert smi is not None
    low, high = [], []
    for i, g in _gpu_names(smi):
        for clk in ("Graphics", "Memory"):
            cur = as_int(tree_get(g, "Applications Clocks", clk))
            default = as_int(tree_get(g, "Default Applications Clocks", clk))
            if cur is None or default is None or cur == default:
                continue  # N/A, [N/A], Not Supported: nothing to compare
            (low if cur < default else high).append(f"GPU{i} {clk} {cur} vs default {default}")
    if low:
        return Verdict("app_clocks", WARN, "lowered: " + _join(low))
    if high:
        return Verdict("app_clocks", PASS, "raised by the site: " + _join(high, 2))
    return Verdict("app_clocks", PASS, "application clocks at defaults")


def swap(meminfo: dict[str, int] | None, exp: Exp) -> Verdict:
    """Swap as configured: ``swap_max_gib`` (-1 = any; 0 = must have none) and used share
    < ``swap_used_warn_pct`` (a node that swaps stalls the synchronous step of a training job).
    Source: NHC check_hw_swap / check_hw_swap_free, gcm memory checks.
    """
    if meminfo is None or "SwapTotal" not in meminfo:
        return Verdict("swap", SKIP, "/proc/meminfo unavailable")
    total = meminfo["SwapTotal"] / 2**20
    used = (meminfo["SwapTotal"] - meminfo.get("SwapFree", meminfo["SwapTotal"])) / 2**20
    max_gib = float(exp.get("swap_max_gib", -1))
    if max_gib >= 0 and total > max_gib:
        return Verdict("swap", FAIL, f"{total:.1f} GiB swap > {max_gib:g} GiB allowed")
    pct = float(exp.get("swap_used_warn_pct", 50))
    if total and 100 * used / total >= pct:
        return Verdict("swap", WARN, f"{used:.1f} of {total:.1f} GiB swap used (>= {pct:g}%)")
    return Verdict("swap", PASS, f"{total:.1f} GiB swap, {used:.1f} GiB used")


def processes(data: dict[str, Any] | None, exp: Exp) -> Verdict:
    """Processes in D state (uninterruptible: a hung filesystem or driver), zombies, and the
    5-minute load per CPU on a node that is about to get a job.

    ``data`` = :func:`parse.parse_proc_snapshot`.  Over ``proc_dstate_max`` (0) D-state,
    ``proc_zombie_max`` (50) zombies or ``load_per_cpu_max`` (2.0) -> warn (never drains by
    default); D state counts only when a second look 0.25 s later still finds the process
    there (a read from disk is a D state of milliseconds).  Source: gcm
    check_dstate / check_zombie, NHC check_ps_loadavg, gpud.  Not judged in healthcheck mode on
    a node that may be running jobs (``gpu_scope = "busy"``); the load not on shared nodes
    (``gpu_processes_allowed``).
    """
    if data is None:
        return Verdict("processes", SKIP, "/proc/loadavg unavailable")
    if exp.get("gpu_scope") == "busy":  # healthcheck on a node that may be running jobs
        return Verdict("processes", SKIP, "healthcheck: node may be running jobs")
    states = data["states"]
    dstate = sorted(f"{pid}({comm})" for pid, (comm, st) in states.items() if st == "D")
    zombies = [pid for pid, (_, st) in states.items() if st == "Z"]
    warn = []
    if len(dstate) > int(exp.get("proc_dstate_max", 0)):
        warn.append(f"{len(dstate)} in D state: " + ", ".join(dstate[:5]))
    if len(zombies) > int(exp.get("proc_zombie_max", 50)):
        warn.append(f"{len(zombies)} zombies")
    load5, ncpu = data.get("load5"), data.get("ncpu") or 0
    per_cpu = float(exp.get("load_per_cpu_max", 2.0))
    shared = exp.get("gpu_processes_allowed")  # other jobs' load is legitimate there
    if load5 is not None and ncpu and per_cpu > 0 and not shared and load5 > per_cpu * ncpu:
        warn.append(f"load5 {load5:g} > {per_cpu:g} x {ncpu} CPUs")
    if warn:
        return Verdict("processes", WARN, "; ".join(warn))
    return Verdict("processes", PASS, f"{len(states)} processes, none stuck; load5 {load5}")


def kernel_modules(loaded: set[str] | None, exp: Exp) -> Verdict:
    """Required kernel modules loaded (``kernel_modules``, e.g. nvidia_peermem for GPUDirect
    RDMA, ib_umad, nvidia_uvm).  A missing nvidia_peermem silently halves NCCL bandwidth.
    Source: gpud peermem component, AzHC, gcm check_nvidia_smi kmod checks.
    """
    want = list(exp.get("kernel_modules", []))
    if not want:
        return Verdict("kernel_modules", SKIP, "no modules required")
    if loaded is None:
        # not being able to look is the checker's problem, not a missing module
        return Verdict("kernel_modules", PROBE_ERROR, "/proc/modules not read")
    missing = [m for m in want if m.replace("-", "_") not in loaded]
    if missing:
        return Verdict("kernel_modules", FAIL, "not loaded: " + ", ".join(missing))
    return Verdict("kernel_modules", PASS, f"{len(want)} required modules loaded")


def disk_inodes(usage: dict[str, Any] | None, exp: Exp) -> Verdict:
    """Free inodes on the ``disk_paths`` >= ``disk_min_free_inodes_pct`` (5): a scratch full of
    small files fails writes with free blocks left.  Source: NHC check_fs_inodes / ifree,
    gcm disk checks.
    """
    if not usage:
        return Verdict("disk_inodes", SKIP, "no paths configured")
    pct = float(exp.get("disk_min_free_inodes_pct", 5))
    bad, ok = [], []
    for path, res in sorted(usage.items()):
        if isinstance(res, str) or len(res) < 4 or not res[3]:
            continue  # missing path: disk_space reports it; filesystems without inodes
        share = 100.0 * res[2] / res[3]
        (bad if share < pct else ok).append(f"{path} {share:.1f}% inodes free")
    if bad:
        return Verdict("disk_inodes", FAIL, _join(bad) + f" (< {pct:g}%)")
    if not ok:
        return Verdict("disk_inodes", SKIP, "no inode counts (filesystem reports none)")
    return Verdict("disk_inodes", PASS, _join(ok))


def nvme(devs: dict[str, str] | None, exp: Exp) -> Verdict:
    """NVMe controllers present and ``live`` (sysfs), at least ``nvme_count``.

    A dropped local NVMe kills checkpoint staging and data caches.  Source: gcm
    check_blockdev (manifest), AzHC azure_nvme count, NHC.
    """
    want = int(exp.get("nvme_count", 0))
    if not want:
        return Verdict("nvme", SKIP, "no NVMe count configured")
    devs = devs or {}
    live = sorted(d for d, st in devs.items() if st == "live")
    down = [f"{d} {st}" for d, st in sorted(devs.items()) if st != "live"]
    if len(live) < want:
        ev = f"{len(live)}/{want} NVMe live" + ("; " + _join(down) if down else "")
        return Verdict("nvme", FAIL, ev)
    if down:
        return Verdict("nvme", WARN, f"{len(live)} live; " + _join(down))
    return Verdict("nvme", PASS, f"{len(live)} NVMe live")


def nvme_smart(smart: dict[str, dict] | None, exp: Exp) -> Verdict:
    """smartctl -j health of each NVMe: SMART failed, critical_warning set, spare below its
    threshold or percentage_used > 100 -> fail; percentage_used > ``nvme_used_warn_pct`` (80)
    or media errors -> warn.  Source: gcm check_blockdev (same thresholds), AzHC, NHC.
    """
    if not smart:
        return Verdict("nvme_smart", SKIP, "unavailable: no NVMe or smartctl")
    used_warn = int(exp.get("nvme_used_warn_pct", 80))
    bad, warn = [], []
    for dev, d in sorted(smart.items()):
        h = d.get("nvme_smart_health_information_log") or {}
        if d.get("smart_status", {}).get("passed") is False:
            bad.append(f"{dev} SMART failed")
        if h.get("critical_warning"):
            bad.append(f"{dev} critical_warning {h['critical_warning']:#x}")
        spare, thresh = h.get("available_spare"), h.get("available_spare_threshold")
        if spare is not None and thresh is not None and spare < thresh:
            bad.append(f"{dev} spare {spare}% < {thresh}%")
        used = h.get("percentage_used", 0)
        if used > 100:
            bad.append(f"{dev} {used}% used")
        elif used > used_warn:
            warn.append(f"{dev} {used}% used")
        if h.get("media_errors"):
            warn.append(f"{dev} {h['media_errors']} media errors")
    if bad:
        return Verdict("nvme_smart", FAIL, _join(bad + warn))
    if warn:
        return Verdict("nvme_smart", WARN, _join(warn))
    return Verdict("nvme_smart", PASS, f"{len(smart)} NVMe healthy")


def edac(counts: dict[str, dict[str, int]] | None, exp: Exp) -> Verdict:
    """Host memory errors since boot from the EDAC counters (machine-check memory errors):
    uncorrectable > 0 -> fail, correctable >= ``edac_ce_warn`` (100) -> warn.
    Source: gpud memory/EDAC, NHC (check_hw_mcelog), gcm check_ipmitool SEL (the same
    events through the BMC).
    """
    if not counts:
        return Verdict("edac", SKIP, "no EDAC memory controllers")
    ce_warn = int(exp.get("edac_ce_warn", 100))
    ue = {mc: c["ue"] for mc, c in counts.items() if c.get("ue")}
    ce = {mc: c["ce"] for mc, c in counts.items() if c.get("ce", 0) >= ce_warn}
    if ue:
        return Verdict("edac", FAIL, "uncorrectable: " + _join([f"{m} {n}" for m, n in ue.items()]))
    if ce:
        return Verdict("edac", WARN, "correctable: " + _join([f"{m} {n}" for m, n in ce.items()]))
    return Verdict("edac", PASS, f"no memory errors on {len(counts)} controllers")


def cpu_config(cpu: dict[str, Any] | None, exp: Exp) -> Verdict:
    """Online CPUs, sockets, SMT and frequency governor as configured (``cpu_count``,
    ``cpu_sockets``, ``cpu_smt`` "on"/"off", ``cpu_governor``).  A CPU taken offline by a
    machine check or a BIOS reset to "powersave" slows data loading.  Count/sockets -> fail,
    SMT/governor -> warn.  Source: NHC check_hw_cpuinfo, gcm check_processor, AzHC.
    """
    keys = ("cpu_count", "cpu_sockets", "cpu_smt", "cpu_governor")
    if not any(exp.get(k) for k in keys):
        return Verdict("cpu_config", SKIP, "no CPU expectations configured")
    if cpu is None:
        return Verdict("cpu_config", SKIP, "CPU topology unreadable")
    bad, warn = [], []
    if exp.get("cpu_count") and cpu.get("online") != int(exp["cpu_count"]):
        bad.append(f"{cpu.get('online')} CPUs online, {exp['cpu_count']} expected")
    note = ""
    if exp.get("cpu_sockets") and cpu.get("sockets") is None:
        # e.g. aarch64 without ACPI PPTT: neither sysfs nor /proc/cpuinfo names the package;
        # not knowing is not a missing socket
        note = "; socket count not reported by this kernel (not judged)"
    elif exp.get("cpu_sockets") and cpu.get("sockets") != int(exp["cpu_sockets"]):
        bad.append(f"{cpu.get('sockets')} sockets, {exp['cpu_sockets']} expected")
    smt = exp.get("cpu_smt")
    if smt and cpu.get("smt") is not None and cpu["smt"] != (smt == "on"):
        warn.append(f"SMT {'on' if cpu['smt'] else 'off'}, {smt} expected")
    gov = exp.get("cpu_governor")
    other = sorted(set(cpu.get("governors", [])) - {gov}) if gov else []
    if other:
        warn.append(f"governor {', '.join(other)}, {gov} expected")
    if bad:
        return Verdict("cpu_config", FAIL, _join(bad + warn))
    if warn:
        return Verdict("cpu_config", WARN, _join(warn))
    ev = f"{cpu.get('online')} CPUs, {cpu.get('sockets')} sockets{note}"
    return Verdict("cpu_config", PASS, ev)


#: nvbandwidth testcases that measure the PCIe (or C2C) path between host and each GPU
H2D_TESTS = ("host_to_device_memcpy_ce", "device_to_host_memcpy_ce")


def pcie_bandwidth(res: dict[str, dict[int, float]] | None, exp: Exp) -> Verdict:
    """nvbandwidth host<->device copy bandwidth per GPU: below ``pcie_min_gbps`` (if set) or
    below ``pcie_bw_min_ratio`` (0.8) x the node's median -> fail.  A GPU behind a degraded
    link or switch shows here even when its link reports full width.  Source: AzHC
    azure_cuda_bandwidth.nhc (H2D/D2H per GPU), Aegis (PCIe bandwidth test), superbenchmark.
    """
    if res is None:
        return Verdict("pcie_bandwidth", SKIP, "unavailable: nvbandwidth not installed")
    floor = float(exp.get("pcie_min_gbps", 0))
    ratio = float(exp.get("pcie_bw_min_ratio", 0.8))
    bad, seen = [], []
    for test in H2D_TESTS:
        per_gpu = res.get(test)
        if not per_gpu:
            continue
        seen.append(test)
        vals = sorted(per_gpu.values())
        med = vals[len(vals) // 2]
        short = test.replace("_memcpy_ce", "").replace("host_to_device", "h2d")
        short = short.replace("device_to_host", "d2h")
        for gpu, bw in sorted(per_gpu.items()):
            if floor and bw < floor:
                bad.append(f"GPU{gpu} {short} {bw:.1f} < {floor:g} GB/s")
            elif bw < ratio * med:
                bad.append(f"GPU{gpu} {short} {bw:.1f} < {ratio:g} x median {med:.1f} GB/s")
    if not seen:
        return Verdict("pcie_bandwidth", PROBE_ERROR, "nvbandwidth printed no host<->device result")
    if bad:
        return Verdict("pcie_bandwidth", FAIL, _join(bad))
    return Verdict("pcie_bandwidth", PASS, f"{', '.join(seen)} within {ratio:g} x median")


#: SEL events that mean broken hardware (IPMI sensor-specific event offsets as ipmitool prints
#: them); correctable/threshold events only warn
SEL_CRITICAL = (
    "uncorrectable",
    "machine check",
    "ierr",
    "bus fatal",
    "fatal error",
    "failure detected",
    "thermal trip",
)
SEL_WARN = ("correctable ecc", "upper critical", "lower critical", "predictive failure")


def ipmi_sel(entries: list | None, exp: Exp) -> Verdict:
    """New (since the last run) IPMI SEL records: an asserted uncorrectable / machine-check /
    IERR / bus-fatal / supply-failure event -> fail; correctable ECC or a critical threshold
    -> warn.  The first reading is only a baseline.  Enabled with ``ipmi_sel = true`` (the BMC
    answers in seconds on some boards).  Source: gcm check_ipmitool (asserted SEL events),
    NHC/AzHC via mcelog, Aegis host checks.
    """
    if entries is None:
        return Verdict("ipmi_sel", SKIP, "disabled or ipmitool absent")
    crit, warn = [], []
    for e in entries:
        if not e.asserted:
            continue
        text = f"{e.sensor}: {e.event}"
        low = e.event.lower()
        # "Correctable machine check error" (ipmitool's processor offset 0x0c) names a machine
        # check too: anything correctable is a warning, only the uncorrectable can fail
        correctable = "correctable" in low and "uncorrectable" not in low
        if correctable or (any(w in low for w in SEL_WARN) and "uncorrectable" not in low):
            warn.append(text)
        elif any(w in low for w in SEL_CRITICAL):
            crit.append(text)
    if crit:
        return Verdict("ipmi_sel", FAIL, _join(sorted(set(crit))))
    if warn:
        return Verdict("ipmi_sel", WARN, _join(sorted(set(warn))))
    return Verdict("ipmi_sel", PASS, f"{len(entries)} new SEL records, none critical")


def cpu_stream(res: dict | None, exp: Exp) -> Verdict:
    """Quick CPU/memory execution test: STREAM's own result validation, and Triad bandwidth
    >= ``cpu_stream_min_mbps`` (0 = only validation).  A failed validation is wrong arithmetic
    or memory on the host; low Triad is a missing DIMM channel or a wrong NUMA/BIOS setting.
    Source: AzHC azure_cpu_stream.nhc, Aegis (host checks), superbenchmark cpu-stream.
    """
    if res is None:
        return Verdict("cpu_stream", SKIP, "unavailable: stream not installed")
    triad = res["Triad"]
    if not res["validates"]:
        return Verdict(
            "cpu_stream", FAIL, f"STREAM results did not validate (Triad {triad:.0f} MB/s)"
        )
    want = float(exp.get("cpu_stream_min_mbps", 0))
    ev = f"Triad {triad:.0f} MB/s, validated"
    if want and triad < want:
        return Verdict("cpu_stream", FAIL, ev + f" < {want:g}")
    return Verdict("cpu_stream", PASS, ev)
