"""``aegis-slurm demo``: a simulated month of a GPU cluster, ingested and analysed end to end."""

from __future__ import annotations

import json
from pathlib import Path

import click

#: The demo history starts on a month boundary so its report covers whole months.
DEMO_START = "2023-12-01T00:00:00"


@click.command()
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Directory for the report, the demo history, its store and summary.json.",
)
@click.option("--nodes", default=256, show_default=True, help="Simulated nodes (8 GPUs each).")
@click.option(
    "--days",
    default=62.0,
    show_default=True,
    help="Simulated days from 2023-12-01 (two months: the report compares them).",
)
@click.option("--seed", default=1, show_default=True, help="Simulator RNG seed.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
def demo(out: Path, nodes: int, days: float, seed: int, as_json: bool) -> None:
    """Simulate a cluster history with planted failures and crash loops, ingest it through the
    real sacct parser, write the monthly reliability report and print where it is.

    The report (last full month) goes to OUT/index.html, OUT/report.json and OUT/figures/; the
    history to OUT/history/ (a sacct --parsable2 export, sacctmgr events, node signals), the
    store to OUT/store/, and the headline figures with the planted truth to OUT/summary.json.
    """
    from aegis_slurm.accounting import ingest_files
    from aegis_slurm.report.builder import build_report, latest_month
    from aegis_slurm.sections import compute, load_inputs
    from aegis_slurm.simulate.history import SimConfig, simulate, write_history

    out.mkdir(parents=True, exist_ok=True)
    (out / "history").mkdir(exist_ok=True)
    # Five planted crash loops: with the default seed two of them fall in the reported month.
    result = simulate(SimConfig(nodes=nodes, days=days, seed=seed, start=DEMO_START, crash_loops=5))
    paths = write_history(result, out / "history" / "sacct.txt")
    ingest = ingest_files([paths["sacct"]], out / "store")
    # All three evidence sources, as the report uses them: node signals, AdminComment, events;
    # the sections layer loads them once and computes what the commands print.
    inp = load_inputs(out / "store", [Path(paths["events"])], [Path(paths["signals"])])
    summary = {
        "ingest": ingest,
        "taxonomy": compute.taxonomy(inp),
        "failure_rate": compute.failure_rate(inp),
        "mttf": compute.mttf(inp)["buckets"],
        "requeue_loops": compute.requeue_loops(inp)["loops"],
        "planted_truth": result.truth,
    }
    month = latest_month(out / "store")
    report = build_report(
        out / "store", month, out, [Path(paths["events"])], [Path(paths["signals"])]
    )
    summary["report"] = {
        "month": report["month"],
        "html": str(out / "index.html"),
        "json": str(out / "report.json"),
    }
    summary_path = out / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    if as_json:
        click.echo(json.dumps(summary, default=str))
        return
    rate = summary["failure_rate"]
    rf = rate["rf_per_node_day"]
    click.echo(f"simulated {nodes} nodes x {days:g} days: {ingest['rows_kept']} job runs ingested")
    planted = result.truth["expected_rf_gt128"] * 1000
    click.echo(
        f"r_f (jobs > 128 GPUs) = {rf * 1000:.2f} per 1000 node-days, expected from "
        f"the planted rates {planted:.2f}"
        if rf
        else "r_f: no failures in jobs > 128 GPUs"
    )
    click.echo(
        f"infrastructure failures in jobs > 128 GPUs: {rate['failures']} found, "
        f"{result.truth['infra_failures_gt128']} planted"
    )
    click.echo(
        f"crash loops found: {len(summary['requeue_loops'])} "
        f"(planted {len(result.truth['crash_loops'])})"
    )
    click.echo(f"summary: {summary_path}")
    click.echo(f"report for {report['month']}: open {(out / 'index.html').resolve()}")
