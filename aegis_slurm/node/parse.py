"""Parsers: raw probe output (text) -> plain Python data.  Pure functions, standard library only.

Each parser is tested on real recorded output (tests/fixtures/hostsignals/).  A parser raises
``ValueError`` on output it cannot make sense of; the runner turns that into ``probe_error``.
"""

from __future__ import annotations

import contextlib
import functools
import re
from dataclasses import dataclass, field

Tree = dict[str, "str | Tree"]


def _indent_tree(lines: list[str]) -> Tree:
    """Turn ``key : value`` lines nested by indentation (nvidia-smi -q style) into dicts."""
    root: Tree = {}
    stack: list[tuple[int, Tree]] = [(-1, root)]
    for raw in lines:
        if not raw.strip():
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        key, sep, value = raw.strip().partition(":")
        key = key.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        if sep and value.strip():
            parent[key] = value.strip()
        else:
            node: Tree = {}
            parent[key] = node
            stack.append((indent, node))
    return root


@dataclass
class NvidiaSmiQuery:
    driver_version: str
    cuda_version: str
    attached: int
    gpus: list[Tree] = field(default_factory=list)  # one tree per "GPU <bus id>" block
    failure: str = ""  # nvidia-smi's own failure message (no GPU data), see NVSMI_FAILURES


#: messages with which nvidia-smi refuses to report that are a state of the node (driver and
#: library of different versions after an upgrade without reboot; no GPU visible), so data for
#: the checks, not an unreadable output.  "couldn't communicate with the NVIDIA driver" is kept a
#: probe error (tests/cbd/test_cbd_runner.py pins it; see docs/cbd.md "Limits").
NVSMI_FAILURES = (
    "Driver/library version mismatch",
    "No devices were found",
)


def parse_nvidia_smi_q(text: str) -> NvidiaSmiQuery:
    """Parse ``nvidia-smi -q`` (full or ``-d SECTION``) text output, or one of nvidia-smi's
    :data:`NVSMI_FAILURES` (a query with ``failure`` set and no GPUs)."""
    if "NVSMI LOG" not in text:
        for line in text.strip().splitlines():
            if any(f in line for f in NVSMI_FAILURES):
                return NvidiaSmiQuery("", "", 0, [], failure=line.strip()[:200])
        raise ValueError("not nvidia-smi -q output: " + (text.strip().splitlines() or [""])[0])
    head: dict[str, str] = {}
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("GPU ") and not line.startswith("GPU  "):
            blocks.append([])
            continue
        if blocks:
            blocks[-1].append(line)
        elif ":" in line:
            k, _, v = line.partition(":")
            head[k.strip()] = v.strip()
    attached = int(head.get("Attached GPUs", len(blocks)))
    return NvidiaSmiQuery(
        driver_version=head.get("Driver Version", ""),
        cuda_version=head.get("CUDA Version", ""),
        attached=attached,
        gpus=[_indent_tree(b) for b in blocks],
    )


@functools.lru_cache(maxsize=2)
def parse_nvidia_smi_q_once(text: str) -> NvidiaSmiQuery:
    """:func:`parse_nvidia_smi_q` memoised on the text: one ``nvidia-smi -q`` feeds thirteen
    checks, which must not parse 70 KB thirteen times.  Callers must not mutate the result."""
    return parse_nvidia_smi_q(text)


def tree_get(tree: Tree, *path: str, default: str = "") -> str:
    """Value at ``path`` in an nvidia-smi tree, or ``default`` when absent."""
    node: str | Tree = tree
    for p in path:
        if not isinstance(node, dict) or p not in node:
            return default
        node = node[p]
    return node if isinstance(node, str) else default


def as_int(value: str) -> int | None:
    """Leading integer of a value like ``16x``, ``29 C`` or ``0``; None for N/A."""
    m = re.match(r"\s*(-?\d+)", value)
    return int(m.group(1)) if m else None


@dataclass
class NvlinkGpu:
    index: int
    name: str
    links: dict[int, str]  # link number -> "25 GB/s" or "<inactive>"
    all_inactive: bool = False


