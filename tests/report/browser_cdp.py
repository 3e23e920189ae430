"""Drive real headless Chromium over the DevTools protocol on a pipe (stdlib only).

``--remote-debugging-pipe`` makes Chromium read NUL-terminated JSON commands on fd 3 and write
replies and events on fd 4.  What a page did while it loaded is observed, not guessed:

* ``Page.javascriptDialogOpening`` fires for every alert/confirm/prompt;
* ``Debugger.scriptParsed`` fires for every script the page compiles (inline or external);
* ``Runtime.exceptionThrown`` / ``Runtime.consoleAPICalled`` record errors and console output.

Both detectors are checked against a control page that *does* run a script (test_report_browser).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Safety net against a wedged browser only (no test asserts on time).
READ_TIMEOUT_S = 120.0


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageLoad:
    dialogs: list[dict[str, Any]] = field(default_factory=list)
    scripts: list[dict[str, Any]] = field(default_factory=list)
    exceptions: list[dict[str, Any]] = field(default_factory=list)
    console: list[dict[str, Any]] = field(default_factory=list)
    failed_requests: list[dict[str, Any]] = field(default_factory=list)


class Chromium:
    def __init__(self, user_data_dir: Path) -> None:
        exe = chromium_path()
        assert exe, "chromium is not installed (tools/install-test-deps.sh installs it)"
        self._to_r, self._to_w = os.pipe()  # we write, Chromium reads on fd 3
        self._from_r, self._from_w = os.pipe()  # Chromium writes on fd 4, we read
        to_r, from_w = self._to_r, self._from_w

        def fds() -> None:  # in the child, before exec: move the pipe ends to fds 3 and 4
            os.dup2(to_r, 100)
            os.dup2(from_w, 101)
            os.dup2(100, 3)
            os.dup2(101, 4)

        self.proc = subprocess.Popen(
            [
                exe,
                *FLAGS,
                f"--user-data-dir={user_data_dir}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=fds,
        )
        os.close(to_r)
        os.close(from_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self) -> dict[str, Any]:
        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._from_r], [], [], READ_TIMEOUT_S)
            assert ready, "chromium did not answer"
            chunk = os.read(self._from_r, 1 << 20)
            assert chunk, "chromium closed the pipe"
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._id += 1
        cmd: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            cmd["sessionId"] = session
        os.write(self._to_w, json.dumps(cmd).encode() + b"\0")
        while True:
            msg = self._read_message()
            if msg.get("id") == self._id:
                assert "error" not in msg, (method, msg["error"])
                return msg.get("result", {})
            self.events.append(msg)

    def wait_event(self, method: str) -> dict[str, Any]:
        for i, ev in enumerate(self.events):
            if ev.get("method") == method:
                return self.events.pop(i)
        while True:
            msg = self._read_message()
            if msg.get("method") == method:
                return msg
            self.events.append(msg)

    def open(self, url: str, screenshot: Path | None = None) -> tuple[str, PageLoad]:
        """Load ``url`` in a fresh tab, record what it did; returns (session id, PageLoad)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        s = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Debugger", "Network"):
            self.send(f"{domain}.enable", session=s)
        self.events.clear()
        self.send("Page.navigate", {"url": url}, session=s)
        load = PageLoad()
        while True:
            msg = self.wait_any(s)
            m = msg.get("method")
            p = msg.get("params", {})
            if m == "Page.javascriptDialogOpening":
                load.dialogs.append(p)
                # Dismiss it so the page can finish loading (the dialog is the evidence).
                self.send("Page.handleJavaScriptDialog", {"accept": True}, session=s)
            elif m == "Debugger.scriptParsed":
                load.scripts.append(p)
            elif m == "Runtime.exceptionThrown":
                load.exceptions.append(p)
            elif m == "Runtime.consoleAPICalled":
                load.console.append(p)
            elif m == "Network.loadingFailed":
                load.failed_requests.append(p)
            elif m == "Page.loadEventFired":
                break
        # Our own evaluations below also compile scripts: stop recording them first.
        self.send("Debugger.disable", session=s)
        if screenshot is not None:
            data = self.send(
                "Page.captureScreenshot",
                {"format": "png", "captureBeyondViewport": True},
                session=s,
            )["data"]
            screenshot.write_bytes(base64.b64decode(data))
        return s, load

    def wait_any(self, session: str) -> dict[str, Any]:
        while True:
            msg = self.events.pop(0) if self.events else self._read_message()
            if msg.get("sessionId") == session and "method" in msg:
                return msg

    def evaluate(self, session: str, expression: str) -> Any:
        res = self.send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
            session=session,
        )
        assert "exceptionDetails" not in res, res
        return res["result"].get("value")

    def close(self) -> None:
        with contextlib.suppress(AssertionError, OSError):
            self.send("Browser.close")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_w)
        os.close(self._from_r)
