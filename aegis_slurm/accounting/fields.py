"""sacct field names: which exist, which are free text, which we ask for, and cheap validators."""

from __future__ import annotations

import re

from aegis_slurm.accounting.schema import STATES

#: Every field of ``sacct --helpformat`` (22.05), plus newer ones we use when present.
_HELPFORMAT_2205 = """
Account AdminComment AllocCPUS AllocNodes AllocTRES AssocID AveCPU AveCPUFreq AveDiskRead
AveDiskWrite AvePages AveRSS AveVMSize BlockID Cluster Comment Constraints ConsumedEnergy
ConsumedEnergyRaw Container CPUTime CPUTimeRAW DBIndex DerivedExitCode Elapsed ElapsedRaw
Eligible End ExitCode Flags GID Group JobID JobIDRaw JobName Layout MaxDiskRead MaxDiskReadNode
MaxDiskReadTask MaxDiskWrite MaxDiskWriteNode MaxDiskWriteTask MaxPages MaxPagesNode MaxPagesTask
MaxRSS MaxRSSNode MaxRSSTask MaxVMSize MaxVMSizeNode MaxVMSizeTask McsLabel MinCPU MinCPUNode
MinCPUTask NCPUS NNodes NodeList NTasks Partition Priority QOS QOSRAW Reason ReqCPUFreq
ReqCPUFreqGov ReqCPUFreqMax ReqCPUFreqMin ReqCPUS ReqMem ReqNodes ReqTRES Reservation
ReservationId Reserved ResvCPU ResvCPURAW Start State Submit SubmitLine Suspended SystemComment
SystemCPU Timelimit TimelimitRaw TotalCPU TRESUsageInAve TRESUsageInMax TRESUsageInMaxNode
TRESUsageInMaxTask TRESUsageInMin TRESUsageInMinNode TRESUsageInMinTask TRESUsageInTot
TRESUsageOutAve TRESUsageOutMax TRESUsageOutMaxNode TRESUsageOutMaxTask TRESUsageOutMin
TRESUsageOutMinNode TRESUsageOutMinTask TRESUsageOutTot UID User UserCPU WCKey WCKeyID WorkDir
"""
_NEWER = "AllocGRES ReqGRES FailedNode Restarts Planned PlannedCPU SLUID OriginalSLUID Extra"
KNOWN_FIELDS: frozenset[str] = frozenset((_HELPFORMAT_2205 + _NEWER).split())
_BY_LOWER = {name.lower(): name for name in KNOWN_FIELDS}

#: Fields users or admins write freely: they may hold the delimiter or a newline.
FREE_TEXT_FIELDS = frozenset(
    {
        "JobName",
        "Comment",
        "AdminComment",
        "SystemComment",
        "WorkDir",
        "SubmitLine",
        "Extra",
        "Constraints",
        "Reservation",
        "WCKey",
        "Container",
    }
)

#: At least one id column and State are needed to make a job-run row.
REQUIRED_ANY_ID = ("JobIDRaw", "JobID")
REQUIRED = ("State",)

#: What live ingest asks sacct for, free text last (JobName last of all), when the site's
#: sacct knows the field (checked with ``sacct --helpformat``).
LIVE_FIELDS = (
    "JobIDRaw",
    "JobID",
    "Cluster",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ElapsedRaw",
    "TimelimitRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "FailedNode",
    "Restarts",
    "Reason",
    "Flags",
    "SystemComment",
    "AdminComment",
    "Comment",
    "WorkDir",
    "JobName",
)

TIME_FIELDS = ("Submit", "Eligible", "Start", "End")
INT_FIELDS = ("ElapsedRaw", "NNodes", "AllocNodes")
#: Fields whose values record_is_plausible() checks.
CHECKED_FIELDS = frozenset((*TIME_FIELDS, *INT_FIELDS, *REQUIRED_ANY_ID, "State"))
_TIME_RE = re.compile(r"^(?:\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d|\d{9,11}|Unknown|None|)$")
_INT_RE = re.compile(r"^\d*$")
_JOBID_RE = re.compile(r"^\d+(?:[_+][\w\[\]%,-]+)?(?:\.\w+)?$")


def canonical_field(name: str) -> str:
    """``jobidraw`` -> ``JobIDRaw``; unknown names are returned unchanged."""
    return _BY_LOWER.get(name.strip().lower(), name.strip())


def base_state(raw: str) -> str:
    """``CANCELLED by 1001`` -> ``CANCELLED``; fixed-width ``CANCELLED+`` -> ``CANCELLED``."""
    return raw.split(" ", 1)[0].rstrip("+") if raw else ""


def record_is_plausible(record: dict[str, str]) -> bool:
    """Cheap check used to choose between repairs of a broken line (not the full conversion)."""
    state = record.get("State")
    if state is not None and base_state(state) not in STATES:
        return False
    for name in TIME_FIELDS:
        value = record.get(name)
        if value is not None and not _TIME_RE.match(value):
            return False
    for name in INT_FIELDS:
        value = record.get(name)
        if value is not None and not _INT_RE.match(value):
            return False
    for name in REQUIRED_ANY_ID:
        value = record.get(name)
        if value is not None and not _JOBID_RE.match(value):
            return False
    return True
