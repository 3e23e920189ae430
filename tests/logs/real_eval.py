"""Independent evaluation of ``diagnose_logs`` on real multi-rank logs nobody here wrote.

The cases and their labels are in ``tests/fixtures/logs/real/`` (labels committed before the tool
first ran on them).  Every case is one file as posted in a public issue thread, read with the
shipped defaults plus what an admin would pass for such a file: one unit per srun task or
global rank (``--tasks-per-node 1 --ranks-per-node 1``), no baseline (no thread has one).

.venv/bin/python tests/logs/real_eval.py [--heldout]     (prints per-case results)
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from aegis_slurm.logs import Layout, diagnose_logs
from aegis_slurm.logs.diagnose import ALL_NODES

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "logs" / "real"
#: collected and labelled after the fixes the first 12 cases exposed; never used to change code
HELDOUT = REAL / "heldout"
#: one evaluation unit per srun task / global rank; without a node list a unit is ``node#k``
LAYOUT = Layout(tasks_per_node=1, ranks_per_node=1)


@dataclass
class Result:
    file: str
    culprit: str
    got: list[str]
    top1: bool | None  # None: the label is "unknown", not scored for top-1
    recall: float  # the labelled key lines among the top five (each labelled copy counts)
    any_key: bool  # at least one key line among the top five (the generated corpus's rule)
    all_nodes: bool


def want_unit(culprit: str) -> str:
    """The unit name the verdict uses for a label: ``rank2`` -> ``node#2``."""
    if culprit == "all":
        return ALL_NODES
    if culprit.startswith("rank") and culprit[4:].isdigit():
        return f"node#{int(culprit[4:])}"
    return culprit


def evaluate(layout: Layout = LAYOUT, root: Path = REAL) -> list[Result]:
    labels = json.loads((root / "labels.json").read_text())["cases"]
    out = []
    for case in labels:
        path = root / case["file"]
        v = diagnose_logs([path], layout=layout)
        got = [n["node"] for n in v.nodes]
        top1 = None
        if case["culprit"] != "unknown":
            top1 = bool(got and got[0] == want_unit(case["culprit"]))
        hits = {ln["line"] for ln in v.lines[:5] if Path(ln["file"]).name == case["file"]}
        key = set(case["key"])
        recall = len(hits & key) / min(len(key), 5)
        out.append(
            Result(
                case["file"], case["culprit"], got[:3], top1, recall, bool(hits & key), v.all_nodes
            )
        )
    return out


def figures(results: list[Result]) -> tuple[float, float, int, int]:
    """(top-1 accuracy over scored cases, mean top-5 line recall over all, scored, total)."""
    scored = [r for r in results if r.top1 is not None]
    acc = sum(bool(r.top1) for r in scored) / len(scored) if scored else 0.0
    rec = sum(r.recall for r in results) / len(results)
    return acc, rec, len(scored), len(results)


def any_key_rate(results: list[Result]) -> float:
    """Share of cases with at least one labelled key line among the top five."""
    return sum(r.any_key for r in results) / len(results)


if __name__ == "__main__":
    res = evaluate(root=HELDOUT if "--heldout" in sys.argv else REAL)
    for r in res:
        mark = "-" if r.top1 is None else ("ok" if r.top1 else "MISS")
        print(
            f"{r.file:40s} want={r.culprit:22s} got={r.got} top1={mark} "
            f"recall={r.recall:.2f} any={int(r.any_key)}"
        )
    acc, rec, n_scored, n = figures(res)
    print(
        f"{n} cases: top-1 {acc:.1%} of {n_scored} scored, top-5 line recall {rec:.1%}, "
        f"a key line in the top five {any_key_rate(res):.1%}"
    )
    sys.exit(0)
