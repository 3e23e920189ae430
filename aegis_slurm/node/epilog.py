"""Slurm Epilog hooks: ``python3 -m aegis_slurm.node.epilog --mode node|ctld|hold-watch``.

Standard library only, no click.  ``node`` (slurm.conf ``Epilog=``, every node of the job):
capture the failure signals the job left (new kernel-log lines since the previous Epilog: XIDs,
GPU lost, PCIe/IB/NFS/NCCL errors; GPU ECC/row-remap and IB counter growth; the CBD checks
that matter after a crash; the node's last Prolog verdicts) and write one record to the
durable spool.  ``ctld`` (``EpilogSlurmctld=``, once per job): crash-loop guard; for a failed
job, collect the nodes' records it can read, append the short ``aegis:v1;hw=`` tag to
AdminComment with sacctmgr, and optionally drain the Algorithm-1 culprit.  ``hold-watch``
(spawned detached by ``ctld``): wait until Slurm has requeued the looping job, then hold it.

Fail open: any internal error is logged to syslog, counted, and the hook exits 0; a hung probe
is abandoned after its timeout and a process watchdog exits 0 at the latest after
``watchdog_s + watchdog_grace_s``.  Job teardown never waits longer and is never failed by us.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import fcntl
import json
import os
import re
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aegis_slurm.node import cbd, config, export, probes, slurm, spool
from aegis_slurm.node import diagnose as diag
from aegis_slurm.node import signals as sg
from aegis_slurm.node.parse import parse_nvidia_smi_q
from aegis_slurm.node.prolog import host_name
from aegis_slurm.node.verdict import FAIL, PASS, Verdict

DEFAULTS = Path(__file__).with_name("epilog_default.toml")
#: CBD checks worth re-running at job end (host state a crash leaves behind); "xid" only makes
#: the kernel-log probe run in the same parallel pass (its verdict is not used: see _kernel)
EPILOG_CHECKS = (
    "gpu_count",
    "ecc_uncorrectable",
    "row_remap",
    "pcie_link",
    "pci_links",
    "nvlink",
    "ib_ports",
    "nics",
    "mounts",
    "xid",
)
KEEP_S = 86400.0  # loop-guard history kept per job (longer than any sane window)
FINAL = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
)


def load_config(path: str | None = None) -> dict[str, Any]:
    """Epilog defaults, then the CBD config (its defaults + the site file) merged over them."""
    with DEFAULTS.open("rb") as f:
        base = tomllib.load(f)
    return config._merge(base, config.load(path))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@contextlib.contextmanager
def locked_json(path: Path) -> Iterator[dict[str, Any]]:
    """Load/modify/save a small JSON state file under an exclusive flock (0600, atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            data = json.loads(path.read_text())
            data = data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            data = {}
        yield data
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        t = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(t, "w") as fh:
            fh.write(json.dumps(data, sort_keys=True))
        os.replace(tmp, path)
    finally:
        os.close(fd)


def _bump(cfg: dict[str, Any], host: str, name: str) -> None:
    """Best-effort counter file ``<state_dir>/<host>/epilog_<name>`` (internal errors etc.)."""
    try:
        d = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm")) / host
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        p = d / f"epilog_{name}"
        n = int(p.read_text() or 0) + 1 if p.exists() else 1
        p.write_text(str(n))
    except Exception:  # noqa: S110 - counting must never break the hook
        pass


# ---- node side -------------------------------------------------------------------------------


def _job_env() -> dict[str, Any]:
    e = os.environ
    return {
        "job_id": e.get("SLURM_JOB_ID", ""),
        "run": int(e.get("SLURM_JOB_RESTART_COUNT") or 0),
        "cluster": e.get("SLURM_CLUSTER_NAME", ""),
        "partition": e.get("SLURM_JOB_PARTITION", ""),
        "exit_code": e.get("SLURM_JOB_EXIT_CODE2", ""),
        "nodelist": e.get("SLURM_JOB_NODELIST") or e.get("SLURM_NODELIST", ""),
    }


def _tail(path: str, nbytes: int) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - nbytes))
        return f.read().decode("utf-8", "replace")


