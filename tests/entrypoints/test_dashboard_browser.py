"""The dashboard in a real headless Chromium: what a person opening `/` sees once the loop has
run. One test serves it from `reckon serve` over data that came in the real way (saved
estimates, tagged MLflow runs, `reckon reconcile`); the others serve the page with canned JSON
in the documented shapes, so every panel is drawn (or says why not) even before its endpoint
exists.

Chromium is the Debian package (`apt-get install chromium`); without it these tests skip,
or fail when CI is set. The page must make no request beyond the server that served it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, free_port, make_training_run
from service import estimates
from service.db.unit_of_work import SqlUnitOfWork
from service.domain import ESTIMATE_TAG
from service.hardware import build_catalog
from service.presenters import dashboard
from tests.builders import an_estimate

CHROMIUM = "/usr/bin/chromium"
RECKON = str(Path(sys.executable).parent / "reckon")
BROWSER_TIMEOUT_SECONDS = 30.0
SERVER_READY_SECONDS = 30.0
METRIC = "tokens_per_second"
PANELS = ("chart-scatter", "chart-error", "chart-factors", "chart-coverage", "table-running")


# --- the browser ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Browser:
    """Headless Chromium driven from its command line: a fresh profile per page load, and a
    NetLog of every request so a test can see where the page went."""

    binary: str
    root: Path

    def dump_dom(self, url: str) -> tuple[str, list[str]]:
        """The DOM after the page's scripts ran, and the URLs the page itself requested."""
        run_dir = self._run_dir("dom")
        out = self._run(run_dir, ["--dump-dom", url])
        return out, page_requests(run_dir / "netlog.json")

    def screenshot(self, url: str, path: Path) -> None:
        self._run(self._run_dir("shot"), [f"--screenshot={path}", url])

    def _run_dir(self, prefix: str) -> Path:
        index = sum(1 for _ in self.root.glob(f"{prefix}-*"))
        run_dir = self.root / f"{prefix}-{index}"
        run_dir.mkdir(parents=True)
        return run_dir

    def _run(self, run_dir: Path, extra: list[str]) -> str:
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
            f"--user-data-dir={run_dir / 'profile'}",
            "--window-size=1400,1800",
            "--virtual-time-budget=5000",
            # Chromium itself still phones home (update checks, accounts); keep that off the
            # network. The page's own requests are still logged, wherever they point.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
            f"--log-net-log={run_dir / 'netlog.json'}",
            *extra,
        ]
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=BROWSER_TIMEOUT_SECONDS, check=False
        )
        assert done.returncode == 0, f"chromium exited {done.returncode}:\n{done.stderr[-3000:]}"
        return done.stdout


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


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    if binary is None:
        reason = "chromium is not installed (Debian: apt-get install -y chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI is set, so the dashboard must be tested", pytrace=False)
        pytest.skip(f"{reason}; CI would fail here")
    return binary


@pytest.fixture
def browser(chromium: str, tmp_path: Path) -> Browser:
    return Browser(chromium, tmp_path / "chromium")


# --- reading the DOM --------------------------------------------------------------------------


@dataclass(frozen=True)
class Panel:
    attributes: str  # the opening tag's attributes, as serialized
    content: str

    @property
    def state(self) -> str:
        for state in ("rendered", "empty", "error"):
            if f'data-{state}="true"' in self.attributes:
                return state
        return "loading"

    def points(self) -> dict[str, tuple[float, float]]:
        """(cx, cy) of each circle drawn for an estimate, by estimate id."""
        found = {}
        for tag in re.findall(r"<circle\b[^>]*>", self.content):
            attributes = dict(re.findall(r'([\w-]+)="([^"]*)"', tag))
            if "data-estimate-id" in attributes:
                point = (float(attributes["cx"]), float(attributes["cy"]))
                found[attributes["data-estimate-id"]] = point
        return found

    def line(self, css_class: str) -> tuple[float, float, float, float]:
        """(x0, y0, x1, y1) of the one straight <path> or <line> with this class."""
        path = re.search(rf'<path\b[^>]*\bclass="{css_class}"[^>]*\bd="M([^"]+)"', self.content)
        if path is not None:
            x0, y0, x1, y1 = (float(v) for v in path.group(1).replace("L", " ").split())
            return x0, y0, x1, y1
        tag = re.search(rf'<line\b[^>]*\bclass="{css_class}"[^>]*>', self.content)
        assert tag is not None, f"no .{css_class} in the panel"
        attributes = {k: float(v) for k, v in re.findall(r'(x1|y1|x2|y2)="([^"]*)"', tag.group(0))}
        return attributes["x1"], attributes["y1"], attributes["x2"], attributes["y2"]

    def count(self, tag: str, css_class: str | None = None) -> int:
        pattern = rf"<{tag}\b" + ("" if css_class is None else rf'[^>]*\bclass="{css_class}"')
        return len(re.findall(pattern, self.content))


