"""The one result type every check returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PASS, WARN, FAIL, PROBE_ERROR, SKIP = "pass", "warn", "fail", "probe_error", "skip"
#: ordered worst-first for summaries
STATES = (FAIL, PROBE_ERROR, WARN, PASS, SKIP)


@dataclass(frozen=True)
class Verdict:
    """Outcome of one check on one node, with the evidence line an operator reads.

    ``internal`` marks a probe_error caused by aegis itself (a parser or check raising): such a
    verdict is logged and counted but never drains a node.
    """

    check: str
    state: str
    evidence: str
    internal: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
