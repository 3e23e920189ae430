"""Drain / resume with reason ownership, and the drain-storm guard.

Slurm is the source of truth for "who drained what": our reasons start with ``aegis: <check>:``
and Slurm stores the reason's timestamp, so ``scontrol show nodes -o`` (one RPC) gives the
cluster-wide count per check for the storm guard.  See docs/cbd.md for why this beats a shared
directory.  All commands are argv lists with their own timeout; the healthy path never calls
Slurm at all.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aegis_slurm.node import probes
from aegis_slurm.node.verdict import Verdict

#: Job states after which Slurm will not run the job again (base token, as sacct and scontrol
#: print it).  REVOKED: a federated sibling cancelled because another cluster runs the job.
JOB_ENDED_STATES = frozenset(
    {
        "COMPLETED",
        "FAILED",
        "CANCELLED",
        "TIMEOUT",
        "NODE_FAIL",
        "PREEMPTED",
        "OUT_OF_MEMORY",
        "BOOT_FAIL",
        "DEADLINE",
        "REVOKED",
    }
)
PREFIX = "aegis: "
MAX_REASON = 120


@dataclass(frozen=True)
class NodeInfo:
    name: str
    state: str  # e.g. "IDLE+DRAIN", "MIXED", "DOWN+DRAIN"
    reason: str = ""
    reason_time: datetime | None = None

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.state

    @property
    def ours(self) -> bool:
        return self.reason.startswith(PREFIX)

    def aegis_check(self) -> str | None:
        """The check named in an aegis drain reason, else None."""
        if not self.ours:
            return None
        return self.reason[len(PREFIX) :].split(":", 1)[0].strip()


_REASON_RE = re.compile(r"Reason=(.*?) \[([^@\]]*)@(\S+?)\]")


def parse_scontrol_nodes(text: str) -> list[NodeInfo]:
    """Parse ``scontrol show nodes -o`` (one node per line)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"NodeName=(\S+)", line)
        if not m:
            continue
        st = re.search(r"\bState=(\S+)", line)
        reason, when = "", None
        r = _REASON_RE.search(line)
        if r:
            reason = r.group(1)
            try:
                when = datetime.fromisoformat(r.group(3))
            except ValueError:
                when = None
        out.append(NodeInfo(m.group(1), st.group(1) if st else "", reason, when))
    return out


def make_reason(v: Verdict) -> str:
    """``aegis: <check>: <short evidence>`` on one line, bounded in length."""
    ev = " ".join(v.evidence.split())
    return (f"{PREFIX}{v.check}: {ev}")[:MAX_REASON]


@dataclass(frozen=True)
class DrainPlan:
    action: str  # "drain" | "keep" (already drained: ours or admin's) | "storm" | "none"
    check: str = ""
    reason: str = ""
    detail: str = ""


def _limits(guard: dict[str, Any]) -> tuple[timedelta, float, int]:
    return (
        timedelta(minutes=float(guard.get("window_minutes", 60))),
        float(guard.get("max_drained_share", 0.2)),
        int(guard.get("max_drained_nodes", 10)),
    )


def storm_tripped(
    check: str, me: str, nodes: list[NodeInfo], guard: dict[str, Any], now: datetime
) -> tuple[bool, str]:
    """Would draining ``me`` for ``check`` exceed the guard?  Pure.

    Share cap: every node *currently* drained by aegis for ``check`` counts, whatever its age
    (a slow storm is still a storm), plus this one; trips above ``max_drained_share`` of all
    nodes.  Rate cap: only those drained within ``window_minutes`` (Slurm's reason timestamp;
    unknown time counts as recent), plus this one; trips above ``max_drained_nodes``.
    """
    window, share, cap = _limits(guard)
    same = [n for n in nodes if n.name != me and n.drained and n.aegis_check() == check]
    recent = [n for n in same if n.reason_time is None or now - n.reason_time <= window]
    total = max(len(nodes), 1)
    would = len(same) + 1
    if would / total > share:
        return True, (f"{would}/{total} nodes would be drained for {check} (limit {share:.0%})")
    if len(recent) + 1 > cap:
        return True, (
            f"{len(recent) + 1} nodes drained for {check} within "
            f"{window.total_seconds() / 60:g} min (limit {cap})"
        )
    return False, ""


