"""Outputs of a CBD run: node_exporter textfile (atomic) and syslog lines."""

from __future__ import annotations

from pathlib import Path

from aegis_slurm.node import files
from aegis_slurm.node.verdict import STATES, Verdict


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def prom_text(
    verdicts: list[Verdict],
    *,
    host: str,
    profile: str,
    duration_s: float,
    timestamp: float,
    counters: dict[str, float],
    storm: list[str] | None = None,
    guard_unavailable: list[str] | None = None,
) -> str:
    """Prometheus exposition text: one-hot verdict per check, run timing, aegis counters."""
    lines = [
        "# HELP aegis_cbd_verdict Last CBD verdict per check (one-hot over state).",
        "# TYPE aegis_cbd_verdict gauge",
    ]
    for v in verdicts:
        for s in STATES:
            lines.append(
                f'aegis_cbd_verdict{{check="{_esc(v.check)}",state="{s}",'
                f'profile="{profile}"}} {int(v.state == s)}'
            )
    lines += [
        "# HELP aegis_cbd_last_run_timestamp_seconds End of the last CBD run.",
        "# TYPE aegis_cbd_last_run_timestamp_seconds gauge",
        f'aegis_cbd_last_run_timestamp_seconds{{profile="{profile}"}} {timestamp:.3f}',
        "# HELP aegis_cbd_duration_seconds Wall time of the last CBD run.",
        "# TYPE aegis_cbd_duration_seconds gauge",
        f'aegis_cbd_duration_seconds{{profile="{profile}"}} {duration_s:.3f}',
    ]
    for name, val in sorted(counters.items()):
        lines += [f"# TYPE aegis_cbd_{name}_total counter", f"aegis_cbd_{name}_total {val:g}"]
    lines.append("# TYPE aegis_cbd_drain_storm_guard gauge")
    for c in storm or []:
        lines.append(f'aegis_cbd_drain_storm_guard{{check="{_esc(c)}"}} 1')
    if guard_unavailable:  # would have drained, but slurmctld could not be read/updated
        lines.append("# TYPE aegis_cbd_drain_guard_unavailable gauge")
        for c in guard_unavailable:
            lines.append(f'aegis_cbd_drain_guard_unavailable{{check="{_esc(c)}"}} 1')
    return "\n".join(lines) + "\n"


def write_atomic(directory: str | Path, name: str, text: str) -> Path:
    """The metrics file via :func:`files.atomic_write` (0644: node_exporter reads it)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    return files.atomic_write(d / name, text, mode=0o644, durable=False)


_syslog_open = False


def log(priority: str, message: str, enabled: bool = True) -> None:
    """Syslog (LOG_DAEMON, ident aegis-cbd); silently no-op when syslog is unavailable."""
    global _syslog_open
    if not enabled:
        return
    try:
        import syslog

        if not _syslog_open:
            syslog.openlog("aegis-cbd", syslog.LOG_PID, syslog.LOG_DAEMON)
            _syslog_open = True
        syslog.syslog(getattr(syslog, f"LOG_{priority.upper()}"), message)
    except Exception:  # noqa: S110 - logging must never break the prolog
        pass
