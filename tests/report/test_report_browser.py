"""The report opened in real headless Debian Chromium: figures load, links resolve, and a job
named ``<script>alert(1)</script>`` is shown as text and runs nothing.

Script execution is observed through the DevTools protocol (dialogs opened, scripts compiled),
and the same observation is run on a control page that does execute that script, so a detector
that sees nothing cannot pass by being blind.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from browser_cdp import Chromium
from report_store import SCRIPT_NAME, Built


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    b = Chromium(tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


def test_control_page_proves_the_detector_sees_a_script(browser: Chromium, tmp_path: Path):
    page = tmp_path / "control.html"
    page.write_text(f"<!DOCTYPE html><html><body><p>x</p>{SCRIPT_NAME}</body></html>")
    _, load = browser.open(page.as_uri())
    assert [d["message"] for d in load.dialogs] == ["1"]
    assert any(s["url"] == page.as_uri() for s in load.scripts)


def test_report_in_chromium(browser: Chromium, built: Built, tmp_path: Path):
    index = built.out / "index.html"
    shot = tmp_path / "report.png"
    s, load = browser.open(index.as_uri(), screenshot=shot)

    # Nothing ran: no dialog, no script compiled by the page, no error, nothing failed to load.
    assert load.dialogs == []
    assert load.scripts == [], [x["url"] for x in load.scripts]
    assert load.exceptions == []
    assert load.failed_requests == []
    assert browser.evaluate(s, "document.scripts.length") == 0
    assert browser.evaluate(s, "document.querySelectorAll('script').length") == 0

    # The hostile job name is on the page as text, in the crash-loop tables.
    cells = browser.evaluate(s, "[...document.querySelectorAll('td')].map(td => td.textContent)")
    assert cells.count(SCRIPT_NAME) == 2  # summary's worst loops + the crash-loop section
    assert SCRIPT_NAME in browser.evaluate(s, "document.body.innerText")

    # Every figure is there and decoded by the browser; every figure the report lists is shown.
    imgs = browser.evaluate(
        s,
        "[...document.images].map(i => ({src: i.src, ok: i.complete && i.naturalWidth > 0,"
        " w: i.naturalWidth}))",
    )
    shown = {Path(urlparse(i["src"]).path).stem for i in imgs}
    expected = {k for k, v in built.report["figures"].items() if "png" in v}
    assert shown == expected and len(expected) == 8
    assert all(i["ok"] for i in imgs), imgs
    for i in imgs:
        assert i["w"] == _png_size(Path(unquote(urlparse(i["src"]).path)))[0]

    # No broken link: every href is relative, stays in the report folder and exists.
    hrefs = browser.evaluate(s, "[...document.querySelectorAll('a[href]')].map(a => a.href)")
    assert hrefs
    for h in hrefs:
        u = urlparse(h)
        assert u.scheme == "file", h  # nothing on the network
        target = Path(unquote(u.path))
        assert target.is_file(), h
        assert built.out.resolve() in target.resolve().parents
    raw = index.read_text()
    assert "http://" not in raw and "https://" not in raw

    # The SVGs the page links to parse, and the JSON link is the report's numbers.
    for v in built.report["figures"].values():
        if "svg" in v:
            assert (built.out / v["svg"]).read_text().lstrip().startswith("<?xml")
    assert json.loads((built.out / "report.json").read_text())["month"] == built.report["month"]

    # The screenshot is a real rendering of a long page (looked at by hand once; see report).
    w, h = _png_size(shot)
    assert w > 600 and h > 3000


def test_missing_figures_say_why_in_the_browser(browser: Chromium, built: Built, tmp_path: Path):
    from aegis_slurm.report.builder import build_report

    out = tmp_path / "no-events"
    rep = build_report(built.store, "2024-01", out)  # no --events: no drains figure
    assert "missing" in rep["figures"]["drains"]
    s, load = browser.open((out / "index.html").as_uri())
    assert load.dialogs == [] and load.scripts == []
    text = browser.evaluate(s, "document.querySelector('[data-figure-missing=drains]').textContent")
    assert "No node events were given" in text
    assert browser.evaluate(s, "[...document.images].every(i => i.naturalWidth > 0)")
