"""Step 3 of L4: spatial pattern comparison across nodes.

Under data parallelism every node runs the same code on the same schedule, so healthy nodes log
nearly the same events the same number of times.  One event-count vector per node; an Isolation
Forest over the nodes ranks them (a node isolated in few splits is anomalous), and the features
(events) used on the short paths that isolate a node are its failure-indicating events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: a node is a culprit when its anomaly score exceeds the median by this much in robust units
#: (3 x 1.4826 MAD, the usual 3-sigma for a normal population)...
OUTLIER_SIGMAS = 3.0
#: ...and by at least this much in Isolation Forest score units (identical nodes have MAD 0).
MIN_GAP = 0.05


@dataclass
class SpatialResult:
    nodes: list[str]
    scores: np.ndarray  # anomaly score per node, higher = more anomalous (0..1)
    outliers: list[int]  # indices into nodes, most anomalous first
    importance: np.ndarray  # nodes x events: how much each event isolated each node


def isolation_forest(x: np.ndarray, seed: int = 0):
    """An Isolation Forest over the node vectors and its anomaly scores.

    Score: ``-score_samples`` (Liu et al. 2008: 2^(-E[h(x)]/c(n)), ~0.5 normal, → 1 anomalous).
    Every tree sees every node (``max_samples`` = n, up to 8,192): with sklearn's default of 256,
    one culprit among 4,096 nodes is absent from most trees' samples and is never isolated.
    """
    from aegis_slurm.logs.parse import need

    IsolationForest = need("sklearn.ensemble").IsolationForest

    n = x.shape[0]
    forest = IsolationForest(
        n_estimators=200, max_samples=min(n, 8192), random_state=seed, contamination="auto"
    ).fit(x)
    return forest, -forest.score_samples(x)


def isolation_importance(forest, x: np.ndarray, rows: list[int]) -> np.ndarray:
    """How much each feature (event) took part in isolating each of ``rows``.

    For each tree, the features split on along a row's path, each weighted by 1/depth (splits
    near the root isolate more), summed over trees (L4: "the features that take part in
    isolating the node").  Only the rows asked for: the culprits, not every node.
    """
    out = np.zeros((len(rows), x.shape[1]))
    if not rows:
        return out
    for tree, feats in zip(forest.estimators_, forest.estimators_features_, strict=True):
        t = tree.tree_
        paths = tree.decision_path(x[rows][:, feats]).tocsr()
        for r in range(len(rows)):
            on_path = paths.indices[paths.indptr[r] : paths.indptr[r + 1]]
            split = [k for k in on_path if t.feature[k] >= 0]
            for depth, k in enumerate(split, start=1):
                out[r, feats[t.feature[k]]] += 1.0 / depth
    return out


def compare_nodes(nodes: list[str], counts: np.ndarray) -> SpatialResult:
    """Rank nodes by how their event counts differ from the others'."""
    n = len(nodes)
    x = np.log1p(counts.astype(float))
    forest = None
    if n < 3 or x.shape[1] == 0:
        # too few nodes for a forest: a node's distance to the others' median vector
        med = np.median(x, axis=0) if n else x
        dev = np.abs(x - med) if x.shape[1] else np.zeros((n, 0))
        dist = dev.sum(axis=1)
        scores = dist / (1.0 + dist)
    else:
        forest, scores = isolation_forest(x)
    med = float(np.median(scores)) if n else 0.0
    mad = float(np.median(np.abs(scores - med))) * 1.4826 if n else 0.0
    gap = max(OUTLIER_SIGMAS * mad, MIN_GAP)
    order = np.argsort(-scores, kind="stable")
    outliers = [int(i) for i in order if scores[i] - med > gap]
    # a majority is never "the outlier": then the failure is everywhere
    if len(outliers) > n // 2:
        outliers = []
    importance = np.zeros((n, x.shape[1]))
    if forest is not None:
        importance[outliers] = isolation_importance(forest, x, outliers)
    elif x.shape[1]:
        importance = dev
    return SpatialResult(nodes=nodes, scores=scores, outliers=outliers, importance=importance)


def error_on_every_node(counts: np.ndarray, error_worded: np.ndarray) -> bool:
    """True when some error-worded event was logged by every node: an "all nodes" verdict is
    then the same failure everywhere.  Otherwise no node stands out but the nodes' errors
    differ (with two nodes an event of one is already "shared by half"), and the text must
    not claim they are the same."""
    if counts.size == 0:
        return False
    return bool(((counts > 0).all(axis=0) & error_worded).any())
