"""Failure signals a job leaves on a node: pure extraction from probe output.  Stdlib only.

Used by the Epilog (``aegis_slurm.node.epilog``).  The probes and parsers are the Prolog's
(:mod:`aegis_slurm.node.probes`, :mod:`aegis_slurm.node.parse`, the XID catalog
:mod:`aegis_slurm.node.xid`); this module only turns their output into signals.

A signal is ``{"signal", "kind", "critical", "time", "detail"[, "pci", "peer"]}``.  Kinds follow
Aegis (NSDI'25 §4.1, Algorithm 1):

* ``critical``    – a host-local fault that by itself explains a crash and points at this host
  (critical XID, GPU lost, uncorrectable ECC, row-remap failure, PCIe/NVLink/IB link down,
  mount failure, machine check).  ``critical=True`` in the analytics' node-signal frame.
* ``distributed`` – errors that show on many hosts when one component fails (IB link flaps and
  error-counter growth, NCCL/connection errors, NFS/Lustre server timeouts).  They locate a
  culprit only together (≤ 2 hosts, or a common peer: :mod:`aegis_slurm.node.diagnose`).
* ``info``        – worth keeping, never blamed (application XIDs 13/31/43, correctable ECC).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from aegis_slurm.node import xid as xidcat
from aegis_slurm.node.parse import NvidiaSmiQuery, as_int, tree_get
from aegis_slurm.node.verdict import FAIL, PROBE_ERROR, Verdict

CRITICAL, DISTRIBUTED, INFO = "critical", "distributed", "info"


def sig(name: str, kind: str, when: float | None, detail: str, **extra: Any) -> dict[str, Any]:
    """One signal dict (``time`` ISO 8601 UTC, or None when the source has no timestamp)."""
    out: dict[str, Any] = {
        "signal": name,
        "kind": kind,
        "critical": kind == CRITICAL,
        "time": iso(when) if when is not None else None,
        "detail": " ".join(detail.split())[:240],
    }
    out.update({k: v for k, v in extra.items() if v})
    return out


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


# ---- kernel-log timestamps -------------------------------------------------------------------

_KMSG = re.compile(r"^\d+,\d+,(\d+),[^;]*;")  # /dev/kmsg: prio,seq,usec-since-boot,flags;msg
_RAW = re.compile(r"^\[\s*(\d+\.\d+)\]")  # dmesg: [  123.456789]
_CTIME = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]")  # dmesg -T
_ISO = re.compile(
    r"^(?:\w+\s*:\w+\s*: )?"  # dmesg --decode prefix "kern  :warn  : "
    r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?[+-]\d\d:?\d\d)"
)
_SYSLOG = re.compile(r"^(\w{3} +\d+ \d\d:\d\d:\d\d) ")


def line_time(line: str, boot_epoch: float, now: float | None = None) -> float | None:
    """Epoch seconds of a kernel-log/syslog line, None when it carries no usable timestamp.

    Monotonic stamps (``/dev/kmsg``, plain ``dmesg``) are placed with ``boot_epoch``; ``dmesg
    -T`` and syslog stamps are host-local time; syslog has no year (the latest not in the future).
    """
    now = time.time() if now is None else now
    if m := _KMSG.match(line):
        return boot_epoch + int(m.group(1)) / 1e6
    if m := _RAW.match(line):
        return boot_epoch + float(m.group(1))
    try:
        if m := _CTIME.match(line):
            stamp = " ".join(m.group(1).split())
            return datetime.strptime(stamp, "%a %b %d %H:%M:%S %Y").timestamp()
        if m := _ISO.match(line):
            return datetime.fromisoformat(m.group(1).replace(",", ".")).timestamp()
        if m := _SYSLOG.match(line):
            year = datetime.fromtimestamp(now).year
            t = datetime.strptime(f"{year} {' '.join(m.group(1).split())}", "%Y %b %d %H:%M:%S")
            if t.timestamp() > now + 86400:
                t = t.replace(year=year - 1)
            return t.timestamp()
    except ValueError:
        return None
    return None


def collapse(signals: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One signal per (signal, device): the first occurrence, with ``count`` when repeated."""
    out: dict[tuple[str, ...], dict[str, Any]] = {}
    for s in signals:
        key = (
            s["signal"],
            str(s.get("pci", "")),
            str(s.get("peer", "")),
            str(s.get("iface", "")),
            str(s.get("port", "")),
        )
        if key in out:
            out[key]["count"] = out[key].get("count", 1) + 1
        else:
            out[key] = dict(s)
    return list(out.values())