def parse_nvlink_status(text: str) -> list[NvlinkGpu]:
    """Parse ``nvidia-smi nvlink -s``."""
    gpus: list[NvlinkGpu] = []
    for line in text.splitlines():
        s = line.strip()
        m = re.match(r"GPU (\d+): (.*?)(?: \(UUID.*)?$", s)
        if m:
            gpus.append(NvlinkGpu(int(m.group(1)), m.group(2), {}))
            continue
        if not gpus:
            continue
        m = re.match(r"Link (\d+): (.*)$", s)
        if m:
            gpus[-1].links[int(m.group(1))] = m.group(2).strip()
        elif "all links are inactive" in s.lower():  # B200 prints "inActive"
            gpus[-1].all_inactive = True
    return gpus


@dataclass
class IbPort:
    device: str
    port: int
    state: str  # "ACTIVE", "DOWN", "INIT", ...
    phys_state: str  # "LinkUp", "Polling", "Disabled", ...
    rate_gbps: float
    link_layer: str  # "InfiniBand" or "Ethernet"
    counters: dict[str, int] = field(default_factory=dict)


def _state_word(value: str) -> str:
    # sysfs "4: ACTIVE" / ibstat "Active" -> "ACTIVE";  "5: LinkUp" -> "LinkUp"
    return value.split(":", 1)[-1].strip()


def parse_ibstat(text: str) -> list[IbPort]:
    """Parse ``ibstat`` output (tolerates a trailing ``ibpanic`` after valid CA blocks)."""
    ports: list[IbPort] = []
    ca = ""
    cur: dict[str, str] | None = None
    port_no = 0

    def flush() -> None:
        if cur is not None:
            ports.append(
                IbPort(
                    ca,
                    port_no,
                    cur.get("State", "").upper(),
                    cur.get("Physical state", ""),
                    float(cur.get("Rate", "0") or 0),
                    cur.get("Link layer", ""),
                )
            )

    for line in text.splitlines():
        m = re.match(r"CA '([^']+)'", line)
        if m:
            flush()
            cur, ca = None, m.group(1)
            continue
        m = re.match(r"\s+Port (\d+):\s*$", line)
        if m:
            flush()
            cur, port_no = {}, int(m.group(1))
            continue
        if cur is not None and ":" in line and line[:1].isspace():
            k, _, v = line.strip().partition(":")
            cur[k.strip()] = v.strip()
    flush()
    return ports


def ib_port_from_sysfs(device: str, port: int, files: dict[str, str]) -> IbPort:
    """Build an :class:`IbPort` from the text of sysfs files under ``ports/<n>/``."""
    rate = re.match(r"\s*([\d.]+)", files.get("rate", "0")) or None
    counters = {
        k[len("counters/") :]: int(v)
        for k, v in files.items()
        if k.startswith("counters/") and v.strip().lstrip("-").isdigit()
    }
    return IbPort(
        device,
        port,
        _state_word(files.get("state", "")).upper(),
        _state_word(files.get("phys_state", "")),
        float(rate.group(1)) if rate else 0.0,
        files.get("link_layer", "").strip(),
        counters,
    )


def parse_meminfo(text: str) -> dict[str, int]:
    """``/proc/meminfo`` -> {key: kB}."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        n = as_int(v)
        if n is not None:
            out[k.strip()] = n
    return out


def parse_proc_mounts(text: str) -> dict[str, tuple[str, str]]:
    """``/proc/self/mounts`` -> {mountpoint: (fstype, options)}."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            mnt = parts[1].replace("\\040", " ")
            out[mnt] = (parts[2], parts[3])
    return out


@dataclass
class NcclResult:
    avg_busbw_gbps: float
    max_busbw_gbps: float  # best out-of-place busbw over message sizes
    out_of_bounds: int
    n_gpus: int


def parse_nccl_tests(text: str) -> NcclResult:
    """Parse nccl-tests ``all_reduce_perf`` output, reading columns by the header.

    The column set changed over nccl-tests versions (a ``root`` column since 2.x, per-iteration
    and timestamp columns with ``-I``/``-T``), so the out-of-place ``busbw`` is located by the
    ``# size count type redop [root] time algbw busbw ...`` header line, never by position.
    """
    avg = re.search(r"# Avg bus bandwidth\s*:\s*([\d.]+)", text)
    if not avg:
        raise ValueError("no '# Avg bus bandwidth' line in nccl-tests output")
    oob = re.search(r"# Out of bounds values\s*:\s*(\d+)", text)
    ngpus = re.search(r"nGpus (\d+)", text)
    col = None
    busbw = []
    for line in text.splitlines():
        cols = line.split()
        if cols[:3] == ["#", "size", "count"] and "busbw" in cols:
            col = cols.index("busbw") - 1  # data rows have no leading "#"
            continue
        if col is not None and len(cols) > col and cols[0].isdigit():
            try:
                busbw.append(float(cols[col]))
            except ValueError:
                continue
    if col is None:
        raise ValueError("no '# size count ... busbw' header in nccl-tests output")
    return NcclResult(
        float(avg.group(1)),
        max(busbw, default=0.0),
        int(oob.group(1)) if oob else 0,
        int(ngpus.group(1)) if ngpus else 0,
    )


