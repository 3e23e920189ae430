"""Kernel/sys log reading from a saved position: only what is new since the last run.  Stdlib.

Shared by the Prolog (new XIDs) and the Epilog (signals of the job that just ended).  A position
is a small JSON-able dict kept in the hook's state file; what is before it was judged already
and never comes back, whatever happened since (10.3, 10.4), and the cost grows with the new
lines only (10.5):

* ``/dev/kmsg`` records carry the kernel's sequence number: new = ``seq > pos["seq"]``.
* a log file (``kernel_log_path``, ``syslog_path``): inode + byte offset; a file rotated away
  (new inode) is finished from its old offset when found as ``<path>.1``, then the new file is
  read from its start.  At most ``max_bytes`` are read per run (the newest ones).
* any other text (a ``dmesg`` argv): the last few lines seen are the anchor; new = what follows
  their last occurrence.  An anchor no longer present (ring buffer wrapped) makes all new.
"""

from __future__ import annotations

import os
import re
from typing import Any

KMSG_REC = re.compile(r"^\d+,(\d+),\d+,[^;]*;")
ANCHOR = 4  # lines kept as the anchor of a text without sequence numbers


def since(text: str, pos: dict[str, Any] | None) -> tuple[list[str], dict[str, Any]]:
    """(lines of ``text`` after ``pos``, the position after them).  ``pos`` None: all new."""
    pos = pos if isinstance(pos, dict) else {}
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    if KMSG_REC.match(first):
        return _since_seq(lines, pos)
    return _since_anchor(lines, pos)


def _since_seq(lines: list[str], pos: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    last = pos.get("seq") if isinstance(pos.get("seq"), int) else -1
    out: list[str] = []
    keep = False
    top = last
    for ln in lines:
        m = KMSG_REC.match(ln)
        if m:
            seq = int(m.group(1))
            keep = seq > last
            top = max(top, seq)
        if keep:  # a record and its continuation (dictionary) lines
            out.append(ln)
    return out, {"seq": top}


def _since_anchor(lines: list[str], pos: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    body = [ln for ln in lines if ln.strip()]
    anchor = pos.get("tail")
    start = 0
    if isinstance(anchor, list) and anchor and all(isinstance(a, str) for a in anchor):
        k = len(anchor)
        n = pos.get("n")
        if isinstance(n, int) and k <= n <= len(body) and body[n - k : n] == anchor:
            start = n  # the usual case: the log only grew
        else:
            for i in range(len(body) - k, -1, -1):  # shifted (ring wrapped at the front)
                if body[i : i + k] == anchor:
                    start = i + k
                    break
    return body[start:], {"tail": body[-ANCHOR:], "n": len(body)}


def read_file_since(
    path: str, pos: dict[str, Any] | None, max_bytes: int
) -> tuple[str, dict[str, Any], str]:
    """(new complete lines of the file at ``path``, new position, note).  Reads O(new bytes).

    ``note`` says when something was skipped (more than ``max_bytes`` new).  A partial last
    line is left for the next run.  Raises OSError when the file cannot be read.
    """
    pos = pos if isinstance(pos, dict) else {}
    chunks: list[bytes] = []
    note = ""
    st = os.stat(path)
    ino, off = pos.get("ino"), pos.get("off")
    same = ino == st.st_ino and isinstance(off, int) and 0 <= off <= st.st_size
    if not same and isinstance(ino, int) and isinstance(off, int):
        try:  # rotated: finish the old file first
            old = os.stat(path + ".1")
            if old.st_ino == ino and off <= old.st_size:
                data, _ = _read_range(path + ".1", off, old.st_size, max_bytes)
                chunks.append(data)
        except OSError:
            pass
    start = off if same else 0
    assert isinstance(start, int)
    data, skipped = _read_range(path, start, st.st_size, max_bytes)
    if skipped:
        note = f"{path}: {skipped} bytes of new log skipped (more than {max_bytes} new)"
    cut = data.rfind(b"\n") + 1  # complete lines only
    chunks.append(data[:cut])
    end = st.st_size - (len(data) - cut)
    text = b"".join(chunks).decode("utf-8", "replace")
    return text, {"ino": st.st_ino, "off": end}, note


def _read_range(path: str, start: int, end: int, max_bytes: int) -> tuple[bytes, int]:
    """Bytes [start, end) of ``path``, at most the last ``max_bytes`` of them (+ skipped count)."""
    skipped = max(0, end - start - max_bytes)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        os.lseek(fd, start + skipped, os.SEEK_SET)
        want = end - start - skipped
        parts = []
        while want > 0:
            b = os.read(fd, min(want, 1 << 20))
            if not b:
                break
            parts.append(b)
            want -= len(b)
    finally:
        os.close(fd)
    data = b"".join(parts)
    if skipped:  # drop the partial first line
        data = data[data.find(b"\n") + 1 :]
    return data, skipped
