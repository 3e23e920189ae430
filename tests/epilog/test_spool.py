"""The durable spool: atomic, private, bounded; kill -9 at random points never tears it."""

from __future__ import annotations

import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

from aegis_slurm.node import spool

WRITER = r"""
import sys
from aegis_slurm.node import spool
root, start = sys.argv[1], int(sys.argv[2])
i = start
while True:
    spool.append(root, {"node": "n1", "job_id": str(i), "run": 0, "pad": "x" * (i % 300)},
                 max_bytes=4096, keep=100000)
    print(i, flush=True)  # acknowledged: append() returned
    i += 1
"""


def rec(job: int, node: str = "n1", **kw) -> dict:
    return {"node": node, "job_id": str(job), "run": 0, "cluster": "c", **kw}


def test_records_are_private_and_readable(tmp_path):
    root = tmp_path / "spool"
    path = spool.append(root, rec(1, signals=[{"signal": "xid79"}]))
    spool.append(root, rec(2))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    got = list(spool.read_records([root]))
    assert [r["job_id"] for r in got] == ["1", "2"]
    assert got[0]["signals"] == [{"signal": "xid79"}]


def test_an_existing_world_readable_spool_dir_is_tightened(tmp_path):
    root = tmp_path / "spool"
    root.mkdir(mode=0o777)
    root.chmod(0o777)
    spool.append(root, rec(1))
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_same_job_run_node_replaces_instead_of_duplicating(tmp_path):
    spool.append(tmp_path, rec(5, signals=[]))
    spool.append(tmp_path, rec(5, signals=[{"signal": "gpu_lost"}]))
    spool.append(tmp_path, rec(5, node="n2"))
    got = list(spool.read_records([tmp_path]))
    assert len(got) == 2
    assert next(r for r in got if r["node"] == "n1")["signals"] == [{"signal": "gpu_lost"}]


def test_rotation_bounds_the_size(tmp_path):
    for i in range(400):
        spool.append(tmp_path, rec(i, pad="y" * 200), max_bytes=8192, keep=3)
    files = sorted((tmp_path / "n1").glob("signals.jsonl*"))
    assert [f.name for f in files] == [
        "signals.jsonl",
        "signals.jsonl.1",
        "signals.jsonl.2",
        "signals.jsonl.3",
    ]
    assert all(f.stat().st_size <= 8192 for f in files)
    jobs = sorted(int(r["job_id"]) for r in spool.read_records([tmp_path]))
    assert jobs[-1] == 399 and jobs == list(range(jobs[0], 400))  # newest kept, contiguous
    assert len(jobs) < 400


def test_garbage_lines_are_reported_not_fatal(tmp_path):
    spool.append(tmp_path, rec(1))
    (tmp_path / "n2").mkdir()
    (tmp_path / "n2" / "signals.jsonl").write_text('{"node": "n2", "job_id": "3"}\nnot json\n')
    errors: list[str] = []
    got = list(spool.read_records([tmp_path], errors))
    assert sorted(r["node"] for r in got) == ["n1", "n2"]
    assert len(errors) == 1 and "not JSON" in errors[0]


def test_kill_9_at_random_points_never_tears_or_loses_a_record(tmp_path):
    """80 writer processes, each SIGKILLed at a random instant while appending in a loop
    (with rotation every ~4 KiB).  After each kill: every file parses line by line, no temp file
    is visible to readers, and every record the writer acknowledged is there."""
    root = tmp_path / "spool"
    rng = random.Random(1234)
    acked: set[int] = set()
    start = 0
    kills = 0
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    for _ in range(80):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), str(start)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        lines: list[str] = []
        reader = threading.Thread(target=lambda p=proc, out=lines: out.extend(p.stdout))
        reader.start()
        time.sleep(rng.uniform(0.05, 0.45))  # start-up ~0.05 s, an append ~30 ms
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        kills += proc.returncode == -signal.SIGKILL
        got = [int(x) for x in lines if x.strip().isdigit()]
        acked.update(got)
        start = (max(got) + 1) if got else start + 1000  # never reuse a key
        start = max(start, max(acked, default=-1) + 1)
        errors: list[str] = []
        present = {int(r["job_id"]) for r in spool.read_records([root], errors)}
        assert errors == [], errors
        assert acked <= present, sorted(acked - present)[:10]
        for f in spool.spool_files([root]):
            assert ".tmp." not in f.name
            for line in f.read_text().splitlines():
                json.loads(line)
    assert kills >= 70  # the writers really were killed, not finished
    assert len(acked) > 150  # and they really were writing


def test_tail_records_reads_the_newest_records_only(tmp_path):
    for i in range(300):
        spool.append(tmp_path, rec(i, pad="z" * 100), max_bytes=1 << 20)
    tail = spool.tail_records(tmp_path / "n1", nbytes=2048)
    jobs = [int(r["job_id"]) for r in tail]
    assert jobs[-1] == 299 and jobs == list(range(jobs[0], 300)) and len(jobs) < 300
    assert spool.tail_records(tmp_path / "nobody") == []


def test_concurrent_epilogs_on_one_node_lose_nothing(tmp_path):
    """Several jobs ending at once on one node: the flock serialises the rewrites."""
    code = (
        "import sys\nfrom aegis_slurm.node import spool\n"
        "for i in range(25):\n"
        "    spool.append(sys.argv[1], {'node': 'n1', 'job_id': f'{sys.argv[2]}-{i}', "
        "'run': 0})\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(w)], env=env)
        for w in range(4)
    ]
    assert [p.wait() for p in procs] == [0, 0, 0, 0]
    jobs = {r["job_id"] for r in spool.read_records([tmp_path])}
    assert jobs == {f"{w}-{i}" for w in range(4) for i in range(25)}


def test_append_replaces_only_the_same_key_however_the_job_id_was_spelled(tmp_path):
    """Lines are pre-filtered by how they spell the job id before being parsed: a number or a
    string of the same id is the same key; 5 is not 55 nor 15."""
    from aegis_slurm.node import spool as sp

    base = {"node": "n1", "cluster": "c", "run": 0, "captured_at": "t"}
    for jid in (5, "55", "15", 'x"5'):
        sp.append(tmp_path, {**base, "job_id": jid})
    sp.append(tmp_path, {**base, "job_id": "5", "new": True})
    sp.append(tmp_path, {**base, "job_id": 'x"5', "new": True})
    recs = list(sp.read_records([tmp_path]))
    assert sorted(str(r["job_id"]) for r in recs) == ["15", "5", "55", 'x"5']
    assert {str(r["job_id"]) for r in recs if r.get("new")} == {"5", 'x"5'}
