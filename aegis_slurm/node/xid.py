"""NVIDIA Xid catalog: which Xids mean "this host is broken" and what to do about them.

Shared by the Prolog (Check-Before-Delivery) and the Epilog (failure-signal capture).  Standard
library only.

The catalog is data, ``xid_catalog.json`` next to this module: every code of NVIDIA's published
catalog ("Analyzing Xid Errors with the Xid Catalog",
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, dated in the file) with
NVIDIA's immediate/investigatory resolution buckets and the severity we derive from the
immediate one (RESET_GPU / RESTART_BM / ... -> critical, RESTART_APP / IGNORE -> ignore,
CONTACT_SUPPORT on codes NVIDIA lists as unused -> warn).  Entries that differ from that rule,
or where NVIDIA gives no action yet (162-172), carry their reason in ``why``.  Four codes are
decided from the message itself, as NVIDIA's catalog says:

* 154 names its recovery action ("... changed from 0x0 (None) to 0x1 (GPU Reset Required)"):
  GPU reset, node reboot and drain-and-reset drain; None and Drain P2P do not.
* 94 (contained ECC error) is a RESTART_APP: the driver ends the message with ``RST: Yes|No,
  D-RST: Yes|No``; we drain only when it asks for a reset (a pending row remap after a 94 also
  fails the ``row_remap`` check, which is what needs the reset).
* 144-150 (NVLink5) are decoded with NVIDIA's "XID 144-150 Decode" table by unit name, error
  status and interrupt-info bit pattern; a line no row matches falls back to the message's own
  Fatal/Nonfatal word.
* Unknown codes are WARN: logged and counted, never a drain on their own.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

CATALOG_FILE = Path(__file__).with_name("xid_catalog.json")


class XidSeverity(StrEnum):
    """How a single Xid occurrence should be treated by a health check."""

    CRITICAL = "critical"  # host broken: drain, reset/reboot
    WARN = "warn"  # worth logging/trending; never a drain on its own
    IGNORE = "ignore"  # caused by the user's application or informational; never drain


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    severity: XidSeverity
    action: str  # suggested operator action


UNKNOWN_SEVERITY = XidSeverity.WARN


@functools.cache
def catalog() -> dict:
    """The parsed catalog file (read once, and only when an Xid needs classifying)."""
    return json.loads(CATALOG_FILE.read_text())


def _entry(code: int) -> dict | None:
    return catalog()["xids"].get(str(code))


# Both anchored at the end of the line: the message may quote the process name (pid=, name=),
# which a user controls, but always before the driver's own trailing text.
_RECOVERY = re.compile(r"recovery action changed from .*? to (0x[0-9a-fA-F]+)(?: \(([^)]*)\))?\s*$")
#: nvmlDeviceGpuRecoveryAction_t: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain+reset
_RECOVERY_SEV = {0: XidSeverity.IGNORE, 1: XidSeverity.CRITICAL, 2: XidSeverity.CRITICAL}
_RECOVERY_SEV |= {3: XidSeverity.WARN, 4: XidSeverity.CRITICAL}
_RESET_FLAG = re.compile(r"\bRST: (Yes|No), D-RST: (Yes|No)\s*$")
# "...): 145, RLW_REMAP Nonfatal XC0 i0 Link 00 (0x<intrinfo> 0x<error status> ...)"
_NVLINK = re.compile(
    r"\): 1(?:4[4-9]|50), (\S+) (Fatal|Nonfatal|Non-fatal)\b.*?\((0x[0-9a-fA-F]+) (0x[0-9a-fA-F]+)"
)
#: Xid 45's message names the Xid that forced the cleanup ("... caused by previous Xid 149")
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)\s*$")
_SEV_RANK = {XidSeverity.IGNORE: 0, XidSeverity.WARN: 1, XidSeverity.CRITICAL: 2}


def _bits_match(pattern: str, value: int) -> bool:
    """NVIDIA's intrinfo patterns: 32 chars, MSB first, '-' = any bit."""
    bits = format(value & 0xFFFFFFFF, "032b")
    return len(pattern) == 32 and all(p in ("-", b) for p, b in zip(pattern, bits, strict=True))


def _nvlink_severity(code: int, line: str) -> tuple[XidSeverity, str]:
    if not line:  # a caller without the message cannot decode it: never blame on a guess
        return XidSeverity.WARN, "log; sub-code not available (pass the kernel line)"
    m = _NVLINK.search(line)
    if not m:
        return XidSeverity.CRITICAL, "drain; NVLink5 error without a decodable sub-code"
    unit, word, intr, status = m.group(1), m.group(2), int(m.group(3), 16), int(m.group(4), 16)
    hits = [
        r
        for r in catalog()["nvlink_decode"]
        if r["xid"] == code
        and unit in r["units"]
        and (r["error_status"] == status or r["error_status"] & status)
        and (_bits_match(r["intrinfo_v1"], intr) or _bits_match(r["intrinfo_v2"], intr))
    ]
    if hits:  # overlapping rows: the most severe one wins
        worst = max(hits, key=lambda r: _SEV_RANK[XidSeverity(r["severity"])])
        sev = XidSeverity(worst["severity"])
        return sev, f"{unit} status {status:#x}: NVIDIA {worst['nvidia_resolution']}"
    if word == "Fatal":
        return XidSeverity.CRITICAL, f"{unit} Fatal (no decode row): drain; reset the GPU"
    return XidSeverity.WARN, f"{unit} Nonfatal (no decode row): log"