def panel(dom: str, panel_id: str) -> Panel:
    """One dashboard panel: each sits alone at the end of its own <section>."""
    match = re.search(rf'<div\b([^>]*\bid="{panel_id}"[^>]*)>(.*?)</section>', dom, re.S)
    assert match is not None, f"#{panel_id} is missing from the page"
    return Panel(match.group(1), match.group(2))


def passes_panel(dom: str) -> Panel:
    """The header's list of reconcile passes, the last thing in the <header>."""
    match = re.search(r'<div\b([^>]*\bid="passes"[^>]*)>(.*?)</header>', dom, re.S)
    assert match is not None, "#passes is missing from the page"
    return Panel(match.group(1), match.group(2))


def assert_only_local_requests(requests: list[str]) -> None:
    assert any(urlsplit(url).path == "/v1/history" for url in requests), requests
    outside = [url for url in requests if urlsplit(url).hostname != "127.0.0.1"]
    assert outside == [], f"the page reached beyond the server: {outside}"


def show_screenshot(capsys: pytest.CaptureFixture[str], path: Path) -> None:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
    with capsys.disabled():
        print(f"\ndashboard screenshot: {path}")


# --- the real loop ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    ratios: dict[str, float]  # estimate id -> observed / predicted wall time
    running_run: str


def seed(engine: Engine, client: MlflowClient, experiment: str) -> Seeded:
    """Four finished estimates, each with a tagged run ending on a different day, and one
    estimate whose run is still going."""
    now = datetime.now(UTC).replace(microsecond=0)
    uow = SqlUnitOfWork(engine)
    cases = [  # (estimate, observed / predicted, days ago the run ended)
        (an_estimate(gpus=1024), 1.12, 9),
        (an_estimate(gpus=2048), 0.93, 6),
        (an_estimate(gpu="h100-sxm", gpus=512), 1.05, 3),
        (an_estimate(gpus=1536, overhead=0.15), 1.30, 1),
    ]
    ratios = {}
    for result, ratio, days_ago in cases:
        saved = estimates.save(uow, result, now=now - timedelta(days=days_ago + 20))
        observed = timedelta(seconds=result.wall_seconds * ratio)
        end = now - timedelta(days=days_ago)
        throughput = result.request.model.tokens / (result.compute_seconds * ratio)
        make_training_run(
            client, experiment, start=end - observed, end=end,
            metrics={METRIC: throughput}, tags={ESTIMATE_TAG: saved.id},
        )  # fmt: skip
        ratios[saved.id] = ratio
    external = estimates.record_external(
        uow, build_catalog(), predicted_seconds=84 * 3600.0, gpu="a100-80gb", gpus=8,
        precision="bf16", now=now - timedelta(days=30),
    )  # fmt: skip
    make_training_run(
        client, experiment, start=now - timedelta(days=12, hours=80),
        end=now - timedelta(days=12), tags={ESTIMATE_TAG: external.id},
    )  # fmt: skip
    ratios[external.id] = 80 / 84
    live = an_estimate(gpu="h100-sxm", gpus=1024)
    live_id = estimates.save(uow, live, now=now - timedelta(days=2)).id
    running_run = make_training_run(
        client, experiment, start=now - timedelta(days=1), end=None, status="RUNNING",
        metrics={METRIC: live.tokens_per_second * 0.9}, tags={ESTIMATE_TAG: live_id},
    )  # fmt: skip
    return Seeded(ratios, running_run)


def reckon_env(database_url: str, server: MlflowServer, experiment: str) -> dict[str, str]:
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("RECKON_API_TOKEN", "RECKON_HARDWARE_FILE")
    }
    env.update(
        RECKON_DATABASE_URL=database_url,
        MLFLOW_TRACKING_URI=server.uri,
        RECKON_EXPERIMENTS=experiment,
    )
    return env


