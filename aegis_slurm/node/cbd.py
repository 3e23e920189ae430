"""Check-Before-Delivery runner: profiles, parallel probes, per-probe timeouts, watchdog, state.

Flow: expectations for this host -> start every needed probe in its own daemon thread (the full
profile's load-generating benchmarks one group at a time, after the rest: :data:`LOAD_GROUPS`) ->
wait for each up to its own timeout (and never past the run's watchdog deadline) -> parse -> check.
A probe that times out, crashes, or cannot be parsed yields ``probe_error`` for every check that
needed it, never ``pass``.  A check that raises is an aegis bug: ``probe_error`` with
``internal=True`` (logged and counted, never drains).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aegis_slurm.node import checks, config, klog, parse, probes
from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.verdict import PROBE_ERROR, Verdict

ProbeFn = Callable[[probes.ProbeContext], Any]


@dataclass(frozen=True)
class Spec:
    """One check: which probe feeds it, how to parse that, which pure function judges it."""

    name: str
    probe: str
    parse: Callable[[Any, RunState], Any]
    check: checks.CheckFn
    profile: str = "light"


@dataclass
class RunState:
    """Per-node persistent state (XIDs already seen, IB counter readings), mutated by parsers."""

    data: dict[str, Any] = field(default_factory=dict)
    boot_id: str = ""


def _ident(raw: Any, st: RunState) -> Any:
    return raw


def _smi(raw: str, st: RunState) -> parse.NvidiaSmiQuery:
    return parse.parse_nvidia_smi_q_once(raw)


def _new_xids(raw: str, st: RunState) -> list[xidcat.XidEvent]:
    """XID lines after the kernel-log position saved by an earlier run in this boot.

    The position after this run's lines goes to ``xid_pending``; :func:`mark_xids_seen` commits
    it once the verdict was acted on (the Prolog does that only after a drain succeeded, so an
    XID whose drain was stopped by the storm guard or a dead slurmctld is judged again next run).
    A position, not a bounded list of seen lines: an XID the admin handled never comes back,
    however many harmless lines follow it (10.4).
    """
    if st.data.get("boot_id") != st.boot_id:
        st.data.pop("xid_pos", None)
        st.data["boot_id"] = st.boot_id
    fresh, pos = klog.since(raw, st.data.get("xid_pos"))
    st.data["xid_pending"] = pos
    return xidcat.parse_xids("\n".join(fresh))


def mark_xids_seen(state: dict[str, Any]) -> None:
    """Commit the kernel-log position of the last run (its XIDs will not be reported again)."""
    pos = state.pop("xid_pending", None)
    if isinstance(pos, dict):
        state["xid_pos"] = pos
    state.pop("xid_seen", None)  # the bounded list of older versions


def _ib_ports(raw: Any, st: RunState) -> list[parse.IbPort]:
    if isinstance(raw, str):
        return parse.parse_ibstat(raw)
    return [parse.ib_port_from_sysfs(dev, port, files) for (dev, port), files in raw.items()]


def _ib_deltas(raw: Any, st: RunState) -> dict[str, dict[str, int]]:
    """Counter increase since the previous reading; counters going down (reset) restart."""
    prev = st.data.get("ib_counters", {})
    cur = {f"{p.device}/{p.port}": p.counters for p in _ib_ports(raw, st) if p.counters}
    st.data["ib_counters"] = cur
    return {
        port: {
            k: v - prev[port][k]
            for k, v in ctr.items()
            if k in prev.get(port, {}) and v >= prev[port][k]
        }
        for port, ctr in cur.items()
        if port in prev
    }


def _json(raw: str, st: RunState) -> Any:
    return json.loads(raw)


SPECS: list[Spec] = [
    Spec("gpu_count", "nvidia_smi_q", _smi, checks.gpu_count),
    Spec("driver_version", "nvidia_smi_q", _smi, checks.driver_version),
    Spec("ecc_uncorrectable", "nvidia_smi_q", _smi, checks.ecc_uncorrectable),
    Spec("row_remap", "nvidia_smi_q", _smi, checks.row_remap),
    Spec("retired_pages", "nvidia_smi_q", _smi, checks.retired_pages),
    Spec("pcie_link", "nvidia_smi_q", _smi, checks.pcie_link),
    Spec("clocks_thermal", "nvidia_smi_q", _smi, checks.clocks_thermal),
    Spec("gpu_processes", "nvidia_smi_q", _smi, checks.gpu_processes),
    Spec("nvlink", "nvlink_status", lambda r, s: parse.parse_nvlink_status(r), checks.nvlink),
    Spec("pci_links", "pci", _ident, checks.pci_links),
    Spec("xid", "kernel_log", _new_xids, checks.xid_events),
    Spec("ib_ports", "ib", _ib_ports, checks.ib_ports),
    Spec("ib_counters", "ib", _ib_deltas, checks.ib_counters),
    Spec("nics", "net", _ident, checks.nics),
    Spec("mounts", "mounts", _ident, checks.mounts),
    Spec("disk_space", "disk", _ident, checks.disk_space),
    Spec("memory", "meminfo", lambda r, s: parse.parse_meminfo(r), checks.memory),
    Spec("time_sync", "adjtimex", _ident, checks.time_sync),
    Spec("services", "services", _ident, checks.services),
    # coverage checks (docs/cbd.md "Coverage")
    Spec("persistence_mode", "nvidia_smi_q", _smi, checks.persistence_mode),
    Spec("vbios", "nvidia_smi_q", _smi, checks.vbios),
    Spec("ecc_health", "nvidia_smi_q", _smi, checks.ecc_health),
    Spec("gpu_reset_required", "nvidia_smi_q", _smi, checks.gpu_reset_required),
    Spec("app_clocks", "nvidia_smi_q", _smi, checks.app_clocks),
    Spec("swap", "meminfo", lambda r, s: parse.parse_meminfo(r), checks.swap),
    Spec("processes", "procs", lambda r, s: parse.parse_proc_snapshot(r), checks.processes),
    Spec(
        "kernel_modules", "modules", lambda r, s: parse.parse_proc_modules(r), checks.kernel_modules
    ),
    Spec("disk_inodes", "disk", _ident, checks.disk_inodes),
    Spec("nvme", "nvme", _ident, checks.nvme),
    Spec("edac", "edac", lambda r, s: parse.parse_edac(r), checks.edac),
    Spec("cpu_config", "cpu", lambda r, s: parse.parse_cpu_topology(r), checks.cpu_config),
    Spec("ipmi_sel", "ipmi_sel", lambda r, s: parse.new_sel_entries(r, s.data), checks.ipmi_sel),
    # full profile: never on job start
    Spec("dcgm_diag", "dcgm_diag", lambda r, s: parse.parse_dcgm_diag(r), checks.dcgm_diag, "full"),
    Spec(
        "nccl_allreduce",
        "nccl_allreduce",
        lambda r, s: parse.parse_nccl_tests(r),
        checks.nccl_allreduce,
        "full",
    ),
    Spec("gpu_burn", "gpu_burn", lambda r, s: parse.parse_gpu_burn(r), checks.gpu_burn, "full"),
    Spec("pcie_link_load", "nvidia_smi_q_load", _smi, checks.pcie_link_load, "full"),
    Spec("cpu_stream", "cpu_stream", lambda r, s: parse.parse_stream(r), checks.cpu_stream, "full"),
    Spec(
        "pcie_bandwidth",
        "nvbandwidth",
        lambda r, s: parse.parse_nvbandwidth(r),
        checks.pcie_bandwidth,
        "full",
    ),
    Spec("data_read", "data_read", _ident, checks.data_read, "full"),
    Spec(
        "nvme_smart", "nvme_smart", lambda r, s: parse.parse_smartctl(r), checks.nvme_smart, "full"
    ),
]

PROBES: dict[str, ProbeFn] = {
    "nvidia_smi_q": probes.nvidia_smi_q,
    "nvlink_status": probes.nvlink_status,
    "pci": probes.pci_links,
    "kernel_log": probes.kernel_log,
    "ib": probes.ib_sysfs,
    "net": probes.net_operstate,
    "mounts": probes.mounts_status,
    "disk": probes.disk_usage,
    "meminfo": probes.meminfo,
    "adjtimex": probes.adjtimex,
    "services": probes.process_names,
    "procs": probes.proc_snapshot,
    "modules": probes.proc_modules,
    "nvme": probes.nvme_sysfs,
    "edac": probes.edac_counts,
    "cpu": probes.cpu_topology,
    "ipmi_sel": probes.ipmi_sel,
    "nvme_smart": probes.nvme_smart,
    "dcgm_diag": probes.dcgm_diag,
    "nccl_allreduce": probes.nccl_allreduce,
    "gpu_burn": probes.gpu_burn,
    "nvidia_smi_q_load": probes.nvidia_smi_q_load,
    "nvbandwidth": probes.nvbandwidth,
    "cpu_stream": probes.cpu_stream,
    "data_read": probes.data_read,
}


def _needed(probe: str, exp: dict[str, Any]) -> bool:
    """Skip probes whose every check would be skipped anyway (keeps the light run cheap)."""
    return {
        "nvlink_status": bool(exp.get("nvlink_links")),
        "pci": bool(exp.get("pci_manifest")),
        "net": bool(exp.get("nics")),
        "mounts": bool(exp.get("mounts")),
        "disk": bool(exp.get("disk_paths")),
        "services": bool(exp.get("services")),
        "adjtimex": exp.get("time_sync", "warn") != "off",
        "modules": bool(exp.get("kernel_modules")),
        "ipmi_sel": bool(exp.get("ipmi_sel")),
        "nvme": bool(exp.get("nvme_count")),
        "cpu": any(exp.get(k) for k in ("cpu_count", "cpu_sockets", "cpu_smt", "cpu_governor")),
    }.get(probe, True)


def slurm_conf_text() -> str | None:
    """This node's slurm.conf: $SLURM_CONF (set in Prolog/Epilog), else the usual places
    (configless slurmd keeps a cached copy).  None when none is readable."""
    for conf in (
        os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf",
        "/run/slurm/conf/slurm.conf",
        "/var/spool/slurmd/conf-cache/slurm.conf",
    ):
        with contextlib.suppress(OSError, ValueError):
            return Path(conf).read_text()
    return None


def resolve_expectations(cfg: dict[str, Any], host: str) -> dict[str, Any]:
    """Expectations for ``host``; ``gpus = "slurm"`` becomes the Gres count in slurm.conf."""
    exp = config.expectations(cfg, host)
    if exp.get("gpus") == "slurm":
        exp["gpus"] = None
        text = slurm_conf_text()
        if text is not None:
            exp["gpus"] = config.slurm_gpu_count(text, host)
    return exp


def run(
    cfg: dict[str, Any],
    host: str,
    profile: str = "light",
    *,
    overrides: dict[str, ProbeFn] | None = None,
    root: str | Path | None = None,
    state: dict[str, Any] | None = None,
    only: list[str] | None = None,
    context: dict[str, Any] | None = None,
    commit_xids: bool = True,
) -> list[Verdict]:
    """Run the checks of ``profile`` ("light" or "full" = light + full) and return verdicts.

    ``overrides`` replaces probe functions (tests: recorded output); ``state`` is the mutable
    per-node state dict (the Prolog's ``state.json``), a throwaway dict when None.  ``context`` is
    merged into the expectations (the Prolog passes ``gpu_scope``/``job_gpus``, see
    :func:`checks.scoped_gpus`).  ``commit_xids=False`` leaves new XID lines pending until the
    caller calls :func:`mark_xids_seen`.
    """
    rt = cfg.get("runtime", {})
    exp = resolve_expectations(cfg, host)
    exp.update(context or {})
    timeout = float(rt.get("full_probe_timeout_s" if profile == "full" else "probe_timeout_s", 8))
    watchdog = float(rt.get("watchdog_s", 25)) if profile == "light" else timeout * 2
    specs = [
        s
        for s in SPECS
        if (profile == "full" or s.profile == "light") and (only is None or s.name in only)
    ]
    # probe argv overrides: [probes] then any matching [[nodetype]] probes table
    argv = {
        k: list(v)
        for k, v in {**cfg.get("probes", {}), **exp.pop("probes", {})}.items()
        if isinstance(v, list)
    }
    root = Path(root if root is not None else rt.get("root", "/"))
    ctx = probes.ProbeContext(exp=exp, root=root, timeout=timeout, argv=argv)
    fns = {**PROBES, **(overrides or {})}
    st = RunState(state if state is not None else {}, probes.boot_id(ctx))
    if any(s.name == "xid" for s in specs):  # pending = this run's new lines, nothing older
        st.data.pop("xid_pending", None)

    # Light probes together, then each load group of the full profile on its own: a benchmark
    # run beside another measures the other's load, and reads a healthy node as slow.
    sink = _Results()
    needed = []
    for name in dict.fromkeys(s.probe for s in specs):
        if _needed(name, exp):
            needed.append(name)
        else:
            sink.put(name, ("missing", "not needed"))
    stages = _stages(needed)
    deadline = time.monotonic() + watchdog * (len(stages) if profile == "full" else 1)
    for stage in stages:
        _run_stage(stage, fns, ctx, sink, timeout, deadline)
    # from here on an abandoned probe thread that finally returns cannot change the verdicts
    results = sink.close()
    if time.monotonic() > deadline:
        probes.kill_live_children()

    out = []
    for s in specs:
        kind, raw = results.get(s.probe, ("error", f"probe {s.probe} gave no result"))
        if kind in ("error", "internal"):
            out.append(Verdict(s.name, PROBE_ERROR, str(raw)[:200], kind == "internal"))
            continue
        try:
            data = None if kind == "missing" else s.parse(raw, st)
        except ValueError as e:
            out.append(Verdict(s.name, PROBE_ERROR, f"unparseable {s.probe} output: {e}"[:200]))
            continue
        except Exception as e:
            out.append(Verdict(s.name, PROBE_ERROR, f"aegis parser bug: {e!r}"[:200], True))
            continue
        try:
            out.append(s.check(data, exp))
        except Exception as e:
            out.append(Verdict(s.name, PROBE_ERROR, f"aegis check bug: {e!r}"[:200], True))
    if commit_xids:
        mark_xids_seen(st.data)
    return out


#: Full-profile probes that load the GPUs, PCIe, memory bandwidth or storage.  Each group runs
#: alone, after the light probes and one after another; a group's members run together because
#: ``nvidia_smi_q_load`` samples the PCIe link while ``gpu_burn`` loads it.  gpu_burn's per-GPU
#: ratio test, nccl-tests' busbw floor and nvbandwidth's median test all fail healthy GPUs that
#: share the node with another benchmark.
LOAD_GROUPS: tuple[tuple[str, ...], ...] = (
    ("dcgm_diag",),
    ("gpu_burn", "nvidia_smi_q_load"),
    ("nccl_allreduce",),
    ("nvbandwidth",),
    ("cpu_stream",),
    ("data_read",),
)


def _stages(needed: list[str]) -> list[list[str]]:
    """The probes in ``needed`` split into stages run one after another: every probe outside
    :data:`LOAD_GROUPS` in the first stage, then each load group that has a needed member."""
    grouped = {name for group in LOAD_GROUPS for name in group}
    stages = [[name for name in needed if name not in grouped]]
    stages += [[n for n in group if n in needed] for group in LOAD_GROUPS]
    return [stage for stage in stages if stage]


def _run_stage(
    stage: list[str],
    fns: dict[str, ProbeFn],
    ctx: probes.ProbeContext,
    sink: _Results,
    timeout: float,
    deadline: float,
) -> None:
    """Run one stage's probes in daemon threads; a probe still running at its timeout (or the
    run's deadline) is reported hung and its processes killed before the next stage starts."""
    threads: dict[str, threading.Thread] = {}
    for name in stage:
        t = threading.Thread(
            target=_call, args=(fns[name], ctx, name, sink), daemon=True, name=f"probe-{name}"
        )
        threads[name] = t
        t.start()
    hung = False
    for name, t in threads.items():
        # the child-process timeout fires first; +1 s lets run_argv report it itself
        t.join(max(0.0, min(timeout + 1.0, deadline - time.monotonic())))
        if t.is_alive():
            hung = True
            sink.put(name, ("error", f"probe {name} hung > {timeout:g}s (abandoned)"))
    if hung:  # a hung benchmark must not load the node under the next stage's measurements
        probes.kill_live_children()


class _Results:
    """Probe results written by the probe threads; closed (later writes dropped) after the joins,
    so a probe abandoned as hung can never turn into a verdict."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[str, tuple[str, Any]] = {}
        self._closed = False

    def put(self, name: str, value: tuple[str, Any]) -> None:
        with self._lock:
            if not self._closed:
                self._data.setdefault(name, value)

    def close(self) -> dict[str, tuple[str, Any]]:
        with self._lock:
            self._closed = True
            return dict(self._data)


def _call(fn: ProbeFn, ctx: probes.ProbeContext, name: str, sink: _Results) -> None:
    try:
        res: tuple[str, Any] = ("ok", fn(ctx))
    except probes.ProbeMissing as e:
        res = ("missing", str(e))
    except (probes.ProbeTimeout, probes.ProbeFailed) as e:
        res = ("error", str(e))
    except OSError as e:
        res = ("error", f"{name}: {e}")
    except Exception as e:
        res = ("internal", f"aegis probe bug in {name}: {e!r}")
    sink.put(name, res)