def capture(
    cfg: dict[str, Any],
    host: str,
    state: dict[str, Any],
    *,
    overrides: dict[str, cbd.ProbeFn] | None = None,
    now: float | None = None,
) -> dict[str, Any]:
    """One node's signals for the job that just ended.  Mutates ``state`` (seen lines, counters).

    Probes run once, in parallel, through the Prolog's runner (same per-probe timeout and
    watchdog), with the Epilog's tighter budget; their raw output is kept for the counters.
    """
    ep = cfg["epilog"]
    now = time.time() if now is None else now
    run_cfg = copy.deepcopy(cfg)
    run_cfg.setdefault("runtime", {}).update(
        probe_timeout_s=float(ep["probe_timeout_s"]), watchdog_s=float(ep["watchdog_s"])
    )
    raw: dict[str, Any] = {}
    base = {**cbd.PROBES, **(overrides or {})}

    def keep(name: str) -> cbd.ProbeFn:
        def probe(ctx: probes.ProbeContext) -> Any:
            raw[name] = out = base[name](ctx)
            return out

        return probe

    wrapped = {name: keep(name) for name in base}
    verdicts = [
        v
        for v in cbd.run(
            run_cfg, host, "light", overrides=wrapped, only=list(EPILOG_CHECKS), state={}
        )
        if v.check != "xid"
    ]
    out: list[dict[str, Any]] = []
    errors = [f"{v.check}: {v.evidence}" for v in verdicts if v.state == "probe_error"]

    # kernel log: lines not seen by the previous Epilog on this node in this boot
    boot = probes.boot_id(
        probes.ProbeContext(exp={}, root=Path(run_cfg["runtime"].get("root", "/")))
    )
    ks = state.setdefault("kernel", {})
    if ks.get("boot_id") != boot:
        ks.clear()
        ks["boot_id"] = boot
    if "kernel_log" in raw:
        fresh, ks["seen"] = sg.new_lines(str(raw["kernel_log"]), ks.get("seen", []))
        boot_epoch = now - time.clock_gettime(time.CLOCK_MONOTONIC)
        out += sg.kernel_signals(fresh, boot_epoch, now)
    if ep.get("syslog_path"):
        try:
            fresh, state["syslog_seen"] = sg.new_lines(
                _tail(ep["syslog_path"], int(ep["syslog_tail_bytes"])), state.get("syslog_seen", [])
            )
            out += sg.link_flaps(fresh, int(ep["link_flap_min"]), now)
        except OSError as e:
            errors.append(f"syslog: {e}")

    out += sg.verdict_signals(verdicts, now)
    if isinstance(raw.get("nvidia_smi_q"), str):
        with contextlib.suppress(ValueError):
            cur = sg.gpu_counters(parse_nvidia_smi_q(raw["nvidia_smi_q"]))
            out += sg.gpu_counter_signals(state.get("gpu", {}), cur, now)
            state["gpu"] = cur
    if raw.get("ib") is not None:
        ib_state = state.setdefault("ib", {})
        with contextlib.suppress(ValueError):
            deltas = cbd._ib_deltas(raw["ib"], cbd.RunState(ib_state))
            out += sg.ib_counter_signals(deltas, int(ep["ib_errors_min"]), now)
    # a GPU lost from the bus shows both as an XID 79 line and as a missing GPU: keep both,
    # they are evidence of the same fault from two probes
    bad = [v.to_dict() for v in verdicts if v.state not in (PASS, "skip")]
    return {"signals": sg.collapse(out), "verdicts": bad, "probe_errors": errors}


def last_cbd(cfg: dict[str, Any], host: str) -> dict[str, Any] | None:
    """The node's last Prolog/HealthCheck verdicts (non-pass only), read without the lock."""
    p = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm")) / host
    try:
        last = json.loads((p / "state.json").read_text()).get("last")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(last, dict):
        return None
    bad = [v for v in last.get("verdicts", []) if v.get("state") not in (PASS, "skip")]
    return {"at": last.get("at"), "mode": last.get("mode"), "rc": last.get("rc"), "verdicts": bad}


