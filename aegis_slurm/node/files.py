"""File safety for the hooks (they run as root): one private directory, one atomic durable
write, one locked JSON state file with shape validation, one counter file.  Stdlib only.

* Nothing follows a symlink an unprivileged user could plant (``O_NOFOLLOW`` on every open of
  a file we write; directories are checked with ``O_DIRECTORY | O_NOFOLLOW``).
* Directories are 0700, state files 0600 (records may name users' jobs).
* A state file of the wrong shape never disables a hook: a file that is not a JSON object is
  quarantined (renamed ``<name>.corrupt``) and replaced; a key of the wrong type is dropped;
  both are counted (``repaired`` in the returned :class:`Locked`, 10.7).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aegis_slurm.errors import InputError

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def safe_name(name: str, what: str = "node name") -> str:
    """``name`` when it is usable as one path component, else :class:`InputError` (10.10).

    Node names come from the environment (``SLURMD_NODENAME``) or from records: untrusted.
    """
    if not isinstance(name, str) or not _NAME.match(name) or name in (".", ".."):
        raise InputError(f"refusing {what} {name!r}: not a plain host name")
    return name


def private_dir(d: str | os.PathLike[str]) -> Path:
    """``d`` created (with parents) as a real directory with mode 0700, an existing one
    re-chmodded; a symlink in its place is refused (OSError)."""
    d = Path(d)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        os.fchmod(fd, 0o700)
    finally:
        os.close(fd)
    return d


def fsync_dir(d: str | os.PathLike[str]) -> None:
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(
    path: str | os.PathLike[str], data: str | bytes, *, mode: int = 0o600, durable: bool = True
) -> Path:
    """Replace ``path`` with ``data``: temp file (``O_EXCL|O_NOFOLLOW``) in the same directory,
    fsync, rename, fsync the directory.  A reader sees the old or the new file, never half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data.encode() if isinstance(data, str) else data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)
    return path


# ---- shapes -------------------------------------------------------------------------------
# A shape is a type (int, float, str, bool, dict, list), ``{str: shape}`` for a dict whose values
# all have that shape, or ``[shape]`` for a list of them.  ``float`` accepts int.


def conforms(value: Any, shape: Any) -> bool:
    if isinstance(shape, dict):
        (vshape,) = shape.values()
        return isinstance(value, dict) and all(conforms(v, vshape) for v in value.values())
    if isinstance(shape, list):
        return isinstance(value, list) and all(conforms(v, shape[0]) for v in value)
    if shape is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if shape is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, shape)


@dataclass
class Locked:
    """The state dict of :func:`locked_json` and what was repaired while loading it."""

    data: dict[str, Any]
    repaired: list[str] = field(default_factory=list)


@contextlib.contextmanager
def locked_json(path: str | os.PathLike[str], shape: dict[str, Any]) -> Iterator[Locked]:
    """Load/modify/save a small JSON object under an exclusive flock (0600, atomic).

    ``shape`` maps top-level keys to their shape; keys of the wrong shape are dropped, a file
    that is not a JSON object is renamed ``<name>.corrupt`` and replaced (both in ``repaired``).
    Keys not in ``shape`` are kept as they are.
    """
    path = Path(path)
    private_dir(path.parent)
    lock = os.open(
        path.with_name(path.stem + ".lock"),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        os.fchmod(lock, 0o600)
        fcntl.flock(lock, fcntl.LOCK_EX)
        st = Locked({})
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            with os.fdopen(fd, "rb") as f:
                raw = f.read()
            try:
                data = json.loads(raw)
            except ValueError:
                data = None
            if isinstance(data, dict):
                st.data = data
            else:
                st.repaired.append(f"{path.name}: not a JSON object, quarantined")
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(path.name + ".corrupt"))
        except FileNotFoundError:
            pass
        except OSError as e:  # a symlink (ELOOP) or unreadable: start afresh, say so
            st.repaired.append(f"{path.name}: unreadable ({e.strerror}), replaced")
        for k, s in shape.items():
            if k in st.data and not conforms(st.data[k], s):
                st.repaired.append(f"{path.name}: {k} of the wrong shape, dropped")
                del st.data[k]
        yield st
        atomic_write(path, json.dumps(st.data, sort_keys=True), durable=False)
    finally:
        os.close(lock)


def bump_counter(d: str | os.PathLike[str], name: str, n: int = 1) -> int:
    """Best-effort persistent counter file ``<d>/<name>`` (outside any state file, which may be
    the broken thing).  Returns the new value, -1 when it could not be written."""
    try:
        fd = os.open(
            private_dir(d) / name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        with os.fdopen(fd, "r+") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            text = f.read().strip()
            cur = int(text) if text.isdigit() else 0
            f.seek(0)
            f.truncate()
            f.write(str(cur + n))
        return cur + n
    except Exception:
        return -1


def read_counter(d: str | os.PathLike[str], name: str) -> int:
    try:
        text = (Path(d) / name).read_text().strip()
    except OSError:
        return 0
    return int(text) if text.isdigit() else 0
