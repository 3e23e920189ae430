"""Top-1 node accuracy and top-5 line recall of ``diagnose_logs`` on the generated corpus.

.venv/bin/python tests/logs/evaluate.py [--seeds 3]    (prints per-case results)
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from aegis_slurm.logs import Layout, diagnose_logs

try:
    from .corpus import HELDOUT, KINDS, Case, healthy_baseline, make_case
except ImportError:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import HELDOUT, KINDS, Case, healthy_baseline, make_case  # type: ignore[no-redef]


def score(case: Case, verdict) -> tuple[bool, float]:
    top = verdict.nodes[0]["node"] if verdict.nodes else None
    hit = top == case.culprit
    got = {(Path(ln["file"]).name, ln["line"]) for ln in verdict.lines[:5]}
    if case.culprit == "all nodes":  # one node's copy of the key line is enough
        recall = 1.0 if got & case.key else 0.0
    else:
        want = case.key
        recall = len(got & want) / min(len(want), 5) if want else 1.0
    return hit, recall


def run(
    root: Path,
    seeds: int = 3,
    with_baseline: bool = True,
    verbose: bool = False,
    kinds: tuple[str, ...] = KINDS,
    n_nodes: int = 8,
):
    results = []
    for seed in range(seeds):
        for k, kind in enumerate(kinds):
            layout = "label" if (seed + k) % 3 == 2 else "dir"
            d = root / f"{kind}-{seed}"
            case = make_case(d / "failed", kind, seed * 100 + k, n_nodes=n_nodes, layout=layout)
            base = [healthy_baseline(d / "baseline", seed * 100 + k)] if with_baseline else []
            lay = (
                Layout(nodes=tuple(case.nodes), tasks_per_node=1) if layout == "label" else Layout()
            )
            v = diagnose_logs([case.path], baseline=base, layout=lay)
            hit, recall = score(case, v)
            results.append((kind, layout, hit, recall, v, case))
            if verbose:
                print(
                    f"{kind:16s} {layout:5s} seed={seed} top1={'ok ' if hit else 'MISS'} "
                    f"recall={recall:.2f} got={[n['node'] for n in v.nodes[:3]]} "
                    f"want={case.culprit} stage={v.stage}/{case.stage} "
                    f"it={v.iteration}/{case.iteration}"
                )
    n = len(results)
    acc = sum(r[2] for r in results) / n
    rec = sum(r[3] for r in results) / n
    if verbose:
        stage = sum(r[4].stage == r[5].stage for r in results) / n
        it = sum(r[4].iteration == r[5].iteration for r in results) / n
        print(f"stage correct {stage:.1%}, iteration correct {it:.1%}")
    return acc, rec, results


if __name__ == "__main__":
    seeds = int(sys.argv[sys.argv.index("--seeds") + 1]) if "--seeds" in sys.argv else 3
    kinds = HELDOUT if "--heldout" in sys.argv else KINDS
    n_nodes = int(sys.argv[sys.argv.index("--nodes") + 1]) if "--nodes" in sys.argv else 8
    with tempfile.TemporaryDirectory() as d:
        for wb in (True, False):
            acc, rec, res = run(Path(d) / str(wb), seeds, wb, True, kinds, n_nodes)
            print(
                f"baseline={wb}: {len(res)} cases, top-1 node accuracy {acc:.1%}, "
                f"top-5 line recall {rec:.1%}\n"
            )