def run_node(
    cfg: dict[str, Any], host: str, overrides: dict[str, cbd.ProbeFn] | None = None
) -> dict[str, Any]:
    """Epilog on one node: capture, then one durable spool record.  Returns the record."""
    t0 = time.monotonic()
    ep = cfg["epilog"]
    job = _job_env()
    state_dir = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm"))
    with locked_json(state_dir / host / "epilog.json") as state:
        got = capture(cfg, host, state, overrides=overrides)
    rec = {
        "v": 1,
        "node": host,
        "job_id": job["job_id"],
        "run": job["run"],
        "cluster": job["cluster"],
        "partition": job["partition"],
        "exit_code": job["exit_code"],
        "captured_at": now_iso(),
        **got,
        "last_cbd": last_cbd(cfg, host),
    }
    rec["duration_s"] = round(time.monotonic() - t0, 4)
    spool.append(
        ep["spool_dir"], rec, max_bytes=int(ep["spool_max_bytes"]), keep=int(ep["spool_keep"])
    )
    if any(s["kind"] != sg.INFO for s in got["signals"]):
        export.log(
            "warning",
            f"{host} job={job['job_id']} epilog signals: "
            + ", ".join(s["signal"] for s in got["signals"] if s["kind"] != sg.INFO)[:400],
            bool(cfg.get("runtime", {}).get("syslog", True)),
        )
    return rec


# ---- slurmctld side --------------------------------------------------------------------------


def slurm_cmd(cfg: dict[str, Any], argv: list[str]) -> str:
    """scontrol/sacctmgr/sacct as an argv list, bounded, with SLURM_CONF when configured (the
    EpilogSlurmctld environment is scrubbed; run_argv passes only PATH)."""
    conf = cfg["epilog"].get("slurm_conf") or os.environ.get("SLURM_CONF", "")
    full = ["env", f"SLURM_CONF={conf}", *argv] if conf else argv
    return probes.run_argv(full, float(cfg["epilog"].get("command_timeout_s", 10)))


def wait_records(
    dirs: list[str], cluster: str, job_id: str, run: int, nodes: list[str], wait_s: float
) -> list[dict[str, Any]]:
    """Node records of this run readable from ``dirs``, waiting up to ``wait_s`` for all.

    Reads only the tail of each not-yet-found node's current spool file per poll.
    """
    deadline = time.monotonic() + wait_s
    found: dict[str, dict[str, Any]] = {}
    while True:
        for n in nodes:
            if n in found:
                continue
            for d in dirs:
                for rec in spool.tail_records(Path(d) / n):
                    if (
                        str(rec.get("job_id")) == job_id
                        and int(rec.get("run", 0)) == run
                        and str(rec.get("cluster", "")) == cluster
                        and rec["node"] == n
                    ):
                        found[n] = rec
        if len(found) >= len(set(nodes)) or time.monotonic() >= deadline:
            return list(found.values())
        time.sleep(0.2)


def current_admin_comment(cfg: dict[str, Any], job_id: str) -> str:
    out = slurm_cmd(
        cfg,
        ["sacct", "-n", "-P", "-X", "-D", "-j", job_id, "-S", "2000-01-01", "-o", "AdminComment"],
    )
    lines = out.splitlines()
    return lines[-1] if lines else ""


def write_tag(cfg: dict[str, Any], job_id: str, tag: str) -> str:
    """Append ``tag`` to the ended job's AdminComment with sacctmgr (never clobbers)."""
    merged = sg.merge_comment(current_admin_comment(cfg, job_id), tag)
    slurm_cmd(
        cfg,
        [
            "sacctmgr",
            "-i",
            "modify",
            "job",
            "where",
            f"jobid={job_id}",
            "set",
            f"AdminComment={merged}",
        ],
    )
    return merged


# -- crash-loop guard --