@contextmanager
def reckon_serve(env: Mapping[str, str], cwd: Path) -> Iterator[str]:
    """`reckon serve --no-scheduler` on a free port; yields its base URL once healthy."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = cwd / "serve.log"
    command = [RECKON, "serve", "--no-scheduler", "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + SERVER_READY_SECONDS
        while not _answers(f"{base}/healthz"):
            assert process.poll() is None, "reckon serve exited:\n" + log_path.read_text()
            assert time.monotonic() < deadline, "reckon serve never answered:\n" + (
                log_path.read_text()
            )
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@pytest.mark.mlflow
def test_dashboard_draws_reconciled_estimates_from_a_running_server(
    database_url: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    browser: Browser,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("the browser test runs once, on SQLite; the API is tested on both")
    seeded = seed(engine, mlflow_client, experiment_id)
    env = reckon_env(database_url, mlflow_server, experiment_id)
    reconciled = subprocess.run(
        [RECKON, "reconcile", "--json"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert reconciled.returncode == 0, reconciled.stderr
    assert json.loads(reconciled.stdout)["reconciled"] == len(seeded.ratios)
    screenshot = tmp_path / "dashboard.png"

    with reckon_serve(env, tmp_path) as base:
        with urllib.request.urlopen(f"{base}/", timeout=10) as response:
            served = response.read().decode()
        dom, requests = browser.dump_dom(f"{base}/")
        browser.screenshot(f"{base}/", screenshot)

    assert re.findall(r"https?://|\b(?:src|href)=\"//", served) == []
    assert_only_local_requests(requests)
    scatter, error = panel(dom, "chart-scatter"), panel(dom, "chart-error")
    assert (scatter.state, error.state) == ("rendered", "rendered")
    assert scatter.points().keys() == error.points().keys() == seeded.ratios.keys()
    x0, y0, x1, y1 = scatter.line("identity")
    for estimate_id, (cx, cy) in scatter.points().items():  # SVG y grows downwards
        above_identity = cy < y0 + (cx - x0) * (y1 - y0) / (x1 - x0)
        assert above_identity == (seeded.ratios[estimate_id] > 1), estimate_id
    zero = error.line("zero")[1]
    for estimate_id, (_cx, cy) in error.points().items():  # positive: predicted too long
        assert (cy < zero) == (seeded.ratios[estimate_id] < 1), estimate_id
    assert error.count("path", "trend") == 1
    running = panel(dom, "table-running")
    assert running.state == "rendered" and seeded.running_run in running.content
    for optional in ("chart-factors", "chart-coverage"):  # endpoints may not exist yet
        assert panel(dom, optional).state in ("rendered", "empty"), optional
    assert passes_panel(dom).state == "rendered" and "succeeded" in dom
    show_screenshot(capsys, screenshot)


# --- every panel, from the documented shapes -------------------------------------------------

CANNED: dict[str, Any] = {
    "/v1/history": {
        "history": [
            {
                "estimate_id": f"e{index}",
                "run_ids": [f"r{index}"],
                "gpu": gpu,
                "precision": "bf16",
                "predicted_seconds": predicted,
                "observed_seconds": observed,
                "error_pct": 100.0 * (predicted / observed - 1.0),
                "started_at": "2026-10-01T00:00:00+00:00",
                "ended_at": f"2026-10-{10 + 3 * index:02d}T06:00:00+00:00",
                "line": f"predicted {predicted:.0f} s, observed {observed:.0f} s",
            }
            for index, (gpu, predicted, observed) in enumerate(
                [
                    ("a100-80gb", 302400.0, 288000.0),
                    ("a100-80gb", 86400.0, 101000.0),
                    ("h100-sxm", 4 * 86400.0, 3.1 * 86400.0),
                    ("h100-sxm", 12 * 3600.0, 13 * 3600.0),
                ]
            )
        ]
    },
    "/v1/jobs": {
        "schedule": "0 2 * * *",
        "timezone": "UTC",
        "passes": [
            {
                "pass_id": 2,
                "status": "succeeded",
                "started_at": "2026-10-22T02:00:00+00:00",
                "runs_seen": 4,
                "reconciled": 1,
                "skipped": 0,
            },
            {
                "pass_id": 1,
                "status": "failed",
                "started_at": "2026-10-21T02:00:00+00:00",
                "runs_seen": 0,
                "reconciled": 0,
                "skipped": 0,
                "error": "MLflow unreachable",
            },
        ],
    },
    "/v1/factors/history": {
        "versions": [
            {
                "version": version,
                "created_at": f"2026-10-{10 + version:02d}T02:00:00+00:00",
                "active": version == 3,
                "segments": [
                    {
                        "segment": segment,
                        "level": "segment",
                        "n": 3 * version,
                        "utilization": u,
                        "utilization_p10": u - 0.05,
                        "utilization_p90": u + 0.05,
                        "overhead": f,
                        "overhead_p10": f - 0.03,
                        "overhead_p90": f + 0.04,
                    }
                    for segment, u, f in (
                        ("a100-80gb/bf16", 0.38 + 0.01 * version, 0.14),
                        ("h100-sxm/bf16", 0.33 + 0.02 * version, 0.2 - 0.01 * version),
                    )
                ],
            }
            for version in (1, 2, 3)
        ]
    },
    "/v1/accuracy": {
        "by": "gpu_type",
        "overall": {
            "raw": {"n": 4, "median_ape": 9.1, "mape": 12.0, "bias": 3.2, "coverage": 0.5},
            "calibrated": {"n": 4, "median_ape": 5.0, "mape": 6.1, "bias": 1.0, "coverage": 0.75},
        },
        "groups": [
            {
                "group": "a100-80gb",
                "raw": {"n": 2, "median_ape": 10.0, "mape": 10.0, "bias": -4.0, "coverage": 0.5},
                "calibrated": {
                    "n": 2,
                    "median_ape": 4.0,
                    "mape": 4.0,
                    "bias": 1.0,
                    "coverage": 1.0,
                },
            },
            {
                "group": "h100-sxm",
                "raw": {"n": 2, "median_ape": 14.0, "mape": 14.0, "bias": 9.0, "coverage": None},
                "calibrated": {
                    "n": 2,
                    "median_ape": 6.0,
                    "mape": 6.0,
                    "bias": 2.0,
                    "coverage": 0.5,
                },
            },
        ],
    },
}


Routes = Mapping[str, tuple[int, object]]  # path -> (status, JSON body)


@contextmanager
def api_stub(routes: Routes) -> Iterator[str]:
    """A stand-in API on a free port: the real dashboard page at `/`, canned JSON elsewhere,
    404 for anything not listed (as an endpoint that does not exist yet)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path == "/":
                self._send(200, "text/html; charset=utf-8", dashboard.page().encode())
                return
            status, body = routes.get(path, (404, {"detail": "Not Found"}))
            self._send(status, "application/json", json.dumps(body).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output quiet

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_dashboard_draws_every_panel_from_the_documented_shapes(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    screenshot = tmp_path / "dashboard-canned.png"

    routes: dict[str, tuple[int, object]] = {path: (200, body) for path, body in CANNED.items()}
    routes["/v1/running"] = (503, {"detail": "MLflow is unreachable"})  # as when it is down

    with api_stub(routes) as base:
        dom, requests = browser.dump_dom(f"{base}/")
        browser.screenshot(f"{base}/", screenshot)

    assert_only_local_requests(requests)
    states = {panel_id: panel(dom, panel_id).state for panel_id in PANELS}
    assert states == {
        "chart-scatter": "rendered",
        "chart-error": "rendered",
        "chart-factors": "rendered",
        "chart-coverage": "rendered",
        "table-running": "error",
    }
    factors = panel(dom, "chart-factors")
    assert factors.count("path", "series") == 4 and factors.count("path", "band") == 4
    assert "a100-80gb/bf16" in factors.content and "h100-sxm/bf16" in factors.content
    coverage = panel(dom, "chart-coverage")
    assert sorted(re.findall(r'data-coverage="([^"]+)"', coverage.content)) == sorted(
        ["0.5", "0.75", "0.5", "1", "0.5"]
    )
    assert "n/a" in coverage.content  # h100-sxm raw coverage is null
    assert "MLflow is unreachable" in panel(dom, "table-running").content
    assert "MLflow unreachable" in dom and "failed" in passes_panel(dom).content
    show_screenshot(capsys, screenshot)


def test_dashboard_says_so_when_nothing_is_there_yet(browser: Browser) -> None:
    routes: Routes = {
        "/v1/history": (200, {"history": []}),
        "/v1/running": (200, {"running": []}),
        "/v1/jobs": (200, {"passes": []}),
    }

    with api_stub(routes) as base:
        dom, _requests = browser.dump_dom(f"{base}/")

    states = {panel_id: panel(dom, panel_id).state for panel_id in PANELS}
    assert states == dict.fromkeys(PANELS, "empty")
    assert "No factor sets yet" in panel(dom, "chart-factors").content
    assert "No reconciled estimates yet" in panel(dom, "chart-scatter").content
