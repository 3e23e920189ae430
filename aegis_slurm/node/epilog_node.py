"""Epilog on every node (slurm.conf ``Epilog=``): capture the failure signals the job left and
write one durable spool record.  Stdlib only.

What is new since the previous Epilog on this node is read from saved positions (:mod:`.klog`):
the kernel log (``/dev/kmsg`` sequence number, or ``kernel_log_path`` offset + inode, or the
anchor of a ``kernel_log`` probe argv) and ``syslog_path``; GPU ECC/row-remap and IB counter
growth since the previous reading; the CBD checks that matter after a crash; the node's last
Prolog verdicts.  Old faults are never blamed on a later job (10.3), and the cost grows with the
new lines only (10.5).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aegis_slurm.node import cbd, config, export, files, klog, probes, spool
from aegis_slurm.node import signals as sg
from aegis_slurm.node.parse import parse_nvidia_smi_q
from aegis_slurm.node.verdict import PASS

#: CBD checks worth re-running at job end (host state a crash leaves behind); "xid" only makes
#: the kernel-log probe run in the same parallel pass (its verdict is not used: see capture)
EPILOG_CHECKS = (
    "gpu_count",
    "ecc_uncorrectable",
    "row_remap",
    "pcie_link",
    "pci_links",
    "nvlink",
    "ib_ports",
    "nics",
    "mounts",
    "xid",
)
#: epilog.json keys and their shapes (a key of another shape is dropped and counted, 10.7)
SHAPE: dict[str, Any] = {
    "kernel": dict,
    "kernel_file": dict,
    "syslog_pos": dict,
    "gpu": {str: {str: int}},
    "ib": {str: {str: {str: int}}},
}
MAX_RUN = 1_000_000  # SLURM_JOB_RESTART_COUNT beyond this is not a restart count


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def clean(text: str, limit: int = 256) -> str:
    """An environment string made safe for a record: invalid UTF-8 (lone surrogates from
    Python's surrogateescape) replaced, control characters dropped, bounded (10.12)."""
    text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return "".join(c for c in text if c.isprintable())[:limit]


def _int_env(name: str, lo: int, hi: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and lo <= int(raw) <= hi else 0


def job_env() -> dict[str, Any]:
    """The job's identity from the hook environment, validated (the job's owner controls part
    of it: partition names, array/het variables are not ours to trust)."""
    e = os.environ
    jid = e.get("SLURM_JOB_ID", "").strip()
    return {
        "job_id": jid if jid.isdigit() and len(jid) <= 12 else "",
        "run": _int_env("SLURM_JOB_RESTART_COUNT", 0, MAX_RUN),
        "cluster": clean(e.get("SLURM_CLUSTER_NAME", ""), 64),
        "partition": clean(e.get("SLURM_JOB_PARTITION", ""), 64),
        "exit_code": clean(e.get("SLURM_JOB_EXIT_CODE2", ""), 16),
        "nodelist": clean(e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST", ""), 65536),
    }


def capture(
    cfg: dict[str, Any],
    host: str,
    state: dict[str, Any],
    *,
    overrides: dict[str, cbd.ProbeFn] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """One node's signals for the job that just ended.  Mutates ``state`` (positions, counters).

    Probes run once, in parallel, through the Prolog's runner (same per-probe timeout and
    watchdog), with the Epilog's tighter budget; their raw output is kept for the counters.
    """
    ep = cfg["epilog"]
    now = time.time() if now is None else now
    run_cfg = copy.deepcopy(cfg)
    run_cfg.setdefault("runtime", {}).update(
        probe_timeout_s=float(ep["probe_timeout_s"]), watchdog_s=float(ep["watchdog_s"])
    )
    raw: dict[str, Any] = {}
    base = {**cbd.PROBES, **(overrides or {})}

    def keep(name: str) -> cbd.ProbeFn:
        def probe(ctx: probes.ProbeContext) -> Any:
            raw[name] = out = base[name](ctx)
            return out

        return probe

    wrapped = {name: keep(name) for name in base}
    kfile = str(ep.get("kernel_log_path") or "")
    only = [c for c in EPILOG_CHECKS if not (kfile and c == "xid")]
    verdicts = [
        v
        for v in cbd.run(run_cfg, host, "light", overrides=wrapped, only=only, state={})
        if v.check != "xid"
    ]
    out: list[dict[str, Any]] = []
    errors = [f"{v.check}: {v.evidence}" for v in verdicts if v.state == "probe_error"]

    boot_epoch = now - time.clock_gettime(time.CLOCK_MONOTONIC)
    if kfile:  # a kernel log file: offset + inode, O(new bytes)
        try:
            text, state["kernel_file"], note = klog.read_file_since(
                kfile, state.get("kernel_file"), int(ep["kernel_log_max_bytes"])
            )
            out += sg.kernel_signals(text.splitlines(), boot_epoch, now)
            if note:
                errors.append(note)
        except OSError as e:
            errors.append(f"kernel_log_path: {e}")
    elif "kernel_log" in raw:  # /dev/kmsg (sequence numbers, per boot) or a probe argv
        boot = probes.boot_id(
            probes.ProbeContext(exp={}, root=Path(run_cfg["runtime"].get("root", "/")))
        )
        ks = state.setdefault("kernel", {})
        if ks.get("boot_id") != boot:
            ks.clear()
            ks["boot_id"] = boot
        fresh, ks["pos"] = klog.since(str(raw["kernel_log"]), ks.get("pos"))
        out += sg.kernel_signals(fresh, boot_epoch, now)
    if ep.get("syslog_path"):
        try:
            text, state["syslog_pos"], note = klog.read_file_since(
                ep["syslog_path"], state.get("syslog_pos"), int(ep["syslog_tail_bytes"])
            )
            out += sg.link_flaps(text.splitlines(), int(ep["link_flap_min"]), now)
            if note:
                errors.append(note)
        except OSError as e:
            errors.append(f"syslog: {e}")

    out += sg.verdict_signals(verdicts, now)
    if isinstance(raw.get("nvidia_smi_q"), str):
        with contextlib.suppress(ValueError):
            cur = sg.gpu_counters(parse_nvidia_smi_q(raw["nvidia_smi_q"]))
            out += sg.gpu_counter_signals(state.get("gpu", {}), cur, now)
            state["gpu"] = cur
    if raw.get("ib") is not None:
        ib_state = state.setdefault("ib", {})
        with contextlib.suppress(ValueError):
            deltas = cbd._ib_deltas(raw["ib"], cbd.RunState(ib_state))
            out += sg.ib_counter_signals(deltas, int(ep["ib_errors_min"]), now)
    # a GPU lost from the bus shows both as an XID 79 line and as a missing GPU: keep both,
    # they are evidence of the same fault from two probes
    bad = [v.to_dict() for v in verdicts if v.state not in (PASS, "skip")]
    return {"signals": sg.collapse(out), "verdicts": bad, "probe_errors": errors}


def last_cbd(cfg: dict[str, Any], host: str) -> dict[str, Any] | None:
    """The node's last Prolog/HealthCheck verdicts (non-pass only), read without the lock."""
    p = config.state_dir(cfg) / host
    try:
        fd = os.open(p / "state.json", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd) as f:
            last = json.loads(f.read()).get("last")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(last, dict) or not isinstance(last.get("verdicts"), list):
        return None
    bad = [
        v for v in last["verdicts"] if isinstance(v, dict) and v.get("state") not in (PASS, "skip")
    ]
    return {"at": last.get("at"), "mode": last.get("mode"), "rc": last.get("rc"), "verdicts": bad}


def run_node(
    cfg: dict[str, Any], host: str, overrides: dict[str, cbd.ProbeFn] | None = None
) -> dict[str, Any]:
    """Epilog on one node: capture, then one durable spool record.  Returns the record."""
    t0 = time.monotonic()
    ep = cfg["epilog"]
    job = job_env()
    use_syslog = bool(cfg.get("runtime", {}).get("syslog", True))
    state_dir = config.state_dir(cfg)
    with files.locked_json(state_dir / files.safe_name(host) / "epilog.json", SHAPE) as lk:
        got = capture(cfg, host, lk.data, overrides=overrides)
        repaired = lk.repaired
    for r in repaired:
        files.bump_counter(state_dir / host, "epilog_state_repaired")
        export.log("warning", f"{host} aegis epilog: {r}", use_syslog)
    rec = {
        "v": 1,
        "node": host,
        "job_id": job["job_id"],
        "run": job["run"],
        "cluster": job["cluster"],
        "partition": job["partition"],
        "exit_code": job["exit_code"],
        "captured_at": now_iso(),
        **got,
        "last_cbd": last_cbd(cfg, host),
    }
    rec["duration_s"] = round(time.monotonic() - t0, 4)
    spool.append(
        ep["spool_dir"], rec, max_bytes=int(ep["spool_max_bytes"]), keep=int(ep["spool_keep"])
    )
    if any(s["kind"] != sg.INFO for s in got["signals"]):
        export.log(
            "warning",
            f"{host} job={job['job_id']} epilog signals: "
            + ", ".join(s["signal"] for s in got["signals"] if s["kind"] != sg.INFO)[:400],
            use_syslog,
        )
    return rec
