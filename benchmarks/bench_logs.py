"""Benchmark: ``aegis-slurm logs`` on a 64-node job's logs, and the per-node-summary central step.

Target (issue 14): 1 GB of logs from a 64-node job in <= 30 s wall and <= 2 GB peak RSS on the
2-core reference machine.  The job is the corpus generator's ECC case (real failure text,
tests/fixtures/logs/) padded with healthy Megatron iteration lines to the size asked for; the
command runs as a subprocess, so RSS is the whole process's.  Prints figures only.

    .venv/bin/python benchmarks/bench_logs.py [--mb 1024] [--nodes 64] [--summary-nodes 4096]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "logs"))

from corpus import SNIPPETS, healthy_baseline, make_case  # noqa: E402

ITERATION = SNIPPETS["background"]["iteration"]["lines"][0]


def pad(case_dir: Path, total_bytes: int, seed: int = 0) -> int:
    """Insert healthy iteration lines before each node's first iteration line."""
    files = sorted(case_dir.glob("*.log"))
    rng = random.Random(seed)
    per_file = total_bytes // len(files)
    for f in files:
        lines = f.read_text().splitlines(keepends=True)
        at = next(i for i, ln in enumerate(lines) if "iteration" in ln)
        have = sum(len(x) for x in lines)
        out = f.with_suffix(".tmp")
        with out.open("w") as fh:
            fh.writelines(lines[:at])
            written, it = have, 0
            while written < per_file:
                it += 1
                t = 3600 * 24 * 300 + it * 5.0
                s = ITERATION.format(
                    iso=time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)),
                    it=it,
                    samples=it * 1024,
                    ms=5000 * rng.uniform(0.97, 1.03),
                    lr=1e-5,
                    loss=2.5 + rng.uniform(-0.01, 0.01),
                    gn=rng.uniform(0.2, 0.3),
                )
                fh.write(s + "\n")
                written += len(s) + 1
            fh.writelines(lines[at:])
        out.replace(f)
    return sum(f.stat().st_size for f in files)


def run_cli(args: list[str]) -> tuple[float, float, dict]:
    t = time.perf_counter()
    done = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "aegis-slurm"), "logs", *args, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return wall, rss, json.loads(done.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--nodes", type=int, default=64)
    ap.add_argument("--summary-nodes", type=int, default=4096)
    ap.add_argument("--keep", type=Path, help="generate into (or reuse) this directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        root = args.keep or Path(d)
        t = time.perf_counter()
        if not (root / "failed").exists():
            case = make_case(root / "failed", "ecc", 3, n_nodes=args.nodes)
            pad(case.path, args.mb * 2**20)
            (root / "culprit").write_text(case.culprit)
        culprit = (root / "culprit").read_text()
        size = sum(f.stat().st_size for f in (root / "failed").glob("*.log"))
        base = healthy_baseline(root / "baseline", 3)
        print(
            f"logs: {size / 2**20:,.0f} MiB from {args.nodes} nodes "
            f"({time.perf_counter() - t:.1f} s to generate)"
        )
        wall, rss, out = run_cli([str(root / "failed"), "--baseline", str(base)])
        top = out["nodes"][0]["node"] if out["nodes"] else None
        print(
            f"  aegis-slurm logs: {wall:.1f} s wall, {rss:,.0f} MiB peak RSS; "
            f"{out['lines_read']:,} lines, {out['distinct_lines']:,} distinct masked, "
            f"{out['templates']} templates; culprit {top} (true {culprit})"
        )
    if args.summary_nodes:
        from aegis_slurm.logs.summary import bench_central

        bench_central(args.summary_nodes)


if __name__ == "__main__":
    main()
