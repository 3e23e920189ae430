"""CBD test helpers: recorded real outputs and fake sysfs/proc trees built from them.

Also used by benchmarks/bench_cbd.py (imported by path), so standard library only.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "hostsignals"
H100_Q = FIX / "gpud" / "nvidia-smi-query.535.161.08.out.0.valid"


def write_cbd_config(
    path: Path, *, state_dir: Path, probes: dict[str, list[str]], gpus: int = 8, extra: str = ""
) -> Path:
    """A test cbd.toml: no textfile, no syslog, no time-sync check, the given probe commands."""
    lines = [
        "[runtime]",
        f'state_dir = "{state_dir}"',
        'textfile_dir = ""',
        "syslog = false",
        "[expect]",
        f"gpus = {gpus}",
        'time_sync = "off"',
        "[probes]",
        *(f"{name} = {json.dumps(command)}" for name, command in probes.items()),
    ]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def fixture_text(rel: str) -> str:
    return (FIX / rel).read_text()


def edit_gpu(text: str, gpu: int, old: str, new: str) -> str:
    """Replace the first match of regex ``old`` in the ``gpu``-th GPU block of nvidia-smi -q."""
    parts = text.split("\nGPU 0000")
    assert re.search(old, parts[gpu + 1]), f"{old!r} not in GPU {gpu} block"
    parts[gpu + 1] = re.sub(old, new, parts[gpu + 1], count=1)
    return "\nGPU 0000".join(parts)


def drop_gpu(text: str, gpu: int) -> str:
    """Remove one GPU block (what nvidia-smi shows after XID 79 'fallen off the bus')."""
    parts = text.split("\nGPU 0000")
    del parts[gpu + 1]
    return "\nGPU 0000".join(parts).replace(
        "Attached GPUs                             : 8",
        "Attached GPUs                             : 7",
    )


def materialize_sysfs(json_path: Path, root: Path) -> Path:
    """Write a gcm sysfs-as-JSON dump as a real tree under ``root`` and add the
    /sys/class/{infiniband,net} symlinks the kernel would create."""
    data = json.loads(json_path.read_text())
    for path, content in data.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    for kind in ("infiniband", "net"):
        cls = root / "sys" / "class" / kind
        cls.mkdir(parents=True, exist_ok=True)
        for dev in (root / "sys" / "bus" / "pci" / "devices").glob(f"*/{kind}/*"):
            link = cls / dev.name
            if not link.exists():
                os.symlink(dev, link)
    return root


def write_text(p: Path, text: str) -> Path:
    p.write_text(text)
    return p
