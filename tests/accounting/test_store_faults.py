"""The store under faults (issue 12, items 11-14): killed ingests, racing readers, bad files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from aegis_slurm.accounting import ingest_files, load_runs
from aegis_slurm.accounting import store as store_mod
from aegis_slurm.accounting.store import StoreError
from aegis_slurm.accounting.store_check import check_store

HEADER = "JobIDRaw|JobID|Cluster|State|ExitCode|Submit|Start|End|ElapsedRaw|NNodes|NodeList|JobName"
CLI = [sys.executable, "-m", "aegis_slurm.cli"]


def export(tmp_path: Path, name: str, *jobs: int, state: str = "COMPLETED") -> Path:
    lines = [
        f"{j}|{j}|c|{state}|0:0|2026-11-01T00:00:00|2026-11-01T00:00:01|2026-11-01T01:00:01|3600|1|n1|x"
        for j in jobs
    ]
    path = tmp_path / name
    path.write_text("\n".join([HEADER, *lines]) + "\n")
    return path


def temp_files(store: Path) -> list[str]:
    return sorted(p.name for p in store.glob("runs/month=*/.*"))


def test_files_of_an_ingest_killed_with_sigkill_are_swept_by_the_next_one(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1, 2)], store)
    # A real ingest killed with SIGKILL after staging its parts, before publishing them.
    script = textwrap.dedent(
        f"""
        import os, signal
        from aegis_slurm.accounting.ingest import parse_export
        from aegis_slurm.accounting.store import RunWriter
        writer = RunWriter({str(store)!r})
        parsed = parse_export(open({str(export(tmp_path, "b.txt", 3))!r}, "rb").read(), source="b")
        writer.add(parsed.runs)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    killed = subprocess.run([sys.executable, "-c", script], check=False)
    assert killed.returncode == -9
    assert [n[:8] for n in temp_files(store)] == [".staged-"]
    # A live writer's file (this process) is never touched.
    live = (
        store
        / "runs"
        / "month=2026-11"
        / f".staged-20261101T000000-{os.getpid()}-{store_mod._HOST}-00000.parquet"
    )
    live.write_bytes(b"in progress")
    ingest_files([export(tmp_path, "c.txt", 4)], store)
    assert temp_files(store) == [live.name]
    assert sorted(load_runs(store).get_column("job_id").to_list()) == ["1", "2", "4"]


@pytest.mark.parametrize("window", [False, True])
def test_a_reader_listing_parts_just_before_a_compaction_retries(tmp_path, monkeypatch, window):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1, 2)], store)
    ingest_files([export(tmp_path, "b.txt", 3)], store)  # two parts, no repeated key
    real = store_mod._load_runs
    calls = []

    def compact_first(store_dir, files, *window_args):
        calls.append(len(files))
        if len(calls) == 1:  # an ingest compacts the month after the reader listed it
            store_mod._compact(store / "runs" / "month=2026-11")
        return real(store_dir, files, *window_args)

    monkeypatch.setattr(store_mod, "_load_runs", compact_first)
    since = datetime(2026, 11, 1, tzinfo=UTC) if window else None
    runs = load_runs(store, start=since)  # the windowed read lists and retries the same way
    assert calls == [2, 1]
    assert sorted(runs.get_column("job_id").to_list()) == ["1", "2", "3"]


def test_compaction_syncs_the_new_part_and_directory_before_unlinking_old_parts(
    tmp_path, monkeypatch
):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    ingest_files([export(tmp_path, "b.txt", 1, state="FAILED")], store)
    folder = store / "runs" / "month=2026-11"
    ingest_files([export(tmp_path, "c.txt", 2)], store)  # a third part, then repeat a key:
    events: list[str] = []
    monkeypatch.setattr(
        store_mod, "_fsync_file", lambda p: events.append(f"fsync {Path(p).name[:8]}")
    )
    monkeypatch.setattr(store_mod, "fsync_dir", lambda p: events.append("fsync dir"))
    real_unlink = Path.unlink

    def unlink(self: Path, missing_ok: bool = False) -> None:
        events.append(f"unlink {self.name[:5]}")
        real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink)
    store_mod._compact(folder)
    first_unlink = events.index("unlink part-")
    assert events[:first_unlink] == ["fsync .compact", "fsync dir"]
    assert len(list(folder.glob("part-*.parquet"))) == 1


