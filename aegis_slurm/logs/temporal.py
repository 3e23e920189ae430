"""Step 4 of L4: temporal pattern — the failure-indicating stage and iteration, and hangs."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

STAGES = ("launch", "init", "iteration", "checkpoint", "teardown")
#: lines that show the job got past launching (process group, NCCL, model or data set-up)
_INIT = re.compile(
    r"(?i)NCCL INFO|initializ|building|loading|process group|init_process_group|rendezvous"
)
_CHECKPOINT = re.compile(r"(?i)checkpoint|saving|save_|\.pt\b|safetensors|torch\.save")
_TEARDOWN = re.compile(
    r"(?i)training (?:is )?(?:done|finished|complete)|after training|destroy_process_group|"
    r"exiting|shutting down"
)
#: PyTorch's NCCL watchdog names the collective that timed out or failed:
#: ``WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, ...)``
_NCCL_WORK = re.compile(r"WorkNCCL\(SeqNum=\d+, OpType=(\w+)")
#: collectives of a training step: gradient all-reduce (DDP), reduce-scatter (FSDP/ZeRO),
#: all-to-all (expert parallelism); a job at set-up issues none of them on its data
_STEP_OPS = frozenset(
    {"ALLREDUCE", "REDUCE_SCATTER", "_REDUCE_SCATTER_BASE", "ALLTOALL", "ALLTOALL_BASE"}
)
#: collectives of set-up: DDP's parameter broadcast from rank 0 and barriers (ALLGATHER is
#: both: FSDP gathers parameters every step, so it says nothing alone)
_SETUP_OPS = frozenset({"BROADCAST", "BARRIER"})
#: window of iterations compared by DTW (L4 uses 10)
WINDOW = 10
SIGMAS = 3.0
NOISE_RATIO = 5.0


def nccl_stage(texts: Sequence[str]) -> str | None:
    """The stage the failed NCCL collective named in ``texts`` belongs to, or None: a step's
    collective (all-reduce, reduce-scatter, all-to-all) is "iteration", a broadcast or
    barrier "init" (PyTorch semantics, see ``_STEP_OPS``)."""
    ops = {m.group(1) for t in texts for m in _NCCL_WORK.finditer(t)}
    if ops & _STEP_OPS:
        return "iteration"
    if ops & _SETUP_OPS:
        return "init"
    return None


def stage_of(
    texts_before: list[str],
    indicating_text: str,
    seen_iteration: bool,
    failure_texts: Sequence[str] = (),
) -> str:
    """Stage of the first failure-indicating line, from what the node logged before it.

    ``texts_before`` are the node's preceding lines (most recent last, a bounded tail is enough);
    ``failure_texts`` the job's failure-indicating lines (a NCCL watchdog line names the
    collective that failed, which tells a step from set-up when no iteration was logged).
    """
    # the node's last activity before the failure, or the failure's own text, is a save
    recent = [*texts_before[-1:], indicating_text]
    if any(_CHECKPOINT.search(t) for t in recent) and seen_iteration:
        return "checkpoint"
    if any(_TEARDOWN.search(t) for t in texts_before[-50:]):
        return "teardown"
    if seen_iteration:
        return "iteration"
    by_collective = nccl_stage([indicating_text, *failure_texts])
    if by_collective is not None:
        return by_collective
    if any(_INIT.search(t) for t in texts_before):
        return "init"
    return "launch"


def dtw_outlier_iteration(iterations: np.ndarray, values: np.ndarray) -> int | None:
    """The failure-indicating iteration: windows of ``WINDOW`` iterations compared by DTW.

    ``values`` is one number per iteration (its duration, or its line count).  Each window's DTW
    distance to the previous window is computed (dtaidistance); a window more than 3 (robust)
    sigma above the median distance is anomalous and its most deviating iteration is returned.
    """
    from aegis_slurm.logs.parse import need

    dtw = need("dtaidistance.dtw")

    if len(values) < 3 * WINDOW:
        return None
    v = values.astype(np.double)
    starts = list(range(0, len(v) - WINDOW + 1, WINDOW // 2))
    dists = np.array(
        [
            dtw.distance_fast(v[a - WINDOW // 2 : a - WINDOW // 2 + WINDOW], v[a : a + WINDOW])
            for a in starts[1:]
        ]
    )
    if len(dists) < 3:
        return None
    # 3 sigma, estimated robustly (median, 1.4826 MAD): one slow iteration lands in two
    # overlapping windows, and two large distances inflate a plain standard deviation enough to
    # hide both.  A hit must also be NOISE_RATIO times the typical distance: windows of pure
    # timing jitter stay within about 2x of each other (measured on Gaussian noise).
    med = float(np.median(dists))
    rsd = 1.4826 * float(np.median(np.abs(dists - med)))
    hits = np.nonzero((dists > med + SIGMAS * rsd) & (dists > NOISE_RATIO * med))[0]
    if len(hits) == 0:
        return None
    a = starts[int(hits[0]) + 1]
    window = v[a : a + WINDOW]
    k = int(np.argmax(np.abs(window - np.median(v))))
    return int(iterations[a + k])


def hung_nodes(
    last_iteration: dict[str, int], last_ts: dict[str, float], interval: float | None
) -> list[str]:
    """Nodes whose iterations stopped first (a hang: no error, one node falls behind).

    A node is hung when its last iteration is behind every other node's (a minority only), or,
    with equal iterations, its last progress line is more than 3 iteration intervals older than
    the others' median.
    """
    if len(last_iteration) < 2:
        return []
    its = np.array(list(last_iteration.values()))
    top = its.max()
    behind = [n for n, i in last_iteration.items() if i < top]
    if behind and len(behind) <= len(its) // 2:
        return sorted(behind, key=lambda n: last_iteration[n])
    if interval and len(last_ts) >= 2:
        med = float(np.median(list(last_ts.values())))
        late = [n for n, t in last_ts.items() if med - t > SIGMAS * interval]
        if late and len(late) <= len(last_ts) // 2:
            return sorted(late, key=lambda n: last_ts[n])
    return []
