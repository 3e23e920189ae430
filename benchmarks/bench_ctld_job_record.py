"""Benchmark: what the EpilogSlurmctld's job record (where the output went) adds per job end.
Prints figures; asserts nothing.

In process, ``run_ctld`` for a failed 64-node job with the tag off (no Slurm call), the job
spool already holding ~0.8 MiB of records (2,500 jobs: the rewrite reads the whole file), once
with the record and once with it switched off, in the same run.  The spool lives on this
machine's /tmp (fsync included).  The one ``scontrol show job`` the hook makes for a failed
multi-node job's task count (``job_tasks``) is left out: it needs a slurmctld, and its cost is
that RPC's.

Usage: ``.venv/bin/python benchmarks/bench_ctld_job_record.py [--runs 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from aegis_slurm.node import epilog, epilog_ctld, spool

ENV = {
    "SLURM_JOB_EXIT_CODE2": "1:0",
    "SLURM_JOB_NODELIST": "gpu[001-064]",
    "SLURM_JOB_STDOUT": "/scratch/%u/%x-%j-%N.out",
    "SLURM_JOB_WORK_DIR": "/home/bob",
    "SLURM_JOB_USER": "bob",
    "SLURM_JOB_UID": "1002",
    "SLURM_JOB_NAME": "train",
    "SLURM_CLUSTER_NAME": "c",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    os.environ.update(ENV)
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "cbd.toml").write_text(
            f'[runtime]\nstate_dir = "{tmp}/state"\nsyslog = false\n'
            f'[epilog]\nspool_dir = "{tmp}/spool"\ntag = false\n'
        )
        cfg = epilog.load_config(str(tmp / "cbd.toml"))
        epilog_ctld.job_tasks = lambda *a, **k: None  # no slurmctld here (see the docstring)
        job = {
            "cluster": "c",
            "run": 0,
            "exit_code": "1:0",
            "partition": "p",
            "nodelist": "gpu[001-064]",
        }
        for i in range(2500):
            rec = epilog_ctld.job_record(
                dict(os.environ), {**job, "job_id": str(10**6 + i)}, "2026-11-23T00:00:00+00:00"
            )
            spool.append(tmp / "spool", rec, name=spool.JOB_FILE, max_bytes=1 << 30)
        size = (tmp / "spool" / spool.JOB_DIR / spool.JOB_FILE).stat().st_size

        def run(first_id: int) -> list[float]:
            out = []
            for i in range(args.runs):
                os.environ["SLURM_JOB_ID"] = str(first_id + i)
                t0 = time.perf_counter()
                epilog.run_ctld(cfg, spawn=False)
                out.append(time.perf_counter() - t0)
            return out

        with_record = run(1)
        real = epilog_ctld.record_job
        epilog_ctld.record_job = lambda *a, **k: None
        try:
            without = run(100_000)
        finally:
            epilog_ctld.record_job = real
    med = statistics.median
    print(
        json.dumps(
            {
                "runs": args.runs,
                "job_spool_bytes": size,
                "record_bytes": size // 2500,
                "ctld_failed_64_nodes_ms": {
                    "with_record_median": round(med(with_record) * 1000, 2),
                    "with_record_max": round(max(with_record) * 1000, 2),
                    "without_record_median": round(med(without) * 1000, 2),
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