def test_a_corrupt_part_is_named_and_store_check_repairs_it(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    ingest_files([export(tmp_path, "b.txt", 2)], store)
    bad = sorted((store / "runs" / "month=2026-11").glob("part-*.parquet"))[0]
    bad.write_bytes(b"PAR1 not really parquet PAR1")
    with pytest.raises(StoreError, match=bad.name) as info:
        load_runs(store)
    assert "store check --repair" in str(info.value)

    res = subprocess.run(
        [*CLI, "store", "check", "--store", str(store)], capture_output=True, text=True
    )
    assert res.returncode == 3, res.stderr
    assert bad.name in res.stdout and "Traceback" not in res.stderr
    res = subprocess.run(
        [*CLI, "store", "check", "--store", str(store), "--repair", "--json"],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)
    assert found["ok"] and found["problems"][0]["path"] == str(bad)
    assert (store / "quarantine" / "month=2026-11" / bad.name).exists()
    assert load_runs(store).get_column("job_id").to_list() in (["1"], ["2"])


def test_a_foreign_schema_part_is_named(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    foreign = store / "runs" / "month=2026-11" / "part-foreign.parquet"
    pl.DataFrame({"job_id": ["x"], "other": [1]}).write_parquet(foreign)
    with pytest.raises(StoreError, match=r"part-foreign\.parquet: not a job-run part"):
        load_runs(store)
    report = check_store(store, repair=True)
    assert report.ok and load_runs(store).height == 1


@pytest.mark.parametrize("content", ["{broken", "[]", "\xff\xfe"])
def test_a_broken_meta_json_is_named_and_rewritten_by_repair(tmp_path, content):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    (store / "meta.json").write_text(content, encoding="latin-1")
    with pytest.raises(StoreError, match=r"meta\.json"):
        load_runs(store)
    assert not check_store(store).ok
    assert check_store(store, repair=True).ok
    assert load_runs(store).height == 1


def test_a_full_disk_is_one_store_error(tmp_path, monkeypatch):
    def no_space(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", no_space)
    store = tmp_path / "store"
    with pytest.raises(StoreError, match="No space left on device"):
        ingest_files([export(tmp_path, "a.txt", 1)], store)
    assert temp_files(store) == []


def test_store_check_on_a_sound_store_and_on_a_non_store(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    assert check_store(store).ok and check_store(store).findings == []
    with pytest.raises(StoreError, match="not an aegis-slurm store"):
        check_store(tmp_path / "nothing")


def test_concurrent_ingests_and_readers_see_one_consistent_store(tmp_path):
    """Two ingests repeating the same keys (so each compacts the month) race a reader."""
    store = tmp_path / "store"
    jobs = range(1, 41)
    ingest_files([export(tmp_path, "base.txt", *jobs)], store)
    exports = [
        export(tmp_path, f"{state}.txt", *jobs, state=state) for state in ("FAILED", "COMPLETED")
    ]
    script = textwrap.dedent(
        """
        import sys
        from aegis_slurm.accounting import ingest_files
        for _ in range(4):
            ingest_files([sys.argv[2]], sys.argv[1])
        """
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(store), str(path)]) for path in exports
    ]
    reads = 0
    while any(w.poll() is None for w in writers) or reads < 3:
        runs = load_runs(store)  # never FileNotFoundError, never a run twice or missing
        assert sorted(runs.get_column("job_id").cast(int).to_list()) == list(jobs)
        reads += 1
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    assert temp_files(store) == []
    assert load_runs(store).height == len(jobs)


def test_ingest_into_a_store_with_a_corrupt_part_names_it_and_leaves_nothing_staged(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1)], store)
    [part] = (store / "runs" / "month=2026-11").glob("part-*.parquet")
    part.write_bytes(b"not parquet at all")
    with pytest.raises(StoreError, match=part.name):
        ingest_files([export(tmp_path, "b.txt", 2)], store)
    assert temp_files(store) == []
    res = subprocess.run(
        [*CLI, "ingest", str(export(tmp_path, "c.txt", 3)), "--store", str(store)],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert part.name in res.stderr and "store check --repair" in res.stderr


def test_store_check_repair_racing_compacting_ingests_never_quarantines_a_sound_part(tmp_path):
    """A part a concurrent compaction unlinks was once taken for a corrupt one (and the move
    failed with a bare 'No such file'); check and repair now hold the month's lock."""
    store = tmp_path / "a store with spaces"
    jobs = range(1, 401)
    ingest_files([export(tmp_path, "base.txt", *jobs)], store)
    exports = [
        export(tmp_path, f"{state}.txt", *jobs, state=state) for state in ("FAILED", "COMPLETED")
    ]
    script = textwrap.dedent(
        """
        import sys
        from aegis_slurm.accounting import ingest_files
        for _ in range(6):
            ingest_files([sys.argv[2]], sys.argv[1])
        """
    )
    writers = [
        subprocess.Popen([sys.executable, "-c", script, str(store), str(path)]) for path in exports
    ]
    checks = 0
    while any(w.poll() is None for w in writers) or checks < 3:
        report = check_store(store, repair=True)
        assert [f.problem for f in report.findings if "part" in f.problem] == []
        checks += 1
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    assert not (store / "quarantine").exists()
    assert sorted(load_runs(store).get_column("job_id").cast(int).to_list()) == list(jobs)


def test_quarantine_never_overwrites_an_earlier_quarantined_part(tmp_path):
    store = tmp_path / "store"
    ingest_files([export(tmp_path, "a.txt", 1, 2)], store)
    (part,) = store.glob("runs/month=*/part-*.parquet")
    earlier = store / "quarantine" / part.parent.name / part.name
    earlier.parent.mkdir(parents=True)
    earlier.write_bytes(b"an earlier bad part the admin has not looked at yet")
    part.write_bytes(b"corrupt")
    report = check_store(store, repair=True)
    assert report.ok
    assert earlier.read_bytes() == b"an earlier bad part the admin has not looked at yet"
    assert b"corrupt" in [p.read_bytes() for p in earlier.parent.iterdir()]
    assert check_store(store, repair=True).findings == []  # idempotent
