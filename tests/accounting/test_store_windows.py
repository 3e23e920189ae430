"""Reading part of a store: a time window or one job, with the predicate pushed down.

What a windowed read must give is defined by the whole-store read: the same rows as filtering
``load_runs(store)`` by when each run ended, with the same ``run_index`` -- also for a job
requeued across a month boundary when only the later month is read, and for a store holding
repeated keys because an ingest stopped before compacting.
"""

from __future__ import annotations

import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import ingest_files, job_runs, load_job_runs, load_runs

HEADER = "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName"
FMT = "%Y-%m-%dT%H:%M:%S"


def line(raw: int, job: str, state: str, submit: datetime, start: datetime, end: datetime | None):
    elapsed = int(((end or start + timedelta(minutes=1)) - start).total_seconds())
    end_text = end.strftime(FMT) if end else "Unknown"
    return (
        f"{raw}|{job}|c|{state}|0:0|{submit.strftime(FMT)}|{start.strftime(FMT)}|{end_text}|"
        f"{elapsed}|1|n{raw % 7}|j{raw}"
    )


def export(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def ended_in(start: datetime | None, end: datetime | None) -> pl.Expr:
    at = pl.coalesce(
        pl.col("end_time"), pl.col("start_time") + pl.duration(seconds=pl.col("elapsed_s"))
    )
    keep = pl.lit(True)
    if start is not None:
        keep &= at >= start
    if end is not None:
        keep &= at < end
    return keep


def same_rows(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    order = ["cluster", "job_id", "submit_time"]
    return a.sort(order, nulls_last=True).equals(b.sort(order, nulls_last=True))


def stop_before_compaction(store: Path, other: Path, month: str) -> None:
    """Leave ``other``'s parts of ``month`` in ``store`` beside its own, as an ingest killed
    between publishing and compacting leaves them (the reader must de-duplicate)."""
    for k, part in enumerate(sorted((other / "runs" / f"month={month}").glob("part-*"))):
        shutil.copy(part, store / "runs" / f"month={month}" / f"part-zzzz-stopped-{k}.parquet")


D = datetime(2026, 10, 31, 22, 0, tzinfo=UTC)
NOV = datetime(2026, 11, 1, tzinfo=UTC)
DEC = datetime(2026, 12, 1, tzinfo=UTC)


def test_a_job_requeued_across_a_month_boundary_keeps_its_run_index_in_the_later_month_alone(
    tmp_path,
):
    runs = [  # job 9: two runs in October (Submit month October), two in November
        line(9, "9", "NODE_FAIL", D - timedelta(days=3), D - timedelta(days=3), D - timedelta(2)),
        line(9, "9", "REQUEUED", D - timedelta(days=1), D - timedelta(days=1), D),
        line(9, "9", "FAILED", NOV, NOV + timedelta(hours=1), NOV + timedelta(hours=3)),
        line(9, "9", "COMPLETED", NOV + timedelta(hours=4), NOV + timedelta(hours=5), DEC),
        line(10, "10", "COMPLETED", NOV, NOV, NOV + timedelta(hours=2)),  # ran once
    ]
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", runs)], store)
    assert sorted(p.name for p in (store / "runs").iterdir()) == ["month=2026-10", "month=2026-11"]
    november = load_runs(store, start=NOV, end=DEC)
    assert november.sort("end_time").select("job_id", "state", "run_index").rows() == [
        ("10", "COMPLETED", 0),
        ("9", "FAILED", 2),
    ]
    # The same after an ingest stopped before compacting either month.
    again = tmp_path / "again"
    ingest_files([export(tmp_path, "b.txt", runs)], again)
    stop_before_compaction(store, again, "2026-10")
    stop_before_compaction(store, again, "2026-11")
    after = load_runs(store, start=NOV, end=DEC).sort("end_time")
    assert after.drop("source").equals(november.sort("end_time").drop("source"))
    assert {Path(s).name for s in after["source"]} == {"b.txt"}  # the newest ingest wins
    december = load_runs(store, start=DEC)
    assert december.select("state", "run_index").rows() == [("COMPLETED", 3)]
    assert load_job_runs(store, "9").get_column("run_index").to_list() == [0, 1, 2, 3]


def test_a_stale_running_copy_left_by_a_stopped_ingest_never_shows_in_a_window(tmp_path):
    start = datetime(2026, 10, 31, 23, 0, tzinfo=UTC)
    running = line(7, "7", "RUNNING", start, start, None)  # imputed end: 23:01, in October
    final = line(7, "7", "FAILED", start, start, NOV + timedelta(hours=1))
    store, other = tmp_path / "store", tmp_path / "other"
    ingest_files([export(tmp_path, "final.txt", [final])], store)
    ingest_files([export(tmp_path, "old.txt", [running])], other)
    stop_before_compaction(store, other, "2026-10")  # the stale copy is published, not merged
    october = datetime(2026, 10, 1, tzinfo=UTC)
    # Filtering before de-duplicating would show the RUNNING copy in October.
    assert load_runs(store, start=october, end=NOV).height == 0
    assert load_runs(store, start=NOV).select("state").rows() == [("FAILED",)]
    assert load_job_runs(store, "7").select("state").rows() == [("FAILED",)]


def _random_history(rng: random.Random) -> tuple[list[str], list[str]]:
    """Final records of ~120 jobs (1-5 runs, some array tasks) from September to January, and
    stale RUNNING copies of some of them."""
    final, stale = [], []
    t0 = datetime(2026, 9, 1, tzinfo=UTC)
    for raw in range(100, 220):
        job = f"{raw - raw % 10}_{raw % 10}" if raw % 3 == 0 else str(raw)
        at = t0 + timedelta(hours=rng.uniform(0, 24 * 120))
        for _ in range(rng.choice([1, 1, 1, 2, 3, 5])):
            submit = at + timedelta(minutes=rng.uniform(0, 600))
            start = submit + timedelta(minutes=rng.uniform(0, 3000))
            end = start + timedelta(minutes=rng.uniform(1, 20000))
            state = "COMPLETED" if rng.random() < 0.5 else rng.choice(["NODE_FAIL", "REQUEUED"])
            if state == "NODE_FAIL" and rng.random() < 0.3:
                final.append(line(raw, job, state, submit, start, None))  # End=Unknown
            else:
                final.append(line(raw, job, state, submit, start, end))
            if rng.random() < 0.2:
                stale.append(line(raw, job, "RUNNING", submit, start, None))
            at = end
    return final, stale


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_windows_and_job_lookups_equal_filtering_the_whole_store(tmp_path, seed):
    rng = random.Random(seed)
    final, stale = _random_history(rng)
    rng.shuffle(final)
    store, other = tmp_path / "store", tmp_path / "other"
    half = len(final) // 2
    ingest_files([export(tmp_path, "a.txt", final[:half])], store)
    ingest_files([export(tmp_path, "b.txt", final[half:])], store)
    ingest_files([export(tmp_path, "s.txt", stale)], other)
    for month in sorted(p.name[6:] for p in (other / "runs").iterdir()):
        if (store / "runs" / f"month={month}").exists():
            stop_before_compaction(store, other, month)
    whole = load_runs(store)
    assert whole.height == len(final)  # every stale copy lost to its final record
    assert whole.group_by("cluster", "job_id").len()["len"].max() > 2  # several runs per job
    cuts = [None, *(datetime(2026, m, 1, tzinfo=UTC) for m in (9, 10, 11, 12)), None]
    cuts += [datetime(2026, 10, 17, 5, tzinfo=UTC), datetime(2027, 1, 9, tzinfo=UTC)]
    for start in cuts:
        for end in cuts:
            if start and end and start >= end:
                continue
            window = load_runs(store, start=start, end=end)
            assert window.schema == whole.schema
            assert same_rows(window, whole.filter(ended_in(start, end))), (start, end)
    ids = sorted({*whole["job_id"].to_list(), *map(str, whole["job_id_raw"].to_list())})
    for job in [*rng.sample(ids, 25), "99999", "1_x", "0105", " 105", "105 ", "", "+1"]:
        # The filter diagnose, logs and minder applied to the whole table before lookups
        # read only the job's rows.
        old = (pl.col("job_id_raw").cast(pl.String) == job) | (pl.col("job_id") == job)
        expected = whole.filter(old).sort("run_index")
        assert load_job_runs(store, job).equals(expected), job
        assert job_runs(whole, job).equals(expected), job
    where = (pl.col("state") == "COMPLETED") & (pl.col("job_name") == "j105")
    assert same_rows(load_runs(store, where=where), whole.filter(where))


def test_an_empty_window_and_an_unknown_job_are_empty_tables_of_the_schema(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", [line(1, "1", "COMPLETED", D, D, NOV)])], store)
    whole = load_runs(store)
    empty = load_runs(store, start=DEC)
    assert empty.height == 0 and empty.schema == whole.schema
    nobody = load_job_runs(store, "2")
    assert nobody.height == 0 and nobody.schema == whole.schema


def test_a_predicate_on_a_text_column_sees_empty_text_as_the_table_does(tmp_path):
    # "" is stored as null on disk; a lookup of the empty user must still find the run.
    header = HEADER + "|User"
    path = tmp_path / "a.txt"
    path.write_text(f"{header}\n{line(1, '1', 'COMPLETED', D, D, NOV)}|\n")
    store = tmp_path / "store"
    ingest_files([path], store)
    assert load_runs(store)["user"].to_list() == [""]
    assert load_runs(store, where=pl.col("user") == "").height == 1
    assert load_runs(store, where=pl.col("user") != "").height == 0


def test_ended_per_month_counts_each_run_once(tmp_path):
    from aegis_slurm.accounting.store import ended_per_month

    runs = [
        line(1, "1", "COMPLETED", D, D, NOV + timedelta(hours=1)),
        line(2, "2", "COMPLETED", D, D, D + timedelta(hours=1)),
        line(3, "3", "COMPLETED", NOV, NOV, DEC + timedelta(days=3)),
        line(4, "4", "NODE_FAIL", NOV, NOV, None),  # no End: not counted
    ]
    store, other = tmp_path / "store", tmp_path / "other"
    ingest_files([export(tmp_path, "a.txt", runs)], store)
    ingest_files([export(tmp_path, "b.txt", runs)], other)
    stop_before_compaction(store, other, "2026-10")
    whole = load_runs(store).filter(pl.col("end_time").is_not_null())
    expected = whole.group_by(pl.col("end_time").dt.strftime("%Y-%m").alias("m")).len().sort("m")
    assert (
        ended_per_month(store).rows()
        == expected.rows()
        == [
            ("2026-10", 1),
            ("2026-11", 1),
            ("2026-12", 1),
        ]
    )


def order(rows: list[tuple], i: int) -> tuple:
    """Submit, then Start (nulls first), then file order."""
    _, _, submit, start = rows[i]
    low = datetime(1970, 1, 1, tzinfo=UTC)
    return (submit is not None, submit or low, start is not None, start or low, i)


@pytest.mark.parametrize("colliding", [False, True])
def test_run_index_is_the_order_of_submit_then_start_within_each_job(colliding, monkeypatch):
    from aegis_slurm.accounting import store
    from aegis_slurm.accounting.store import _run_index

    if colliding:  # every job one hash: the text-key sort must take over
        monkeypatch.setattr(
            store, "_job_key_hash", lambda keys: pl.Series([7] * keys.height, dtype=pl.UInt64)
        )

    rng = random.Random(5)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    def when() -> datetime | None:  # few distinct values: ties and nulls are common
        return None if rng.random() < 0.1 else t0 + timedelta(minutes=rng.randrange(30))

    for _ in range(100):
        n = rng.randrange(1, 40)
        rows = [
            (rng.choice(["a", "b", None]), rng.choice(["1", "2", None]), when(), when())
            for _ in range(n)
        ]
        keys = pl.DataFrame(
            rows,
            schema={
                "cluster": pl.String,
                "job_id": pl.String,
                "submit_time": pl.Datetime("us", "UTC"),
                "start_time": pl.Datetime("us", "UTC"),
            },
            orient="row",
        )

        expected = [0] * n
        for job in {(c, j) for c, j, _, _ in rows}:
            mine = sorted(
                (i for i in range(n) if rows[i][:2] == job), key=lambda i, r=rows: order(r, i)
            )
            for k, i in enumerate(mine):
                expected[i] = k
        assert _run_index(keys).to_list() == expected


def test_an_array_task_exported_with_and_without_jobidraw_is_one_job(tmp_path):
    # The October run came from an export without JobIDRaw (its raw id is unknown), the
    # November one from an export with it: one job, so November's run is its second.
    october = tmp_path / "old.txt"
    old_header = HEADER.replace("JobIDRaw|", "")
    first = line(20, "14_2", "NODE_FAIL", D, D, D + timedelta(hours=1))
    october.write_text(f"{old_header}\n{first.split('|', 1)[1]}\n")
    later = line(20, "14_2", "COMPLETED", NOV, NOV, NOV + timedelta(hours=5))
    store = tmp_path / "store"
    ingest_files([october], store)
    ingest_files([export(tmp_path, "new.txt", [later])], store)
    whole = load_runs(store).sort("run_index")
    assert whole["job_id_raw"].to_list() == [None, 20]
    assert whole.select("state", "run_index").rows() == [("NODE_FAIL", 0), ("COMPLETED", 1)]
    november = load_runs(store, start=NOV)
    assert november.select("state", "run_index").rows() == [("COMPLETED", 1)]
    assert load_job_runs(store, "14_2").equals(job_runs(whole, "14_2"))
    by_raw = load_job_runs(store, "20")  # only the run that carries JobIDRaw, still the second
    assert by_raw.equals(job_runs(whole, "20")) and by_raw["run_index"].to_list() == [1]
