"""``aegis-slurm logs``: which nodes, lines, stage and iteration a failed job's logs point to."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.command("logs")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--baseline",
    "baseline",
    multiple=True,
    type=click.Path(exists=True, path_type=Path),
    help="Logs of a successful run of the same job (file or directory); repeatable.",
)
@click.option("--job", "job_id", help="Slurm job id: find its output files and node list.")
@click.option(
    "--store",
    type=click.Path(file_okay=False, path_type=Path),
    help="Analytics store: the job's recorded output patterns and node list after slurmctld "
    "forgot the job, and the baseline run.",
)
@click.option("--nodes", "nodelist", help="The job's node list (hostlist), for prefixed logs.")
@click.option("--tasks-per-node", type=click.IntRange(min=1), help="For srun --label / %t files.")
@click.option("--ranks-per-node", type=click.IntRange(min=1), help="For [rankN]: prefixes.")
@click.option(
    "--summary-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write this node's template-count summary of PATH (run on the node) instead.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def logs(
    paths: tuple[Path, ...],
    baseline: tuple[Path, ...],
    job_id: str | None,
    store: Path | None,
    nodelist: str | None,
    tasks_per_node: int | None,
    ranks_per_node: int | None,
    summary_out: Path | None,
    as_json: bool,
) -> None:
    """Diagnose a failed multi-node job from its logs (L4: failure-indicating nodes and lines).

    PATH is a directory of <node>.log files, per-task files, or one file with `srun --label` or
    `[rankN]:` prefixes; or node summaries (*.summary.json, from --summary-out on each node).
    Exit 0 with a verdict, 4 when there is nothing to read.
    """
    from aegis_slurm.errors import InputError
    from aegis_slurm.logs import Layout, diagnose_job_logs, diagnose_logs, summary
    from aegis_slurm.logs.job import expand_hostlist

    if summary_out is not None:
        if not paths:
            raise click.UsageError("--summary-out needs the node's log PATH")
        summary.write_summary(summary.summarize(paths), summary_out)
        return
    if paths and all(str(p).endswith(summary.SUFFIX) for p in paths):
        verdict = summary.diagnose_summaries(
            summary.load_summaries(paths), summary.load_summaries(baseline)
        )
    elif job_id is not None:
        info, verdict = diagnose_job_logs(
            job_id,
            paths=paths,
            store=store,
            baseline=baseline,
            tasks_per_node=tasks_per_node,
            ranks_per_node=ranks_per_node,
        )
        for why in info.refused[:5]:  # the job's own paths that were not the job's files
            click.echo(f"aegis-slurm: warning: not read: {why}", err=True)
    else:
        if not paths:
            raise click.UsageError("give log PATHs, or --job JOBID")
        if store is not None:
            raise InputError("--store needs --job")
        layout = Layout(
            nodes=expand_hostlist(nodelist or ""),
            tasks_per_node=tasks_per_node,
            ranks_per_node=ranks_per_node,
        )
        verdict = diagnose_logs(paths, baseline=baseline, layout=layout)
    if as_json:
        click.echo(json.dumps(verdict.to_json()))
        return
    click.echo(render_text(verdict))


def render_text(v) -> str:
    """What an admin reads at 3 a.m.: culprit nodes, five lines with file:line, stage, iteration."""
    out: list[str] = []
    if v.all_nodes and v.same_error_everywhere:
        out.append("culprit: ALL NODES (the same failure on every node: job or config, not a node)")
    elif v.all_nodes:
        out.append(
            "culprit: ALL NODES (no node stands out, but their errors differ: read each node's "
            "lines below; job, config or the network between them, not one node's fault)"
        )
    elif v.nodes:
        kind = "hang: iterations stopped first on" if v.hang else "culprit node(s):"
        names = ", ".join(f"{n['node']} ({n['score']:.2f})" for n in v.nodes[:5])
        more = f" and {len(v.nodes) - 5} more" if len(v.nodes) > 5 else ""
        out.append(f"{kind} {names}{more}")
    else:
        out.append("no failure-indicating node or line found")
    stage = v.stage or "unknown"
    it = f", iteration {v.iteration}" if v.iteration is not None else ""
    out.append(f"stage: {stage}{it}")
    if v.lines:
        out.append("look at:")
        for ln in v.lines:
            text = ln["text"] if len(ln["text"]) <= 160 else ln["text"][:159] + "…"
            out.append(f"  {ln['file']}:{ln['line']}  [{ln['node']}]  {text}")
    out.append(
        f"({v.files} files, {v.lines_read:,} lines, {v.distinct_lines:,} distinct after masking, "
        f"{v.templates} templates"
        + (f", {v.baseline_events} baseline events" if v.baseline_events else ", no baseline")
        + ")"
    )
    return "\n".join(out)
