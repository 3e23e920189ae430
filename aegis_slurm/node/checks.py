"""Checks: one small pure function per check, (parsed probe output, expectations) -> Verdict.

No I/O here.  ``None`` data means "the probe's tool is not installed on this node"; each check
decides whether that is fine (nothing expected -> skip) or a failure (hardware expected but the
tool to see it is missing).  Expectations (``exp``) come from :mod:`aegis_slurm.node.config`.
"""

from __future__ import annotations

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
from aegis_slurm.node.verdict import FAIL, PASS, SKIP, WARN, Verdict

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
    have = len(smi.gpus) or smi.attached
    if want is None:
        return Verdict("gpu_count", PASS, f"{have} GPUs (no expectation configured)")
    if have != want:
        return Verdict("gpu_count", FAIL, f"{have} GPUs visible, {want} expected")
    return Verdict("gpu_count", PASS, f"{have}/{want} GPUs")


def driver_version(smi: NvidiaSmiQuery | None, exp: Exp) -> Verdict:
    """Driver/CUDA versions present and as configured (a half-upgraded node breaks NCCL jobs).

    Source: gcm package-version; k8s-device-plugin #1431 (driver/library mismatch).
    """
    skip = _no_gpu("driver_version", smi, exp)
    if skip:
        return skip
    assert smi is not None
    gsp = {tree_get(g, "GSP Firmware Version") for g in smi.gpus} - {"", "N/A"}
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
        vol = g.get("ECC Errors", {}).get("Volatile", {})
        if not isinstance(vol, dict):
            continue
        n = sum(
            as_int(v) or 0 for k, v in vol.items() if "Uncorrectable" in k and isinstance(v, str)
        )
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
        tag = f"Xid {ev.code} on {ev.pci} ({info.meaning})"
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


def disk_space(usage: dict[str, tuple[int, int] | str] | None, exp: Exp) -> Verdict:
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
        free, total = res
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