def classify(code: int, line: str = "") -> XidInfo:
    """Catalog entry for ``code`` as it applies to this kernel-log ``line``.

    Without a line, codes decided by their message (94, 144-150, 154) are WARN: nothing to
    decide on, and a guess must neither drain a node nor blame it.  A 144-150 line whose
    sub-code cannot be read is critical (NVIDIA's default for them is the NVLink5 reset
    workflow).  Unknown codes are WARN (logged, never drained alone).
    """
    e = _entry(code)
    if e is None:
        return XidInfo(code, "unknown Xid", UNKNOWN_SEVERITY, catalog()["unknown"]["action"])
    cause = _CAUSED_BY.search(line) if code == 45 else None
    if cause and int(cause.group(1)) != 45:
        # NVIDIA for 45: "Not Solo: IGNORE (follow other Xid)".  The cause's own line may be
        # gone (ring buffer wrapped, read before this run's baseline), so follow the Xid the
        # message names, judged without its line: at most a warning for message-decided codes
        root = classify(int(cause.group(1)))
        if _SEV_RANK[root.severity] > _SEV_RANK[XidSeverity.IGNORE]:
            return XidInfo(
                code, f"cleanup after Xid {root.code} ({root.meaning})", root.severity, root.action
            )
    meaning, sev_s, action = e["description"], e["severity"], e["action"]
    if meaning == "Unused":
        meaning = e["mnemonic"]
    if sev_s == "by_recovery_action":
        m = _RECOVERY.search(line)
        if not m:
            return XidInfo(code, meaning, XidSeverity.WARN, "log; recovery action not stated")
        n = int(m.group(1), 16)
        name = m.group(2) or f"action {n:#x}"
        sev = _RECOVERY_SEV.get(n, XidSeverity.WARN)
        return XidInfo(code, f"{meaning} to {name}", sev, f"follow: {name}")
    if sev_s == "by_reset_flag":
        m = _RESET_FLAG.search(line)
        reset = bool(m) and "Yes" in m.groups()
        sev = XidSeverity.CRITICAL if reset else XidSeverity.WARN
        how = "reset requested (RST/D-RST: Yes)" if sev == XidSeverity.CRITICAL else "no reset"
        return XidInfo(code, f"{meaning}, {how}", sev, action)
    if sev_s == "by_subcode":
        sev, how = _nvlink_severity(code, line)
        return XidInfo(code, f"{meaning}: {how}", sev, how)
    return XidInfo(code, meaning, XidSeverity(sev_s), action)


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str  # PCI address as printed by NVRM, e.g. "0000:9b:00"
    line: str  # the whole kernel-log line (used as the de-duplication key)
    mig: str = ""  # MIG attribution, e.g. "GPU-I:05" or "GPU-I:01 GPU-CI:02"


# The kernel-log line prefixes we accept in front of the message (the message itself must *start*
# with "NVRM: Xid"): a /dev/kmsg record header, a dmesg stamp (raw ``[  12.345]``, ``-T``
# ``[Sun Feb 23 16:24:18 2025]``, ``--time-format iso``, optionally after the ``--decode``
# ``kern  :warn  :`` prefix), or a syslog/journal line whose tag is ``kernel:``.  Anchoring
# matters: the kernel quotes user-controlled text inside other messages (``evil[42]: segfault at
# ... in NVRM: Xid (...): 79``), and any user can write ``NVRM: Xid`` to syslog under their own
# tag; neither may look like a critical XID.
_STAMP = (
    r"(?:\[\s*\d+\.\d+\]"  # dmesg raw
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d \d{4}\]"  # dmesg -T
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[,.]?\d*(?:[+-]\d\d:?\d\d|Z)?)"
)  # iso
_SYSLOG = (
    r"(?:[A-Z][a-z]{2} +\d+ \d\d:\d\d:\d\d"  # "Feb 23 16:24:18"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[,.]\d+)?(?:[+-]\d\d:?\d\d|Z)?)"  # iso
    r"(?: \S+)? kernel: (?:" + _STAMP + r" ?)?"  # host absent with journalctl --no-hostname
)
#: CONFIG_PRINTK_CALLER kernels: dmesg prints the caller after the stamp, "[ T1946]" / "[ C3]"
_CALLER = r"(?:\[\s*[TC]\d+\] ?)?"
_XID_RE = re.compile(
    r"^(?:\d+,\d+,\d+,[^;]*;"  # /dev/kmsg "pri,seq,usec,flags;"
    r"|(?:[a-z]+ *:[a-z]+ *: )?(?:" + _STAMP + r" ?)?"  # dmesg [--decode] [stamp]
    r"|"
    + _SYSLOG
    + r"|kernel: )"  # "kernel: " alone: journalctl -k -o short, date cut off
    + _CALLER
    + r" *NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)((?: GPU-I:\d+)?(?: GPU-CI:\d+)?)\): (\d+)"
)
#: the kernel's reports of user-space crashes quote the user's binary/library names verbatim
_USER_TEXT = ("segfault at", "traps:")


def parse_xids(text: str) -> list[XidEvent]:
    """All ``NVRM: Xid`` events in a kernel-log text, in order of appearance.

    Only lines whose message starts with ``NVRM: Xid`` (after a recognised kmsg/dmesg/syslog
    prefix) count; lines carrying user-controlled crash reports never do.
    """
    events = []
    for line in text.splitlines():
        line = line.strip()
        m = _XID_RE.match(line)
        if m and not any(u in line for u in _USER_TEXT):
            events.append(XidEvent(int(m.group(3)), m.group(1), line, m.group(2).strip()))
    return events
