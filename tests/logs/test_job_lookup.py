"""`logs --job` after slurmctld forgot the job: the EpilogSlurmctld's recorded output pattern,
expanded the way Slurm expands sbatch's filename fields; only the job owner's files are read."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from aegis_slurm.accounting.signals import collect
from aegis_slurm.cli import main
from aegis_slurm.errors import NoDataError
from aegis_slurm.logs.job import (
    NO_ARRAY_TASK,
    JobInfo,
    diagnose_job_logs,
    expand_output_pattern,
    job_files,
    output_globs,
    readable_by_job,
)
from aegis_slurm.node import spool

from .corpus import make_case

OWNER = 1002  # the job's uid in the recorded hook environment (bob)


@pytest.fixture(autouse=True)
def _no_slurmctld(monkeypatch, tmp_path):
    """The analytics host has no scontrol (or slurmctld forgot the job): only the record."""
    empty = tmp_path / "no-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))


def test_slurm_filename_fields():
    e = expand_output_pattern
    assert e("/j/%j.out", "4242") == "/j/4242.out"
    assert e("/j/%J-%10j-%4A.out", "42") == "/j/42-0000000042-0042.out"
    assert e("/j/%A_%a-%b.out", "130", array_job_id="128", array_task_id="12") == "/j/128_12-2.out"
    # not an array task: %a is Slurm's NO_VAL, %A the job id
    assert e("/j/%A_%a.out", "7") == f"/j/7_{NO_ARRAY_TASK}.out"
    assert e("/j/%u-%x-%%-%q.out", "7", "bob", "train") == "/j/bob-train-%-%q.out"
    assert e("out/%j.log", "7", work_dir="/home/bob") == "/home/bob/out/7.log"
    assert e("/j/%N-%n-%t-%s.log", "7") == "/j/*-*-*-*.log"
    assert e("/j/%N-%2n-%t.log", "7", node="gpu3", node_index=2) == "/j/gpu3-02-*.log"
    # a backslash: Slurm expands nothing and drops the backslashes
    assert e("/j/\\%j.out", "7") == "/j/%j.out"
    # job-controlled values are glob-escaped: a name "*" matches only "*"
    assert e("/j/%x.out", "7", name="*") == "/j/[*].out"
    assert e("/j/[ab]%j.out", "7") == "/j/[[]ab]7.out"


def test_a_per_node_pattern_is_the_set_of_per_node_files(tmp_path):
    info = JobInfo(job_id="77", nodes=("gpu1", "gpu2", "gpu3"), stdout=str(tmp_path / "%j-%N.log"))
    assert output_globs(info.stdout, info) == [str(tmp_path / f"77-gpu{k}.log") for k in (1, 2, 3)]
    for n in ("gpu1", "gpu3", "gpu9"):  # gpu2 wrote nothing; gpu9 is not the job's
        (tmp_path / f"77-{n}.log").write_text("x\n")
    assert [p.name for p in job_files(info)] == ["77-gpu1.log", "77-gpu3.log"]
    # slurmstepd writes %N as the host's short hostname: not always the NodeName
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "77-vm.log").write_text("x\n")
    host = JobInfo(job_id="77", nodes=("node1", "node2"), stdout=str(tmp_path / "h" / "%j-%N.log"))
    assert [p.name for p in job_files(host)] == ["77-vm.log"]
    (tmp_path / "t").mkdir()
    per_task = JobInfo(job_id="77", nodes=("gpu1",), stdout=str(tmp_path / "t" / "%j-%t.log"))
    (tmp_path / "t" / "77-0.log").write_text("x\n")
    (tmp_path / "t" / "77-1.log").write_text("x\n")
    assert [p.name for p in job_files(per_task)] == ["77-0.log", "77-1.log"]
    rel = JobInfo(job_id="77", stdout="77-gpu1.log", work_dir=str(tmp_path))
    assert job_files(rel) == [tmp_path / "77-gpu1.log"]


def test_only_the_job_owners_regular_files_are_read(tmp_path):
    mine = tmp_path / "mine.out"
    mine.write_text("x\n")
    os.chown(mine, OWNER, OWNER)
    assert readable_by_job(mine, OWNER) is None
    other = tmp_path / "other.out"
    other.write_text("secret\n")  # root's, like /etc/shadow
    assert readable_by_job(other, OWNER) == f"owned by uid 0, not the job's uid {OWNER}"
    link = tmp_path / "link.out"
    link.symlink_to(other)
    os.lchown(link, OWNER, OWNER)  # the user's own link to a file that is not theirs
    assert "owned by uid 0" in readable_by_job(link, OWNER)
    fifo = tmp_path / "fifo.out"
    os.mkfifo(fifo)
    os.chown(fifo, OWNER, OWNER)
    assert readable_by_job(fifo, OWNER) == "not a regular file"  # would hang a read
    assert readable_by_job(mine, None) == "the job's uid is unknown"  # we run as root


def _record(spool_dir: Path, job: str, stdout: str, nodes: str, **kw) -> None:
    rec = {
        "kind": "job",
        "node": "slurmctld",
        "cluster": "testbed",
        "job_id": job,
        "run": 0,
        "captured_at": "2026-11-21T17:56:45+00:00",
        "exit_code": "1:0",
        "nodelist": nodes,
        "user": "bob",
        "uid": OWNER,
        "name": "train",
        "work_dir": "/nonexistent",
        "stdout": stdout,
        "stderr": "",
        **kw,
    }
    spool.append(spool_dir, rec, name=spool.JOB_FILE)


def test_logs_job_finds_the_files_from_the_recorded_pattern(tmp_path):
    case = make_case(tmp_path / "gen", "ecc", 3)
    out = tmp_path / "jobs"
    out.mkdir()
    for n in case.nodes:  # sbatch --output=/jobs/%j-%N.out, one file per node
        dst = out / f"4242-{n}.out"
        (case.path / f"{n}.log").rename(dst)
        os.chown(dst, OWNER, OWNER)
    hostlist = ",".join(case.nodes)
    _record(tmp_path / "spool", "4242", str(out / "%j-%N.out"), hostlist)
    store = tmp_path / "store"
    assert collect([tmp_path / "spool"], store)["job_records_in_store"] == 1

    info, verdict = diagnose_job_logs("4242", store=store)
    assert info.source == "epilog record" and info.nodes == tuple(case.nodes)
    assert verdict.nodes[0]["node"] == case.culprit
    assert "ECC" in verdict.lines[0]["text"]

    r = CliRunner().invoke(main, ["logs", "--job", "4242", "--store", str(store), "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["nodes"][0]["node"] == case.culprit

    # the culprit's file swapped for a link to a file the user does not own: refused, and said
    victim = out / f"4242-{case.culprit}.out"
    victim.unlink()
    secret = tmp_path / "secret"
    secret.write_text("root:$6$hash:19000:0:99999:7:::\n")
    victim.symlink_to(secret)
    info, verdict = diagnose_job_logs("4242", store=store)
    assert any(str(victim) in x and "owned by uid 0" in x for x in info.refused)
    assert all("root:$6$" not in ln["text"] for ln in verdict.lines)
    r = CliRunner().invoke(main, ["logs", "--job", "4242", "--store", str(store)])
    assert r.exit_code == 0 and "root:$6$" not in r.output
    assert f"aegis-slurm: warning: not read: {victim}: owned by uid 0" in r.stderr


def test_nothing_readable_is_a_one_line_no_data_error(tmp_path):
    out = tmp_path / "jobs"
    out.mkdir()
    (out / "4243.out").write_text("RuntimeError: CUDA error: an illegal memory access\n")
    _record(tmp_path / "spool", "4243", str(out / "%j.out"), "gpu[1-2]")
    store = tmp_path / "store"
    collect([tmp_path / "spool"], store)
    with pytest.raises(NoDataError, match=r"not read: .*4243.out: owned by uid 0"):
        diagnose_job_logs("4243", store=store)
    r = CliRunner().invoke(main, ["logs", "--job", "4243", "--store", str(store)])
    assert r.exit_code == 4
    with pytest.raises(NoDataError, match="no collected Epilog job record"):
        diagnose_job_logs("4244", store=store)
    # the admin's explicit PATH is read as given
    _, v = diagnose_job_logs("4243", store=store, paths=[out / "4243.out"])
    assert v.lines_read == 1


def test_array_task_by_its_array_id(tmp_path):
    out = tmp_path / "jobs"
    out.mkdir()
    for node, text in (
        ("gpu1", "iteration 1\n"),
        ("gpu2", "iteration 1\nOSError: [Errno 28] No space left on device\n"),
    ):
        f = out / f"130_5-{node}.out"
        f.write_text(text)
        os.chown(f, OWNER, OWNER)
    _record(
        tmp_path / "spool",
        "135",
        str(out / "%A_%a-%N.out"),
        "gpu[1-2]",
        array_job_id="130",
        array_task_id="5",
    )
    store = tmp_path / "store"
    collect([tmp_path / "spool"], store)
    for jid in ("135", "130_5"):
        _, v = diagnose_job_logs(jid, store=store)
        assert [n["node"] for n in v.nodes] == ["gpu2"], jid


def test_diagnose_find_logs_uses_the_recorded_pattern_from_the_spool(tmp_path):
    """``diagnose JOBID --spool DIR --find-logs`` before any ``signals collect``: the job record
    in the slurmctld's spool gives the output files."""
    case = make_case(tmp_path / "gen", "oom", 4)
    out = tmp_path / "jobs"
    out.mkdir()
    for n in case.nodes:
        dst = out / f"train-5151.{n}.log"
        (case.path / f"{n}.log").rename(dst)
        os.chown(dst, OWNER, OWNER)
    _record(tmp_path / "spool", "5151", "train-%j.%N.log", ",".join(case.nodes), work_dir=str(out))
    r = CliRunner().invoke(
        main, ["diagnose", "5151", "--spool", str(tmp_path / "spool"), "--find-logs", "--json"]
    )
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["verdict"] == "no-records"  # no node Epilog record: the logs alone name it
    assert d["logs"]["nodes"][0]["node"] == case.culprit
    assert d["named_by"][case.culprit] == ["logs"]