# ---- kernel-log messages ---------------------------------------------------------------------

# What the kernel (not a user) wrote: the record header of /dev/kmsg, a dmesg stamp (raw, -T,
# --time-format iso, optionally after the --decode "kern  :warn  : " prefix) or a syslog line
# tagged "kernel:".  Everything after it is the kernel's message, and every pattern below is
# anchored at the message's start, as the XID matcher is (10.1).
_STAMP = (
    r"(?:\[\s*\d+\.\d+\]"
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\]"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]?\d*(?:[+-]\d\d:?\d\d|Z)?)"
)
_SYSLOG_HEAD = (
    r"(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?) \S+ "
)
_KMSG_HEAD = re.compile(r"^\d+,\d+,\d+,[^;]*;")
_SYSLOG_KERNEL = re.compile(r"^" + _SYSLOG_HEAD + r"kernel: (?:" + _STAMP + r" ?)?")
_SYSLOG_OTHER = re.compile(r"^" + _SYSLOG_HEAD + r"[^\s:]+:")
_DMESG_HEAD = re.compile(r"^(?:[a-z]+ *:[a-z]+ *: )?(?:" + _STAMP + r" ?)?")
#: a message that starts by quoting a task ("comm[pid]: segfault at ...", "traps: comm[pid]
#: general protection ..."): comm is the user's chosen process name (<= 15 chars)
_TASK_LED = re.compile(r"^(?:traps: )?.{1,15}\[\d+\]:? |^audit[:(]")
# (audit records quote a task's comm and exe path: user-chosen text of any length)


def kernel_messages(lines: list[str]) -> list[tuple[str, str, bool]]:
    """(line, message, first part of its line) for every kernel-written message in ``lines``.

    A dmesg record's indented continuation lines are joined to the message before them; a
    /dev/kmsg record's escaped newlines (``\\x0a``) split it into one message per part (the
    NVIDIA driver prints "GPU has fallen off the bus" either way, 11.2).  /dev/kmsg dictionary
    lines (`` SUBSYSTEM=...``) and syslog lines of any other program are dropped: a user can
    write those.
    """
    out: list[tuple[str, str, bool]] = []
    for raw in lines:
        if raw[:1] in (" ", "\t") and out:
            cont = raw.strip()
            if cont and not re.match(r"^[A-Z_]+=", cont):  # kmsg dictionary: not message text
                line, msg, first = out[-1]
                out[-1] = (line, f"{msg} {cont}", first)
            continue
        line = raw.strip()
        if not line:
            continue
        if m := _KMSG_HEAD.match(line):
            parts = [p.strip() for p in line[m.end() :].split("\\x0a")]
            out += [(line, p, i == 0) for i, p in enumerate(parts) if p]
            continue
        if m := _SYSLOG_KERNEL.match(line):
            msg = line[m.end() :]
        elif _SYSLOG_OTHER.match(line):
            continue  # another program's syslog line: anyone can write those
        else:
            msg = line[_DMESG_HEAD.match(line).end() :]  # type: ignore[union-attr]
        if msg.strip():
            out.append((line, msg.strip(), True))
    return out


# ---- kernel-log patterns (besides XIDs) ------------------------------------------------------


@dataclass(frozen=True)
class Pattern:
    signal: str
    kind: str
    regex: re.Pattern[str]  # matched at the start of the kernel's message (re.match)
    peer_group: int = 0  # regex group naming the other end (server, peer address), if any


