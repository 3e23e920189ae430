"""Multi-node NCCL all-reduce with bisection: name the slow or failing node of a set.

Run from a maintenance job that holds the nodes (``salloc -N 16 --exclusive -p maint``):
``python3 -m aegis_slurm.node.nccl_bisect --min-busbw 300 --gpus-per-node 8``.  The whole set
is tested with nccl-tests' ``all_reduce_perf`` through ``srun``; when it is below
``--min-busbw`` (or fails) the set is split in halves, recursively; a group of one or two nodes
is paired with a node already proven good, so a bad NIC or cable (which a single-node test
never sees) is named too.  When both halves pass but their union fails, the fault is between
them (a switch or the fabric), and the group is reported as inconclusive instead of blaming a
node.  Aegis (NSDI'25 §6) and gcm's check_nccl do the same; standard library only.

Prints one JSON document: ``{"bad": [...], "inconclusive": [[...]], "tests": [...]}``; exit 3
when a node was named, 0 otherwise.  It never drains: the admin (or a site script) decides.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from aegis_slurm.node.parse import parse_nccl_tests
from aegis_slurm.node.probes import ProbeFailed, ProbeMissing, ProbeTimeout, run_argv

Measure = Callable[[list[str]], float]


@dataclass
class BisectResult:
    bad: list[str] = field(default_factory=list)
    inconclusive: list[list[str]] = field(default_factory=list)
    tests: list[dict] = field(default_factory=list)  # every run: nodes, busbw or error, ok


def bisect(nodes: Sequence[str], measure: Measure, min_busbw: float) -> BisectResult:
    """Find the nodes that make ``measure`` (peak busbw in GB/s of an all-reduce over a node
    list) fall below ``min_busbw``.  ``measure`` may raise (hang, crash): that counts as below.
    """
    res = BisectResult()

    def ok(group: list[str]) -> bool:
        try:
            bw = measure(group)
        except Exception as e:  # a failed or hung run is a failing group, not a crash here
            res.tests.append({"nodes": group, "error": str(e)[:200], "ok": False})
            return False
        good = bw >= min_busbw
        res.tests.append({"nodes": group, "busbw_gbps": bw, "ok": good})
        return good

    nodes = list(nodes)
    if not nodes or ok(nodes):
        return res
    proven: list[str] = []
    todo = [nodes]
    while todo:
        group = todo.pop(0)
        if len(group) <= 2:
            for n in group:
                ref = next((p for p in proven if p not in group), None)
                if ref is None:  # nothing known good to pair with: judge it alone
                    (proven if ok([n]) else res.bad).append(n)
                elif ok([n, ref]):
                    proven.append(n)
                else:
                    res.bad.append(n)
            continue
        half = len(group) // 2
        failing = []
        for part in (group[:half], group[half:]):
            if ok(part):
                proven.extend(part)
            else:
                failing.append(part)
        if failing:
            todo.extend(failing)
        else:
            res.inconclusive.append(group)  # each half fine, together not: between them
    return res


def srun_measure(gpus_per_node: int, timeout: float, extra: Sequence[str] = ()) -> Measure:
    """A :data:`Measure` running all_reduce_perf on the given nodes of the current allocation
    (argv only, no shell; one task per GPU)."""

    def measure(group: list[str]) -> float:
        argv = [
            "srun",
            f"--nodes={len(group)}",
            f"--nodelist={','.join(group)}",
            f"--ntasks-per-node={gpus_per_node}",
            f"--gpus-per-node={gpus_per_node}",
            "all_reduce_perf",
            "-b",
            "1G",
            "-e",
            "4G",
            "-f",
            "2",
            "-g",
            "1",
            *extra,
        ]
        out = run_argv(argv, timeout)
        res = parse_nccl_tests(out)
        if res.out_of_bounds:
            raise ValueError(f"{res.out_of_bounds} out-of-bounds values")
        return res.max_busbw_gbps

    return measure


def _expand(nodelist: str) -> list[str]:
    """Expand a Slurm hostlist (``gpu[001-004,007]``) with ``scontrol show hostnames``."""
    return run_argv(["scontrol", "show", "hostnames", nodelist], 10).split()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m aegis_slurm.node.nccl_bisect")
    ap.add_argument("--nodes", help="hostlist (default: $SLURM_JOB_NODELIST)")
    ap.add_argument("--min-busbw", type=float, required=True, help="GB/s, peak out-of-place")
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per srun")
    a = ap.parse_args(argv)
    import os

    nodelist = a.nodes or os.environ.get("SLURM_JOB_NODELIST", "")
    if not nodelist:
        print("nccl_bisect: no --nodes and no SLURM_JOB_NODELIST", file=sys.stderr)
        return 2
    try:
        nodes = _expand(nodelist)
    except (ProbeMissing, ProbeFailed, ProbeTimeout) as e:
        print(f"nccl_bisect: cannot expand {nodelist!r}: {e}", file=sys.stderr)
        return 1
    res = bisect(nodes, srun_measure(a.gpus_per_node, a.timeout), a.min_busbw)
    print(json.dumps(res.__dict__, indent=1))
    return 3 if res.bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