def loop_limits(cfg: dict[str, Any], partition: str) -> dict[str, Any]:
    lg = cfg.get("loop_guard", {})
    base = {k: v for k, v in lg.items() if k != "partition"}
    return {**base, **lg.get("partition", {}).get(partition, {})}


def _signal_of(exit_code: str) -> int:
    try:
        return int(exit_code.split(":")[1])
    except (IndexError, ValueError):
        return 0


def loop_decision(
    history: list[dict[str, Any]], limits: dict[str, Any], now: float
) -> tuple[bool, int, str]:
    """Pure: (hold?, counted runs, why).  ``history`` = this job's run ends, this one included.

    Counts run ends inside ``window_minutes`` except those ended by an ignored signal
    (SIGTERM: preemption, scancel); trips when the count exceeds ``max_requeues``.
    """
    if not limits.get("enabled", True):
        return False, 0, "disabled"
    window = float(limits.get("window_minutes", 60)) * 60
    ignore = {int(x) for x in limits.get("ignore_exit_signals", [15])}
    counted = [
        h
        for h in history
        if now - float(h["t"]) <= window and _signal_of(str(h.get("exit_code", ""))) not in ignore
    ]
    k = int(limits.get("max_requeues", 5))
    why = (
        f"{len(counted)} failed runs within {window / 60:g} min "
        f"(limit {k}, restarts={history[-1].get('run') if history else '?'})"
    )
    return len(counted) > k, len(counted), why


def run_ctld(
    cfg: dict[str, Any], spawn: bool = True, config_path: str | None = None
) -> dict[str, Any]:
    """EpilogSlurmctld: loop guard, then tag (and optional auto-drain) for a failed job."""
    ep = cfg["epilog"]
    job = _job_env()
    jid = job["job_id"]
    res: dict[str, Any] = {"job_id": jid, "run": job["run"]}
    if not jid.isdigit():
        return res
    use_syslog = bool(cfg.get("runtime", {}).get("syslog", True))
    state_dir = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm")) / "ctld"
    now = time.time()
    failed = job["exit_code"] not in ("", "0:0") or os.environ.get(
        "SLURM_JOB_DERIVED_EC", "0"
    ) not in ("", "0")
    nodes = config.expand_hostlist(job["nodelist"]) if job["nodelist"] else []
    multi = len(nodes) >= int(ep.get("min_nodes_auto", 2))
    state = "FAILED" if failed else "COMPLETED"
    if not failed and multi and (ep.get("tag", True) or ep.get("auto_drain")):
        # NODE_FAIL ends with 0:0 in the hook environment (measured on 22.05: JobState
        # COMPLETING, Reason=NodeDown): one scontrol RPC per clean multi-node job end tells
        state = node_fail_state(cfg, jid)
        failed = state == "NODE_FAIL"
    if failed or job["run"] > 0:  # a clean first run cannot be part of a loop: no state write
        limits = loop_limits(cfg, job["partition"])
        with locked_json(state_dir / "loops.json") as st:
            jobs = st.setdefault("jobs", {})
            hist = [h for h in jobs.get(jid, []) if now - float(h["t"]) < KEEP_S]
            hist.append({"t": now, "run": job["run"], "exit_code": job["exit_code"]})
            jobs[jid] = hist[-200:]
            for other in [j for j, h in jobs.items() if not h or now - float(h[-1]["t"]) > KEEP_S]:
                del jobs[other]  # bounded: forget jobs that ended no run for a day
            held = st.setdefault("held", {})
            for j in [j for j, v in held.items() if j not in jobs]:
                del held[j]
            hold, n, why = loop_decision(hist, limits, now)
        res["loop"] = {"counted": n, "hold": hold, "why": why}
        if hold and spawn:
            _spawn_watch(jid, job["run"], why, config_path)
            export.log(
                "alert", f"job {jid} crash loop: {why}; holding it once requeued", use_syslog
            )

    if not failed or not (ep.get("tag", True) or ep.get("auto_drain")):
        return res
    dirs = [str(d) for d in (ep.get("ctld_spool_dirs") or [ep["spool_dir"]])]
    recs = wait_records(dirs, job["cluster"], jid, job["run"], nodes, float(ep["ctld_wait_s"]))
    res["records"] = len(recs)
    if ep.get("tag", True):
        pairs = sg.tag_pairs(recs)
        if state == "NODE_FAIL":  # the node that went down left no record: blame it first
            seen = {r["node"] for r in recs}
            pairs = [(n, "node_fail") for n in nodes if n not in seen] + pairs
        tag = sg.make_tag(pairs, int(ep.get("tag_max_len", 120)))
        if tag:
            try:
                res["admin_comment"] = write_tag(cfg, jid, tag)
            except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed) as e:
                export.log("err", f"job {jid} AdminComment tag failed: {e}", use_syslog)
    if ep.get("auto_drain") and multi:
        res["diagnosis"] = d = diag.diagnose(nodes, recs, job_state=state).to_dict()
        res["drained"] = auto_drain(cfg, jid, d, use_syslog)
    return res