_PEER = r"(\d{1,3}(?:\.\d{1,3}){3}|[A-Za-z][\w.-]*)"
#: dev_printk's "<driver> <PCI address>: " (and the GHES "{1}[Hardware Error]: " form)
_DEV = (
    r"(?:[\w.-]+ [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]:? (?:\S+: )?"
    r"|\{\d+\}\[Hardware Error\]: )"
)
_NVRM = r"NVRM: (?:GPU (?:at PCI:)?[0-9a-fA-F:.]+:? (?:GPU-[0-9a-fA-F-]+ )?)?"
PATTERNS: tuple[Pattern, ...] = (
    Pattern("gpu_lost", CRITICAL, re.compile(_NVRM + r"GPU has fallen off the bus")),
    Pattern(
        "gpu_driver",
        CRITICAL,
        re.compile(_NVRM + r"(?:RmInitAdapter failed|rm_init_adapter failed|GPU is lost)"),
    ),
    Pattern(
        "mce",
        CRITICAL,
        re.compile(r"(?:mce: \[Hardware Error\]|(?:\[Hardware Error\]: )?CPU \d+: Machine Check)"),
    ),
    Pattern(
        "pcie_aer_fatal",
        CRITICAL,
        re.compile(_DEV + r"(?:AER: )?PCIe Bus Error: severity=(?:Uncorrected \(Fatal\)|Fatal)"),
    ),
    Pattern(
        "pcie_aer",
        INFO,
        re.compile(
            _DEV + r"(?:AER: )?PCIe Bus Error: severity=(?:Corrected|Uncorrected \(Non-Fatal\))"
        ),
    ),
    Pattern(
        "pcie_link_degraded",
        CRITICAL,
        re.compile(
            _DEV + r"(?:[\d.]+ Gb/s available PCIe bandwidth, limited by"
            r"|(?i:(?:PCIe )?link (?:is )?(?:degraded|down-?trained)))"
        ),
    ),
    Pattern(
        "ib_link_down",
        DISTRIBUTED,
        re.compile(
            r"(?:" + _DEV + r"|(?:ib\w*|mlx\d_\d+|mlx\d_core)(?:[ :]\S*)?:? )"
            r"(?:.*? )?(?i:link down|lost carrier|port state (?:changed to )?down)"
        ),
    ),
    Pattern(
        "nccl_error",
        DISTRIBUTED,
        re.compile(r"NCCL (WARN|ERROR|error).*?(?:(?:peer|remote|from|to) " + _PEER + r")?$"),
        2,
    ),
    Pattern("nfs_timeout", DISTRIBUTED, re.compile(r"nfs: server (\S+) not responding"), 1),
    Pattern(
        "lustre_error",
        DISTRIBUTED,
        re.compile(r"Lustre(?:Error)?: .*(?:lost connection|Connection to) \S*? ?\(at (\S+?)\)"),
        1,
    ),
    Pattern(
        "fs_error",
        CRITICAL,
        re.compile(
            r"(?:EXT4-fs error \(device |XFS \([^)\s]+\): .*(?:Corruption|metadata I/O error)"
            r"|Buffer I/O error on dev)"
        ),
    ),
    Pattern(
        "conn_reset",
        DISTRIBUTED,
        re.compile(
            r"[\w.-]+: .*[Cc]onnection reset by peer(?:.*?(?:peer|from|to) " + _PEER + r")?"
        ),
        1,
    ),
)


_FALLEN = "GPU has fallen off the bus"


def kernel_signals(lines: list[str], boot_epoch: float, now: float) -> list[dict[str, Any]]:
    """Signals in (new) kernel-log lines: XIDs classified by the catalog, then the patterns.

    Patterns see only kernel-written messages (:func:`kernel_messages`), anchored at the
    message start; a message that starts by quoting a user's process name never matches.
    """
    out: list[dict[str, Any]] = []
    prev_nvrm = False
    for line, msg, first in kernel_messages(lines):
        t = line_time(line, boot_epoch, now)
        events = xidcat.parse_xids(line) if first else []
        if events:
            ev = events[0]
            info = xidcat.classify(ev.code, ev.line)
            kind = CRITICAL if info.severity == xidcat.XidSeverity.CRITICAL else INFO
            out.append(
                sig(
                    f"xid{ev.code}",
                    kind,
                    t,
                    f"XID {ev.code} on {ev.pci}: {info.meaning} ({info.action})",
                    pci=ev.pci,
                )
            )
            if _FALLEN in msg and _FALLEN not in line:  # said by a continuation line (11.2)
                out.append(sig("gpu_lost", CRITICAL, t, msg[-200:], pci=ev.pci))
            prev_nvrm = True
            continue
        if _TASK_LED.match(msg):
            prev_nvrm = False
            continue
        if prev_nvrm and msg.startswith(_FALLEN):
            msg = "NVRM: " + msg  # the driver's continuation record of the line before (11.2)
        prev_nvrm = msg.startswith("NVRM:")
        for p in PATTERNS:
            m = p.regex.match(msg)
            if m:
                peer = m.group(p.peer_group) if p.peer_group else None
                out.append(sig(p.signal, p.kind, t, line[-200:], peer=peer))
                break
    return out


#: systemd-networkd's own message: "systemd-networkd[PID]: IFNAME: Lost carrier"
_CARRIER = re.compile(
    r"^" + _SYSLOG_HEAD + r"systemd-networkd\[\d+\]: (\S+): (?i:(lost|gained) carrier)$"
)


