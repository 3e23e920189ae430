"""The L4 pipeline over a job's logs: parse → cross-job filter → spatial → temporal.

``diagnose_logs(paths, baseline=...)`` returns a :class:`LogVerdict`: the failure-indicating nodes,
lines, events, stage and iteration.  ``aegis_slurm.logs.diagnose_job_logs`` is the entry point
for ``aegis-slurm diagnose`` (it finds a job's files first).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.errors import NoDataError
from aegis_slurm.logs import parse, spatial, temporal
from aegis_slurm.logs.sources import UNLABELLED, Layout, read_logs

ALL_NODES = "all nodes"
TOP_LINES = 5
#: a prior on what an admin needs to read first among lines that are already failure-indicating
#: (L4 found level alone insufficient to *find* them; here it only orders them).  Megatron's
#: counter "number of nan iterations: 0" on every iteration line is not a NaN.
_ERROR_WORDS = re.compile(
    r"(?i)error|fail|exception|fatal|timeout|timed out|killed|abort|\bnan\b(?! iterations)|"
    r"no space|stale|\bECC\b|\bXid\b|illegal|out of memory|OOM|exited|terminat|signal|assert|\bWARN"
)


@dataclass
class LogVerdict:
    """The answer for one job (``--json`` prints ``to_json()``; keys are a stable contract)."""

    nodes: list[dict] = field(default_factory=list)  # {"node", "score"}, most suspicious first
    lines: list[dict] = field(default_factory=list)  # {"node", "line", "text", "score", "file"}
    events: list[dict] = field(default_factory=list)  # {"template", "nodes", "count", "score"}
    stage: str | None = None
    iteration: int | None = None
    all_nodes: bool = False
    #: with ``all_nodes``: some error-worded event is on every node (else they differ)
    same_error_everywhere: bool = False
    hang: bool = False
    files: int = 0
    lines_read: int = 0
    distinct_lines: int = 0
    templates: int = 0
    baseline_events: int = 0

    def to_json(self) -> dict:
        d = asdict(self)
        return d


@dataclass
class _Corpus:
    lines: pl.DataFrame  # node, file, line, mid, ts, iteration
    first: pl.DataFrame  # node, file, mid -> line, text (first occurrence)
    masked: list[str]  # mid -> masked text
    files: list[str]


def _ingest(paths: Sequence[str | Path], layout: Layout, masked_ids: dict[str, int]) -> _Corpus:
    parts: list[pl.DataFrame] = []
    firsts: list[pl.DataFrame] = []
    files: list[str] = []
    for k, lf in enumerate(read_logs(paths, layout)):
        files.append(str(lf.path))
        df, masked = parse.annotate_ids(lf.frame)
        sid_to_mid = []
        for m in masked:
            if m not in masked_ids:
                masked_ids[m] = len(masked_ids)
            sid_to_mid.append(masked_ids[m])
        df = df.with_columns(
            pl.col("sid")
            .replace_strict(list(range(len(masked))), sid_to_mid, return_dtype=pl.UInt32)
            .alias("mid"),
            pl.lit(k, dtype=pl.UInt16).alias("file"),
        )
        first = df.group_by("node", "file", "mid").agg(pl.col("line").min(), pl.col("text").first())
        # rebuilt from Python objects: polars' strings would otherwise stay views into the
        # whole file's buffer, and 64 files x 16 MB would stay in memory for ~50 lines each
        firsts.append(pl.DataFrame(first.to_dict(as_series=False), schema=first.schema))
        parts.append(df.select("node", "file", "line", "mid", "ts", "iteration"))
    if not parts:
        raise NoDataError("no log lines to diagnose")
    lines = pl.concat(parts)
    if lines.height == 0:
        raise NoDataError("the log files are empty")
    return _Corpus(lines=lines, first=pl.concat(firsts), masked=[], files=files)


def diagnose_logs(
    paths: Sequence[str | Path],
    baseline: Sequence[str | Path] = (),
    layout: Layout | None = None,
) -> LogVerdict:
    """Run L4 over the failed job's log files (``paths``), against a successful run's logs."""
    layout = layout or Layout()
    masked_ids: dict[str, int] = {}
    corpus = _ingest(paths, layout, masked_ids)
    n_failed_masked = len(masked_ids)
    base_ids: dict[str, int] = dict(masked_ids)
    base_corpus = _ingest(baseline, Layout(), base_ids) if baseline else None
    masked_list = [""] * len(base_ids)
    for text, i in base_ids.items():
        masked_list[i] = text

    # Step 1: only distinct masked lines reach the miner (failed run's first, then baseline's).
    templates = parse.mine(masked_list)
    mid_to_tid = np.array([templates.ids[t] for t in masked_list], dtype=np.int64)
    lines = corpus.lines.with_columns(pl.Series("tid", mid_to_tid[corpus.lines["mid"].to_numpy()]))
    verdict = LogVerdict(
        files=len(corpus.files),
        lines_read=lines.height,
        distinct_lines=n_failed_masked,
        templates=len(set(mid_to_tid[:n_failed_masked].tolist())),
    )
    baseline_events: set[int] = set()
    if base_corpus is not None:
        base_mids = base_corpus.lines["mid"].unique().to_numpy()
        baseline_events = {int(t) for t in mid_to_tid[base_mids]}
        verdict.baseline_events = len(baseline_events)

    # Step 2: cross-job filtering — events seen in a successful run are not failure-indicating.
    counts = lines.group_by("node", "tid").len()
    # a labelled file's unlabelled lines (srun's own messages) are not a node to compare
    nodes = sorted(n for n in lines["node"].unique().to_list() if not n.endswith(UNLABELLED))
    if not nodes:
        raise NoDataError("no line could be attributed to a node (pass --nodes/--tasks-per-node)")
    events = sorted(set(counts["tid"].to_list()) - baseline_events)
    ev_index = {e: j for j, e in enumerate(events)}
    node_index = {n: i for i, n in enumerate(nodes)}
    mat = np.zeros((len(nodes), len(events)))
    for n, t, c in counts.iter_rows():
        j = ev_index.get(t)
        if j is not None and n in node_index:
            mat[node_index[n], j] = c

    # Step 3: spatial comparison.
    sp = spatial.compare_nodes(nodes, mat)
    weights = np.array(
        [2.0 if _ERROR_WORDS.search(templates.text.get(e, "")) else 1.0 for e in events]
    )
    med = np.median(mat, axis=0) if len(nodes) > 1 else np.zeros(len(events))
    first = corpus.first.with_columns(pl.Series("tid", mid_to_tid[corpus.first["mid"].to_numpy()]))

    culprits = list(sp.outliers)
    if len(nodes) < 3 and not culprits:
        # one or two nodes: counts cannot say which is the odd one; a node logging an error
        # event the other(s) did not is the culprit
        alone = [j for j in range(len(events)) if weights[j] > 1 and (mat[:, j] == 0).any()]
        culprits = [i for i in range(len(nodes)) if any(mat[i, j] > 0 for j in alone)]
        if len(nodes) == 1:
            culprits = [0] if any(weights[j] > 1 for j in range(len(events))) else []
        if len(culprits) == len(nodes) > 1:
            culprits = []
    candidate_lines: list[dict] = []
    if culprits:
        # order the culprits by who showed a failure-indicating event first (root cause before
        # its consequences), when every culprit's events carry time; else by anomaly score
        per_node = {
            i: _node_events(i, sp, mat, med, weights, _first_positions(lines, nodes[i]), events)
            for i in culprits
        }
        # an outlier by absence only (it logged no event more often than the median node: a
        # log cut short, a rank whose lines were not captured) has no failure-indicating event
        # to show, so it is not a failure-indicating node; silence is the hang check's to judge
        culprits = [i for i in culprits if per_node[i]]
        # root cause before consequences: order by the first *error-worded* indicating event
        # (a launcher's ChildFailedError comes after the culprit's own error); with a baseline
        # every indicating event counts (rank 0's set-up lines were filtered out by it)
        t_err = {
            i: _first_time(lines, nodes[i], [events[j] for j, _ in per_node[i] if weights[j] > 1])
            for i in culprits
        }
        t_any = {
            i: _first_time(lines, nodes[i], [events[j] for j, _ in per_node[i]]) for i in culprits
        }
        if all(t is not None for t in t_err.values()):
            culprits.sort(key=lambda i: (t_err[i], -sp.scores[i]))
        elif baseline and all(t is not None for t in t_any.values()):
            culprits.sort(key=lambda i: (t_any[i], -sp.scores[i]))
        # ...and when, on each outlier's own log, an error event that *every* node shows comes
        # before its own events, the outliers are consequences (the launcher's summary) and the
        # failure is everywhere.  Only with a baseline: without one, a harmless ERROR printed by
        # every node at start-up would always come first.
        if baseline and _shared_comes_first(lines, culprits, per_node, nodes, mat, events, weights):
            culprits = []
    if culprits:
        for i in culprits:
            verdict.nodes.append({"node": nodes[i], "score": round(float(sp.scores[i]), 4)})
        for rank, i in enumerate(culprits):
            for j, w in per_node[i]:
                candidate_lines.append(
                    {
                        "node": nodes[i],
                        "tid": events[j],
                        "order": rank,
                        "score": float(sp.scores[i]) * w,
                    }
                )
    present = (mat > 0).mean(axis=0) if len(nodes) else np.zeros(len(events))
    shared = [j for j in range(len(events)) if present[j] >= 0.5]
    # "all nodes" needs an error to point at: a run whose logs hold no error-worded event shared
    # by the nodes (a successful run, a job killed from outside) gets no verdict rather than a
    # blame on every node
    if not culprits and any(weights[j] > 1 for j in shared) and (baseline or not _hang_only(lines)):
        verdict.all_nodes = True
        verdict.same_error_everywhere = spatial.error_on_every_node(mat, weights > 1)
        verdict.nodes.append({"node": ALL_NODES, "score": 1.0})
        # lines from one representative node: the events (not in the baseline) most nodes share
        rep_i = int(np.argmax((mat[:, shared] > 0).sum(axis=1)))
        for j in shared:
            # a shared event the representative did not log is shown from a node that did
            # (it used to be dropped: "failure detected" on one half of the ranks, the watchdog
            # timeout on the other, and only one of the two was shown)
            i = rep_i if mat[rep_i, j] > 0 else int(np.flatnonzero(mat[:, j] > 0)[0])
            candidate_lines.append({"node": nodes[i], "tid": events[j], "score": float(weights[j])})

    # Step 4a: a hang — no error anywhere (no culprit showed an error-worded event of its own);
    # one node's iterations stop first.
    no_error = not any(weights[j] > 1 for c in candidate_lines for j in [ev_index[c["tid"]]])
    if not verdict.nodes or verdict.all_nodes or no_error:
        hung = _hangs(lines)
        if hung:
            verdict.all_nodes = verdict.same_error_everywhere = False
            verdict.hang = True
            verdict.nodes = [{"node": n, "score": 1.0} for n in hung]
            candidate_lines = []

    verdict.lines = _pick_lines(candidate_lines, first, corpus.files)
    if verdict.hang:
        verdict.lines = _last_lines(lines, [n["node"] for n in verdict.nodes], corpus.files)
    verdict.events = _events_out(candidate_lines, templates, counts)
    _temporal(verdict, lines, corpus, first)
    return verdict


def _node_events(
    i: int,
    sp: spatial.SpatialResult,
    mat: np.ndarray,
    med: np.ndarray,
    weights: np.ndarray,
    first_pos: dict[int, tuple[int, int]],
    events: list[int],
) -> list[tuple[int, float]]:
    """The events that isolate node ``i`` (it logged them more often than the others), in the
    order an admin should read them.

    Selection is the forest's: events split on along node ``i``'s isolation paths, or logged by
    it alone.  Events that isolate a node equally well are ordered by what they say (error-worded
    and logged by this node only first) and then by when they first appeared (the root error
    precedes its traceback).
    """
    imp = sp.importance[i] if sp.importance.size else np.zeros(mat.shape[1])
    extra = mat[i] > med
    unique = extra & ((mat > 0).sum(axis=0) == 1)
    chosen = [j for j in range(mat.shape[1]) if extra[j] and (imp[j] > 0 or unique[j])]
    if not chosen:
        return []
    rank = {j: weights[j] * (1.0 + unique[j]) for j in chosen}
    top = max(rank.values())
    far = (1 << 31, 1 << 31)
    chosen.sort(key=lambda j: (-rank[j], first_pos.get(events[j], far)))
    return [(j, float(rank[j] / top)) for j in chosen]


def _first_positions(lines: pl.DataFrame, node: str) -> dict[int, tuple[int, int]]:
    pos = (
        lines.filter(pl.col("node") == node)
        .group_by("tid")
        .agg(pl.col("file").min(), pl.col("line").min())
    )
    return {t: (f, ln) for t, f, ln in pos.iter_rows()}


def _first_time(lines: pl.DataFrame, node: str, tids: list[int]) -> float | None:
    sub = lines.filter((pl.col("node") == node) & pl.col("tid").is_in(tids))
    t = sub["ts"].min() if sub.height else None
    return None if t is None else float(t)


def _shared_comes_first(
    lines: pl.DataFrame,
    culprits: list[int],
    per_node: dict,
    nodes: list[str],
    mat: np.ndarray,
    events: list[int],
    weights: np.ndarray,
) -> bool:
    """True when an error-worded event present on every node precedes each culprit's own."""
    if mat.shape[0] < 2:
        return False
    shared = [events[j] for j in range(len(events)) if (mat[:, j] > 0).all() and weights[j] > 1]
    if not shared:
        return False
    for i in culprits:
        # its own events: those most nodes never logged (a count above the median on an event
        # every node logs, such as one more traceback frame, says nothing about order)
        own = [events[j] for j, _ in per_node[i] if (mat[:, j] > 0).mean() <= 0.5]
        sub = lines.filter(pl.col("node") == nodes[i]).select("file", "line", "tid")
        pos_shared = sub.filter(pl.col("tid").is_in(shared)).sort("file", "line").head(1)
        pos_own = sub.filter(pl.col("tid").is_in(own)).sort("file", "line").head(1)
        if pos_shared.height == 0:
            return False
        if pos_own.height and pos_own.row(0) <= pos_shared.row(0):
            return False
    return True