def node_fail_state(cfg: dict[str, Any], jid: str) -> str:
    """ "NODE_FAIL" when slurmctld says the job ended because a node went down, else "COMPLETED"."""
    try:
        out = slurm_cmd(cfg, ["scontrol", "-o", "show", "job", jid])
    except (probes.ProbeMissing, probes.ProbeTimeout, probes.ProbeFailed):
        return "COMPLETED"
    if re.search(r"\bReason=NodeDown\b|\bJobState=NODE_FAIL\b", out):
        return "NODE_FAIL"
    return "COMPLETED"


def auto_drain(cfg: dict[str, Any], jid: str, d: dict[str, Any], use_syslog: bool) -> list[str]:
    """Drain the diagnosed culprits, through the Prolog's ownership rules and storm guard."""
    if d["verdict"] not in ("critical", "distributed-few", "root-cause") or not d["nodes"]:
        return []
    to = float(cfg["epilog"].get("command_timeout_s", 10))
    conf = cfg["epilog"].get("slurm_conf") or os.environ.get("SLURM_CONF", "")
    env_prefix = ["env", f"SLURM_CONF={conf}"] if conf else []
    nodes = slurm.parse_scontrol_nodes(
        probes.run_argv([*env_prefix, "scontrol", "show", "nodes", "-o"], to)
    )
    drained = []
    for node in d["nodes"]:
        v = Verdict(
            "diagnose",
            FAIL,
            f"job {jid} {d['verdict']}: " + (d["evidence"][:1] or [""])[0].split(": ", 1)[-1],
        )
        plan = slurm.plan_drain([v], node, nodes, cfg.get("guard", {}), datetime.now())
        if plan.action == "drain":
            probes.run_argv(
                [
                    *env_prefix,
                    "scontrol",
                    "update",
                    f"nodename={node}",
                    "state=drain",
                    f"reason={plan.reason}",
                ],
                to,
            )
            drained.append(node)
            export.log("crit", f"job {jid}: drained {node}: {plan.reason}", use_syslog)
        else:
            export.log(
                "alert", f"job {jid}: not draining {node}: {plan.action} {plan.detail}", use_syslog
            )
    return drained


def _spawn_watch(jid: str, run: int, why: str, config_path: str | None) -> None:
    """Detached watcher: the hold must wait until Slurm requeued the job (measured on 22.05:
    in EpilogSlurmctld the job is still COMPLETING and ``scontrol hold`` answers "Job has
    already finished")."""
    argv = [
        sys.executable,
        "-I",
        "-m",
        "aegis_slurm.node.epilog",
        "--mode",
        "hold-watch",
        "--job",
        jid,
        "--restarts",
        str(run),
        "--why",
        why,
    ]
    if config_path:
        argv += ["--config", config_path]
    subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        env={
            k: v for k, v in os.environ.items() if k in ("PATH", "AEGIS_CBD_CONFIG", "SLURM_CONF")
        },
    )