def storm_overshoot(
    check: str, me: str, nodes: list[NodeInfo], guard: dict[str, Any], now: datetime
) -> tuple[bool, str]:
    """After draining ``me``: is ``me`` beyond the guard in the deterministic order?  Pure.

    Prologs failing at the same instant each passed :func:`storm_tripped` before the others
    drained.  Re-reading the node states afterwards, every one of them ranks the nodes drained by
    aegis for ``check`` the same way (reason time, then node name) and those ranked beyond the
    share or rate cap undrain themselves.  ``me`` not drained for ``check`` (an admin changed
    it meanwhile): nothing to undo.
    """
    window, share, cap = _limits(guard)
    same = sorted(
        (n for n in nodes if n.drained and n.aegis_check() == check),
        key=lambda n: (n.reason_time or datetime.min, n.name),
    )
    names = [n.name for n in same]
    if me not in names:
        return False, ""
    ahead = same[: names.index(me) + 1]  # me and the nodes ranked before me
    recent = [n for n in ahead if n.reason_time is None or now - n.reason_time <= window]
    total = max(len(nodes), 1)
    if len(ahead) / total > share or len(recent) > cap:
        return True, (
            f"{me} is #{len(ahead)} of {len(same)}/{total} nodes drained for {check} "
            f"(limit {cap} nodes, {share:.0%})"
        )
    return False, ""


def plan_drain(
    failing: list[Verdict], me: str, nodes: list[NodeInfo], guard: dict[str, Any], now: datetime
) -> DrainPlan:
    """Decide what to do about checks whose policy says drain.  Pure.

    Never overwrites a reason aegis did not set; keeps an existing aegis reason (and its
    timestamp); skips checks whose drain-storm guard has tripped and tries the next one.
    """
    if not failing:
        return DrainPlan("none")
    mine = next((n for n in nodes if n.name == me), None)
    if mine is not None and (mine.drained or "DOWN" in mine.state):
        who = "aegis" if mine.ours else "someone else"
        return DrainPlan(
            "keep", failing[0].check, mine.reason, f"already drained by {who}: {mine.reason}"
        )
    storms = []
    for v in failing:
        tripped, why = storm_tripped(v.check, me, nodes, guard, now)
        if not tripped:
            return DrainPlan("drain", v.check, make_reason(v))
        storms.append(why)
    return DrainPlan("storm", failing[0].check, "", "; ".join(storms))


def should_resume(info: NodeInfo, passes: dict[str, int], policy_resume: bool, needed: int) -> bool:
    """Resume only a node aegis drained, whose draining check passed ``needed`` times since."""
    check = info.aegis_check()
    return info.drained and check is not None and policy_resume and passes.get(check, 0) >= needed


# ---- I/O: one Slurm client (argv lists, short timeouts) and the one guarded drain ---------

ERRORS = (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed, OSError, ValueError)


