"""Hook runtime shared by the Prolog and the Epilog: the process watchdog (armed before anything
else), the node name, the outcome that must survive a crash, and failing open.  Stdlib only.

Order in every hook's ``main``: :func:`Watchdog.arm` with the *default* budget (read from the
package's own default TOML, never from a site file that could sit on a hung NFS mount), then
load the site config, then :meth:`Watchdog.rearm` with the configured budget (10.8).  Whatever
happens after a drain succeeded -- an exception, the watchdog -- the process exits with the
hook's "drained" exit code, so Slurm requeues the job off the node it just drained (10.9).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable

from aegis_slurm.node import export, files, probes


class Outcome:
    """What this process did that must decide its exit code even if it crashes afterwards."""

    drained_exit: int | None = None  # set by the guarded drain (prolog mode)


OUTCOME = Outcome()


def node_name() -> str:
    """Slurm's node name (SLURMD_NODENAME, several slurmds may share a host), else hostname.

    Untrusted (it ends up in paths): a name that is not a plain host name is refused."""
    return files.safe_name(os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0])


class Watchdog:
    """Last line of defence: kill every probe process group and exit (0, or the drained exit)."""

    def __init__(self, name: str, on_fire: Callable[[], None] | None = None) -> None:
        self.name = name
        self.on_fire = on_fire
        self._t0 = time.monotonic()
        self._deadline = float("inf")
        self._cv = threading.Condition()
        self._thread: threading.Thread | None = None

    def arm(self, seconds: float) -> Watchdog:
        """Fire ``seconds`` after the process started this watchdog (re-arming moves it)."""
        with self._cv:
            self._deadline = self._t0 + seconds
            self._cv.notify_all()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, daemon=True, name="watchdog")
            self._thread.start()
        return self

    rearm = arm

    @property
    def deadline(self) -> float:
        """When it fires, on the ``time.monotonic()`` clock (inf until armed)."""
        return self._deadline

    def _run(self) -> None:
        with self._cv:
            while (left := self._deadline - time.monotonic()) > 0:
                self._cv.wait(left)
        probes.kill_live_children()
        if self.on_fire is not None:
            with contextlib.suppress(Exception):  # the watchdog must exit whatever happens
                self.on_fire()
        rc = OUTCOME.drained_exit or 0
        msg = (
            f"{self.name}: watchdog fired after {time.monotonic() - self._t0:.1f}s; "
            f"exit {rc} (fail open)"
        )
        export.log("alert", msg)
        with contextlib.suppress(Exception):
            print(msg, file=sys.stderr, flush=True)
        os._exit(rc)


def say(hook: str, level: str, message: str, use_syslog: bool = True) -> None:
    """One line to syslog and to stderr (the hook log: slurmd's, or the wrapper's logger)."""
    export.log(level, f"{hook}: {message}", use_syslog)
    with contextlib.suppress(Exception):
        print(f"{hook}: {message}", file=sys.stderr, flush=True)
