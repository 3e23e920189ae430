"""The EpilogSlurmctld's job record (where the job's output went), from the recorded 22.05 hook
environment, through the spool into the store (``signals collect``)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from aegis_slurm.accounting.signals import JOBS, collect, job_output, load_jobs
from aegis_slurm.node import epilog, spool
from aegis_slurm.node.epilog_ctld import job_record
from aegis_slurm.node.epilog_node import job_env

REPO = Path(__file__).resolve().parents[2]
# recorded by the Slurm 22.05.8 testbed's recording hooks (tests/fixtures/sacct/README.md)
HOOKS = REPO / "tests" / "fixtures" / "sacct" / "hooks-22.05.8_env.log"


def recorded_env(hook: str, job: int) -> dict[str, str]:
    """One recorded hook invocation's environment (values may hold spaces: split on ' KEY=')."""
    import re

    for line in HOOKS.read_text().splitlines():
        if f" {hook} node=" in line and f" job={job} env: " in line:
            body = line.split(" env: ", 1)[1].rstrip()
            parts = re.split(r" (?=[A-Z_][A-Z0-9_]*=)", body)
            return dict(p.split("=", 1) for p in parts)
    raise AssertionError(f"no {hook} line for job {job}")


def test_ctld_record_from_the_recorded_22_05_environment(monkeypatch):
    env = recorded_env("epilog_slurmctld", 2)
    assert env["SLURM_JOB_STDOUT"] == "/srv/slurm-testbed/jobs/%j.out"  # unexpanded
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rec = job_record(env, job_env(), "2026-11-21T17:56:45+00:00")
    assert rec == {
        "kind": "job",
        "node": "slurmctld",
        "cluster": "testbed",
        "job_id": "2",
        "run": 0,
        "captured_at": "2026-11-21T17:56:45+00:00",
        "exit_code": "0:0",
        "partition": "batch",
        "nodelist": "node[5-8]",
        "user": "bob",
        "uid": 1002,
        "name": "train-4n",
        "array_job_id": "",
        "array_task_id": "",
        "work_dir": "/srv/slurm-testbed/jobs",
        "stdout": "/srv/slurm-testbed/jobs/%j.out",
        "stderr": "",  # not set apart: 22.05 exports no SLURM_JOB_STDERR then
        "tasks": None,  # not in the hook environment: job_tasks asks slurmctld
    }
    # a requeued run (job 20, restart 1) is its own record
    env20 = recorded_env("epilog_slurmctld", 20)
    for k, v in env20.items():
        monkeypatch.setenv(k, v)
    rec20 = job_record(env20, job_env(), "2026-11-21T17:56:55+00:00")
    assert (rec20["job_id"], rec20["run"], rec20["user"], rec20["uid"]) == ("20", 1, "alice", 1001)


def test_hostile_job_strings_are_bounded_and_cleaned(monkeypatch):
    env = {
        "SLURM_JOB_ID": "77",
        "SLURM_JOB_STDOUT": "/x/" + "a" * 10_000 + "/%j.out",
        "SLURM_JOB_STDERR": "/x/$(reboot)\n;rm -rf /\x1b[31m.err",
        "SLURM_JOB_NAME": "n\x07ame" * 200,
        "SLURM_JOB_UID": "-1",
        "SLURM_ARRAY_JOB_ID": "12; rm",
        "SLURM_ARRAY_TASK_ID": "3",
        "SLURM_JOB_WORK_DIR": "\udcff/home/bob",
    }
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    rec = job_record(env, job_env(), "2026-11-21T17:56:45+00:00")
    assert len(rec["stdout"]) == 4096 and len(rec["name"]) == 256
    assert rec["stderr"] == "/x/$(reboot);rm -rf /[31m.err"  # kept as text, never run
    assert all(c.isprintable() for k in ("stdout", "stderr", "name") for c in rec[k])
    assert rec["uid"] is None and rec["array_job_id"] == "" and rec["array_task_id"] == "3"
    assert rec["work_dir"] == "\ufffd/home/bob"
    json.dumps(rec).encode()  # storable


def _ctld_cfg(tmp_path: Path) -> dict:
    cfg_path = tmp_path / "cbd.toml"
    cfg_path.write_text(
        f'[runtime]\nstate_dir = "{tmp_path}/state"\n[epilog]\n'
        f'spool_dir = "{tmp_path}/spool"\ntag = false\ncommand_timeout_s = 0.5\n'
    )
    return epilog.load_config(str(cfg_path))


