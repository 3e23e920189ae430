"""Culprit localization for a failed multi-node job: Aegis (NSDI'25) Algorithm 1.  Pure, stdlib.

Input: the job's nodes and the Epilog records of its last run (one per node, signals classified
``critical`` / ``distributed`` / ``info`` by :mod:`aegis_slurm.node.signals`).  The procedure:

1. ``CriticalError(T)``: nodes with a critical signal -> isolate exactly those nodes.
2. ``DistError(T)``: nodes with distributed errors; if at most 2 (the paper's sweet spot:
   isolating two hosts is cheaper than diagnosing further) -> isolate them.
3. ``RootDiag(L_DE)``: more than 2 -> do the errors share a source/destination?  If one endpoint
   is named by most reporting hosts (a peer address, a server) it is the culprit: a job node is
   isolated, anything else (an NFS server, a switch) is "not host-side, check it".
4. Otherwise a distributed problem: no single culprit; evidence, network/config check, and
   offline diagnosis of the reporting hosts.

Recommended action per isolated node follows Aegis §6 ("reboot or repair"): drain and
reboot-and-recheck, but a node already blamed ``repair_after`` (3) times before is sent for
repair.  A node of a NODE_FAIL job that left no Epilog record (its slurmd was gone) counts as a
critical error of that node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

FEW_HOSTS = 2
REPAIR_AFTER = 3


@dataclass
class Diagnosis:
    verdict: str  # critical | distributed-few | root-cause | external | distributed |
    # node-fail | no-signals
    nodes: list[str]  # the culprit(s) to isolate (empty when none)
    action: str  # summary action
    actions: dict[str, str] = field(default_factory=dict)  # node -> drain+reboot / repair
    evidence: list[str] = field(default_factory=list)
    detail: str = ""
    missing: list[str] = field(default_factory=list)  # nodes without an Epilog record

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _node_action(node: str, history: dict[str, int], repair_after: int) -> str:
    prior = history.get(node, 0)
    if prior >= repair_after:
        return f"drain; send for repair (blamed {prior}x before, reboots did not fix it)"
    return "drain; reboot and re-run the full CBD before resuming"


def _ev(node: str, s: dict[str, Any]) -> str:
    when = f" @{s['time']}" if s.get("time") else ""
    return f"{node}: {s.get('signal')} ({s.get('kind')}){when}: {s.get('detail', '')}"[:300]


def root_diag(
    dist: dict[str, list[dict[str, Any]]], job_nodes: list[str]
) -> tuple[str | None, int, list[str]]:
    """Common source/destination of distributed errors: (endpoint, hosts naming it, evidence).

    An endpoint is a signal's ``peer`` (remote address/host/server); a reporting host that is
    itself named by the others counts too.  The endpoint must be named by more than half of the
    reporting hosts (at least 2) and strictly more than any other endpoint.
    """
    named: Counter[str] = Counter()
    ev: dict[str, list[str]] = {}
    for node, sigs in dist.items():
        peers = {str(s["peer"]) for s in sigs if s.get("peer")} - {node}
        for p in peers:
            named[p] += 1
            ev.setdefault(p, []).append(f"{node} -> {p}")
    if not named:
        return None, 0, []
    (best, n), *rest = [*named.most_common(), ("", 0)]
    runner_up = rest[0][1] if rest else 0
    if n >= 2 and n * 2 > len(dist) and n > runner_up:
        return best, n, ev[best]
    return None, 0, []


def diagnose(
    job_nodes: list[str],
    records: list[dict[str, Any]],
    *,
    job_state: str = "FAILED",
    history: dict[str, int] | None = None,
    repair_after: int = REPAIR_AFTER,
    tagged: dict[str, str] | None = None,
) -> Diagnosis:
    """Algorithm 1 over one run's records.  ``history``: node -> times blamed before.

    ``tagged``: node -> signal from the job's own ``aegis:v1;hw=`` AdminComment tag.  For a
    NODE_FAIL job a node tagged ``node_fail`` is critical even when its restarted slurmd's
    Epilog later wrote a record with no signal (10.16); a NODE_FAIL job is never called an
    application failure.
    """
    history = history or {}
    tagged = tagged or {}
    by_node: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_node.setdefault(str(r["node"]), []).extend(r.get("signals", []))
    nodes = list(dict.fromkeys(job_nodes or sorted(by_node)))
    missing = [n for n in nodes if n not in by_node]
    crit = {n: [s for s in by_node.get(n, []) if s.get("kind") == "critical"] for n in nodes}
    if job_state == "NODE_FAIL":
        for n in nodes:
            if tagged.get(n) == "node_fail" and not crit[n]:
                crit[n] = [
                    {
                        "signal": "node_fail",
                        "kind": "critical",
                        "detail": "job ended NODE_FAIL; the job's AdminComment tag names this node",
                    }
                ]
        for n in missing:
            if crit.get(n):
                continue
            crit[n] = [
                {
                    "signal": "node_fail_no_record",
                    "kind": "critical",
                    "detail": "job ended NODE_FAIL and this node left no Epilog record",
                }
            ]
    crit = {n: s for n, s in crit.items() if s}
    dist = {n: [s for s in by_node.get(n, []) if s.get("kind") == "distributed"] for n in nodes}
    dist = {n: s for n, s in dist.items() if s}

    def isolate(verdict: str, culprits: list[str], evidence: list[str], detail: str) -> Diagnosis:
        acts = {n: _node_action(n, history, repair_after) for n in culprits}
        summary = (
            "send for repair"
            if any("repair" in a for a in acts.values())
            else "drain and reboot-and-recheck"
        )
        return Diagnosis(
            verdict,
            culprits,
            f"{summary}: {', '.join(culprits)}; restart the job",
            acts,
            evidence,
            detail,
            missing,
        )

    if crit:
        ev = [_ev(n, s) for n, sigs in crit.items() for s in sigs]
        return isolate(
            "critical", sorted(crit), ev, f"critical errors on {len(crit)} of {len(nodes)} nodes"
        )
    if 0 < len(dist) <= FEW_HOSTS:
        ev = [_ev(n, s) for n, sigs in dist.items() for s in sigs]
        return isolate(
            "distributed-few",
            sorted(dist),
            ev,
            f"distributed errors on only {len(dist)} host(s): isolate them",
        )
    if dist:
        ev = [_ev(n, s) for n, sigs in dist.items() for s in sigs[:3]]
        culprit, n, why = root_diag(dist, nodes)
        if culprit is not None and culprit in nodes:
            return isolate(
                "root-cause",
                [culprit],
                why + ev,
                f"{n} of {len(dist)} hosts' errors point at {culprit}",
            )
        if culprit is not None:
            return Diagnosis(
                "external",
                [],
                f"not host-side: check {culprit} (network/storage endpoint outside the job)",
                {},
                why + ev,
                f"{n} of {len(dist)} hosts' errors point at {culprit}",
                missing,
            )
        return Diagnosis(
            "distributed",
            [],
            "no single culprit: check network and config "
            f"(NetDiag/ConfigCheck), offline diagnosis of {', '.join(sorted(dist))}",
            {},
            ev,
            f"distributed errors on {len(dist)} hosts, no common source or destination",
            missing,
        )
    if job_state == "NODE_FAIL":
        return Diagnosis(
            "node-fail",
            [],
            "a node of the job went down (NODE_FAIL): find it in slurmctld's log or "
            "`sacctmgr show event`; not an application failure",
            {},
            [],
            "NODE_FAIL, but no node left a critical signal or a node_fail tag",
            missing,
        )
    return Diagnosis(
        "no-signals",
        [],
        "none: no hardware signal, likely an application failure",
        {},
        [],
        "no critical or distributed signal on any node",
        missing,
    )
