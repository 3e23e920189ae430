"""Hostile Prometheus answers, served over real HTTP on loopback by a scripted server.

A real Prometheus cannot be made to answer these (wrong result types, malformed pairs, partial
answers with warnings, huge or dripping bodies, redirects), so a tiny server plays them; the
code under test is the real HTTP path.  Each must be a one-line error (never a traceback) or a
correct table — never nodes made to look absent.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from click.testing import CliRunner

from aegis_slurm.cli import main
from aegis_slurm.errors import ServiceError
from aegis_slurm.metrics import prometheus
from aegis_slurm.metrics.catalog import spec_for
from aegis_slurm.metrics.prometheus import PromConfig, fetch_job

POWER = spec_for("DCGM_FI_DEV_POWER_USAGE")
ANSWERS: dict[str, bytes | str] = {}


def matrix(result: object, **extra: object) -> bytes:
    doc = {"status": "success", "data": {"resultType": "matrix", "result": result}, **extra}
    return json.dumps(doc).encode()


def series(node: str, values: list) -> dict:
    return {"metric": {"Hostname": node}, "values": values}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a: object) -> None:
        pass

    def do_POST(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        body = ANSWERS[self.path.split("/")[1]]
        if body == "redirect":
            self.send_response(302)
            self.send_header("Location", "/ok/api/v1/query_range")
            self.end_headers()
            return
        if body == "drip":
            self.send_response(200)
            self.end_headers()
            for _ in range(40):
                self.wfile.write(b" ")
                self.wfile.flush()
                time.sleep(0.1)
            return
        if body == "huge":
            self.send_response(200)
            self.end_headers()
            chunk = b" " * (1 << 20)
            try:
                for _ in range(8):
                    self.wfile.write(chunk)
            except OSError:
                pass
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body if isinstance(body, bytes) else body.encode())


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def fetch(url: str, name: str, **cfg: float) -> object:
    c = PromConfig(f"{url}/{name}", retries=0, timeout=cfg.get("timeout", 2.0))
    return fetch_job(c, ["n1", "n2"], 1000.0, 1600.0, [POWER])


GOOD = [[1000 + 15 * i, "400"] for i in range(40)]


@pytest.mark.parametrize(
    ("name", "body", "words"),
    [
        ("notdict", b'{"status": "success", "data": [1, 2]}', "without a data object"),
        (
            "vector",
            json.dumps(
                {"status": "success", "data": {"resultType": "vector", "result": []}}
            ).encode(),
            "expected a matrix",
        ),
        ("badpairs", matrix([series("n1", [[1000]]), series("n2", GOOD)]), "pairs"),
        ("strseries", matrix(["n1"]), "not an object"),
        ("partial", matrix([series("n1", GOOD)], warnings=["remote store down"]), "partially"),
        ("html", b"<html>proxy error</html>", "not JSON"),
        ("binary", b"\xff\xfe\x00", "not JSON"),
        ("error", b'{"status": "error", "error": "query timed out"}', "query timed out"),
    ],
)
def test_malformed_answers_are_service_errors(
    server: str, name: str, body: bytes, words: str
) -> None:
    ANSWERS[name] = body
    with pytest.raises(ServiceError, match=words):
        fetch(server, name)


def test_nan_and_inf_strings_become_dropped_values(server: str) -> None:
    vals = [[1000 + 15 * i, v] for i, v in enumerate(["NaN", "+Inf", "-Inf", "400", "x"])]
    ANSWERS["nan"] = matrix([series("n1", vals), series("n2", GOOD), series("other", GOOD)])
    df = fetch(server, "nan")
    assert sorted(df["node"].unique().to_list()) == ["n1", "n2"]
    assert df.filter(df["node"] == "n1").height == 5  # kept here, counted by the aligner


def test_a_redirect_is_named_not_followed_as_an_empty_query(server: str) -> None:
    # urllib would re-send the POST as a GET without the query: "empty query" would mislead
    ANSWERS["redir"] = "redirect"
    with pytest.raises(ServiceError, match=r"redirects \(HTTP 302\) to .*/ok/api/v1/query_range"):
        fetch(server, "redir")


def test_a_dripping_answer_hits_the_total_deadline(server: str) -> None:
    ANSWERS["drip"] = "drip"
    t = time.monotonic()
    with pytest.raises(ServiceError, match="no answer within"):
        fetch(server, "drip", timeout=0.5)
    assert time.monotonic() - t < 3.5  # 40 x 0.1 s drip, deadline 3 x 0.5 s (not a speed test)


def test_a_huge_answer_is_refused(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prometheus, "MAX_ANSWER", 2 << 20)
    ANSWERS["huge"] = "huge"
    with pytest.raises(ServiceError, match="larger than"):
        fetch(server, "huge")


def test_cli_partial_answer_is_one_line_without_a_verdict(server: str) -> None:
    ANSWERS["partialcli"] = matrix([series("n1", GOOD)], warnings=["shard down"])
    r = CliRunner().invoke(
        main,
        [
            "minder",
            "--prometheus",
            f"{server}/partialcli",
            "--job",
            "5",
            "--nodes",
            "n[1-2]",
            "--start",
            "1970-01-01T00:16:40",
            "--end",
            "1970-01-01T00:26:40",
            "--json",
        ],
    )
    assert r.exit_code == 1 and r.stdout == ""
    (line,) = r.output.strip().splitlines()
    assert line.startswith("aegis-slurm: error: ") and "partially" in line
