"""Ingest benchmark: sacct --parsable2 export -> Parquet store, ours vs a pandas baseline.

    python benchmarks/bench_ingest.py                 # 1M and 4M records
    python benchmarks/bench_ingest.py --sizes 200000  # a quick run

Ours is the `aegis-slurm ingest FILE --store DIR --json` command, timed from interpreter start
to the end of the commit, on the clean export and again on a copy with one broken record
(`dirty_*`: the streaming fast path is refused and the file is read piece by piece).  Each
measurement runs in a fresh Python process and reports its own peak RSS from /proc/self/status
VmHWM (ru_maxrss would also count the benchmark parent, whose maximum survives fork + exec).
Targets on a 2-core machine (issue 2): 4M records (~0.7 GB) in <= 8 s wall, <= 2 GB peak RSS,
and >= 3x faster than the baseline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from aegis_slurm.simulate.history import EXPORT_FIELDS

FIELDS = EXPORT_FIELDS  # the simulator's export layout: free text last
STATES = np.array(
    ["COMPLETED"] * 60
    + ["FAILED"] * 15
    + ["CANCELLED by 1001"] * 12
    + ["TIMEOUT"] * 5
    + ["NODE_FAIL"] * 2
    + ["PREEMPTED"] * 3
    + ["REQUEUED"] * 2
    + ["OUT_OF_MEMORY"]
)


def make_export(path: Path, n: int, seed: int = 7) -> int:
    """Write an n-record export shaped like a 2,048-node GPU cluster's history."""
    rng = np.random.default_rng(seed)
    nodes = np.minimum(2 ** rng.geometric(0.45, n).clip(1, 10) // 2, 256).clip(1)
    first = rng.integers(1, 2048 - 256, n)
    submit = 1_790_000_000 + np.sort(rng.integers(0, 30 * 86400, n))
    wait = rng.exponential(600, n).astype(np.int64)
    elapsed = rng.exponential(7200, n).astype(np.int64)
    ids = np.arange(1_000_000, 1_000_000 + n)
    fmt = "%Y-%m-%dT%H:%M:%S"

    def ts(x: np.ndarray) -> pl.Series:
        return pl.from_epoch(pl.Series(x), "s").dt.strftime(fmt)

    frame = (
        pl.DataFrame(
            {
                "JobIDRaw": ids,
                "JobID": ids,
                "Cluster": "rsc",
                "User": pl.Series(rng.integers(0, 500, n)).cast(pl.String).str.pad_start(4, "0"),
                "Account": "research",
                "Partition": "gpu",
                "QOS": "normal",
                "State": STATES[rng.integers(0, len(STATES), n)],
                "ExitCode": "0:0",
                "DerivedExitCode": "0:0",
                "Submit": ts(submit),
                "Eligible": ts(submit),
                "Start": ts(submit + wait),
                "End": ts(submit + wait + elapsed),
                "ElapsedRaw": elapsed,
                "TimelimitRaw": 4320,
                "NNodes": nodes,
                "_first": first,
                "_last": first + nodes - 1,
            }
        )
        .with_columns(
            pl.when(pl.col("NNodes") == 1)
            .then(pl.format("gpu{}", pl.col("_first").cast(pl.String).str.pad_start(4, "0")))
            .otherwise(
                pl.format(
                    "gpu[{}-{}]",
                    pl.col("_first").cast(pl.String).str.pad_start(4, "0"),
                    pl.col("_last").cast(pl.String).str.pad_start(4, "0"),
                )
            )
            .alias("NodeList"),
            pl.format(
                "billing={},cpu={},gres/gpu:h100={},gres/gpu={},mem={}G,node={}",
                pl.col("NNodes") * 8,
                pl.col("NNodes") * 96,
                pl.col("NNodes") * 8,
                pl.col("NNodes") * 8,
                pl.col("NNodes") * 1024,
                pl.col("NNodes"),
            ).alias("AllocTRES"),
            pl.lit("None").alias("Reason"),
            pl.lit("SchedMain,StartRecieved").alias("Flags"),
            pl.lit("").alias("AdminComment"),
            pl.lit("").alias("Comment"),
            pl.lit("/home/user/run").alias("WorkDir"),
            pl.format("train-{}", pl.col("JobIDRaw") % 997).alias("JobName"),
        )
        .select(FIELDS)
    )
    frame.write_csv(path, separator="|", quote_style="never")
    return path.stat().st_size


# The command admins run, `aegis-slurm ingest FILE --store DIR --json`, in this process so that
# VmHWM is its own peak (the CLI sets polars' allocator before polars loads: see aegis_slurm.cli).
OURS = """
import sys, time, json
t0 = time.perf_counter()
from aegis_slurm.cli import main
main(["ingest", sys.argv[1], "--store", sys.argv[2], "--json"], standalone_mode=False)
wall = time.perf_counter() - t0
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
report = json.loads(open(sys.argv[2] + "/ingest_log.jsonl").readlines()[-1])
print(json.dumps({"wall_s": wall, "peak_rss_mb": rss, "kept": report["rows_kept"],
                  "rejected": report["rows_rejected"]}))
"""

# A plain pandas read_csv-then-convert: what a site script would do to get the same table.
BASELINE = """
import sys, time, json
t0 = time.perf_counter()
import hostlist, pandas as pd
df = pd.read_csv(sys.argv[1], sep="|", dtype=str, keep_default_na=False)
for col in ("Submit", "Eligible", "Start", "End"):
    df[col] = pd.to_datetime(df[col], format="%Y-%m-%dT%H:%M:%S", errors="coerce", utc=True)
df["ElapsedRaw"] = pd.to_numeric(df["ElapsedRaw"], errors="coerce")
df["NNodes"] = pd.to_numeric(df["NNodes"], errors="coerce")
df["state"] = df["State"].str.split(" ").str[0]
df["gpus"] = pd.to_numeric(df["AllocTRES"].str.extract(r"(?:^|,)gres/gpu=(\\d+)")[0])
uniq = {v: hostlist.expand_hostlist(v) for v in df["NodeList"].unique()}
df["nodes"] = df["NodeList"].map(uniq)
df.to_parquet(sys.argv[2] + "/baseline.parquet")
wall = time.perf_counter() - t0
rss = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")) / 1024
print(json.dumps({"wall_s": wall, "peak_rss_mb": rss, "kept": len(df)}))
"""


def break_one_record(export: Path) -> None:
    """Append a continuation line to the record 90% of the way into ``export`` (in place)."""
    data = export.read_bytes()
    end = data.index(b"\n", data.index(b"\n", int(len(data) * 0.9)) + 1)
    export.write_bytes(data[:end] + b"\ncontinued" + data[end:])


def run(code: str, export: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", code, str(export), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,4000000")
    parser.add_argument("--no-baseline", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            export = Path(tmp) / f"sacct-{n}.txt"
            t0 = time.perf_counter()
            size = make_export(export, n)
            gen = time.perf_counter() - t0
            store = Path(tmp) / f"store-{n}"
            ours = run(OURS, export, store)
            row = {
                "records": n,
                "export_mb": round(size / 2**20, 1),
                "generate_s": round(gen, 1),
                "ours_wall_s": round(ours["wall_s"], 2),
                "ours_peak_rss_mb": round(ours["peak_rss_mb"]),
                "ours_kept": ours["kept"],
            }
            if not args.no_baseline:
                base_dir = Path(tmp) / f"base-{n}"
                base_dir.mkdir()
                base = run(BASELINE, export, base_dir)
                row |= {
                    "baseline_wall_s": round(base["wall_s"], 2),
                    "baseline_peak_rss_mb": round(base["peak_rss_mb"]),
                    "speedup": round(base["wall_s"] / ours["wall_s"], 2),
                }
            # The same export with one record broken by a newline in its JobName, 90% of the way
            # in: the fast path is refused (delimiter count) and the file goes piece by piece.
            break_one_record(export)
            dirty = run(OURS, export, Path(tmp) / f"store-dirty-{n}")
            row |= {
                "dirty_wall_s": round(dirty["wall_s"], 2),
                "dirty_peak_rss_mb": round(dirty["peak_rss_mb"]),
                "dirty_kept": dirty["kept"],
            }
            results.append(row)
            print(json.dumps(row), flush=True)
            export.unlink()


if __name__ == "__main__":
    main()
