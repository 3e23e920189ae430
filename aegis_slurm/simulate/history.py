"""Synthetic cluster histories with planted ground truth (vectorized numpy + polars).

The simulator is not a scheduler: jobs are placed on random contiguous node blocks and may
overlap (at the default 2 jobs per node-day the cluster is ~90 % occupied on average).  What
it does get right is what the analytics rely on:

* job sizes and end states mixed like RSC-1 (HPCA'25 §IV Fig. 3 / Fig. 6): ~45 % 1-GPU jobs,
  > 90 % at most one node, most GPU time in ≥ 256-GPU jobs; ~60 % COMPLETED, ~22 % FAILED,
  ~10 % PREEMPTED, ~0.1 % NODE_FAIL of run records;
* hardware failures Poisson in node-runtime at rate ``rf`` per node-day (plus lemon nodes at
  ``lemon_factor``·rf); a failure ends the run as NODE_FAIL or as FAILED with evidence (an aegis
  AdminComment tag, a critical node signal or a DOWN/DRAIN event);
* real Slurm requeue semantics: every run is a record with the same JobIDRaw and a new Submit
  (Eligible = Submit + 120 s, the default ``requeue_delay``); a node-failure requeue's earlier run
  reads NODE_FAIL, a preempt-requeue's PREEMPTED, a RequeueExit crash loop's REQUEUED (exit 42);
  a FAILED hardware run of a big job is resubmitted by its user as a new job with the same name;
* every restart of a failed big job (and every crash-loop restart) preempts a few low-priority
  jobs on its new nodes: their PREEMPTED records end just before the restart starts (§3.2);
* noise the attribution must ignore: Prolog/Epilog-error and maintenance drains at user-failure
  ends, and non-critical signals.

Everything is deterministic for a given :class:`SimConfig` (one ``numpy`` Generator).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from aegis_slurm.accounting.schema import RUN_SCHEMA
from aegis_slurm.analytics.common import seq_within

#: GPU count -> probability (RSC-1-like, HPCA'25 Fig. 6)
SIZE_MIX: dict[int, float] = {
    1: 0.45,
    2: 0.15,
    4: 0.12,
    8: 0.20,
    16: 0.03,
    32: 0.02,
    64: 0.012,
    128: 0.008,
    256: 0.004,
    512: 0.0022,
    1024: 0.001,
    2048: 0.0005,
    4096: 0.0003,
}
#: natural (non-hardware) outcome of a logical job -> probability (HPCA'25 Fig. 3)
OUTCOME_MIX: dict[str, float] = {
    "COMPLETED": 0.63,
    "FAILED": 0.28,
    "CANCELLED": 0.03,
    "PREEMPTED": 0.02,
    "REQUEUED": 0.017,
    "TIMEOUT": 0.006,
    "OUT_OF_MEMORY": 0.002,
}
SIGNALS = ("gpu_xid79", "ib_link_down", "fs_mount", "gpu_ecc_dbe", "pcie_aer", "nvlink")
SIGNAL_P = (0.25, 0.25, 0.15, 0.15, 0.1, 0.1)
EXPORT_FIELDS = [
    "JobIDRaw",
    "JobID",
    "Cluster",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ElapsedRaw",
    "TimelimitRaw",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "Reason",
    "Flags",
    "AdminComment",
    "Comment",
    "WorkDir",
    "JobName",
]
REQUEUE_DELAY_S = 120
TIMELIMIT_MIN = 7 * 1440


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 512
    days: float = 30.0
    rf: float = 0.0065  # hardware failures per node-day of runtime
    seed: int = 0
    gpus_per_node: int = 8
    jobs_per_node_day: float = 2.0  # ≈ 0.9 node occupancy with SIZE_MIX (no scheduler)
    nodefail_share: float = 0.4  # hardware failures that end NODE_FAIL (rest: FAILED + evidence)
    requeue_min_gpus: int = 64  # jobs this big are continued after a hardware failure
    crash_loops: int = 3
    lemons: int = 2
    lemon_factor: float = 100.0  # lemon hazard = lemon_factor·rf per node-day of runtime
    # Mean preemption victims per node of a restart.  After a hardware failure: 0.2 keeps
    # PREEMPTED near the paper's 10 % of records and gives a second-order share of goodput lost
    # of ≈ 9 % (the paper reports 16 %; 0.35 reaches it but doubles PREEMPTED).  Crash-loop
    # restarts: 548 preemptions / 35 requeues / 128 nodes ≈ 0.12 (HPCA'25 §IV example).
    victims_per_node: float = 0.2
    loop_victims_per_node: float = 0.12
    noise_drains: int = 40  # Prolog/Epilog-error and maintenance drains at user-failure ends
    cluster: str = "sim"
    start: str = "2024-01-01T00:00:00"
    size_mix: dict[int, float] = field(default_factory=lambda: dict(SIZE_MIX))


@dataclass
class SimResult:
    runs: pl.DataFrame  # RUN_SCHEMA
    events: pl.DataFrame  # accounting.events.EVENT_SCHEMA
    signals: pl.DataFrame  # node, time, signal, critical
    truth_runs: pl.DataFrame  # job_id_raw, run_index, truth_infra, truth_node, victim_of
    truth: dict[str, Any]


def _choice(rng: np.random.Generator, mix: dict[Any, float], n: int) -> np.ndarray:
    keys = list(mix)
    p = np.array([mix[k] for k in keys], dtype=float)
    idx = rng.choice(len(keys), size=n, p=p / p.sum())
    return (
        np.asarray(keys, dtype=object)[idx] if isinstance(keys[0], str) else np.asarray(keys)[idx]
    )


class _Runs:
    """Column buffers for generated run records (numpy arrays appended per generation)."""

    def __init__(self) -> None:
        self.cols: dict[str, list[np.ndarray]] = {}

    def add(self, **cols: np.ndarray) -> None:
        for k, v in cols.items():
            self.cols.setdefault(k, []).append(np.asarray(v))

    def frame(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v) for k, v in self.cols.items()}


def simulate(cfg: SimConfig) -> SimResult:
    """Generate a history for ``cfg``; see the module docstring for the model."""
    rng = np.random.default_rng(cfg.seed)
    n_nodes_total, gpn = cfg.nodes, cfg.gpus_per_node
    horizon = cfg.days * 1440.0  # minutes
    n_jobs = max(1, round(cfg.jobs_per_node_day * cfg.nodes * cfg.days))
    mix = {g: p for g, p in cfg.size_mix.items() if g <= n_nodes_total * gpn}

    lemon_idx = np.sort(
        rng.choice(n_nodes_total, size=min(cfg.lemons, n_nodes_total), replace=False)
    )
    lemon_mask = np.zeros(n_nodes_total + 1, dtype=np.int64)
    lemon_mask[lemon_idx] = 1
    lemon_cum = np.concatenate([[0], np.cumsum(lemon_mask[:-1])])  # prefix sums for blocks

    # ---- logical jobs --------------------------------------------------------------------------
    gpus = _choice(rng, mix, n_jobs).astype(np.int64)
    nn = np.maximum(1, -(-gpus // gpn))
    dur_med_h = 0.7 * gpus.astype(float) ** 0.35
    dur = np.minimum(np.exp(rng.normal(np.log(dur_med_h * 60), 1.0)), TIMELIMIT_MIN)
    dur = np.maximum(dur, 1.0)
    outcome = _choice(rng, OUTCOME_MIX, n_jobs)
    outcome = np.where((outcome == "PREEMPTED") & ((dur < 150) | (gpus > 8)), "COMPLETED", outcome)
    frac = rng.uniform(0.05, 0.95, n_jobs)
    submit0 = rng.uniform(0, horizon, n_jobs)
    user = rng.integers(0, 60, n_jobs)
    big = gpus >= 128
    qos = np.where(big, "high", np.where(outcome == "PREEMPTED", "low", "normal"))

    out = _Runs()
    # chain = job-id identity (a new one for a user resubmission), logical = the training task
    chain = np.arange(n_jobs)
    logical = np.arange(n_jobs)
    run_idx = np.zeros(n_jobs, dtype=np.int64)
    sub = submit0.copy()
    elig = sub.copy()
    start = elig + rng.exponential(np.where(big, 30.0, 10.0))
    rem = dur.copy()
    nat = outcome.copy()
    after_fail = np.zeros(n_jobs, dtype=bool)
    next_chain = n_jobs
    active = np.arange(n_jobs)
    while active.size:
        k = active.size
        g, n = gpus[logical[active]], nn[logical[active]]
        a = rng.integers(0, n_nodes_total - n + 1)
        lem = lemon_cum[a + n] - lemon_cum[a]
        nat_a = nat[active]
        r = rem[active]
        natural_len = np.where(
            np.isin(nat_a, ["COMPLETED", "TIMEOUT"]),
            r,
            np.where(
                nat_a == "PREEMPTED",
                120.0 + frac[logical[active]] * np.maximum(r - 120.0, 0),
                r * frac[logical[active]],
            ),
        )
        natural_len = np.maximum(natural_len, 0.5)
        base_rate = n * cfg.rf / 1440.0
        lemon_rate = lem * cfg.rf * cfg.lemon_factor / 1440.0
        x_base = rng.exponential(1.0, k) / base_rate
        x_lem = np.where(lem > 0, rng.exponential(1.0, k) / np.maximum(lemon_rate, 1e-300), np.inf)
        x = np.minimum(x_base, x_lem)
        hw = x < natural_len
        elapsed = np.where(hw, x, natural_len)
        elapsed_s = np.maximum(1, np.round(elapsed * 60)).astype(np.int64)
        st = np.round(start[active] * 60) / 60
        end = st + elapsed_s / 60.0
        # blamed node: the lemon when its hazard won, else a uniform allocated node
        off = rng.integers(0, n)
        if lemon_idx.size:  # a uniformly chosen lemon of the block (lemons fail independently)
            pick = np.searchsorted(lemon_idx, a) + np.floor(rng.random(k) * lem).astype(np.int64)
            lem_node = lemon_idx[np.minimum(pick, lemon_idx.size - 1)]
        else:
            lem_node = a
        blamed = np.where(hw & (x_lem < x_base), lem_node, a + off)
        nodefail = hw & (rng.random(k) < cfg.nodefail_share)
        state = np.where(hw, np.where(nodefail, "NODE_FAIL", "FAILED"), nat_a)
        # natural one-off interruptions continue; "REQUEUED" = scontrol requeue
        cont_nat = ~hw & np.isin(nat_a, ["PREEMPTED", "REQUEUED"])
        cont_hw = hw & (g >= cfg.requeue_min_gpus)
        out.add(
            chain=chain[active],
            logical=logical[active],
            run_idx=run_idx[active],
            gpus=g,
            nn=n,
            node0=a,
            submit=sub[active],
            eligible=elig[active],
            start=st,
            end=end,
            elapsed_s=elapsed_s,
            state=state,
            hw=hw,
            blamed=np.where(hw, blamed, -1),
            after_fail=after_fail[active],
            crash_loop=np.zeros(k, dtype=bool),
            loop_restart=np.zeros(k, dtype=bool),
            exit_code=np.where(state == "FAILED", 1, np.where(state == "OUT_OF_MEMORY", 0, 0)),
            qos=qos[logical[active]],
            user=user[logical[active]],
            hazard=base_rate + lemon_rate,
        )
        cont = cont_nat | cont_hw
        nxt = active[cont]
        new_chain = cont_hw[cont] & ~nodefail[cont]  # FAILED hardware: user resubmits, new id
        rem[nxt] = np.maximum(r[cont] - elapsed[cont], 1.0)
        nat[nxt] = "COMPLETED"
        after_fail[nxt] = cont_hw[cont]
        e = end[cont]
        sub[nxt] = np.where(new_chain, e + rng.uniform(1, 10, nxt.size), e)
        elig[nxt] = sub[nxt] + np.where(new_chain, 0.0, REQUEUE_DELAY_S / 60.0)
        start[nxt] = elig[nxt] + rng.exponential(np.where(gpus[logical[nxt]] >= 128, 5.0, 15.0))
        n_new = int(new_chain.sum())
        chain[nxt[new_chain]] = np.arange(next_chain, next_chain + n_new)
        next_chain += n_new
        run_idx[nxt] = np.where(new_chain, 0, run_idx[nxt] + 1)
        active = nxt

    # ---- crash loops: RequeueExit=42 loops of a big high-priority job ----------------------------
    loops_truth: list[dict[str, Any]] = []
    for i in range(cfg.crash_loops):
        g = int(rng.choice([64, 128, 256, 512, 1024]))
        g = min(g, n_nodes_total * gpn)
        n = max(1, -(-g // gpn))
        runs_n = int(rng.integers(5, 36))
        t = rng.uniform(0.1, 0.8) * horizon
        c = next_chain
        next_chain += 1
        lg = n_jobs + i
        subs, eligs, starts, ends, el, a_s = [], [], [], [], [], []
        for j in range(runs_n):
            s_ = t if j == 0 else ends[-1]
            e_ = s_ + (0 if j == 0 else REQUEUE_DELAY_S / 60.0)
            st_ = round((e_ + rng.uniform(0.2, 3.0)) * 60) / 60
            d_ = int(rng.integers(60, 600))
            subs.append(s_)
            eligs.append(e_)
            starts.append(st_)
            ends.append(st_ + d_ / 60.0)
            el.append(d_)
            a_s.append(int(rng.integers(0, n_nodes_total - n + 1)))
        states = np.array(["REQUEUED"] * (runs_n - 1) + ["FAILED"], dtype=object)
        out.add(
            chain=np.full(runs_n, c),
            logical=np.full(runs_n, lg),
            run_idx=np.arange(runs_n),
            gpus=np.full(runs_n, g),
            nn=np.full(runs_n, n),
            node0=np.array(a_s),
            submit=np.array(subs),
            eligible=np.array(eligs),
            start=np.array(starts),
            end=np.array(ends),
            elapsed_s=np.array(el, dtype=np.int64),
            state=states,
            hw=np.zeros(runs_n, dtype=bool),
            blamed=np.full(runs_n, -1),
            after_fail=np.zeros(runs_n, dtype=bool),
            crash_loop=np.ones(runs_n, dtype=bool),
            loop_restart=np.arange(runs_n) > 0,
            exit_code=np.array([42] * (runs_n - 1) + [1]),
            qos=np.full(runs_n, "high"),
            user=np.full(runs_n, 60 + i),
            hazard=np.zeros(runs_n),
        )
        loops_truth.append({"chain": c, "gpus": g, "runs": runs_n})

    R = out.frame()
    nrec = R["chain"].size
    # ---- preemption victims of restarts (second-order effects, §3.2) ---------------------------
    restart = R["after_fail"] | R["loop_restart"]
    ridx = np.flatnonzero(restart)
    per_node = np.where(R["loop_restart"][ridx], cfg.loop_victims_per_node, cfg.victims_per_node)
    n_vict = rng.poisson(per_node * R["nn"][ridx])
    vsrc = np.repeat(ridx, n_vict)
    nv = vsrc.size
    v_node = R["node0"][vsrc] + rng.integers(0, R["nn"][vsrc])
    v_end = R["start"][vsrc] - rng.uniform(0.05, 1.0, nv)
    v_el = np.round((120.0 + rng.exponential(240.0, nv)) * 60).astype(np.int64)
    v_start = v_end - v_el / 60.0
    v_g = rng.choice([1, 2, 4, 8], size=nv)
    v_chain = np.arange(next_chain, next_chain + nv)
    next_chain += nv
    v_sub = v_start - rng.exponential(20.0, nv)
    # the victim is requeued and later completes elsewhere (PreemptMode=REQUEUE)
    v2_start = v_end + REQUEUE_DELAY_S / 60.0 + rng.exponential(30.0, nv)
    v2_el = np.round(rng.exponential(120.0, nv) * 60 + 60).astype(np.int64)
    zeros, ones = np.zeros(nv, dtype=bool), np.ones(nv, dtype=np.int64)
    out.add(
        chain=np.concatenate([v_chain, v_chain]),
        logical=np.full(2 * nv, -1),
        run_idx=np.concatenate([0 * ones, ones]),
        gpus=np.concatenate([v_g, v_g]),
        nn=np.concatenate([ones, ones]),
        node0=np.concatenate([v_node, rng.integers(0, n_nodes_total, nv)]),
        submit=np.concatenate([v_sub, v_end]),
        eligible=np.concatenate([v_sub, v_end + 2.0]),
        start=np.concatenate([v_start, v2_start]),
        end=np.concatenate([v_end, v2_start + v2_el / 60.0]),
        elapsed_s=np.concatenate([v_el, v2_el]),
        state=np.concatenate(
            [np.full(nv, "PREEMPTED", dtype=object), np.full(nv, "COMPLETED", dtype=object)]
        ),
        hw=np.concatenate([zeros, zeros]),
        blamed=np.full(2 * nv, -1),
        after_fail=np.concatenate([zeros, zeros]),
        crash_loop=np.concatenate([zeros, zeros]),
        loop_restart=np.concatenate([zeros, zeros]),
        exit_code=np.zeros(2 * nv, dtype=np.int64),
        qos=np.full(2 * nv, "low"),
        user=np.concatenate([rng.integers(0, 60, nv)] * 2),
        hazard=np.zeros(2 * nv),
    )
    R = out.frame()
    victim_of = np.full(R["chain"].size, -1, dtype=np.int64)
    victim_of[nrec : nrec + nv] = vsrc  # index of the restart record that preempted it

    return _assemble(cfg, rng, R, victim_of, lemon_idx, loops_truth, n_jobs)


def _fmt_time(col: str) -> pl.Expr:
    return pl.col(col).dt.strftime("%Y-%m-%dT%H:%M:%S")


def _assemble(
    cfg: SimConfig,
    rng: np.random.Generator,
    R: dict[str, np.ndarray],
    victim_of: np.ndarray,
    lemon_idx: np.ndarray,
    loops_truth: list[dict[str, Any]],
    n_jobs: int,
) -> SimResult:
    t0 = datetime.fromisoformat(cfg.start).replace(tzinfo=UTC)
    t0_us = int(t0.timestamp() * 1_000_000)
    width = max(4, len(str(cfg.nodes - 1)))
    n = R["chain"].size

    def ts(minutes: np.ndarray) -> np.ndarray:
        return t0_us + np.round(minutes * 60).astype(np.int64) * 1_000_000

    df = pl.DataFrame(
        {
            "_rec": np.arange(n),
            "chain": R["chain"],
            "logical": R["logical"],
            "run_index": R["run_idx"].astype(np.int32),
            "gpus": R["gpus"].astype(np.int32),
            "n_nodes": R["nn"].astype(np.int32),
            "node0": R["node0"],
            "state": R["state"].astype(str),
            "hw": R["hw"],
            "blamed": R["blamed"],
            "exit_code": R["exit_code"].astype(np.int32),
            "qos": R["qos"].astype(str),
            "user_i": R["user"],
            "crash_loop": R["crash_loop"],
            "submit_time": ts(R["submit"]),
            "eligible_time": ts(R["eligible"]),
            "start_time": ts(R["start"]),
            "elapsed_s": R["elapsed_s"],
            "victim_of_rec": victim_of,
            "hazard": R["hazard"],
        }
    )
    df = df.with_columns(
        [
            pl.col(c).cast(pl.Datetime("us", "UTC"))
            for c in ("submit_time", "eligible_time", "start_time")
        ]
    ).with_columns(
        (pl.col("start_time") + pl.duration(seconds=pl.col("elapsed_s"))).alias("end_time")
    )
    # JobIDRaw: chains numbered by their first submit, like slurmctld would.
    first = (
        df.group_by("chain")
        .agg(pl.col("submit_time").min().alias("_f"))
        .sort("_f", "chain")
        .with_row_index("job_id_raw", offset=1)
        .select("chain", pl.col("job_id_raw").cast(pl.Int64))
    )
    df = df.join(first, on="chain", how="left")
    node = pl.format("node{}", pl.element().cast(pl.String).str.zfill(width))
    hw_failed = pl.col("hw") & (pl.col("state") == "FAILED")
    # Evidence channel for FAILED hardware runs: 0 tag, 1 signal, 2 event.
    chan = rng.choice(3, size=n, p=[0.5, 0.25, 0.25])
    sig = np.asarray(SIGNALS)[rng.choice(len(SIGNALS), size=n, p=SIGNAL_P)]
    df = df.with_columns(
        pl.Series("_chan", chan),
        pl.Series("_sig", sig),
        pl.format("node{}", pl.col("blamed").cast(pl.String).str.zfill(width)).alias("_bnode"),
        pl.format("node{}", pl.col("node0").cast(pl.String).str.zfill(width)).alias("_first_node"),
    )
    last = (pl.col("node0") + pl.col("n_nodes") - 1).cast(pl.String).str.zfill(width)
    df = df.with_columns(
        pl.when(pl.col("n_nodes") == 1)
        .then(pl.col("_first_node"))
        .otherwise(pl.format("node[{}-{}]", pl.col("_first_node").str.slice(4), last))
        .alias("node_list"),
        pl.when(hw_failed & (pl.col("_chan") == 0))
        .then(pl.format("aegis:v1;hw={}:{}", pl.col("_bnode"), pl.col("_sig")))
        .otherwise(pl.lit(""))
        .alias("admin_comment"),
    )
    runs = df.select(
        pl.lit(cfg.cluster).alias("cluster"),
        "job_id_raw",
        pl.col("job_id_raw").cast(pl.String).alias("job_id"),
        pl.lit(None, pl.Int64).alias("array_job_id"),
        pl.lit(None, pl.Int64).alias("array_task_id"),
        pl.lit(None, pl.Int64).alias("het_job_id"),
        pl.lit(None, pl.Int64).alias("het_job_offset"),
        pl.lit(0, pl.Int32).alias("run_index"),  # recomputed below from submit order
        pl.when(pl.col("logical") >= 0)
        .then(
            pl.format(
                "{}-{}",
                pl.when(pl.col("gpus") >= 128).then(pl.lit("train")).otherwise(pl.lit("job")),
                pl.col("logical"),
            )
        )
        .otherwise(pl.format("scav-{}", pl.col("job_id_raw")))
        .alias("job_name"),
        pl.format("user{}", pl.col("user_i")).alias("user"),
        pl.format("acct{}", pl.col("user_i") % 12).alias("account"),
        pl.lit("batch").alias("partition"),
        "qos",
        "state",
        pl.when(pl.col("state") == "CANCELLED")
        .then(pl.format("CANCELLED by {}", 1000 + pl.col("user_i")))
        .otherwise(pl.col("state"))
        .alias("state_raw"),
        pl.when(pl.col("state") == "CANCELLED")
        .then(1000 + pl.col("user_i"))
        .otherwise(None)
        .cast(pl.Int64)
        .alias("cancelled_by_uid"),
        pl.col("state").is_in(["REQUEUED"]).not_().alias("ended"),
        "exit_code",
        pl.when(pl.col("state") == "CANCELLED")
        .then(15)
        .when(pl.col("state") == "OUT_OF_MEMORY")
        .then(125)
        .otherwise(0)
        .cast(pl.Int32)
        .alias("exit_signal"),
        pl.col("exit_code").alias("derived_exit_code"),
        pl.lit(0, pl.Int32).alias("derived_exit_signal"),
        "submit_time",
        "eligible_time",
        "start_time",
        "end_time",
        "elapsed_s",
        pl.lit(TIMELIMIT_MIN * 60, pl.Int64).alias("timelimit_s"),
        "n_nodes",
        "gpus",
        pl.lit("h100").alias("gpu_types"),
        "node_list",
        "node0",  # the expanded list is built after the sort (sorting lists is costly)
        pl.lit("").alias("failed_node"),  # Slurm 22.05 has no FailedNode; neither do we
        pl.when(pl.col("run_index") > 0)
        .then(pl.lit("BeginTime"))
        .otherwise(pl.lit("None"))
        .alias("reason"),
        pl.lit("SchedMain,StartRecieved").alias("flags"),
        pl.lit("").alias("comment"),
        "admin_comment",
        pl.lit("").alias("system_comment"),
        pl.format("/home/user{}/run", pl.col("user_i")).alias("work_dir"),
        pl.lit("simulate").alias("source"),
        # carried for truth / evidence, dropped before returning runs
        "hw",
        "_bnode",
        "_chan",
        "_sig",
        "_rec",
        "victim_of_rec",
        "crash_loop",
        "chain",
        "hazard",
        "_first_node",
    )
    runs = runs.sort("job_id_raw", "submit_time").with_columns(
        seq_within("job_id_raw").cast(pl.Int32).alias("run_index"),
        pl.int_ranges("node0", pl.col("node0") + pl.col("n_nodes")).list.eval(node).alias("nodes"),
    )
    # ---- evidence frames ------------------------------------------------------------------------
    hw = runs.filter(pl.col("hw"))
    nf_events = hw.filter(pl.col("state") == "NODE_FAIL").select(
        pl.col("_bnode").alias("node"),
        (pl.col("end_time") + pl.duration(seconds=pl.col("job_id_raw") % 60)).alias("time_start"),
        pl.lit("DOWN*").alias("state"),
        pl.lit("Not responding").alias("reason"),
    )
    drain_events = hw.filter((pl.col("state") == "FAILED") & (pl.col("_chan") == 2)).select(
        pl.col("_bnode").alias("node"),
        (pl.col("end_time") + pl.duration(seconds=30)).alias("time_start"),
        pl.lit("DRAIN").alias("state"),
        pl.format("aegis: {}", pl.col("_sig")).alias("reason"),
    )
    user_failed = runs.filter((pl.col("state") == "FAILED") & ~pl.col("hw"))
    k = min(cfg.noise_drains, user_failed.height)
    noise_rows = rng.choice(user_failed.height, size=k, replace=False) if k else np.array([], int)
    noise_reason = np.asarray(["Prolog error", "Epilog error", "scheduled maintenance"])[
        rng.integers(0, 3, k)
    ]
    noise_events = user_failed[noise_rows].select(
        pl.col("_first_node").alias("node"),
        (pl.col("end_time") + pl.duration(seconds=20)).alias("time_start"),
        pl.lit("DRAIN").alias("state"),
        pl.Series("reason", noise_reason, dtype=pl.String),
    )
    events = (
        pl.concat([nf_events, drain_events, noise_events])
        .with_columns(
            pl.lit(cfg.cluster).alias("cluster"),
            (pl.col("time_start") + pl.duration(hours=2)).alias("time_end"),
            pl.lit("root(0)").alias("user"),
        )
        .select("cluster", "node", "time_start", "time_end", "state", "reason", "user")
        .sort("time_start")
    )
    crit = hw.filter((pl.col("state") == "FAILED") & (pl.col("_chan") == 1)).select(
        pl.col("_bnode").alias("node"),
        (pl.col("end_time") - pl.duration(seconds=45)).alias("time"),
        pl.col("_sig").alias("signal"),
        pl.lit(True).alias("critical"),
    )
    noncrit = user_failed[noise_rows].select(
        pl.col("_first_node").alias("node"),
        pl.col("end_time").alias("time"),
        pl.lit("gpu_temp_warn").alias("signal"),
        pl.lit(False).alias("critical"),
    )
    signals = pl.concat([crit, noncrit]).sort("time")

    # ---- truth -------------------------------------------------------------------------------
    rec_to_key = runs.select("_rec", "job_id_raw", "run_index")
    truth_runs = (
        runs.select(
            "job_id_raw",
            "run_index",
            pl.col("hw").alias("truth_infra"),
            pl.when(pl.col("hw")).then(pl.col("_bnode")).alias("truth_node"),
            "victim_of_rec",
            "crash_loop",
        )
        .join(
            rec_to_key.rename(
                {
                    "_rec": "victim_of_rec",
                    "job_id_raw": "victim_of_job",
                    "run_index": "victim_of_run",
                }
            ),
            on="victim_of_rec",
            how="left",
        )
        .drop("victim_of_rec")
    )
    loop_ids = runs.filter(pl.col("crash_loop")).group_by("chain").agg(pl.col("job_id_raw").first())
    chain_to_id = dict(loop_ids.iter_rows())
    victims = truth_runs.filter(pl.col("victim_of_job").is_not_null())
    vcount = dict(victims.group_by("victim_of_job").len().iter_rows())
    for lt in loops_truth:
        lt["job_id_raw"] = int(chain_to_id[lt.pop("chain")])
        lt["preemptions_caused"] = int(vcount.get(lt["job_id_raw"], 0))
    truth = _truth_summary(cfg, runs, truth_runs, lemon_idx, loops_truth, width, n_jobs)
    keep = list(RUN_SCHEMA)
    return SimResult(runs.select(keep).cast(RUN_SCHEMA), events, signals, truth_runs, truth)


def _truth_summary(
    cfg: SimConfig,
    runs: pl.DataFrame,
    truth_runs: pl.DataFrame,
    lemon_idx: np.ndarray,
    loops: list[dict[str, Any]],
    width: int,
    n_jobs: int,
) -> dict[str, Any]:
    gpu_h = pl.col("elapsed_s") / 3600 * pl.col("gpus")
    lost = pl.min_horizontal(pl.col("elapsed_s"), pl.lit(1800)) / 3600 * pl.col("gpus")
    big = runs.filter(pl.col("gpus") > 128)
    vict = runs.join(
        truth_runs.filter(pl.col("victim_of_job").is_not_null()), on=["job_id_raw", "run_index"]
    )
    vict_of_infra = vict.join(
        truth_runs.select(
            pl.col("job_id_raw").alias("victim_of_job"),
            pl.col("run_index").alias("victim_of_run"),
            "crash_loop",
        ),
        on=["victim_of_job", "victim_of_run"],
        suffix="_pre",
    ).filter(~pl.col("crash_loop_pre"))
    cfg_d = asdict(cfg)
    cfg_d["size_mix"] = {str(k): v for k, v in cfg.size_mix.items()}
    return {
        "config": cfg_d,
        "records": runs.height,
        "logical_jobs": n_jobs,
        "rf_per_node_day": cfg.rf,
        "infra_failures": int(runs["hw"].sum()),
        "infra_failures_gt128": int(big["hw"].sum()),
        # E[failures] = Σ hazard·runtime (the compensator): the r_f an unbiased estimator targets
        "expected_rf_gt128": float(
            big.select(
                (pl.col("hazard") * pl.col("elapsed_s") / 60).sum()
                / (pl.col("elapsed_s") / 86400 * pl.col("n_nodes")).sum()
            ).item()
        ),
        "node_days_gt128": float(
            big.select((pl.col("elapsed_s") / 86400 * pl.col("n_nodes")).sum()).item()
        ),
        "lemon_nodes": [f"node{int(i):0{width}d}" for i in lemon_idx],
        "crash_loops": loops,
        "second_order_victims": int(vict_of_infra.height),
        "second_order_gpu_hours": float(vict_of_infra.select(lost.sum()).item() or 0.0),
        "first_order_gpu_hours": float(runs.filter(pl.col("hw")).select(lost.sum()).item() or 0.0),
        "total_gpu_hours": float(runs.select(gpu_h.sum()).item()),
    }


def write_sacct(runs: pl.DataFrame, path: str | Path) -> int:
    """Write a run table as a ``sacct --parsable2`` export with a header line (UTC timestamps).

    Field order is :data:`EXPORT_FIELDS` (free text last).  Returns the number of records.
    """
    tres = pl.format(
        "billing={},cpu={},gres/gpu:h100={},gres/gpu={},mem={}G,node={}",
        pl.col("gpus"),
        pl.col("gpus"),
        pl.col("gpus"),
        pl.col("gpus"),
        pl.col("gpus") * 8,
        pl.col("n_nodes"),
    )
    out = runs.select(
        pl.col("job_id_raw").cast(pl.String).alias("JobIDRaw"),
        pl.col("job_id").alias("JobID"),
        pl.col("cluster").alias("Cluster"),
        pl.col("user").alias("User"),
        pl.col("account").alias("Account"),
        pl.col("partition").alias("Partition"),
        pl.col("qos").alias("QOS"),
        pl.col("state_raw").alias("State"),
        pl.format("{}:{}", "exit_code", "exit_signal").alias("ExitCode"),
        pl.format("{}:{}", "derived_exit_code", "derived_exit_signal").alias("DerivedExitCode"),
        _fmt_time("submit_time").fill_null("Unknown").alias("Submit"),
        _fmt_time("eligible_time").fill_null("Unknown").alias("Eligible"),
        _fmt_time("start_time").fill_null("Unknown").alias("Start"),
        _fmt_time("end_time").fill_null("Unknown").alias("End"),
        pl.col("elapsed_s").cast(pl.String).alias("ElapsedRaw"),
        (pl.col("timelimit_s") // 60).cast(pl.String).fill_null("UNLIMITED").alias("TimelimitRaw"),
        pl.col("n_nodes").cast(pl.String).alias("NNodes"),
        pl.col("node_list").alias("NodeList"),
        tres.alias("AllocTRES"),
        pl.col("reason").alias("Reason"),
        pl.col("flags").alias("Flags"),
        pl.col("admin_comment").alias("AdminComment"),
        pl.col("comment").alias("Comment"),
        pl.col("work_dir").alias("WorkDir"),
        pl.col("job_name").alias("JobName"),
    )
    out.write_csv(path, separator="|", quote_style="never", include_header=True)
    return out.height


def write_events(events: pl.DataFrame, path: str | Path) -> int:
    """Write node events like ``sacctmgr show event -P format=Cluster,ClusterNodes,NodeName,
    TimeStart,TimeEnd,State,Reason,User,Event``."""
    out = events.select(
        pl.col("cluster").alias("Cluster"),
        pl.lit("").alias("Cluster Nodes"),
        pl.col("node").alias("NodeName"),
        _fmt_time("time_start").alias("TimeStart"),
        _fmt_time("time_end").fill_null("Unknown").alias("TimeEnd"),
        pl.col("state").alias("State"),
        pl.col("reason").alias("Reason"),
        pl.col("user").alias("User"),
        pl.lit("Node").alias("Event"),
    )
    out.write_csv(path, separator="|", quote_style="never", include_header=True)
    return out.height


def write_history(result: SimResult, out: str | Path) -> dict[str, str]:
    """Write ``out`` (sacct export) plus ``<stem>.events.txt``, ``<stem>.signals.parquet`` and
    ``<stem>.truth.json`` beside it.  Returns the paths written."""
    out = Path(out)
    stem = out.with_suffix("")
    paths = {
        "sacct": str(out),
        "events": f"{stem}.events.txt",
        "signals": f"{stem}.signals.parquet",
        "truth": f"{stem}.truth.json",
    }
    write_sacct(result.runs, out)
    write_events(result.events, paths["events"])
    result.signals.write_parquet(paths["signals"])
    Path(paths["truth"]).write_text(
        json.dumps(result.truth, indent=2, default=_json_default) + "\n"
    )
    return paths


def _json_default(o: object) -> object:
    if isinstance(o, np.integer | np.floating):
        return o.item()
    if isinstance(o, float) and math.isinf(o):
        return None
    raise TypeError(type(o))