def _hang_only(lines: pl.DataFrame) -> bool:
    return bool(_hangs(lines))


def _hangs(lines: pl.DataFrame) -> list[str]:
    it = lines.filter(pl.col("iteration").is_not_null())
    if it.height == 0:
        return []
    per = it.group_by("node").agg(
        pl.col("iteration").max().alias("last"), pl.col("ts").max().alias("t")
    )
    if per.height < 2:
        return []
    last = dict(zip(per["node"].to_list(), per["last"].to_list(), strict=True))
    ts = {
        n: t
        for n, t in zip(per["node"].to_list(), per["t"].to_list(), strict=True)
        if t is not None
    }
    interval = None
    one = it.filter(pl.col("node") == per["node"][0]).sort("line")["ts"].drop_nulls()
    if one.len() > 2:
        interval = float(np.median(np.diff(one.to_numpy()))) or None
    return temporal.hung_nodes(last, ts, interval)


def _last_lines(lines: pl.DataFrame, hung: list[str], files: list[str]) -> list[dict]:
    """A hung node's last progress lines: where it stopped (last first)."""
    out: list[dict] = []
    for node in hung:
        sub = lines.filter(pl.col("node") == node).sort("file", "line").tail(TOP_LINES)
        for f, line in zip(sub["file"].to_list()[::-1], sub["line"].to_list()[::-1], strict=True):
            text = _texts(files[f], [line], [])
            out.append(
                {
                    "node": node,
                    "line": int(line),
                    "text": text[0] if text else "",
                    "score": 1.0,
                    "file": files[f],
                }
            )
    return out[:TOP_LINES]