def parse_dcgm_diag(raw: str | dict) -> dict:
    """``dcgmi diag -j`` probe output -> ``{"exit_code": int, "result": parsed JSON}``.

    ``raw`` is the probe's ``{"exit_code", "output"}`` or bare JSON text (recorded output,
    exit code 0).  Raises ValueError on non-JSON output.
    """
    import json

    if isinstance(raw, str):
        raw = {"exit_code": 0, "output": raw}
    try:
        result = json.loads(raw["output"])
    except ValueError as e:
        raise ValueError(f"dcgmi diag output is not JSON ({e})") from None
    return {"exit_code": int(raw["exit_code"]), "result": result}


@dataclass
class GpuBurnResult:
    tested: dict[int, str]  # GPU index -> "OK" / "FAULTY"
    max_errors: list[int]  # per GPU, highest error count seen in progress lines
    max_temp_c: list[int]  # per GPU, highest temperature seen
    gflops: list[float]  # per GPU, last non-zero Gflop/s


def parse_gpu_burn(text: str) -> GpuBurnResult:
    """Parse gpu-burn output (progress lines + the final ``Tested N GPUs`` summary)."""
    tested = {int(m.group(1)): m.group(2) for m in re.finditer(r"GPU (\d+): (OK|FAULTY)", text)}
    if "Tested" not in text or not tested:
        raise ValueError("gpu-burn output has no 'Tested N GPUs' summary")
    n = max(tested) + 1
    errs, temps, gflops = [0] * n, [0] * n, [0.0] * n
    for m in re.finditer(r"errors: ((?:\d+(?: - )?)+)\s+temps: ((?:\d+ C(?: - )?)+)", text):
        for i, e in enumerate(int(x) for x in m.group(1).split(" - ")[:n]):
            errs[i] = max(errs[i], e)
        for i, t in enumerate(int(x.strip().rstrip("C")) for x in m.group(2).split(" - ")[:n]):
            temps[i] = max(temps[i], t)
    for m in re.finditer(r"proc'd: (.*?)\s+errors:", text):
        for i, g in enumerate(re.findall(r"\(([\d.]+) Gflop/s\)", m.group(1))[:n]):
            if float(g) > 0:
                gflops[i] = float(g)
    return GpuBurnResult(tested, errs, temps, gflops)


def parse_proc_modules(text: str) -> set[str]:
    """``/proc/modules`` or ``lsmod`` output -> loaded module names."""
    names = {line.split()[0] for line in text.splitlines() if line.strip()}
    names.discard("Module")  # lsmod header
    return names


def cpu_list_count(text: str) -> int:
    """Number of CPUs in a kernel CPU list such as ``0-63,128-191``."""
    n = 0
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        n += int(hi or lo) - int(lo) + 1
    return n


def parse_proc_snapshot(raw: dict) -> dict:
    """:func:`probes.proc_snapshot` -> ``{"states": {pid: (comm, state)}, "load5", "ncpu"}``.

    The comm field of ``/proc/<pid>/stat`` is in parentheses and may itself contain spaces
    and parentheses, so the state is the first field after the *last* ``)``.
    """
    states = {}
    for line in raw["stat"]:
        head, sep, tail = line.rpartition(")")
        pid, _, comm = head.partition(" (")
        if sep and pid.strip().isdigit() and tail.split():
            states[int(pid)] = (comm, tail.split()[0])
    load = raw.get("loadavg", "").split()
    return {
        "states": states,
        "load5": float(load[1]) if len(load) > 1 else None,
        "ncpu": cpu_list_count(raw["online"]) if raw.get("online", "").strip() else 0,
    }


def parse_edac(raw: dict) -> dict:
    """``{mc: {"ce": text, "ue": text}}`` -> ints."""
    return {mc: {k: as_int(v) or 0 for k, v in c.items()} for mc, c in raw.items()}


