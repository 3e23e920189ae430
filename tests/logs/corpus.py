"""Place real failure text (tests/fixtures/logs/snippets.json) into realistic multi-node logs.

Every case is a Megatron-style data-parallel job: torchrun agent lines, NCCL init lines and a
harmless ``ERROR: ld.so`` line on every node, rank 0's extra set-up lines, one iteration line per
iteration on every node, a checkpoint every 20 iterations.  Then one of:

- a crash on one node (``failures``): the culprit prints the real failure text; every other node
  prints the real NCCL watchdog timeout ten minutes later; node 0's torchrun prints the long
  ``ChildFailedError`` summary (the hard case: the node with the longest traceback is not the
  culprit);
- a failure on every node (``everywhere``, a config error at init): the answer is "all nodes";
- a hang: no error anywhere; the culprit's iterations stop one iteration before the others'.

The labels are the culprit and the (file, line) of the snippet's ``key`` lines.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

SNIPPETS = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "logs" / "snippets.json").read_text()
)
KINDS = (*SNIPPETS["failures"], "config_error", "hang")
#: failures added after the rules were final (tests/fixtures/logs/README.md): a held-out check
HELDOUT = tuple(k for k in SNIPPETS["heldout"] if not k.startswith("_"))
GPUS = 8


@dataclass
class Case:
    kind: str
    path: Path
    culprit: str  # node name, or "all nodes"
    key: set[tuple[str, int]] = field(default_factory=set)  # (file name, 1-based line)
    stage: str | None = None
    iteration: int | None = None
    layout: str = "dir"
    nodes: list[str] = field(default_factory=list)


class _Writer:
    """Per-node timestamped lines, written as one file per node or one ``srun --label`` file."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.lines: dict[str, list[tuple[float, int, str, bool]]] = {n: [] for n in nodes}
        self.seq = 0

    def add(self, node: str, t: float, text: str, key: bool = False) -> None:
        self.seq += 1
        self.lines[node].append((t, self.seq, text, key))

    def write(self, out: Path, layout: str) -> set[tuple[str, int]]:
        out.mkdir(parents=True, exist_ok=True)
        keys: set[tuple[str, int]] = set()
        if layout == "dir":
            for n in self.nodes:
                rows = sorted(self.lines[n])
                (out / f"{n}.log").write_text("".join(r[2] + "\n" for r in rows))
                keys |= {(f"{n}.log", i) for i, r in enumerate(rows, 1) if r[3]}
        else:  # one file, srun --label (one torchrun task per node: task number = node index)
            rows = sorted((*r, k) for k, n in enumerate(self.nodes) for r in self.lines[n])
            text = "".join(f"{r[4]}: {r[2]}\n" for r in rows)
            (out / "slurm-4242.out").write_text(text)
            keys |= {("slurm-4242.out", i) for i, r in enumerate(rows, 1) if r[3]}
        return keys


def _fill(text: str, rng: random.Random, **kw: object) -> str:
    defaults = {
        "pid": rng.randint(1000, 99999),
        "tid": rng.randint(1000, 99999),
        "ip": f"10.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}",
    }
    defaults.update(kw)
    return text.format(**defaults)


def _glog(t: float) -> str:
    d = datetime(2024, 5, 1) + timedelta(seconds=t)
    # as PyTorch's c10 prints it: month * 100 + day, unpadded (E501 for May 1)
    return f"E{d.month * 100 + d.day} {d:%H:%M:%S}.{int((t % 1) * 1e9):09d}"


def _iso(t: float) -> str:
    return f"{datetime(2024, 5, 1) + timedelta(seconds=t):%Y-%m-%d %H:%M:%S}"


