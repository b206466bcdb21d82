"""A headless Chromium for the dashboard tests, driven over its DevTools protocol on a pipe
(no driver package needed): the Debian package (`apt-get install chromium`); without it the
browser tests skip, or fail when CI is set. The fixtures `chromium` and `browser` live in
tests/entrypoints/conftest.py."""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.serving import wait_or_kill

CHROMIUM = "/usr/bin/chromium"
BROWSER_TIMEOUT_SECONDS = 30.0
WINDOW = (1400, 1000)  # CSS pixels; a screenshot is as tall as the page
PANELS = (
    "headline",
    "chart-error",
    "chart-scatter",
    "chart-coverage",
    "chart-factors",
    "chart-scale",
    "table-history",
    "table-spend",
    "table-at-risk",
    "table-running",
)
ALL_DRAWN = (  # the page's last draw finished, and every panel reached a state
    f"document.body.dataset.drawn === 'true' && {json.dumps([*PANELS, 'passes'])}"
    ".every((id) => { const e = document.getElementById(id);"
    " return e && (e.dataset.rendered || e.dataset.empty || e.dataset.error); })"
)


# --- the browser ----------------------------------------------------------------------------


class Page:
    """One tab of a headless Chromium, over the DevTools protocol on a pipe (fd 3 carries
    our commands, fd 4 its answers, each a JSON message ended by a NUL byte)."""

    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int):
        self._process = process
        self._out = to_browser
        self._in = from_browser
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Page.enable")
        self.call("Runtime.enable")
        width, height = WINDOW
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def goto(self, url: str) -> None:
        self._events.clear()
        self.call("Page.navigate", {"url": url})
        self._wait_event("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises are awaited)."""
        answer = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in answer:
            raise AssertionError(f"{expression!r} threw: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def wait_for(self, expression: str, timeout: float = BROWSER_TIMEOUT_SECONDS) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            assert time.monotonic() < deadline, f"the page never satisfied {expression!r}"
            time.sleep(0.05)

    def wait_drawn(self) -> None:
        self.wait_for(ALL_DRAWN)

    def select(self, selector: str, value: str) -> None:
        """Choose an option as a person would: set it and fire the change event."""
        self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" e.value = {json.dumps(value)};"
            " e.dispatchEvent(new Event('change', { bubbles: true })); })()"
        )

    def choose_filter(self, selector: str, value: str) -> None:
        """Change a filter and wait until every panel is drawn again."""
        self.select(selector, value)
        self.wait_drawn()

    def click(self, selector: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    def fill(self, selector: str, value: str) -> None:
        self.evaluate(f"document.querySelector({json.dumps(selector)}).value = {json.dumps(value)}")

    def screenshot(self, path: Path) -> None:
        """The whole page, as tall as its content, as a PNG."""
        width, _ = WINDOW
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        shot = self.call("Page.captureScreenshot", {"format": "png"})
        path.write_bytes(base64.b64decode(shot["data"]))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
        )

    def screenshot_of(self, selector: str, path: Path) -> None:
        """One element (its bounding box on the whole page, 8 px around it), as a PNG."""
        width, _ = WINDOW
        height = int(self.evaluate("document.documentElement.scrollHeight"))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        x, y, w, h = self.evaluate(
            f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
            ".getBoundingClientRect(); return [r.x + scrollX, r.y + scrollY, r.width, r.height];"
            " })()"
        )
        clip = {"x": max(x - 8, 0), "y": max(y - 8, 0), "width": w + 16, "height": h + 16}
        shot = self.call("Page.captureScreenshot", {"format": "png", "clip": {**clip, "scale": 1}})
        path.write_bytes(base64.b64decode(shot["data"]))
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": WINDOW[1], "deviceScaleFactor": 1, "mobile": False},
        )

    def call(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self._call(method, params, self._session)

    def close(self) -> None:
        with suppress(OSError):  # it may be gone already
            self._send("Browser.close", {}, None)

    def _call(
        self, method: str, params: Mapping[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        message_id = self._send(method, params or {}, session)
        while True:
            message = self._receive()
            if message.get("id") == message_id:
                assert "error" not in message, f"{method}: {message['error']}"
                result: dict[str, Any] = message["result"]
                return result
            if "method" in message:
                self._events.append(message)

    def _wait_event(self, method: str) -> None:
        while not any(event["method"] == method for event in self._events):
            self._events.append(self._receive())

    def _send(self, method: str, params: Mapping[str, Any], session: str | None) -> int:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._next_id

    def _receive(self) -> dict[str, Any]:
        deadline = time.monotonic() + BROWSER_TIMEOUT_SECONDS
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            assert left > 0, "chromium stopped answering"
            ready, _, _ = select.select([self._in], [], [], left)
            if ready:
                chunk = os.read(self._in, 1 << 20)
                assert chunk, f"chromium exited {self._process.poll()}"
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        parsed: dict[str, Any] = json.loads(message)
        return parsed


@dataclass
class Browser:
    """Headless Chromium: a fresh profile per page, and a NetLog of every request so a test
    can see where the page went."""

    binary: str
    root: Path
    requests: list[str] = field(default_factory=list)  # of the last page, once it closed

    @contextmanager
    def page(self) -> Iterator[Page]:
        run_dir = self.root / f"page-{sum(1 for _ in self.root.glob('page-*'))}"
        run_dir.mkdir(parents=True)
        to_read, to_browser = os.pipe()  # our commands: chromium reads them on fd 3
        from_browser, to_write = os.pipe()  # its answers: chromium writes them on fd 4

        def wire_pipes() -> None:  # in the child, before exec
            os.dup2(to_read, 3)
            os.dup2(to_write, 4)

        command = [
            self.binary,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            # Chromium's own form-autofill lookups are tagged with the page's origin; they are
            # the browser's, not the page's, so switch the feature off rather than filter.
            "--disable-features=AutofillServerCommunication",
            "--remote-debugging-pipe",
            f"--user-data-dir={run_dir / 'profile'}",
            # Chromium itself still phones home (update checks, accounts); keep that off the
            # network. The page's own requests are still logged, wherever they point.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            f"--log-net-log={run_dir / 'netlog.json'}",
            "about:blank",
        ]
        with (run_dir / "chromium.log").open("wb") as log:
            process = subprocess.Popen(
                command,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=(3, 4),
                preexec_fn=wire_pipes,  # dups the pipes onto fds 3 and 4
            )
        os.close(to_read)
        os.close(to_write)
        page = Page(process, to_browser, from_browser)
        try:
            yield page
        finally:
            page.close()
            wait_or_kill(process)
            os.close(to_browser)
            os.close(from_browser)
            self.requests = page_requests(run_dir / "netlog.json")


def page_requests(netlog: Path) -> list[str]:
    """URLs requested on behalf of a page served from 127.0.0.1 (Chromium's own background
    requests have no such network isolation key)."""
    text = netlog.read_text()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short at exit lacks its closing brackets
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if event["type"] != start_job or "url" not in params:
            continue
        by_page = str(params.get("initiator", "")).startswith("http://127.0.0.1") or str(
            params.get("network_isolation_key", "")
        ).startswith("http://127.0.0.1")
        if by_page:
            urls.append(str(params["url"]))
    return urls


def find_chromium() -> str:
    """Chromium's path; skip without it, or fail when CI is set."""
    binary = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if binary is None:
        reason = "chromium is not installed (Debian: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the browser tests must run", pytrace=False)
        pytest.skip(f"{reason}; CI would fail here")
    return binary


# --- reading the page -------------------------------------------------------------------------


def state_of(page: Page, panel_id: str) -> str:
    found = page.evaluate(
        f"(() => {{ const e = document.getElementById({json.dumps(panel_id)});"
        " if (!e) return 'missing'; for (const s of ['rendered', 'empty', 'error'])"
        " if (e.dataset[s]) return s; return 'loading'; })()"
    )
    return str(found)


def all_of(page: Page, selector: str, expression: str) -> list[Any]:
    """`expression` (over `e`) for each element matching `selector`, in document order."""
    found = page.evaluate(
        f"[...document.querySelectorAll({json.dumps(selector)})].map((e) => {expression})"
    )
    return list(found)


def text_of(page: Page, selector: str) -> str:
    return str(page.evaluate(f"document.querySelector({json.dumps(selector)}).textContent"))


def query_of(page: Page) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(page.evaluate("window.location.href"))).query)


def assert_only_local_requests(requests: list[str]) -> None:
    assert any(urlsplit(url).path == "/v1/history" for url in requests), requests
    outside = [url for url in requests if urlsplit(url).hostname != "127.0.0.1"]
    assert outside == [], f"the page reached beyond the server: {outside}"


def keep_screenshot(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    """Check the PNG and say where it is; also copy it to RECKON_SCREENSHOT_DIR if set."""
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    shown = path
    if target := os.environ.get("RECKON_SCREENSHOT_DIR"):
        Path(target).mkdir(parents=True, exist_ok=True)
        shown = Path(shutil.copy(path, Path(target) / path.name))
    with capsys.disabled():
        print(f"\ndashboard screenshot: {shown}")