def _pick_lines(candidates: list[dict], first: pl.DataFrame, files: list[str]) -> list[dict]:
    """One line per (node, event): its first occurrence on that node; best first, top five."""
    out: list[dict] = []
    seen: set[tuple[str, int]] = set()
    cands = sorted(candidates, key=lambda c: (c.get("order", 0), -c["score"]))
    if not cands:
        return out
    keys = pl.DataFrame({"node": [c["node"] for c in cands], "tid": [c["tid"] for c in cands]})
    hits = first.join(keys, on=["node", "tid"]).sort("line")
    by_key: dict[tuple[str, int], tuple[int, int, str]] = {}
    for node, f, line, text, tid in hits.select("node", "file", "line", "text", "tid").iter_rows():
        by_key.setdefault((node, tid), (f, line, text))
    for c in cands:
        key = (c["node"], c["tid"])
        if key in seen or key not in by_key:
            continue
        seen.add(key)
        f, line, text = by_key[key]
        out.append(
            {
                "node": c["node"],
                "line": int(line),
                "text": text,
                "score": round(c["score"], 4),
                "file": files[f],
            }
        )
        if len(out) >= TOP_LINES:
            break
    return out


def _events_out(
    candidates: list[dict], templates: parse.Templates, counts: pl.DataFrame
) -> list[dict]:
    out: dict[int, dict] = {}
    for c in sorted(candidates, key=lambda c: -c["score"]):
        e = out.setdefault(
            c["tid"],
            {
                "event": int(c["tid"]),
                "template": templates.text.get(c["tid"], ""),
                "nodes": [],
                "score": round(c["score"], 4),
            },
        )
        if c["node"] not in e["nodes"]:
            e["nodes"].append(c["node"])
    return list(out.values())[:20]