SCONTROL = Path(__file__).resolve().parents[1] / "fixtures" / "sacct"


def test_scontrol_line_recorded_on_22_05():
    from aegis_slurm.logs.job import info_from_scontrol

    line = (SCONTROL / "scontrol-22.05.8_show_job_pattern.txt").read_text().splitlines()[0]
    info = info_from_scontrol("44", line)
    assert info.stdout == "/srv/slurm-testbed/jobs/l4gone-44-%N.out"  # %N left as is
    assert (info.user, info.uid, info.name, info.tasks) == ("alice", 1001, "l4-gone", 4)
    assert info.nodes == ("node1", "node2", "node3", "node4")
    assert info.work_dir == "/srv/slurm-testbed/jobs"
    # while COMPLETING, NodeList holds only the nodes still completing: not the job's list
    shrunk = info_from_scontrol("44", line.replace("NodeList=node[1-4]", "NodeList=node[1-3]"))
    assert shrunk.nodes == ()


def test_completing_job_node_list_is_not_the_jobs():
    """Recorded on the 22.05 testbed while node1's Epilog was still running: NodeList=node1
    and NumNodes=1 agree, yet the job ran on node[1-4]; mapping task 2 onto it named node1."""
    from aegis_slurm.logs.job import info_from_scontrol

    line = (SCONTROL / "scontrol-22.05.8_show_job_completing.txt").read_text().splitlines()[0]
    info = info_from_scontrol("47", line)
    assert "NumNodes=1 " in line and "NodeList=node1 " in line
    assert info.nodes == ()
    assert (info.tasks, info.stdout) == (4, "/srv/slurm-testbed/jobs/l4cg-47.out")
    done = info_from_scontrol("47", line.replace("JobState=COMPLETING", "JobState=FAILED"))
    assert done.nodes == ("node1",)  # the same line once the job is done is taken as it is


def test_recorded_task_count_maps_srun_labels_to_the_right_node(tmp_path):
    """8 tasks on 2 nodes in one ``srun --label`` file; task 5 (on the second node) fails.
    Without the task count, label 5 could not be placed; with the record's count it is gpu2's."""
    out = tmp_path / "jobs"
    out.mkdir()
    lines = [f"{t}: iteration {i}/ 100 | lm loss: 2.{i}{t}" for i in range(1, 30) for t in range(8)]
    lines.append("5: RuntimeError: CUDA error: an illegal memory access was encountered")
    (out / "6161.out").write_text("\n".join(lines) + "\n")
    os.chown(out / "6161.out", OWNER, OWNER)
    store = tmp_path / "store"
    _record(tmp_path / "sp1", "6161", str(out / "%j.out"), "gpu[1-2]", tasks=8)
    collect([tmp_path / "sp1"], store)
    info, v = diagnose_job_logs("6161", store=store)
    assert info.tasks == 8
    assert v.nodes[0]["node"] == "gpu2" and "illegal memory access" in v.lines[0]["text"]