def parse_cpu_topology(raw: dict) -> dict:
    """:func:`probes.cpu_topology` -> online count, sockets, SMT flag, governors."""
    # sysfs package ids first: aarch64 /proc/cpuinfo has no "physical id" (-1: not known)
    packages = {p.strip() for p in raw.get("packages", []) if p.strip() not in ("", "-1")}
    sockets = packages or {
        line.partition(":")[2].strip()
        for line in raw.get("cpuinfo", "").splitlines()
        if line.startswith("physical id")
    }
    smt = raw.get("smt")
    return {
        "online": cpu_list_count(raw["online"]),
        "sockets": len(sockets) or None,  # None: this kernel/arch does not tell
        "smt": None if smt is None else smt.strip() == "1",
        "governors": sorted(set(raw.get("governors", []))),
    }


def parse_smartctl(raw: dict) -> dict:
    """``{dev: smartctl -j text}`` -> ``{dev: parsed JSON}``."""
    import json

    try:
        return {dev: json.loads(text) for dev, text in raw.items()}
    except ValueError as e:
        raise ValueError(f"smartctl output is not JSON ({e})") from None


def parse_nvbandwidth(text: str) -> dict[str, dict[int, float]]:
    """nvbandwidth text output -> ``{testcase: {gpu column: GB/s}}``.

    Each testcase prints ``Running <name>.``, a title, a header row of GPU (column) indices and
    one row per CPU/GPU source; a GPU's figure is the best over the rows.  Waived testcases
    print nothing.  Raises ValueError when no testcase result is found.
    """
    out: dict[str, dict[int, float]] = {}
    name, cols = "", []
    for line in text.splitlines():
        m = re.match(r"Running (\w+)\.", line)
        if m:
            name, cols = m.group(1), []
            continue
        f = line.split()
        if not name or not f:
            continue
        if not cols and all(x.isdigit() for x in f):
            cols = [int(x) for x in f]
        elif cols and f[0].isdigit() and len(f) == len(cols) + 1:
            row = out.setdefault(name, {})
            for c, v in zip(cols, f[1:], strict=True):
                with contextlib.suppress(ValueError):  # "N/A" cells
                    row[c] = max(row.get(c, 0.0), float(v))
        elif line.startswith("SUM "):
            name, cols = "", []
    if not out:
        raise ValueError("no nvbandwidth testcase results")
    return out


@dataclass(frozen=True)
class SelEntry:
    sensor: str  # e.g. "Processor #0x40", "Memory #0x88"
    event: str  # e.g. "Uncorrectable machine check exception", "Correctable ECC (CPU0_G1)"
    asserted: bool
    key: str  # the whole line without its record id (ids are reused after a SEL clear)


def parse_ipmi_sel(text: str) -> list[SelEntry]:
    """``ipmitool sel list`` / ``sel elist`` lines: ``id | date | time | sensor | event | dir``."""
    out = []
    for line in text.splitlines():
        f = [x.strip() for x in line.split("|")]
        if len(f) < 6 or not f[0]:
            continue
        out.append(SelEntry(f[3], f[4], f[5] == "Asserted", " | ".join(f[1:])))
    return out


def new_sel_entries(text: str, state: dict) -> list[SelEntry]:
    """SEL entries not seen by an earlier run (the SEL survives reboots and repairs, so only new
    records may judge a node); fingerprints kept in ``state["sel_seen"]`` (last 2000)."""
    import hashlib

    seen = set(state.get("sel_seen", []))
    new, keys = [], []
    for e in parse_ipmi_sel(text):
        k = hashlib.sha1(e.key.encode(), usedforsecurity=False).hexdigest()[:16]
        if k not in seen:
            seen.add(k)
            keys.append(k)
            new.append(e)
    first = "sel_seen" not in state
    state["sel_seen"] = (state.get("sel_seen", []) + keys)[-2000:]
    # the first reading only sets the baseline: years of old records must not drain a node
    return [] if first else new


def parse_stream(text: str) -> dict:
    """McCalpin STREAM output -> ``{"Copy": MB/s, "Scale", "Add", "Triad", "validates": bool}``.

    Raises ValueError when there is no Triad line (the run did not finish)."""
    out: dict = {}
    for m in re.finditer(r"^(Copy|Scale|Add|Triad):\s+([\d.]+)", text, re.M):
        out[m.group(1)] = float(m.group(2))
    if "Triad" not in out:
        raise ValueError("no 'Triad:' line in STREAM output")
    out["validates"] = "Solution Validates" in text
    return out
