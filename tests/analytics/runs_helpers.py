"""Build small job-run tables with the real schema for hand-made cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl

from aegis_slurm.accounting.schema import RUN_SCHEMA

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def run(
    job: int,
    state: str,
    end_min: float,
    elapsed_min: float,
    nodes: list[str],
    gpus: int = 8,
    run_index: int = 0,
    **extra: Any,
) -> dict[str, Any]:
    end = T0 + timedelta(minutes=end_min)
    start = end - timedelta(minutes=elapsed_min)
    row: dict[str, Any] = dict.fromkeys(RUN_SCHEMA)
    row.update(
        cluster="c",
        job_id_raw=job,
        job_id=str(job),
        run_index=run_index,
        job_name=f"j{job}",
        user="u",
        account="a",
        partition="p",
        qos="normal",
        state=state,
        state_raw=state,
        ended=state != "REQUEUED",
        exit_code=0,
        exit_signal=0,
        submit_time=start - timedelta(minutes=1),
        eligible_time=start - timedelta(minutes=1),
        start_time=start,
        end_time=end,
        elapsed_s=round(elapsed_min * 60),
        timelimit_s=None,
        n_nodes=len(nodes),
        gpus=gpus,
        gpu_types="",
        node_list=",".join(nodes),
        nodes=nodes,
        failed_node="",
        reason="None",
        flags="",
        comment="",
        admin_comment="",
        system_comment="",
        work_dir="",
        source="test",
    )
    row.update(extra)
    return row


def frame(rows: list[dict[str, Any]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=RUN_SCHEMA)


def signals(rows: list[tuple[str, float, str, bool]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {"node": n, "time": T0 + timedelta(minutes=m), "signal": s, "critical": c}
            for n, m, s, c in rows
        ],
        schema={
            "node": pl.String,
            "time": pl.Datetime("us", "UTC"),
            "signal": pl.String,
            "critical": pl.Boolean,
        },
    )


def events(rows: list[tuple[str, float, str, str]]) -> pl.DataFrame:
    return pl.DataFrame(
        [
            {
                "cluster": "c",
                "node": n,
                "time_start": T0 + timedelta(minutes=m),
                "time_end": None,
                "state": s,
                "reason": r,
                "user": "root(0)",
            }
            for n, m, s, r in rows
        ],
        schema={
            "cluster": pl.String,
            "node": pl.String,
            "time_start": pl.Datetime("us", "UTC"),
            "time_end": pl.Datetime("us", "UTC"),
            "state": pl.String,
            "reason": pl.String,
            "user": pl.String,
        },
    )
