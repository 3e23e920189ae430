"""NVIDIA XID catalog: which XIDs mean "this host is broken" and what to do about them.

Shared by the Prolog (Check-Before-Delivery) and the Epilog (failure-signal capture).  Standard
library only.

Sources, summarised in the project's health-check survey: NVIDIA's XID catalog "immediate
resolution" column (as mirrored in leptonai/gpud ``catalog_generated.go``), gpud's curated
verdicts, gcm ``xid_error_codes.py`` (everything critical except 13,31,43,45,63,68,92,109),
AzHC ``azure_gpu_xid.nhc`` and the Aegis paper (NSDI'25, §6).  Where they disagree we follow
the "CBD action" column of the survey:

* 63 (row-remap *event*) is not a drain by itself; the remapped-rows state decides.
* 64 (row-remap *failure*) drains although the Aegis summary does not isolate on it, because
  NVIDIA, gcm, AzHC and gpud all treat it as a reset/RMA criterion.
* 92 (high single-bit ECC rate) is logged, not drained (only AzHC drains).
* Unknown XIDs are WARN: logged and counted, never a drain on their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class XidSeverity(StrEnum):
    """How a single XID occurrence should be treated by a health check."""

    CRITICAL = "critical"  # host broken: drain, reset/reboot
    WARN = "warn"  # worth logging/trending; drain only on repeats (left to policy)
    IGNORE = "ignore"  # caused by the user's application; never drain


@dataclass(frozen=True)
class XidInfo:
    code: int
    meaning: str
    severity: XidSeverity
    action: str  # suggested operator action


_C, _W, _I = XidSeverity.CRITICAL, XidSeverity.WARN, XidSeverity.IGNORE

#: code -> catalog entry.  Codes not listed here are :data:`UNKNOWN_SEVERITY`.
CATALOG: dict[int, XidInfo] = {
    x.code: x
    for x in [
        XidInfo(8, "GPU stopped processing (FIFO idle timeout)", _W, "log; drain if repeats"),
        XidInfo(13, "Graphics engine exception", _I, "user application"),
        XidInfo(31, "GPU memory page fault", _I, "user application"),
        XidInfo(32, "Invalid or corrupted push buffer", _W, "log; drain if repeats"),
        XidInfo(38, "Driver firmware error", _W, "log"),
        XidInfo(43, "GPU stopped processing (reset channel)", _I, "user application"),
        XidInfo(44, "Graphics fault during context switch", _C, "drain; reset GPU"),
        XidInfo(45, "Preemptive cleanup after previous error", _I, "follow the other XID"),
        XidInfo(46, "GPU stopped processing", _C, "drain; reset GPU"),
        XidInfo(48, "Double-bit ECC error", _C, "drain; reset; check row remap; RMA if recurs"),
        XidInfo(54, "Auxiliary power not connected", _C, "drain; hardware"),
        XidInfo(56, "Display engine error", _C, "drain; hardware ticket"),
        XidInfo(57, "Error programming video memory interface", _C, "drain; hardware ticket"),
        XidInfo(58, "Unstable video memory interface", _C, "drain; hardware ticket"),
        XidInfo(61, "Internal micro-controller breakpoint", _C, "drain; reset GPU"),
        XidInfo(62, "Internal micro-controller halt", _C, "drain; reset GPU"),
        XidInfo(
            63,
            "Row-remap / page-retirement recording event",
            _W,
            "decide via remapped-rows pending state",
        ),
        XidInfo(64, "Row-remap / page-retirement failure", _C, "drain; reset; RMA criterion"),
        XidInfo(65, "Video processor exception", _C, "drain; reset GPU"),
        XidInfo(68, "NVDEC0 exception", _W, "log (video engine)"),
        XidInfo(69, "Graphics engine class error", _C, "drain; reset GPU"),
        XidInfo(74, "NVLink error", _C, "drain; check NVLink; reset"),
        XidInfo(79, "GPU has fallen off the bus", _C, "drain; reboot node; HW ticket if recurs"),
        XidInfo(80, "Corrupted data sent to GPU", _C, "drain (PCIe)"),
        XidInfo(81, "VGA subsystem error", _C, "drain"),
        XidInfo(92, "High single-bit ECC error rate", _W, "log and trend"),
        XidInfo(93, "Non-fatal violation of provisioned InfoROM wear limit", _W, "log"),
        XidInfo(94, "Contained ECC error", _C, "drain; reset GPU"),
        XidInfo(95, "Uncontained ECC error", _C, "drain; reset/reboot"),
        XidInfo(109, "Context-switch timeout", _W, "log; drain if repeats"),
        XidInfo(110, "Security fault", _C, "drain; reset GPU"),
        XidInfo(119, "GSP RPC timeout", _C, "drain; reset GPU (nvidia-smi may hang)"),
        XidInfo(120, "GSP error", _C, "drain; reset GPU"),
        XidInfo(121, "C2C link error", _C, "drain"),
        XidInfo(136, "Link training failed", _C, "drain; reset GPU"),
        XidInfo(137, "NVLink FLA privilege error", _I, "user application"),
        XidInfo(140, "Unrecovered ECC error", _C, "drain; reset GPU"),
        XidInfo(143, "GPU initialization error", _C, "drain; hardware ticket"),
        *(XidInfo(c, "NVLink5 error", _C, "drain; decode sub-code") for c in range(144, 151)),
        XidInfo(154, "GPU recovery action changed", _C, "follow the reported recovery action"),
        XidInfo(155, "NVLink software error", _C, "drain; reset GPU"),
        XidInfo(156, "Resource retirement event", _C, "drain; reset GPU"),
        XidInfo(157, "Resource retirement failure", _W, "log"),
        XidInfo(158, "GPU fatal timeout", _C, "drain; reset GPU"),
    ]
}

UNKNOWN_SEVERITY = XidSeverity.WARN


def classify(code: int) -> XidInfo:
    """Catalog entry for ``code``; unknown codes are WARN (logged, never drained alone)."""
    return CATALOG.get(code) or XidInfo(code, "unknown XID", UNKNOWN_SEVERITY, "log")


@dataclass(frozen=True)
class XidEvent:
    code: int
    pci: str  # PCI address as printed by NVRM, e.g. "0000:9b:00"
    line: str  # the whole kernel-log line (used as the de-duplication key)


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
    r" \S+ kernel: (?:" + _STAMP + r" ?)?"
)
_XID_RE = re.compile(
    r"^(?:\d+,\d+,\d+,[^;]*;"  # /dev/kmsg "pri,seq,usec,flags;"
    r"|(?:[a-z]+ *:[a-z]+ *: )?(?:" + _STAMP + r" ?)?"  # dmesg [--decode] [stamp]
    r"|" + _SYSLOG + r")"
    r" *NVRM: Xid \((?:PCI:)?([0-9a-fA-F:.]+)\): (\d+)"
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
            events.append(XidEvent(code=int(m.group(2)), pci=m.group(1), line=line))
    return events