def _temporal(
    verdict: LogVerdict, lines: pl.DataFrame, corpus: _Corpus, first: pl.DataFrame
) -> None:
    """Stage of the first indicating line; the failure-indicating iteration."""
    if not verdict.lines:
        return
    # the earliest of the indicating lines on the top node
    top = verdict.nodes[0]["node"] if not verdict.all_nodes else verdict.lines[0]["node"]
    mine = [ln for ln in verdict.lines if ln["node"] == top] or verdict.lines
    lead = min(mine, key=lambda ln: (ln["file"], ln["line"]))
    f = corpus.files.index(lead["file"])
    node_lines = lines.filter((pl.col("node") == lead["node"]) & (pl.col("file") == f))
    before = node_lines.filter(pl.col("line") < lead["line"])
    its = before["iteration"].drop_nulls()
    seen_iteration = its.len() > 0
    texts_before = _texts(
        lead["file"], before["line"].tail(50).to_list(), before["line"].head(200).to_list()
    )
    if verdict.hang:
        # where the hung node stopped: its last iteration
        hung_its = lines.filter(pl.col("node") == lead["node"])["iteration"].drop_nulls()
        verdict.stage = "iteration" if hung_its.len() else "launch"
        verdict.iteration = int(hung_its.max()) if hung_its.len() else None
        return
    else:
        verdict.stage = temporal.stage_of(
            texts_before, lead["text"], seen_iteration, [ln["text"] for ln in verdict.lines]
        )
    if seen_iteration:
        verdict.iteration = int(its[-1])
        # DTW over windows of iterations: an earlier anomalous iteration (slow-down, errors
        # building up) is the failure-indicating one when it precedes the crash
        per_it = before.filter(pl.col("iteration").is_not_null()).sort("line")
        # one value per iteration: its duration (or its line count when lines carry no time)
        clock = per_it["ts"] if per_it["ts"].null_count() == 0 else per_it["line"]
        values = np.diff(clock.to_numpy().astype(float))
        hit = temporal.dtw_outlier_iteration(per_it["iteration"].to_numpy()[1:], values)
        if hit is not None and hit <= verdict.iteration:
            verdict.iteration = hit
    elif verdict.stage in ("iteration", "checkpoint"):
        # this node logs no iteration numbers: take the job's last one before the failure time
        t = _first_time_line(lines, lead["node"], f, lead["line"])
        if t is not None:
            prior = lines.filter(pl.col("iteration").is_not_null() & (pl.col("ts") <= t))
            if prior.height:
                verdict.iteration = int(prior["iteration"].max())


def _first_time_line(lines: pl.DataFrame, node: str, f: int, line: int) -> float | None:
    row = lines.filter((pl.col("node") == node) & (pl.col("file") == f) & (pl.col("line") == line))
    return None if row.height == 0 or row["ts"][0] is None else float(row["ts"][0])


def _texts(path: str, tail: list[int], head: list[int]) -> list[str]:
    """The text of a few lines of a file (re-read: only the handful the stage rules need)."""
    want = sorted(set(tail) | set(head))
    if not want:
        return []
    out: dict[int, str] = {}
    wanted = set(want)
    with open(path, encoding="utf-8", errors="replace") as fh:
        for n, text in enumerate(fh, start=1):
            if n in wanted:
                out[n] = text.rstrip("\n")
            if n >= want[-1]:
                break
    return [out[n] for n in want if n in out]