@dataclass(frozen=True)
class Client:
    """scontrol/sacctmgr/sacct as argv lists with a timeout; ``slurm_conf`` is exported as
    SLURM_CONF (the EpilogSlurmctld environment has none; run_argv passes on only PATH and
    an inherited SLURM_CONF and TZ; this setting overrides the SLURM_CONF)."""

    timeout: float = 5.0
    slurm_conf: str = ""

    def run(self, argv: list[str]) -> str:
        full = ["env", f"SLURM_CONF={self.slurm_conf}", *argv] if self.slurm_conf else argv
        return probes.run_argv(full, self.timeout)

    def show_nodes(self, node: str = "") -> list[NodeInfo]:
        return parse_scontrol_nodes(
            self.run(
                ["scontrol", "show", "node" if node else "nodes", "-o", *([node] if node else [])]
            )
        )

    def drain(self, node: str, reason: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"])

    def resume(self, node: str) -> None:
        self.run(["scontrol", "update", f"nodename={node}", "state=resume"])

    def note(self, node: str, text: str) -> None:
        """Set the node's Comment (``scontrol show node``; Slurm >= 20.11) to ``text``, unless an
        admin's comment is there (never clobbered)."""
        cur = _COMMENT.search(self.run(["scontrol", "show", "node", "-o", node]))
        old = cur.group(1).strip() if cur else ""
        if old and old != "(null)" and not old.startswith(PREFIX):
            return
        self.run(["scontrol", "update", f"nodename={node}", f"comment={text[:200]}"])


_COMMENT = re.compile(r"\bComment=(.*?)(?= [A-Z][A-Za-z]*=|$)", re.M)


@dataclass(frozen=True)
class DrainResult:
    """What :func:`guarded_drain` did: ``drained``, ``kept`` (already drained/down: nothing
    changed), ``storm`` (guard tripped, nothing drained), ``undrained`` (drained, then undone by
    the second look), ``guard_unavailable`` / ``drain_failed`` (slurmctld unreadable or the
    update failed: nothing drained, fail open)."""

    action: str
    check: str = ""
    reason: str = ""
    detail: str = ""

    @property
    def drained(self) -> bool:
        return self.action == "drained"


def guarded_drain(
    client: Client,
    node: str,
    failing: list[Verdict],
    guard: dict[str, Any],
    now: datetime,
    on_drained: Any = None,
) -> DrainResult:
    """The one drain path for every caller (Prolog, HealthCheck, Epilog auto-drain; 10.19).

    Reason ownership and the storm guard (:func:`plan_drain`), the drain, then the second look
    (:func:`storm_overshoot`): drains that happened at the same instant all passed the guard;
    those ranked beyond it undo their own drain.  A trip is written where admins look: the
    node's Comment (``scontrol show node``) besides syslog/stderr (the caller's), 10.17.
    ``on_drained`` is called right after the drain succeeded (the Prolog records its exit there).
    """
    checks = ", ".join(v.check for v in failing)
    try:
        nodes = client.show_nodes()
        if not nodes:
            raise ValueError("scontrol listed no nodes")
    except ERRORS as e:
        return DrainResult(
            "guard_unavailable", failing[0].check, "", f"cannot read node states ({e})"
        )
    plan = plan_drain(failing, node, nodes, guard, now)
    if plan.action == "keep":
        return DrainResult("kept", plan.check, plan.reason, plan.detail)
    if plan.action == "storm":
        _note_trip(client, node, f"{checks} not drained: {plan.detail}", now)
        return DrainResult("storm", plan.check, "", plan.detail)
    try:
        client.drain(node, plan.reason)
    except ERRORS as e:
        return DrainResult("drain_failed", plan.check, plan.reason, f"scontrol drain failed ({e})")
    if on_drained is not None:
        on_drained()
    try:
        over, why = storm_overshoot(plan.check, node, client.show_nodes(), guard, now)
    except ERRORS as e:
        return DrainResult("drained", plan.check, plan.reason, f"could not re-check the guard: {e}")
    if over:
        try:
            client.resume(node)
        except ERRORS as e:
            return DrainResult("drained", plan.check, plan.reason, f"guard undrain failed: {e}")
        _note_trip(client, node, f"{plan.check} drained and undrained again: {why}", now)
        return DrainResult("undrained", plan.check, plan.reason, why)
    return DrainResult("drained", plan.check, plan.reason, "")


def _note_trip(client: Client, node: str, text: str, now: datetime) -> None:
    # best effort: the trip is still in syslog, stderr, the .prom file and the state
    with contextlib.suppress(*ERRORS):
        client.note(node, f"{PREFIX}drain-storm guard {now.isoformat(timespec='seconds')}: {text}")


def show_nodes(timeout: float) -> list[NodeInfo]:
    return Client(timeout).show_nodes()


def drain(node: str, reason: str, timeout: float) -> None:
    Client(timeout).drain(node, reason)


def resume(node: str, timeout: float) -> None:
    Client(timeout).resume(node)