def link_flaps(lines: list[str], min_losses: int, now: float) -> list[dict[str, Any]]:
    """Interfaces that lost carrier ``min_losses`` times or more in these syslog lines.

    systemd-networkd logs ``ib6: lost carrier`` / ``Gained carrier`` to syslog, not the kernel
    ring (AzHC's flap check reads the same lines).  A plain syslog file cannot tell
    systemd-networkd from any local user running ``logger -t systemd-networkd``: these signals
    carry ``source="syslog"`` and are kept out of drain decisions (docs/epilog.md, 10.2).
    """
    losses: dict[str, list[float | None]] = {}
    for line in lines:
        m = _CARRIER.match(line.strip())
        if m and m.group(2).lower() == "lost":
            losses.setdefault(m.group(1), []).append(line_time(line, 0.0, now))
    out = []
    for ifname, times in sorted(losses.items()):
        if len(times) >= min_losses:
            first = next((t for t in times if t is not None), None)
            out.append(
                sig(
                    "link_flap",
                    DISTRIBUTED,
                    first,
                    f"{ifname} lost carrier {len(times)}x",
                    iface=ifname,
                    source="syslog",
                )
            )
    return out


# ---- CBD verdicts at epilog time -> signals --------------------------------------------------

#: check failing at the end of the job -> signal name (all host-local: critical)
VERDICT_SIGNALS = {
    "gpu_count": "gpu_lost",
    "ecc_uncorrectable": "ecc_uncorrectable",
    "row_remap": "row_remap",
    "pcie_link": "pcie_degraded",
    "pci_links": "pcie_degraded",
    "nvlink": "nvlink_down",
    "ib_ports": "ib_link_down",
    "nics": "nic_down",
    "mounts": "mount_failure",
}


def verdict_signals(verdicts: list[Verdict], now: float) -> list[dict[str, Any]]:
    out = []
    for v in verdicts:
        name = VERDICT_SIGNALS.get(v.check)
        if name is None:
            continue
        if v.state == FAIL:
            out.append(sig(name, CRITICAL, now, f"{v.check}: {v.evidence}"))
        elif v.state == PROBE_ERROR and v.check == "gpu_count" and not v.internal:
            # nvidia-smi hanging/failing after a job is the XID 79/119 symptom itself
            out.append(sig("gpu_unresponsive", CRITICAL, now, f"gpu_count: {v.evidence}"))
    return out


# ---- counter deltas (state kept by the caller between Epilog runs) ---------------------------


def gpu_counters(smi: NvidiaSmiQuery) -> dict[str, dict[str, int]]:
    """Per GPU bus id: volatile ECC correctable/uncorrectable and remapped-row counts."""
    out: dict[str, dict[str, int]] = {}
    for i, g in enumerate(smi.gpus):
        bus = tree_get(g, "PCI", "Bus Id") or f"gpu{i}"
        vol = g.get("ECC Errors", {})
        vol = vol.get("Volatile", {}) if isinstance(vol, dict) else {}
        c = {"ecc_corr": 0, "ecc_uncorr": 0}
        if isinstance(vol, dict):
            for k, v in vol.items():
                if isinstance(v, str) and (n := as_int(v)) is not None:
                    c["ecc_uncorr" if "Uncorrectable" in k else "ecc_corr"] += n
        c["remap_corr"] = as_int(tree_get(g, "Remapped Rows", "Correctable Error")) or 0
        c["remap_uncorr"] = as_int(tree_get(g, "Remapped Rows", "Uncorrectable Error")) or 0
        out[bus] = c
    return out


def gpu_counter_signals(
    prev: dict[str, dict[str, int]], cur: dict[str, dict[str, int]], now: float
) -> list[dict[str, Any]]:
    """ECC and row-remap counter growth since the previous Epilog (a reset restarts counting)."""
    out = []
    for bus, c in cur.items():
        p = prev.get(bus)
        if p is None:
            continue
        d = {k: v - p.get(k, v) for k, v in c.items() if v >= p.get(k, v)}
        if d.get("ecc_uncorr"):
            out.append(
                sig(
                    "ecc_uncorrectable",
                    CRITICAL,
                    now,
                    f"GPU {bus}: +{d['ecc_uncorr']} uncorrectable ECC",
                    pci=bus,
                )
            )
        if d.get("remap_uncorr"):
            out.append(
                sig(
                    "row_remap_uncorrectable",
                    INFO,
                    now,
                    f"GPU {bus}: +{d['remap_uncorr']} rows remapped (uncorrectable)",
                    pci=bus,
                )
            )
        if d.get("ecc_corr") or d.get("remap_corr"):
            out.append(
                sig(
                    "ecc_correctable",
                    INFO,
                    now,
                    f"GPU {bus}: +{d.get('ecc_corr', 0)} "
                    f"correctable ECC, +{d.get('remap_corr', 0)} rows remapped",
                    pci=bus,
                )
            )
    return out