def test_run_ctld_spools_the_record_apart_and_collect_stores_it(tmp_path, monkeypatch):
    cfg = _ctld_cfg(tmp_path)
    env = recorded_env("epilog_slurmctld", 2)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", "1:0")  # the run failed
    res = epilog.run_ctld(cfg, spawn=False)
    path = Path(res["job_record"])
    assert path == tmp_path / "spool" / "slurmctld" / "jobs.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # readers of node records never see it
    assert list(spool.read_records([tmp_path / "spool"])) == []
    (rec,) = spool.read_records([tmp_path / "spool"], name=spool.JOB_FILE)
    assert rec["stdout"] == "/srv/slurm-testbed/jobs/%j.out" and rec["exit_code"] == "1:0"
    assert rec["tasks"] is None  # no slurmctld answered (bounded wait): the record still goes
    # an Epilog re-run of the same run replaces its record
    epilog.run_ctld(cfg, spawn=False)
    assert len(list(spool.read_records([tmp_path / "spool"], name=spool.JOB_FILE))) == 1

    store = tmp_path / "store"
    rep = collect([tmp_path / "spool"], store)
    assert rep["records_read"] == 0 and rep["job_records_read"] == 1
    assert rep["job_records_changed"] == 1 and rep["job_records_in_store"] == 1
    assert (store / JOBS).exists()
    again = collect([tmp_path / "spool"], store)
    assert again["job_records_changed"] == 0 and again["job_records_in_store"] == 1
    got = job_output(store, "2")
    assert got["stdout"] == "/srv/slurm-testbed/jobs/%j.out" and got["uid"] == 1002
    assert got["nodelist"] == "node[5-8]" and got["work_dir"] == "/srv/slurm-testbed/jobs"
    assert job_output(store, "3") is None
    assert job_output(None, "2", [tmp_path / "spool"])["name"] == "train-4n"


def test_clean_single_node_job_writes_no_record(tmp_path, monkeypatch):
    cfg = _ctld_cfg(tmp_path)
    for k, v in recorded_env("epilog_slurmctld", 21).items():  # node1 only, 0:0
        monkeypatch.setenv(k, v)
    res = epilog.run_ctld(cfg, spawn=False)
    assert "job_record" not in res
    assert not (tmp_path / "spool").exists()


def test_unwritable_spool_is_logged_not_fatal(tmp_path, monkeypatch):
    cfg = _ctld_cfg(tmp_path)
    (tmp_path / "spool").write_text("a file where the spool directory should be")
    for k, v in recorded_env("epilog_slurmctld", 2).items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("SLURM_JOB_EXIT_CODE2", "1:0")
    res = epilog.run_ctld(cfg, spawn=False)
    assert res["job_record"] is None and res["loop"]["counted"] == 1  # the guard still ran


@pytest.mark.parametrize(
    ("field", "value", "why"),
    [
        ("stdout", "/a\nb", "control characters"),
        ("stdout", "/" * 5000, "longer than 4096"),
        ("uid", "1002", "bad uid"),
        ("tasks", -1, "bad tasks"),
        ("array_task_id", "1;2", "bad array_task_id"),
        ("job_id", "12a", "bad job_id"),
        ("kind", "node", "not a job record"),
    ],
)
def test_collect_counts_bad_job_records(tmp_path, field, value, why):
    good = {
        "kind": "job",
        "node": "slurmctld",
        "cluster": "c",
        "job_id": "5",
        "run": 0,
        "captured_at": "2026-11-21T17:56:45+00:00",
        "stdout": "/j/%j.out",
        "uid": 1001,
    }
    spool.append(tmp_path / "spool", good, name=spool.JOB_FILE)
    spool.append(tmp_path / "spool", {**good, "run": 1, field: value}, name=spool.JOB_FILE)
    rep = collect([tmp_path / "spool"], tmp_path / "store")
    assert rep["job_records_read"] == 2 and rep["n_job_record_errors"] == 1
    assert why in rep["job_record_errors"][0]
    assert load_jobs(tmp_path / "store")["run"].to_list() == [0]


def test_signals_collect_text_counts_job_records(tmp_path):
    from click.testing import CliRunner

    from aegis_slurm.cli import main

    rec = {
        "kind": "job",
        "node": "slurmctld",
        "job_id": "5",
        "run": 0,
        "captured_at": "2026-11-21T17:56:45+00:00",
        "stdout": "/j/\x1b%j.out",  # damaged on disk: a control character
    }
    spool.append(tmp_path / "spool", rec, name=spool.JOB_FILE)
    spool.append(tmp_path / "spool", {**rec, "run": 1, "stdout": "/j/%j.out"}, name=spool.JOB_FILE)
    args = [
        "signals",
        "collect",
        "--spool",
        str(tmp_path / "spool"),
        "--store",
        str(tmp_path / "s"),
    ]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output
    assert "2 EpilogSlurmctld job records read: 1 new or changed; 1 in" in r.stdout
    assert "skipped: job record 5: stdout has control characters" in r.stderr


def test_job_output_is_the_latest_capture(tmp_path):
    """A requeued job's latest run; a reused job id (run 1 of an old job, run 0 of the new one)
    names the newest job."""
    base = {"kind": "job", "node": "slurmctld", "cluster": "c", "job_id": "9", "stdout": "/a"}
    spool.append(tmp_path / "sp", {**base, "run": 1, "captured_at": "2026-01-01T00:00:00+00:00"},
                 name=spool.JOB_FILE)  # fmt: skip
    spool.append(tmp_path / "sp", {**base, "run": 0, "captured_at": "2026-02-01T00:00:00+00:00",
                 "stdout": "/new"}, name=spool.JOB_FILE)  # fmt: skip
    collect([tmp_path / "sp"], tmp_path / "st")
    assert job_output(tmp_path / "st", "9")["stdout"] == "/new"
    assert job_output(None, "9", [tmp_path / "sp"])["stdout"] == "/new"
