"""Past one machine: each node turns its own slice of the logs into a template-count summary.

A node's Epilog (or any job on the node) runs ``aegis-slurm logs --summary-out FILE PATH`` over
its own ``<node>.log``: the lines are masked and counted by *masked text* (masking is the same on
every node, so the keys agree without a shared miner), with each key's first line, text and time,
and the node's last iteration.  Slurm is then the distributed engine, with no extra service.
The central step reads the summaries, mines templates from the union of distinct masked lines
and runs the spatial comparison: O(nodes x templates), not O(bytes).

What the summary path gives: nodes, lines, events, the culprit's last iteration and hangs.  The
stage needs the lines before the failure, so it is left to the full-log path (``stage`` is null).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.errors import InputError, NoDataError
from aegis_slurm.logs import parse, spatial, temporal
from aegis_slurm.logs.diagnose import _ERROR_WORDS, ALL_NODES, TOP_LINES, LogVerdict
from aegis_slurm.logs.sources import Layout, read_logs

VERSION = 1
SUFFIX = ".summary.json"


def summarize(paths: Sequence[str | Path], node: str | None = None) -> dict:
    """One node's summary of its log files (``node`` defaults to the file's node)."""
    parts = []
    files: list[str] = []
    for k, lf in enumerate(read_logs(paths, Layout())):
        files.append(str(lf.path))
        parts.append(parse.annotate(lf.frame).with_columns(pl.lit(k).alias("file")))
    if not parts:
        raise NoDataError("no log lines to summarize")
    df = pl.concat(parts)
    name = node or df["node"][0]
    shapes = (
        df.group_by("masked", maintain_order=True)
        .agg(
            pl.len().alias("count"),
            pl.col("file").first(),
            pl.col("line").first(),
            pl.col("text").first(),
            pl.col("ts").first(),
        )
        .to_dicts()
    )
    for s in shapes:
        s["file"] = files[s["file"]]
    its = df.filter(pl.col("iteration").is_not_null())
    return {
        "version": VERSION,
        "node": name,
        "lines": df.height,
        "shapes": shapes,
        "last_iteration": int(its["iteration"].max()) if its.height else None,
        "last_iteration_ts": its["ts"].max() if its.height else None,
    }


def write_summary(summary: dict, out: Path) -> None:
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(summary))
    tmp.replace(out)


def load_summaries(paths: Sequence[str | Path]) -> list[dict]:
    out = []
    for p in paths:
        try:
            d = json.loads(Path(p).read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read summary {p}: {exc}") from exc
        if not isinstance(d, dict) or d.get("version") != VERSION or "shapes" not in d:
            raise InputError(f"{p}: not an aegis-slurm log summary (version {VERSION})")
        out.append(d)
    return out


def diagnose_summaries(summaries: list[dict], baseline: Sequence[dict] = ()) -> LogVerdict:
    """The central step over node summaries (and optional baseline summaries)."""
    if not summaries:
        raise NoDataError("no node summaries")
    masked_ids: dict[str, int] = {}
    for s in [*summaries, *baseline]:
        for sh in s["shapes"]:
            masked_ids.setdefault(sh["masked"], len(masked_ids))
    ordered = sorted(masked_ids, key=masked_ids.__getitem__)
    templates = parse.mine(ordered)
    tid = {m: templates.ids[m] for m in ordered}
    base_events = {tid[sh["masked"]] for s in baseline for sh in s["shapes"]}
    nodes = [s["node"] for s in summaries]
    events = sorted({tid[sh["masked"]] for s in summaries for sh in s["shapes"]} - base_events)
    col = {e: j for j, e in enumerate(events)}
    mat = np.zeros((len(nodes), len(events)))
    first: dict[tuple[int, int], dict] = {}
    for i, s in enumerate(summaries):
        for sh in s["shapes"]:
            t = tid[sh["masked"]]
            j = col.get(t)
            if j is None:
                continue
            mat[i, j] += sh["count"]
            prev = first.get((i, t))
            if prev is None or (sh["file"], sh["line"]) < (prev["file"], prev["line"]):
                first[(i, t)] = sh
    verdict = LogVerdict(
        files=len(summaries),
        lines_read=sum(s["lines"] for s in summaries),
        distinct_lines=len(masked_ids),
        templates=len(set(tid.values())),
        baseline_events=len(base_events),
    )
    sp = spatial.compare_nodes(nodes, mat)
    weights = np.array([2.0 if _ERROR_WORDS.search(templates.text[e]) else 1.0 for e in events])
    med = np.median(mat, axis=0)
    rows: list[dict] = []
    culprits = list(sp.outliers)

    def t_first_err(i: int) -> float:
        ts = [
            first[(i, events[j])]["ts"]
            for j in range(len(events))
            if mat[i, j] > med[j] and weights[j] > 1 and (i, events[j]) in first
        ]
        ts = [t for t in ts if t is not None]
        return min(ts) if ts else float("inf")

    culprits.sort(key=lambda i: (t_first_err(i), -sp.scores[i]))
    for rank, i in enumerate(culprits):
        verdict.nodes.append({"node": nodes[i], "score": round(float(sp.scores[i]), 4)})
        unique = (mat > 0).sum(axis=0) == 1
        for j in range(len(events)):
            if mat[i, j] > med[j] and (sp.importance[i, j] > 0 or unique[j]):
                sh = first[(i, events[j])]
                rows.append(
                    {
                        "order": rank,
                        "w": -weights[j] * (1 + unique[j]),
                        "pos": (sh["file"], sh["line"]),
                        "node": nodes[i],
                        "line": sh["line"],
                        "text": sh["text"],
                        "file": sh["file"],
                        "score": round(float(sp.scores[i] * weights[j] / 2), 4),
                        "event": events[j],
                    }
                )
    if not culprits:
        last = {s["node"]: s["last_iteration"] for s in summaries if s["last_iteration"]}
        ts = {s["node"]: s["last_iteration_ts"] for s in summaries if s["last_iteration_ts"]}
        hung = temporal.hung_nodes(last, ts, None)
        if hung:
            verdict.hang = True
            verdict.nodes = [{"node": n, "score": 1.0} for n in hung]
        elif events:
            verdict.all_nodes = True
            verdict.same_error_everywhere = spatial.error_on_every_node(mat, weights > 1)
            verdict.nodes = [{"node": ALL_NODES, "score": 1.0}]
    rows.sort(key=lambda r: (r["order"], r["w"], r["pos"]))
    verdict.lines = [
        {k: r[k] for k in ("node", "line", "text", "score", "file")} for r in rows[:TOP_LINES]
    ]
    verdict.events = [
        {
            "event": int(r["event"]),
            "template": templates.text[r["event"]],
            "nodes": [r["node"]],
            "score": r["score"],
        }
        for r in rows[:20]
    ]
    if verdict.nodes and not verdict.all_nodes:
        top = next(s for s in summaries if s["node"] == verdict.nodes[0]["node"])
        verdict.iteration = top["last_iteration"]
    return verdict


def bench_central(n_nodes: int, templates: int = 60, seed: int = 0) -> None:
    """Time the central step for ``n_nodes`` synthetic summaries (benchmarks/bench_logs.py)."""
    rng = np.random.default_rng(seed)
    base = [f"event {k} [rank <N>] value <N> step <N> shape {k * 7}" for k in range(templates)]
    counts = rng.integers(50, 60, size=templates)
    culprit = int(rng.integers(n_nodes))
    summaries = []
    for i in range(n_nodes):
        shapes = [
            {
                "masked": m,
                "count": int(c),
                "file": f"n{i}.log",
                "line": k + 1,
                "text": m,
                "ts": 1000.0 + k,
            }
            for k, (m, c) in enumerate(zip(base, counts, strict=True))
        ]
        if i == culprit:
            shapes.append(
                {
                    "masked": "RuntimeError: CUDA error: uncorrectable ECC error encountered",
                    "count": 1,
                    "file": f"n{i}.log",
                    "line": 999,
                    "text": "RuntimeError: CUDA error: uncorrectable ECC error encountered",
                    "ts": 2000.0,
                }
            )
        summaries.append(
            {
                "version": VERSION,
                "node": f"n{i:05d}",
                "lines": 60_000,
                "shapes": shapes,
                "last_iteration": 100,
                "last_iteration_ts": 3000.0,
            }
        )
    t = time.perf_counter()
    v = diagnose_summaries(summaries)
    dt = time.perf_counter() - t
    print(
        f"  central step, {n_nodes:,} node summaries x {templates + 1} templates: {dt:.2f} s; "
        f"culprit {v.nodes[0]['node'] if v.nodes else None} (true n{culprit:05d})"
    )