def make_case(
    out: Path,
    kind: str,
    seed: int,
    n_nodes: int = 8,
    iters: int = 60,
    layout: str = "dir",
    healthy: bool = False,
) -> Case:
    """Write one job's logs under ``out``; ``healthy`` writes a successful run (a baseline)."""
    rng = random.Random(seed)
    prefix = rng.choice(["gpu", "dgx", "hgx", "node", "a100-"])
    first = rng.randint(100, 899)  # consecutive numbers: distinct names (a real node list)
    nodes = [f"{prefix}{first + k:03d}" for k in range(n_nodes)]
    master = nodes[0]
    w = _Writer(nodes)
    bg = SNIPPETS["background"]
    fx = {**SNIPPETS["failures"], **SNIPPETS["heldout"]}
    t0 = 0.0
    for k, n in enumerate(nodes):
        t = t0 + rng.random()
        for line in bg["torchrun"]["lines"]:
            w.add(n, t, line)
        w.add(n, t + 0.1, bg["harmless_error"]["lines"][0])
        if k:
            w.add(n, t + 0.2, _fill(bg["harmless_socket"]["lines"][0], rng, master=master))
        if k == 0:
            for line in bg["init"]["lines"] + bg["rank0_args"]["lines"]:
                w.add(n, t + 0.3, line)
        for lr in range(GPUS):
            for line in bg["nccl_init"]["lines"]:
                w.add(n, t + 1 + lr * 0.01, _fill(line, rng, node=n, lrank=lr))

    culprit = nodes[rng.randrange(1, n_nodes)]  # never node 0: it prints the launcher summary
    fail_it = rng.randint(iters // 3, iters - 5)
    if kind == "no_space":  # the checkpoint save fails
        fail_it = (fail_it // 20 + 1) * 20 if (fail_it // 20 + 1) * 20 < iters else 20
    elif fail_it % 20 == 0:  # not right after a checkpoint: which stage that is, is ambiguous
        fail_it += 1
    case = Case(kind=kind, path=out, culprit=culprit, layout=layout, nodes=nodes)
    if healthy:
        fail_it = iters + 1
    elif kind == "config_error":
        fail_it = 0
        case.culprit, case.stage = "all nodes", "init"

    t_iter = 5.0
    last_t = {}
    for it in range(1, iters + 1):
        if it > fail_it + (1 if kind == "hang" else 0):
            break
        for n in nodes:
            if kind == "hang" and not healthy and n == culprit and it > fail_it:
                continue
            t = 10 + it * t_iter + rng.random() * 0.2
            w.add(
                n,
                t,
                _fill(
                    bg["iteration"]["lines"][0],
                    rng,
                    iso=_iso(t),
                    it=it,
                    samples=it * 1024,
                    ms=t_iter * 1000 * rng.uniform(0.97, 1.03),
                    lr=1e-5 * it / iters,
                    loss=2.5 - it / (10 * iters) + rng.uniform(-0.01, 0.01),
                    gn=rng.uniform(0.2, 0.3),
                ),
            )
            if it % 20 == 0:
                d = datetime(2024, 5, 1) + timedelta(seconds=t + 0.5)
                w.add(
                    n,
                    t + 0.5,
                    _fill(
                        bg["checkpoint"]["lines"][0],
                        rng,
                        mmdd=f"{d:%m/%d}",
                        hms=f"{d:%H:%M:%S}",
                        it=it,
                    ),
                )
            last_t[n] = t
    if healthy:
        case.culprit = ""
        case.key = w.write(out, layout)
        return case

    t_fail = 10 + fail_it * t_iter + 2.0
    if kind == "config_error":
        snip = SNIPPETS["everywhere"]["config_error"]
        for n in nodes:
            for lr in range(GPUS):
                rank = nodes.index(n) * GPUS + lr
                for i, line in enumerate(snip["lines"]):
                    w.add(
                        n, 3 + lr * 0.01, _fill(line, rng, rank=rank, node=n), key=i in snip["key"]
                    )
        case.iteration = None
    elif kind == "hang":
        case.stage, case.iteration = "iteration", fail_it
        # the culprit's last iteration line is what to look at
        for n_, rows in w.lines.items():
            if n_ == culprit:
                t, s, text, _ = max(rows)
                rows.remove((t, s, text, False))
                rows.append((t, s, text, True))
    else:
        snip = fx[kind]
        case.stage = snip["stage"]
        case.iteration = fail_it
        lr = rng.randrange(GPUS)
        rank = nodes.index(culprit) * GPUS + lr
        for i, line in enumerate(snip["lines"]):
            w.add(
                culprit,
                t_fail + i * 0.001,
                _fill(line, rng, rank=rank, lrank=lr, node=culprit, glog=_glog(t_fail)),
                key=i in snip["key"],
            )
        cons = SNIPPETS["consequences"]
        for n in nodes:
            if n == culprit:
                continue
            for lr2 in range(GPUS):
                r = nodes.index(n) * GPUS + lr2
                for line in cons["peer_timeout"]["lines"] + cons["peer_abort"]["lines"]:
                    w.add(
                        n,
                        t_fail + 600 + lr2 * 0.01,
                        _fill(line, rng, rank=r, glog=_glog(t_fail + 600)),
                    )
    if kind != "hang":
        ts = (datetime(2024, 5, 1) + timedelta(seconds=t_fail + 605)).strftime("%Y-%m-%d_%H:%M:%S")
        for line in SNIPPETS["consequences"]["launcher_childfailed"]["lines"]:
            w.add(master, t_fail + 605, _fill(line, rng, node=master, torchrun_ts=ts))
    case.key = w.write(out, layout)
    return case


def healthy_baseline(out: Path, seed: int) -> Path:
    """A successful, smaller run of the same job (L4's cross-job baseline)."""
    make_case(out, "hang", seed + 10_000, n_nodes=4, iters=45, healthy=True)
    return out
