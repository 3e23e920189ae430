"""Probes: how to read the machine.  Each returns raw text/data and computes nothing.

Every probe is a function ``(ctx) -> raw``; the runner may replace any of them (tests inject
recorded real output, the config may point a probe at another argv).  Commands run as argv lists
in their own session so a hung tool's whole process group can be killed; a missing tool raises
:class:`ProbeMissing` (the check decides whether that matters).
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aegis_slurm.node.parse import NVSMI_FAILURES


class ProbeMissing(Exception):
    """The tool or file the probe needs does not exist on this node."""


class ProbeTimeout(Exception):
    """The probe did not answer within its timeout (its process group was killed)."""


class ProbeFailed(Exception):
    """The probe ran but failed (non-zero exit without usable output, unreadable file)."""


DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

#: process-group ids of running probe children; the watchdog kills whatever is left here
LIVE_PGIDS: set[int] = set()
_LIVE_LOCK = threading.Lock()


def kill_live_children() -> int:
    """SIGKILL every live probe process group (watchdog path).  Returns how many."""
    with _LIVE_LOCK:
        pgids = list(LIVE_PGIDS)
        LIVE_PGIDS.clear()
    for pg in pgids:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pg, signal.SIGKILL)
    return len(pgids)


@dataclass
class ProbeContext:
    """What a probe may look at: config, expectations, filesystem root, timeout, argv overrides."""

    exp: dict[str, Any]
    root: Path = Path("/")
    timeout: float = 8.0
    argv: dict[str, list[str]] = field(default_factory=dict)  # probe name -> argv override

    def path(self, p: str) -> Path:
        return self.root / p.lstrip("/")


def run_argv(argv: list[str], timeout: float, ok_rc: tuple[int, ...] = (0,)) -> str:
    """Run ``argv`` (no shell) with a timeout; kill its whole process group when it expires."""
    rc, out, err = run_argv_rc(argv, timeout)
    if rc not in ok_rc:
        tail = (err.strip() or out.strip()).splitlines()[-1:] or [""]
        raise ProbeFailed(f"{argv[0]} exit {rc}: {tail[0][:160]}")
    return out


#: kept from our own environment for a child: which cluster a Slurm command talks to
#: (``aegis-slurm minder --job`` and ``watch`` run sacct/squeue on a site whose slurm.conf is
#: not at the default path), and the time zone sacct/squeue print their zone-less times in,
#: which must be the one we parse them in; everything else is dropped so probes read alike
#: everywhere
PASSED_ENV = ("SLURM_CONF", "TZ")


def _child_env(path: str) -> dict[str, str]:
    env = {"PATH": path, "LC_ALL": "C"}
    env.update({k: os.environ[k] for k in PASSED_ENV if os.environ.get(k)})
    return env


def run_argv_rc(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """:func:`run_argv` for tools whose exit code is part of the answer: (rc, stdout, stderr)."""
    path = os.environ.get("PATH") or DEFAULT_PATH  # slurmd runs the Prolog without PATH
    exe = shutil.which(argv[0], path=path)
    if exe is None:
        raise ProbeMissing(f"{argv[0]} not found")
    try:
        proc = subprocess.Popen(
            [exe, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            text=True,
            errors="replace",
            env=_child_env(path),
        )
    except OSError as e:
        raise ProbeFailed(f"{argv[0]}: {e.strerror}") from None
    with _LIVE_LOCK:
        LIVE_PGIDS.add(proc.pid)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        # don't block on a child stuck in D state: give it a moment, then abandon it
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)
        raise ProbeTimeout(f"{argv[0]} timed out after {timeout:g}s") from None
    finally:
        with _LIVE_LOCK:
            LIVE_PGIDS.discard(proc.pid)
    return proc.returncode, out, err


def _cmd(ctx: ProbeContext, name: str, default: list[str], **kw: Any) -> str:
    return run_argv(ctx.argv.get(name, default), ctx.timeout, **kw)


# ---- GPU -----------------------------------------------------------------------------------


def nvidia_smi_q(ctx: ProbeContext) -> str:
    """``nvidia-smi -q``; when it exits non-zero with one of nvidia-smi's verdicts on the node
    (:data:`parse.NVSMI_FAILURES`), that message: it is the answer, not a probe failure."""
    argv = ctx.argv.get("nvidia_smi_q", ["nvidia-smi", "-q"])
    rc, out, err = run_argv_rc(argv, ctx.timeout)
    if rc == 0:
        return out
    text = f"{out}\n{err}".strip()
    if any(s in text for s in NVSMI_FAILURES):
        return text
    tail = text.splitlines()[-1:] or [""]
    raise ProbeFailed(f"{argv[0]} exit {rc}: {tail[0][:160]}")


def nvidia_smi_q_load(ctx: ProbeContext) -> str:
    """``nvidia-smi -q -d PCI,UTILIZATION`` taken ``pcie_load_delay_s`` into the full profile,
    while gpu_burn (started at the same time) keeps the GPUs busy."""
    time.sleep(float(ctx.exp.get("pcie_load_delay_s", 20)))
    return _cmd(ctx, "nvidia_smi_q_load", ["nvidia-smi", "-q", "-d", "PCI,UTILIZATION"])


def nvlink_status(ctx: ProbeContext) -> str:
    return _cmd(ctx, "nvlink_status", ["nvidia-smi", "nvlink", "-s"])


# ---- kernel log ----------------------------------------------------------------------------


def kernel_log(ctx: ProbeContext) -> str:
    """The kernel ring buffer: /dev/kmsg read non-blocking (no tool needed), or an argv."""
    if "kernel_log" in ctx.argv:
        return _cmd(ctx, "kernel_log", [])
    kmsg = ctx.path("/dev/kmsg")
    try:
        fd = os.open(kmsg, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ProbeMissing(f"{kmsg} absent") from None
    except PermissionError as e:
        raise ProbeFailed(f"{kmsg}: {e.strerror}") from None
    chunks = []
    try:
        while True:
            try:
                rec = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as e:  # EPIPE: record overwritten while reading; keep going
                if e.errno == errno.EPIPE:
                    continue
                raise
            if not rec:
                break
            chunks.append(rec.decode("utf-8", "replace"))
    finally:
        os.close(fd)
    return "".join(chunks)


def boot_id(ctx: ProbeContext) -> str:
    try:
        return ctx.path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


# ---- fabric / network ----------------------------------------------------------------------

_IB_FILES = ("state", "phys_state", "rate", "link_layer")


def ib_sysfs(ctx: ProbeContext) -> dict[tuple[str, int], dict[str, str]] | str:
    """Read /sys/class/infiniband/*/ports/*/{state,phys_state,rate,link_layer,counters/*}.

    Returns ``{(device, port): {file: text}}``, or ibstat text when an argv override is set.
    """
    if "ib" in ctx.argv:
        return _cmd(ctx, "ib", [])
    base = ctx.path("/sys/class/infiniband")
    if not base.is_dir():
        raise ProbeMissing("no /sys/class/infiniband")
    out: dict[tuple[str, int], dict[str, str]] = {}
    for dev in sorted(base.iterdir()):
        ports = dev / "ports"
        if not ports.is_dir():
            continue
        for port in sorted(ports.iterdir(), key=lambda p: p.name):
            files = {}
            for name in _IB_FILES:
                with contextlib.suppress(OSError):
                    files[name] = (port / name).read_text().strip()
            cdir = port / "counters"
            if cdir.is_dir():
                for c in cdir.iterdir():
                    with contextlib.suppress(OSError):
                        files["counters/" + c.name] = c.read_text().strip()
            if port.name.isdigit():
                out[(dev.name, int(port.name))] = files
    return out


def net_operstate(ctx: ProbeContext) -> dict[str, str]:
    base = ctx.path("/sys/class/net")
    if not base.is_dir():
        raise ProbeMissing("no /sys/class/net")
    out = {}
    for dev in base.iterdir():
        try:
            out[dev.name] = (dev / "operstate").read_text().strip()
        except OSError:
            out[dev.name] = "unreadable"
    return out


def pci_links(ctx: ProbeContext) -> dict[str, Any]:
    """gcm-format node manifest (``pci_manifest``) + sysfs current link speed/width per BDF."""
    import json

    manifest = json.loads(Path(ctx.exp["pci_manifest"]).read_text())
    seen: dict[str, dict[str, str] | None] = {}
    for bdf in manifest.get("pci", {}):
        dev = ctx.path(f"/sys/bus/pci/devices/{bdf}")
        try:
            seen[bdf] = {
                "speed": (dev / "current_link_speed").read_text().strip(),
                "width": (dev / "current_link_width").read_text().strip(),
            }
        except OSError:
            seen[bdf] = None
    return {"manifest": manifest.get("pci", {}), "sysfs": seen}


# ---- filesystems ---------------------------------------------------------------------------


def proc_mounts(ctx: ProbeContext) -> str:
    return ctx.path("/proc/self/mounts").read_text()


def statfs_child(path: str, timeout: float, read_file: str = "") -> dict[str, Any]:
    """statfs (+ optional read of a canary file) of ``path`` in a child process, timed.

    A stale NFS/GPFS/Lustre mount hangs statfs in the kernel; doing it in a killable child keeps
    the checker alive and turns the hang into a verdict.  Returns blocks/avail/bsize or raises.
    """
    out = run_argv(["stat", "-f", "-c", "%b %a %S %c %d", "--", path], timeout)
    blocks, avail, bsize, files, ffree = (int(x) for x in out.split())
    if read_file:
        run_argv(["head", "-c", "4096", "--", os.path.join(path, read_file)], timeout)
    return {"total": blocks * bsize, "free": avail * bsize, "inodes": files, "ifree": ffree}


def mounts_status(ctx: ProbeContext) -> dict[str, dict[str, Any]]:
    """For each required mount: listed in /proc/self/mounts, and answering statfs(+read)."""
    from aegis_slurm.node.parse import parse_proc_mounts

    table = parse_proc_mounts(proc_mounts(ctx))
    want = list(ctx.exp.get("mounts", []))
    results: dict[str, dict[str, Any]] = {}

    def one(m: str) -> None:
        if m not in table:
            results[m] = {"mounted": False, "ok": False, "detail": "not in /proc/self/mounts"}
            return
        try:
            statfs_child(m, ctx.timeout, ctx.exp.get("mount_read_file", ""))
            results[m] = {"mounted": True, "ok": True, "detail": table[m][0]}
        except (ProbeTimeout, ProbeFailed, ProbeMissing, ValueError) as e:
            results[m] = {"mounted": True, "ok": False, "detail": str(e)}

    _parallel(one, want, ctx.timeout + 2)
    done = dict(results)  # a stuck thread finishing later cannot change what we return
    for m in want:  # a thread still stuck after its child was killed
        done.setdefault(m, {"mounted": True, "ok": False, "detail": "statfs hung"})
    return done


def disk_usage(ctx: ProbeContext) -> dict[str, tuple[int, int, int, int] | str]:
    """``{path: (free, total, free inodes, inodes)}`` per configured path, or the error text
    when the child ``stat -f`` failed (e.g. the path does not exist).  Every path goes to the
    child, nothing is looked at in-process (an ``exists()`` on a dead mount hangs this
    process)."""
    res: dict[str, tuple[int, int, int, int] | str] = {}

    def one(p: str) -> None:
        try:
            d = statfs_child(p, ctx.timeout)
        except ProbeFailed as e:  # missing path, not a directory, permission: a verdict
            msg = str(e)
            res[p] = (
                "does not exist"
                if "No such file" in msg
                else "statfs failed: " + msg.rsplit(": ", 1)[-1]
            )
            return
        res[p] = (d["free"], d["total"], d["ifree"], d["inodes"])

    paths = list(ctx.exp.get("disk_paths", []))
    _parallel(one, paths, ctx.timeout + 2)
    done = dict(res)  # a stuck thread finishing later cannot change what we return
    missing = [p for p in paths if p not in done]
    if missing:
        raise ProbeTimeout(f"statfs of {', '.join(missing)} did not answer")
    return done


def _parallel(fn: Any, items: list[str], limit: float) -> None:
    threads = [threading.Thread(target=_swallow, args=(fn, i), daemon=True) for i in items]
    for t in threads:
        t.start()
    deadline = time.monotonic() + limit
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))


def _swallow(fn: Any, item: str) -> None:
    # the caller reports items that produced no result
    with contextlib.suppress(Exception):
        fn(item)


# ---- host ----------------------------------------------------------------------------------


def meminfo(ctx: ProbeContext) -> str:
    return ctx.path("/proc/meminfo").read_text()


def adjtimex(ctx: ProbeContext) -> dict[str, int]:
    """Kernel NTP state via adjtimex(2) (read-only, modes=0), no chrony/ntpd tool needed."""
    import ctypes

    class Timex(ctypes.Structure):
        _fields_ = [
            ("modes", ctypes.c_uint),
            ("offset", ctypes.c_long),
            ("freq", ctypes.c_long),
            ("maxerror", ctypes.c_long),
            ("esterror", ctypes.c_long),
            ("status", ctypes.c_int),
            ("pad", ctypes.c_char * 200),
        ]

    libc = ctypes.CDLL(None, use_errno=True)
    tx = Timex()
    state = libc.adjtimex(ctypes.byref(tx))
    if state < 0:
        raise ProbeFailed(f"adjtimex errno {ctypes.get_errno()}")
    return {"state": state, "status": tx.status, "maxerror_us": tx.maxerror}


def _uid0(status: str) -> bool:
    """Real and effective uid 0 in a /proc/<pid>/status text."""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            f = line.split()
            return len(f) >= 3 and f[1] == "0" and f[2] == "0"
    return False


def process_names(ctx: ProbeContext) -> set[str]:
    """Names (comm and argv[0] basename) of root-owned processes only: a user process named
    like a daemon must not satisfy the ``services`` check."""
    names = set()
    for d in ctx.path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if not _uid0((d / "status").read_text()):
                    continue
                names.add((d / "comm").read_text().strip())
                exe = (d / "cmdline").read_bytes().split(b"\0", 1)[0]
                if exe:
                    names.add(os.path.basename(exe.decode("utf-8", "replace")))
            except OSError:
                continue
    return names


def ipmi_sel(ctx: ProbeContext) -> str:
    return _cmd(ctx, "ipmi_sel", ["ipmitool", "sel", "elist"])


def proc_modules(ctx: ProbeContext) -> str:
    """``/proc/modules``, plus one ``<name> builtin`` line per /sys/module entry: a driver
    built into the kernel (ib_uverbs, nvme on some builds) never shows in /proc/modules
    but is there all the same."""
    text = ctx.path("/proc/modules").read_text()
    sysmod = ctx.path("/sys/module")
    with contextlib.suppress(OSError):
        text += "".join(f"{d.name} builtin\n" for d in sorted(sysmod.iterdir()))
    return text


#: pause before re-reading the processes found in D state (uninterruptible sleep)
DSTATE_RECHECK_S = 0.25


def proc_snapshot(ctx: ProbeContext) -> dict[str, Any]:
    """``/proc/<pid>/stat`` of every process, ``/proc/loadavg`` and the online CPU list."""
    loadavg = ctx.path("/proc/loadavg")
    if not loadavg.exists():  # e.g. root = "/host" without the host's /proc mounted
        raise ProbeMissing(f"{loadavg} absent")
    stats: dict[str, str] = {}
    for d in ctx.path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):  # processes exit while we look
                stats[d.name] = (d / "stat").read_text()
    # A process waiting for a disk read is in D for milliseconds; a hung mount or driver keeps
    # it there.  Look again at the D ones (only when there are any) and keep the still-stuck.
    waiting = [pid for pid, text in stats.items() if text.rpartition(")")[2].split()[:1] == ["D"]]
    if waiting:
        time.sleep(DSTATE_RECHECK_S)
        for pid in waiting:
            try:
                stats[pid] = (ctx.path("/proc") / pid / "stat").read_text()
            except OSError:
                del stats[pid]  # it finished
    online = ""
    with contextlib.suppress(OSError):
        online = ctx.path("/sys/devices/system/cpu/online").read_text()
    return {"stat": list(stats.values()), "loadavg": loadavg.read_text(), "online": online}


def nvme_sysfs(ctx: ProbeContext) -> dict[str, str]:
    """``{controller: state}`` from /sys/class/nvme/*/state."""
    base = ctx.path("/sys/class/nvme")
    if not base.is_dir():
        return {}
    out = {}
    for dev in sorted(base.iterdir()):
        try:
            out[dev.name] = (dev / "state").read_text().strip()
        except OSError:
            out[dev.name] = "unreadable"
    return out


def edac_counts(ctx: ProbeContext) -> dict[str, dict[str, str]]:
    """``{mcN: {"ce": text, "ue": text}}`` from /sys/devices/system/edac/mc."""
    base = ctx.path("/sys/devices/system/edac/mc")
    if not base.is_dir():
        raise ProbeMissing("no EDAC memory controllers")
    out = {}
    for mc in sorted(base.glob("mc[0-9]*")):
        with contextlib.suppress(OSError):
            out[mc.name] = {
                "ce": (mc / "ce_count").read_text(),
                "ue": (mc / "ue_count").read_text(),
            }
    return out


def cpu_topology(ctx: ProbeContext) -> dict[str, Any]:
    """Online CPU list, SMT state, per-CPU governors and /proc/cpuinfo (for sockets)."""
    sysd = ctx.path("/sys/devices/system/cpu")
    out: dict[str, Any] = {"online": (sysd / "online").read_text(), "smt": None}
    with contextlib.suppress(OSError):
        out["smt"] = (sysd / "smt" / "active").read_text()
    govs = []
    for g in sysd.glob("cpu[0-9]*/cpufreq/scaling_governor"):
        with contextlib.suppress(OSError):
            govs.append(g.read_text().strip())
    out["governors"] = govs
    pkgs = []
    for g in sysd.glob("cpu[0-9]*/topology/physical_package_id"):
        with contextlib.suppress(OSError):
            pkgs.append(g.read_text())
    out["packages"] = pkgs
    out["cpuinfo"] = ctx.path("/proc/cpuinfo").read_text()
    return out


# ---- full profile --------------------------------------------------------------------------


#: dcgmi exits 256 + the (negative) dcgmReturn_t: 226 = DCGM_ST_NVVS_ERROR (a test failed),
#: 205 = DCGM_ST_NVVS_ISOLATE_ERROR (a failure that needs the GPU isolated, e.g. a volatile
#: double-bit ECC error).  Both come with the full JSON result.
DCGM_DIAG_RESULT_RC = (0, 205, 226)


def dcgm_diag(ctx: ProbeContext) -> dict[str, Any]:
    """``dcgmi diag -r N -j``: ``{"exit_code": rc, "output": json text}``."""
    lvl = str(ctx.exp.get("dcgm_level", 2))
    argv = ctx.argv.get("dcgm_diag", ["dcgmi", "diag", "-r", lvl, "-j"])
    rc, out, err = run_argv_rc(argv, ctx.timeout)
    if rc not in DCGM_DIAG_RESULT_RC:
        tail = (err.strip() or out.strip()).splitlines()[-1:] or [""]
        raise ProbeFailed(f"{argv[0]} exit {rc}: {tail[0][:160]}")
    return {"exit_code": rc, "output": out}


def nvme_smart(ctx: ProbeContext) -> dict[str, str]:
    """``smartctl -j -a /dev/<ctrl>`` per NVMe controller: ``{ctrl: json text}``.

    smartctl's exit status is a bit mask that is non-zero for many healthy-but-noteworthy
    states, so any run that printed JSON counts; the check reads the JSON."""
    out = {}
    for dev in nvme_sysfs(ctx):
        argv = [*ctx.argv.get("nvme_smart", ["smartctl", "-j", "-a"]), f"/dev/{dev}"]
        rc, text, err = run_argv_rc(argv, ctx.timeout)
        if not text.strip().startswith("{"):
            raise ProbeFailed(f"smartctl /dev/{dev} exit {rc}: {(err or text).strip()[:120]}")
        out[dev] = text
    if not out:
        raise ProbeMissing("no NVMe controllers")
    return out


def nccl_allreduce(ctx: ProbeContext) -> str:
    n = str(ctx.exp.get("gpus") or 8)
    return _cmd(
        ctx, "nccl_allreduce", ["all_reduce_perf", "-b", "8M", "-e", "4G", "-f", "2", "-g", n]
    )


def nvbandwidth(ctx: ProbeContext) -> str:
    return _cmd(
        ctx,
        "nvbandwidth",
        ["nvbandwidth", "-t", "host_to_device_memcpy_ce", "-t", "device_to_host_memcpy_ce"],
    )


def cpu_stream(ctx: ProbeContext) -> str:
    return _cmd(ctx, "cpu_stream", ["stream"])


def gpu_burn(ctx: ProbeContext) -> str:
    return _cmd(ctx, "gpu_burn", ["gpu_burn", str(ctx.exp.get("burn_seconds", 60))])


def data_read(ctx: ProbeContext) -> dict[str, float]:
    """Sequential read of up to ``data_read_mbytes`` from ``data_read_path`` (file or dir)."""
    path = ctx.exp.get("data_read_path", "")
    if not path:
        raise ProbeMissing("no data_read_path")
    p = Path(path)
    files = [p] if p.is_file() else sorted(x for x in p.rglob("*") if x.is_file())
    budget = int(ctx.exp.get("data_read_mbytes", 1024)) * 2**20
    got, t0 = 0, time.monotonic()
    for f in files:
        with f.open("rb", buffering=0) as fh:
            while got < budget and (chunk := fh.read(min(8 << 20, budget - got))):
                got += len(chunk)
        if got >= budget:
            break
    dt = max(time.monotonic() - t0, 1e-6)
    return {"mbytes": got / 2**20, "mbps": got / 2**20 / dt}
