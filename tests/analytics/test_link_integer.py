"""Job-run linkage on integers (cluster codes, two key hashes per record, exact check of the
pairs the hashes link) equals the string linkage it replaced, never links two different keys
even when every key hashes alike, and keeps a real link when two keys' first hashes collide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from aegis_slurm.analytics import job_runs
from aegis_slurm.analytics.attribution import attribute_failures
from aegis_slurm.analytics.common import seq_within, with_aligned
from aegis_slurm.analytics.job_runs import DEFAULT_LINK_GAP, link_job_runs
from aegis_slurm.simulate.history import SimConfig, simulate


# The string linkage before the integer rewrite, kept verbatim as the reference.
def reference_link(runs: pl.DataFrame, gap: timedelta = DEFAULT_LINK_GAP) -> pl.DataFrame:
    """Add ``run_key`` (int, one per job run), ``run_seq`` (order within it) and
    ``link_method`` ("job_id" for a later run of the same JobIDRaw, "resubmit" for the first record
    of a job linked by the heuristic, null otherwise).  Vectorized: jobs are collapsed to one row,
    linked by a sort plus a cumulative sum, and joined back.  Only a slim projection is ever
    sorted; the wide table (with its node lists) keeps its order."""
    key = ["cluster", "user", "account", "job_name", "gpus"]
    slim = runs.select(
        pl.int_range(pl.len()).alias("_i"),
        "job_id_raw",
        "submit_time",
        "end_time",
        "state",
        "run_index",
        *key,
    )
    jobs = (
        slim.group_by("cluster", "job_id_raw")
        .agg(
            *[pl.col(c).first() for c in key if c != "cluster"],
            pl.col("submit_time").min().alias("_first"),
            pl.col("end_time").max().alias("_last_end"),
            pl.col("state").sort_by("submit_time").last().alias("_last_state"),
        )
        # Sorting by a hash of the key groups equal keys without a multi-column string sort;
        # equality is still checked on the real columns below.
        .with_columns(pl.struct(key).hash().alias("_h"))
        .sort("_h", "_first", "job_id_raw")  # (nulls_last=True is 15x slower here)
    )
    same_key = pl.all_horizontal([pl.col(c).eq_missing(pl.col(c).shift(1)) for c in key])
    delta = pl.col("_first") - pl.col("_last_end").shift(1)
    resub = (
        same_key
        & (pl.col("_last_state").shift(1) != "COMPLETED")
        & (delta <= gap)
        & (delta >= timedelta(0))
    ).fill_null(False)
    jobs = jobs.with_columns((~resub).cum_sum().alias("run_key"), resub.alias("_resub")).select(
        "cluster", "job_id_raw", "run_key", "_resub"
    )
    keyed = (
        slim.select("_i", "cluster", "job_id_raw", "submit_time", "run_index")
        .join(jobs, on=["cluster", "job_id_raw"], how="left")
        .sort("run_key", "submit_time", "_i")
        .with_columns(
            seq_within("run_key").alias("run_seq"),
            pl.when(pl.col("run_index") > 0)
            .then(pl.lit("job_id"))
            .when(pl.col("_resub"))
            .then(pl.lit("resubmit"))
            .otherwise(None)
            .alias("link_method"),
        )
        .sort("_i")
    )
    return with_aligned(runs, keyed.select("run_key", "run_seq", "link_method"))


LINK = ["run_key", "run_seq", "link_method"]


@pytest.mark.parametrize("seed", [11, 12, 5])
def test_integer_linkage_equals_string_linkage(seed: int) -> None:
    sim = simulate(SimConfig(nodes=128, days=60, seed=seed, crash_loops=4, lemons=3))
    att = attribute_failures(sim.runs, sim.signals, sim.events)
    got, want = link_job_runs(att), reference_link(att)
    assert got.columns == want.columns
    assert got.select(LINK).equals(want.select(LINK))
    assert got.drop(LINK).equals(att)
    assert got.filter(pl.col("link_method") == "resubmit").height > 0


def _t(h: float) -> datetime:
    return datetime(2024, 1, 1, tzinfo=UTC) + timedelta(hours=h)


def record(job_id_raw: int | None, start: float, state: str, **key: object) -> dict:
    """One hour-long record submitted ``start`` hours in; ``key`` overrides the default
    resubmission key (cluster c1, user u, account acct, job name train, 8 GPUs)."""
    base = dict(cluster="c1", user="u", account="acct", job_name="train", gpus=8)
    return dict(
        base,
        **key,
        job_id_raw=job_id_raw,
        run_index=0,
        submit_time=_t(start),
        start_time=_t(start),
        end_time=_t(start + 1),
        elapsed_s=3600,
        state=state,
    )


def _tricky() -> pl.DataFrame:
    """Failed jobs each followed within the gap by a job that differs from it in exactly one
    key column (or in nothing: the one true resubmission), plus a null job name pair."""
    rows = []
    base = dict(cluster="c1", user="u", account="a", job_name="train", gpus=8)
    variants = [{}, {"user": "v"}, {"account": "b"}, {"job_name": "eval"}, {"gpus": 16}]
    variants += [{"cluster": "c2"}, {"job_name": None}]
    job = 100
    for k, change in enumerate(variants):
        t0 = 10.0 * k
        # A null job name on both sides is one key (eq_missing), as in the string linkage.
        first = dict(base, job_name=None) if change == {"job_name": None} else base
        for jid, kv, start, state in (
            (job, first, t0, "FAILED"),
            (job + 1, dict(base, **change), t0 + 2, "COMPLETED"),
        ):
            rows.append(record(jid, start, state, **kv))
        job += 2
    return pl.DataFrame(rows)


def test_a_colliding_hash_never_links_two_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _tricky()
    want = reference_link(runs)
    # Every key hashes alike: only the exact check on the real columns can tell them apart.
    monkeypatch.setattr(job_runs, "_key_hash", lambda key, seed: pl.lit(7, pl.UInt64))
    got = link_job_runs(runs)
    linked = got.filter(pl.col("link_method") == "resubmit")
    # The unchanged pair and the pair whose job names are both null: eq_missing keys.
    assert sorted(linked["job_id_raw"].to_list()) == [101, 113]
    # The same links as with the real hash (run_key numbers follow the hash order).
    assert got.select("run_seq", "link_method").equals(want.select("run_seq", "link_method"))


def _interleaved() -> pl.DataFrame:
    """Key A fails, key B fails in between, A is resubmitted within the gap: sorted by a hash
    in which A and B collide, B's job lands between A's two jobs."""
    rows = [
        record(jid, start, "FAILED", job_name=name)
        for jid, name, start in ((200, "a", 0.0), (201, "b", 1.5), (202, "a", 2.0))
    ]
    return pl.DataFrame(rows)


def colliding_first_hash(key: list[str], seed: int) -> pl.Expr:
    """Every key collides in the first hash; the second is the real one."""
    return pl.lit(7, pl.UInt64) if seed == 0 else pl.struct(key).hash(seed=seed)


def test_a_first_hash_collision_does_not_break_a_real_link(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = _interleaved()
    want = reference_link(runs)
    assert want.filter(pl.col("link_method") == "resubmit")["job_id_raw"].to_list() == [202]
    monkeypatch.setattr(job_runs, "_key_hash", colliding_first_hash)
    got = link_job_runs(runs)
    assert got.select("run_seq", "link_method").equals(want.select("run_seq", "link_method"))
    keys = dict(zip(got["job_id_raw"], got["run_key"], strict=True))
    assert keys[200] == keys[202] != keys[201]


def exotic_id(rnd, k: int) -> int:
    return rnd.choice([k + 1, 2**48 + k, -(k + 1)])


def _random_runs(seed: int, exotic: bool, n: int = 3000) -> pl.DataFrame:
    """Random records: requeued jobs (several records of one JobIDRaw), resubmits on both
    sides of the gap, null key columns, several clusters; ``exotic``: also JobIDRaw >= 2^48 or
    negative (the job key can't be packed into one integer).  (A null JobIDRaw is the one place
    the linkage deliberately differs from the reference: its own test below.)"""
    import random

    rnd = random.Random(seed)
    rows: list[dict] = []
    t = 0.0
    for k in range(n):
        t += rnd.expovariate(1.0)  # hours
        if rows and rnd.random() < 0.15:  # a requeue of a recent job: its id and key
            prev = rnd.choice(rows[-20:])
            row = dict(prev)
        else:
            row = dict(
                cluster=rnd.choice(["c1", "c2", "c3"] if exotic else ["c1", "c2"]),
                user=rnd.choice(["u1", "u2", None]),
                account="a1",
                job_name=rnd.choice(["train", "eval", None]),
                gpus=rnd.choice([8, 16]),
                job_id_raw=exotic_id(rnd, k) if exotic else k + 1,
            )
        end = t + rnd.uniform(0.1, 8.0)
        row.update(
            submit_time=_t(t),
            start_time=_t(t),
            end_time=_t(end),
            elapsed_s=3600,
            state=rnd.choice(["FAILED", "COMPLETED", "NODE_FAIL", "TIMEOUT", None]),
        )
        rows.append(row)
    runs = pl.DataFrame(rows).with_columns(pl.col("job_id_raw").cast(pl.Int64))
    # run_index as the store numbers it: order among the job's records by submit time.
    return runs.with_columns(
        pl.col("submit_time")
        .rank("ordinal")
        .over("cluster", "job_id_raw")
        .sub(1)
        .cast(pl.Int64)
        .alias("run_index")
    )


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("gap_h", [6.0, 0.5])
@pytest.mark.parametrize("exotic", [False, True])
def test_integer_linkage_equals_string_linkage_on_random_records(
    seed: int, gap_h: float, exotic: bool
) -> None:
    runs = _random_runs(seed, exotic)
    gap = timedelta(hours=gap_h)
    got, want = link_job_runs(runs, gap), reference_link(runs, gap)
    # Identical, run keys included: the slices in hash order are the one sort's order.
    assert got.select(LINK).equals(want.select(LINK))
    assert got.filter(pl.col("link_method") == "resubmit").height > 0


def test_a_record_without_jobidraw_is_a_job_of_its_own() -> None:
    """Three array tasks of an old export without JobIDRaw, then a resubmission of the last.
    The string linkage joined them on a null key: no run_key at all, so every such record fell
    into one null "job run" in the metrics.  Each is its own job; the heuristic still links."""
    rows = [
        record(None, start, state, job_name="sweep")
        for start, state in ((0.0, "COMPLETED"), (3.0, "COMPLETED"), (6.0, "FAILED"))
    ]
    rows.append(dict(rows[-1], job_id_raw=900, submit_time=_t(8.0), end_time=_t(9.0)))
    runs = pl.DataFrame(rows).with_columns(pl.col("job_id_raw").cast(pl.Int64))
    assert reference_link(runs)["run_key"].null_count() == 3
    got = link_job_runs(runs)
    assert got["run_key"].null_count() == 0
    keys = got["run_key"].to_list()
    assert keys[0] != keys[1] != keys[2] == keys[3]
    assert got["link_method"].to_list() == [None, None, None, "resubmit"]
    assert got["run_seq"].to_list() == [0, 0, 0, 1]


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_tiny_tables_link_as_the_string_linkage_does(n: int) -> None:
    runs = _random_runs(0, False).head(n)
    got, want = link_job_runs(runs), reference_link(runs)
    assert got.height == n
    assert got.select(LINK).equals(want.select(LINK))


@pytest.mark.parametrize(
    ("states", "links"), [(("COMPLETED", "FAILED"), True), (("FAILED", "COMPLETED"), False)]
)
def test_a_requeued_jobs_last_record_is_by_submit_then_record_order(
    states: tuple[str, str], links: bool
) -> None:
    """Two records of one job submitted at the same instant (a requeue can keep Submit): the
    later record is the job's last, so whether it ended COMPLETED decides the resubmission
    link; a third record submitted earlier but listed last changes nothing."""
    rows = [record(7, 0.0, states[0]), record(7, 0.0, states[1]), record(7, -1.0, "FAILED")]
    rows += [record(9, 3.0, "COMPLETED")]
    runs = pl.DataFrame(rows).with_columns(pl.Series("run_index", [1, 2, 0, 0], dtype=pl.Int64))
    got = link_job_runs(runs)
    resubmitted = got.filter(pl.col("job_id_raw") == 9)["link_method"].to_list()
    assert resubmitted == (["resubmit"] if links else [None])
    assert got["run_key"].n_unique() == (1 if links else 2)