#: IB port counters whose growth during a job is a link problem (names as in sysfs counters/)
IB_FLAP = ("link_downed",)
IB_ERRORS = (
    "symbol_error",
    "port_rcv_errors",
    "link_error_recovery",
    "local_link_integrity_errors",
    "excessive_buffer_overrun_errors",
)


def ib_counter_signals(
    deltas: dict[str, dict[str, int]], min_errors: int, now: float
) -> list[dict[str, Any]]:
    out = []
    for port, d in sorted(deltas.items()):
        downs = sum(d.get(k, 0) for k in IB_FLAP)
        errs = {k: d[k] for k in IB_ERRORS if d.get(k, 0) > 0}
        if downs:
            out.append(
                sig("ib_link_flap", DISTRIBUTED, now, f"{port}: link_downed +{downs}", port=port)
            )
        if sum(errs.values()) >= min_errors:
            out.append(
                sig(
                    "ib_errors",
                    DISTRIBUTED,
                    now,
                    f"{port}: " + ", ".join(f"{k} +{v}" for k, v in errs.items()),
                    port=port,
                )
            )
    return out


# ---- the AdminComment tag --------------------------------------------------------------------

TAG_PREFIX = "aegis:v1;hw="
_TAG_RE = re.compile(r"aegis:v1;hw=[^;\s]+(?:;\+\d+)?")


def parse_tag(comment: str) -> dict[str, str]:
    """node -> signal of the :func:`make_tag` tag in an AdminComment ({} when there is none)."""
    m = re.search(r"aegis:v1;hw=([^;\s]+)", comment or "")
    pairs = (p.rpartition(":") for p in (m.group(1).split(",") if m else []))
    return {node: sig for node, _, sig in pairs if node and sig}


def make_tag(pairs: list[tuple[str, str]], max_len: int = 120) -> str:
    """``aegis:v1;hw=node1:xid79,node3:ib_link_down`` (what the analytics parse), bounded.

    One pair per node (its first critical signal, see :func:`tag_pairs`); pairs that do
    not fit in ``max_len`` are dropped and counted as ``+N``, which the analytics ignore.
    """
    seen: set[str] = set()
    uniq = []
    for node, signal in pairs:
        if (
            node not in seen
            and re.fullmatch(r"[\w.\-\[\]]+", node)
            and re.fullmatch(r"\w+", signal)
        ):
            seen.add(node)
            uniq.append(f"{node}:{signal}")
    if not uniq:
        return ""
    tag = TAG_PREFIX + uniq[0]
    for i, p in enumerate(uniq[1:], start=1):
        rest = len(uniq) - i
        if len(tag) + 1 + len(p) + (len(f";+{rest}") if rest > 1 else 0) > max_len:
            return f"{tag};+{rest}"
        tag += "," + p
    return tag


def merge_comment(existing: str, tag: str) -> str:
    """Append ``tag`` to an AdminComment without clobbering it (10.11).

    The admin's text is kept byte for byte (lines, whitespace, length); only an older aegis
    ``hw=`` tag of ours (with the one space we put before it) is replaced, so re-tagging is
    idempotent.  Nothing is cut:
    Slurm stores AdminComment as text, so a long comment stays long.
    """
    base = _TAG_SPACED_RE.sub("", existing or "")
    return f"{base} {tag}" if base.strip() else tag


_TAG_SPACED_RE = re.compile(r" ?" + _TAG_RE.pattern)


def tag_pairs(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(node, signal) for the ``hw=`` tag: each node's first *critical* signal.

    Only critical signals go in: the analytics count any ``hw=`` tag as an infrastructure
    failure, and Meta's rule (HPCA'25 §V) attributes a FAILED job to hardware only on a critical
    health check.  Distributed evidence (IB errors, NCCL, NFS timeouts) stays in the spool for
    ``diagnose``; tagging it would count a user's bug on a noisy node as a hardware failure.
    """
    pairs = []
    for rec in sorted(records, key=lambda r: str(r.get("node", ""))):
        pick = next((s for s in rec.get("signals", []) if s.get("kind") == CRITICAL), None)
        if pick:
            pairs.append((str(rec["node"]), str(pick["signal"])))
    return pairs