_JOBSTATE = re.compile(r"\bJobState=(\S+)")
_RESTARTS = re.compile(r"\bRestarts=(\d+)")


def hold_watch(cfg: dict[str, Any], jid: str, run: int, why: str) -> str:
    """Poll until the job is PENDING with Restarts > ``run``, then hold it and say why."""
    use_syslog = bool(cfg.get("runtime", {}).get("syslog", True))
    deadline = time.monotonic() + float(cfg.get("loop_guard", {}).get("hold_wait_s", 60))
    while time.monotonic() < deadline:
        try:
            out = slurm_cmd(cfg, ["scontrol", "-o", "show", "job", jid])
        except probes.ProbeFailed:
            return "gone"  # slurmctld forgot the job: nothing to hold
        except (probes.ProbeTimeout, probes.ProbeMissing):
            time.sleep(1)
            continue
        st = _JOBSTATE.search(out)
        rs = _RESTARTS.search(out)
        state = st.group(1) if st else ""
        if state in FINAL:
            return f"final:{state}"
        if state == "PENDING" and rs and int(rs.group(1)) > run:
            slurm_cmd(cfg, ["scontrol", "hold", jid])
            note = f"aegis:v1;loop=held {why}"[:200]
            with contextlib.suppress(probes.ProbeFailed, probes.ProbeTimeout):
                old = current_admin_comment(cfg, jid)
                slurm_cmd(
                    cfg,
                    [
                        "scontrol",
                        "update",
                        f"jobid={jid}",
                        f"AdminComment={(old + ' ' + note).strip()[-1000:]}",
                    ],
                )
            state_dir = Path(cfg.get("runtime", {}).get("state_dir", "/var/lib/aegis-slurm"))
            with locked_json(state_dir / "ctld" / "loops.json") as stt:
                stt.setdefault("held", {})[jid] = {"at": now_iso(), "why": why}
            export.log("alert", f"job {jid} held by aegis crash-loop guard: {why}", use_syslog)
            return "held"
        time.sleep(0.5)
    return "timeout"


# ---- process entry ---------------------------------------------------------------------------


def _start_watchdog(seconds: float, cfg: dict[str, Any], host: str) -> None:
    def fire() -> None:
        probes.kill_live_children()
        _bump(cfg, host, "watchdog")
        export.log("alert", f"{host} aegis epilog watchdog fired after {seconds:g}s; exit 0")
        os._exit(0)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="aegis-epilog", description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=("node", "ctld", "hold-watch"), default="node")
    ap.add_argument("--config", help="TOML (default $AEGIS_CBD_CONFIG or /etc/aegis-slurm/)")
    ap.add_argument("--job", default="")
    ap.add_argument("--restarts", type=int, default=0)
    ap.add_argument("--why", default="")
    ap.add_argument("--print", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    cfg: dict[str, Any] = {}
    host = host_name() if args.mode == "node" else "ctld"
    try:
        cfg = load_config(args.config)
        ep = cfg["epilog"]
        if args.mode == "node":
            _start_watchdog(float(ep["watchdog_s"]) + float(ep["watchdog_grace_s"]), cfg, host)
            res: Any = run_node(cfg, host)
        elif args.mode == "ctld":
            # tag wait + commands are bounded; this is the outer bound
            _start_watchdog(
                float(ep["ctld_wait_s"]) + 4 * float(ep["command_timeout_s"]), cfg, host
            )
            res = run_ctld(cfg, config_path=args.config)
        else:
            res = hold_watch(cfg, args.job, args.restarts, args.why)
        if args.print:
            print(json.dumps(res, default=str))
        return 0
    except Exception as e:
        _bump(cfg or {"runtime": {}}, host, "internal_errors")
        export.log("err", f"{host} aegis epilog internal error (exit 0, nothing changed): {e!r}")
        print(f"aegis-epilog: internal error, ignored: {e!r}", file=sys.stderr)
        return 0


if __name__ == "__main__":
    rc = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(rc)  # don't wait for abandoned probe threads
