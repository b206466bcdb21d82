"""The dashboard in a real headless Chromium: what a person opening `/` sees. One test serves
it from `reckon serve` over data that came in the real way (saved estimates, tagged MLflow
runs, `reckon reconcile`); the others serve the page with canned JSON in the documented
shapes, so every panel, filter and the estimate/plan form is exercised with known numbers.

Chromium is the Debian package (`apt-get install chromium`), driven over its DevTools
protocol on a pipe (no driver package needed); without it these tests skip, or fail when CI
is set. The page must make no request beyond the server that served it. Screenshots go to
the test's tmp dir and to RECKON_SCREENSHOT_DIR when that is set (the path is printed)."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, make_training_run
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.calibration.model import SegmentFactors
from service.domain.hardware import build_catalog
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.cli.main import main
from service.presenters import dashboard, json_loop, json_views
from service.usecases import registry
from tests.browser import (
    PANELS,
    Browser,
    Page,
    all_of,
    assert_only_local_requests,
    keep_screenshot,
    query_of,
    state_of,
    text_of,
)
from tests.builders import an_estimate
from tests.integration.history import Truth, simulate
from tests.serving import reckon_serve

RECKON = str(Path(sys.executable).parent / "reckon")
METRIC = "tokens_per_second"

# --- the real loop ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seeded:
    ratios: dict[str, float]  # estimate id -> observed / predicted wall time
    runs: dict[str, str]  # estimate id -> its MLflow run id
    running_run: str


# The browser tests run once, on SQLite; the API is tested on both dialects.
ONCE_ON_SQLITE = pytest.mark.only_dialect(
    "sqlite", reason="the browser test runs once, on SQLite; the API is tested on both"
)


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
    ratios, runs = {}, {}
    for result, ratio, days_ago in cases:
        saved = registry.save(uow, result, now=now - timedelta(days=days_ago + 20))
        observed = timedelta(seconds=result.wall_seconds * ratio)
        end = now - timedelta(days=days_ago)
        throughput = result.request.model.tokens / (result.compute_seconds * ratio)
        runs[saved.id] = make_training_run(
            client, experiment, start=end - observed, end=end,
            metrics={METRIC: throughput}, tags={ESTIMATE_TAG: saved.id},
        )  # fmt: skip
        ratios[saved.id] = ratio
    external = registry.record_external(
        uow, build_catalog(), predicted_seconds=84 * 3600.0, gpu="a100-80gb", gpus=8,
        precision="bf16", now=now - timedelta(days=30),
    )  # fmt: skip
    runs[external.id] = make_training_run(
        client, experiment, start=now - timedelta(days=12, hours=80),
        end=now - timedelta(days=12), tags={ESTIMATE_TAG: external.id},
    )  # fmt: skip
    ratios[external.id] = 80 / 84
    live = an_estimate(gpu="h100-sxm", gpus=1024)
    live_id = registry.save(uow, live, now=now - timedelta(days=2)).id
    running_run = make_training_run(
        client, experiment, start=now - timedelta(days=1), end=None, status="RUNNING",
        metrics={METRIC: live.tokens_per_second * 0.9}, tags={ESTIMATE_TAG: live_id},
    )  # fmt: skip
    return Seeded(ratios, runs, running_run)


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


@pytest.mark.mlflow
@ONCE_ON_SQLITE
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
    seeded = seed(engine, mlflow_client, experiment_id)
    env = reckon_env(database_url, mlflow_server, experiment_id)
    reconciled = subprocess.run(
        [RECKON, "reconcile", "--json"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip
    assert reconciled.returncode == 0, reconciled.stderr
    assert json.loads(reconciled.stdout)["reconciled"] == len(seeded.ratios)
    screenshot = tmp_path / "dashboard-live.png"

    with reckon_serve(env, tmp_path) as base:
        with urllib.request.urlopen(f"{base}/", timeout=10) as response:
            served = response.read().decode()
        with browser.page() as page:
            page.goto(f"{base}/")
            page.wait_drawn()
            states = {panel_id: state_of(page, panel_id) for panel_id in PANELS}
            scatter = points_of(page, "#chart-scatter")
            identity = page.evaluate(
                "document.querySelector('#chart-scatter .identity').getAttribute('d')"
            )
            error = error_points(page)
            links = all_of(page, "#table-history a.run-link", "e.getAttribute('href')")
            running = text_of(page, "#table-running")
            raw_n = page.evaluate("document.getElementById('headline-median_ape').dataset.rawN")
            passes = text_of(page, "#passes")
            page.screenshot(screenshot)
        requests = browser.requests
        with browser.page() as mlflow_ui:  # MLflow's own UI finds the run's experiment
            mlflow_ui.goto(links[0])
            opened = mlflow_ui.wait_for(
                "location.hash.includes('/experiments/') && location.hash", timeout=60
            )

    assert re.findall(r"https?://|\b(?:src|href)=\"//", served) == []
    assert_only_local_requests(requests)
    assert states["headline"] == "rendered" and raw_n == str(len(seeded.ratios))
    assert states["chart-error"] == states["chart-scatter"] == "rendered"
    assert scatter.keys() == error.keys() == seeded.ratios.keys()
    x0, y0, x1, y1 = (float(v) for v in identity.lstrip("M").replace("L", " ").split())
    for estimate_id, (cx, cy) in scatter.items():  # SVG y grows downwards
        above_identity = cy < y0 + (cx - x0) * (y1 - y0) / (x1 - x0)
        assert above_identity == (seeded.ratios[estimate_id] > 1), estimate_id
    for estimate_id, (cy, zero) in error.items():  # positive: predicted too long
        assert (cy < zero) == (seeded.ratios[estimate_id] < 1), estimate_id
    assert sorted(links) == sorted(
        f"{mlflow_server.uri}/#/runs/{run_id}" for run_id in seeded.runs.values()
    )
    assert opened.endswith(f"/experiments/{experiment_id}/runs/{links[0].rsplit('/', 1)[1]}")
    assert states["table-running"] == "rendered" and seeded.running_run in running
    for optional in ("chart-factors", "chart-coverage"):  # no refit has run: maybe empty
        assert states[optional] in ("rendered", "empty"), optional
    assert "succeeded" in passes
    keep_screenshot(capsys, screenshot)


def points_of(page: Page, panel: str) -> dict[str, tuple[float, float]]:
    """(cx, cy) of each circle drawn for an estimate, by estimate id."""
    found = all_of(
        page,
        f"{panel} circle[data-estimate-id]",
        "[e.dataset.estimateId, +e.getAttribute('cx'), +e.getAttribute('cy')]",
    )
    return {estimate_id: (cx, cy) for estimate_id, cx, cy in found}


def error_points(page: Page) -> dict[str, tuple[float, float]]:
    """(cy, y of its panel's zero line) of each run in the error-over-time panels."""
    found = all_of(
        page,
        "#chart-error circle[data-estimate-id]",
        "[e.dataset.estimateId, +e.getAttribute('cy'),"
        " +e.closest('svg').querySelector('.zero').getAttribute('y1')]",
    )
    return {estimate_id: (cy, zero) for estimate_id, cy, zero in found}


# --- every panel, from the documented shapes -------------------------------------------------

NOW = datetime.now(UTC).replace(microsecond=0)
SEGMENTS = {  # segment -> (raw signed error %, calibrated signed error %) around which runs sit
    "a100-80gb/bf16": (8.0, 1.5),
    "h100-sxm/bf16": (-15.0, -3.0),
    "h100-sxm/fp8": (25.0, 4.0),
    "mi300x/bf16": (-5.0, -9.0),  # calibration made this one worse
}
SPREAD = (-6.0, 3.0, -1.0, 5.0, 0.0, -3.5)  # added to a segment's error, run by run
FACTOR_KEYS = (  # more keys than the page's ten hand-picked colours: none may repeat
    "*",
    "a100-80gb",
    "a100-80gb/bf16",
    "b200/fp8",
    "gb200/fp4",
    "h100-sxm",
    "h100-sxm/bf16",
    "h100-sxm/fp8",
    "h200/bf16",
    "mi300x/bf16",
    "mi325x/bf16",
    "tpu-v5p/bf16",
)


ACTIVE_VERSION = 3


def _level(k_index: int, version: int) -> float:
    return 0.30 + 0.03 * k_index + 0.01 * version


GPU_COUNTS = (64, 128, 256, 512, 1024, 2048)  # run by run; the last logged no throughput
GPU_SLOPES = {  # the active set's GPU slope (and standard error) per segment; others none
    "a100-80gb/bf16": (-0.09, 0.02),
    "h100-sxm/fp8": (-0.05, 0.015),
    "mi300x/bf16": (-0.2, 0.03),
}
LOG_GPUS_REFERENCE = math.log(256)
# MI300X's GPU term bends (falls ever faster) within 64-1,024 GPUs: (curvature, its se).
GPU_CURVATURES = {"mi300x/bf16": (-0.04, 0.01)}


def _implied_utilization(segment: str, r_index: int) -> float | None:
    """Around the active set's line: its u at 256 GPUs moved by the slope, ± the spread."""
    if r_index == len(GPU_COUNTS) - 1:
        return None
    u = _level(FACTOR_KEYS.index(segment), ACTIVE_VERSION)
    slope, _ = GPU_SLOPES.get(segment, (0.0, 0.0))
    gpus = GPU_COUNTS[r_index]
    return float(u * (gpus / 256.0) ** slope * (1 + SPREAD[r_index] / 100))


def _configuration(r_index: int) -> dict[str, Any]:
    """Every run planned its GPU count; the even ones also stated it (observed)."""
    gpus = GPU_COUNTS[r_index]
    planned = {"gpus": gpus, "tokens": 1e12, "precision": None}
    observed = {"gpus": gpus if r_index % 2 == 0 else None, "tokens": None, "precision": None}
    return {"check": None, "planned": planned, "observed": observed, "note": None}


def _runs() -> list[dict[str, Any]]:
    rows = []
    for s_index, (segment, (raw, _calibrated)) in enumerate(SEGMENTS.items()):
        gpu, precision = segment.split("/")
        for r_index, spread in enumerate(SPREAD):
            error = raw + spread
            observed = (6 + 5 * s_index + r_index) * 3600.0 * 6
            predicted = observed * (1 + error / 100)
            ended = NOW - timedelta(days=2 + 11 * r_index + 2 * s_index, hours=3)
            rows.append(
                {
                    "estimate_id": f"e{s_index}{r_index}",
                    "run_ids": [f"run{s_index}{r_index}"],
                    "gpu": gpu,
                    "precision": precision,
                    "predicted_seconds": predicted,
                    "observed_seconds": observed,
                    "error_pct": 100.0 * (predicted / observed - 1.0),
                    "started_at": (ended - timedelta(seconds=observed)).isoformat(),
                    "ended_at": ended.isoformat(),
                    "line": f"predicted {predicted:.0f} s, observed {observed:.0f} s",
                    # the planner's name for some jobs (history shows it beside the id)
                    "label": f"{gpu} sweep {r_index}" if r_index % 2 == 0 else None,
                    "implied_utilization": _implied_utilization(segment, r_index),
                    "configuration": _configuration(r_index),
                }
            )
    return rows


RUNS = _runs()


def _scores(n: int, raw: float, calibrated: float, raw_coverage: float | None) -> dict[str, Any]:
    return {
        "raw": {
            "n": n,
            "median_ape": abs(raw) + 2.0,
            "mape": abs(raw) + 3.0,
            "bias": raw,
            "coverage": raw_coverage,
        },
        "calibrated": {
            "n": n - 1,
            "median_ape": abs(calibrated) + 2.0,
            "mape": abs(calibrated) + 3.0,
            "bias": calibrated,
            "coverage": 0.55 if calibrated == SEGMENTS["mi300x/bf16"][1] else 0.8,
        },
    }


def _by_segment() -> dict[str, Any]:
    groups = [
        {"group": segment, **_scores(len(SPREAD), raw, calibrated, 0.5 if raw > 0 else None)}
        for segment, (raw, calibrated) in SEGMENTS.items()
    ]
    return {"by": "segment", "overall": _scores(len(RUNS), 12.0, 3.0, 0.45), "groups": groups}


def _by_gpu() -> dict[str, Any]:
    return {
        "by": "gpu_type",
        "overall": _scores(len(RUNS), 12.0, 3.0, 0.45),
        "groups": [
            {"group": "a100-80gb", **_scores(6, 8.0, 1.5, 0.5)},
            {"group": "h100-sxm", **_scores(12, 5.0, 0.5, 0.4)},
            {"group": "mi300x", **_scores(6, -5.0, -9.0, None)},
        ],
    }


def _by_segment_week() -> dict[str, Any]:
    weeks: dict[str, list[dict[str, Any]]] = {}
    for row in RUNS:
        ended = datetime.fromisoformat(row["ended_at"])
        weeks.setdefault(f"{row['gpu']}/{row['precision']} {ended:%G-W%V}", []).append(row)
    groups = []
    for name, rows in sorted(weeks.items()):
        raw = sum(r["error_pct"] for r in rows) / len(rows)
        calibrated = SEGMENTS[name.split(" ")[0]][1]
        groups.append({"group": name, **_scores(len(rows) + 1, raw, calibrated, None)})
    return {"by": "segment_week", "overall": _scores(len(RUNS), 12.0, 3.0, 0.45), "groups": groups}


def _factor_history() -> dict[str, Any]:
    """Four factor sets (v3 active), every entry as GET v1/factors/history shows it: the
    segments in GPU_SLOPES with that GPU slope, every entry the same model-size slope."""
    versions = []
    for version in (1, 2, 3, 4):
        segments = []
        for k_index, key in enumerate(FACTOR_KEYS):
            u = _level(k_index, version)
            f = 0.22 - 0.01 * k_index - 0.015 * version
            slope, slope_se = GPU_SLOPES.get(key, (0.0, 0.0))
            bend, bend_se = GPU_CURVATURES.get(key, (0.0, 0.0))
            entry = SegmentFactors(
                segment=key,
                level="all" if key == "*" else "segment" if "/" in key else "gpu",
                utilization=u,
                utilization_p10=u - 0.06 / version,
                utilization_p90=u + 0.06 / version,
                overhead=f,
                overhead_p10=f - 0.03,
                overhead_p90=f + 0.04,
                log_sigma=0.1,
                n=4 * version + k_index,
                n_throughput=4 * version + k_index,
                combined_only=False,
                log_sigma_low=0.1,
                log_sigma_high=0.1,
                gpus_slope=slope,
                gpus_slope_se=slope_se,
                log_gpus_reference=LOG_GPUS_REFERENCE,
                gpus_curvature=bend,
                gpus_curvature_se=bend_se,
                log_gpus_low=math.log(64),
                log_gpus_high=math.log(1024),
                params_slope=0.3,
                params_slope_se=0.05,
                log_params_reference=math.log(7e9),
                gpus_min=64.0,
                gpus_max=1024.0,
                params_min=1.3e9,
                params_max=70e9,
            )
            segments.append(json_loop.segment_view(entry))
        created = NOW - timedelta(days=7 * (5 - version))
        versions.append(
            {"version": version, "created_at": created.isoformat(),
             "active": version == ACTIVE_VERSION, "segments": segments}
        )  # fmt: skip
    return {"versions": versions}


def _cost(currency: str | None, runs: int, hours: float, planned: float, observed: float) -> Any:
    """A CostTotal (json_money_documents.py); currency None: its runs not compared."""
    priced = currency is not None
    return {
        "currency": currency, "runs": runs, "planned_gpu_hours": hours,
        "observed_gpu_hours": hours * observed / planned,
        "planned_cost": planned if priced else None, "observed_cost": observed if priced else None,
        "difference": observed - planned if priced else None,
        "difference_pct": 100 * (observed / planned - 1) if priced else None,
    }  # fmt: skip


SPEND_GROUPS = [
    {"group": "a100-80gb", **_cost("USD", 6, 12000.0, 18000.0, 19800.0)},
    {"group": "h100-sxm", **_cost("USD", 12, 20000.0, 50000.0, 45000.0)},
    {"group": "mi300x", **_cost("EUR", 5, 4000.0, 8000.0, 8800.0)},
    {"group": "mi300x", **_cost(None, 1, 500.0, 1.0, 1.04)},
]
SPEND_TOTALS = [
    _cost("EUR", 5, 4000.0, 8000.0, 8800.0),
    _cost("USD", 18, 32000.0, 68000.0, 64800.0),
    _cost(None, 1, 500.0, 1.0, 1.04),
]
SPEND = {
    "by": "gpu", "since": None, "gpu": None, "groups": SPEND_GROUPS,
    "totals": SPEND_TOTALS,
    "unpriced_gpus": ["mi300x"], "in_two_currencies": 0, "imported_left_out": 0,
    "prices_file": True, "note": "no price for mi300x in the prices file",
}  # fmt: skip
MLFLOW_UI = "https://mlflow.example.test"
CANNED: dict[str, Any] = {
    "/v1/history": {"history": RUNS},
    "/v1/jobs": {
        "schedule": "0 2 * * *",
        "timezone": "UTC",
        "passes": [
            {
                "pass_id": 2,
                "status": "succeeded",
                "started_at": NOW.isoformat(),
                "runs_seen": 4,
                "reconciled": 1,
                "skipped": 0,
            },
            {
                "pass_id": 1,
                "status": "failed",
                "started_at": (NOW - timedelta(days=1)).isoformat(),
                "runs_seen": 0,
                "reconciled": 0,
                "skipped": 0,
                "error": "MLflow unreachable",
            },
        ],
    },
    "/v1/running": {
        "running": [
            {
                "run_id": "live1",
                "estimate_id": "e9",
                "started_at": NOW.isoformat(),
                "elapsed_seconds": 86400.0,
                "predicted_seconds": 5 * 86400.0,
                "projected_seconds": 5.5 * 86400.0,
                "slip_pct": 10.0,
                "projected_finish": (NOW + timedelta(days=4.5)).isoformat(),
                "line": "",
                "eta": (NOW + timedelta(days=4.5)).isoformat(),
                "eta_p10": (NOW + timedelta(days=4)).isoformat(),
                "eta_p90": (NOW + timedelta(days=5)).isoformat(),
                "deadline": (NOW + timedelta(days=4.75)).isoformat(),
                "at_risk": True,
                "slip_seconds": 0.25 * 86400,
            },
        ]
    },
    "/v1/factors/history": _factor_history(),
    "/v1/accuracy?by=segment": _by_segment(),
    "/v1/accuracy?by=gpu_type": _by_gpu(),
    "/v1/accuracy?by=segment_week": _by_segment_week(),
    "/v1/mlflow": {"ui_url": MLFLOW_UI, "run_url": MLFLOW_UI + "/#/runs/{run_id}"},
    "/v1/spend": SPEND,
    "/v1/hardware": json_views.hardware_view(build_catalog().gpus()),
    "/v1/estimate": {
        "gpu": "h100-sxm",
        "gpus": 512,
        "precision": "bf16",
        "wall_seconds": 9.5 * 86400,
        "wall_seconds_p10": 8.0 * 86400,
        "wall_seconds_p90": 12.25 * 86400,
        "gpu_hours": 116736.0,
        "mfu": 0.41,
        "factor_source": "segment",
        "factor_set": 3,
    },
    "/v1/plan": {
        "gpus": 392,
        "deadline_seconds": 30 * 86400.0,
        "deadline_human": "30 d",
        "multiple_of": 8,
        "estimate": {
            "gpu": "h100-sxm",
            "gpus": 392,
            "precision": "bf16",
            "wall_seconds": 29.1 * 86400,
            "gpu_hours": 273772.8,
            "mfu": 0.38,
        },
    },
}


@dataclass
class Stub:
    """A stand-in API: the real dashboard page at `/`, canned JSON elsewhere (by path, or by
    path and `by`), 404 for anything not listed. /v1/history honours `since`, as the real
    one does. Every query the page sent is kept, in order."""

    base: str
    queries: list[tuple[str, dict[str, list[str]]]]

    def sent(self, path: str) -> list[dict[str, list[str]]]:
        return [query for sent_path, query in self.queries if sent_path == path]


Routes = Mapping[str, tuple[int, object]]  # path (or path?by=x) -> (status, JSON body)


def canned_routes() -> dict[str, tuple[int, object]]:
    return {path: (200, body) for path, body in CANNED.items()}


@contextmanager
def api_stub(routes: Routes) -> Iterator[Stub]:
    queries: list[tuple[str, dict[str, list[str]]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = parse_qs(parts.query)
            queries.append((parts.path, query))
            if parts.path == "/":
                self._send(200, "text/html; charset=utf-8", dashboard.page().encode())
                return
            by = query.get("by", [""])[0]
            status, body = routes.get(
                f"{parts.path}?by={by}", routes.get(parts.path, (404, {"detail": "Not Found"}))
            )
            if parts.path == "/v1/history" and isinstance(body, dict) and "history" in body:
                body = history_page(body["history"], query)
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
        yield Stub(f"http://127.0.0.1:{server.server_address[1]}", queries)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def history_page(rows: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
    """What the real /v1/history answers: `since`, `gpu`, `precision`, `q` filter; `sort`
    orders; `offset`/`limit` page; `total` counts the matches."""
    one = {key: values[0] for key, values in query.items()}
    if "since" in one:
        since = datetime.fromisoformat(one["since"].replace("Z", "+00:00"))
        rows = [row for row in rows if datetime.fromisoformat(row["ended_at"]) >= since]
    for key in ("gpu", "precision"):
        if key in one:
            rows = [row for row in rows if row[key] == one[key]]
    if "q" in one:
        found = one["q"].lower()
        rows = [
            r for r in rows if found in (r["estimate_id"] + " " + (r.get("label") or "")).lower()
        ]
    order = one.get("sort", "newest")
    if order in ("newest", "oldest"):
        rows = sorted(rows, key=lambda r: r["ended_at"], reverse=order == "newest")
    else:
        rows = sorted(rows, key=lambda r: abs(r["error_pct"]), reverse=order == "worst")
    offset = int(one.get("offset", 0))
    limit = int(one["limit"]) if "limit" in one else len(rows)
    return {"history": rows[offset : offset + limit], "total": len(rows), "offset": offset}


def segments_drawn(page: Page, panel: str) -> list[str]:
    return all_of(page, f"{panel} .multiple", "e.dataset.segment")


def test_every_panel_is_drawn_from_the_data(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    screenshot = tmp_path / "dashboard-all.png"

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        states = {panel_id: state_of(page, panel_id) for panel_id in PANELS}
        headline = all_of(
            page, "#headline .card", "[e.id, +e.dataset.raw, +e.dataset.calibrated,"
            " +e.dataset.rawN, +e.dataset.calibratedN, e.dataset.worse]",
        )  # fmt: skip
        error_panels = segments_drawn(page, "#chart-error")
        error_colors = all_of(page, "#chart-error .multiple h3", "e.style.color")
        runs_per_panel = all_of(
            page, "#chart-error .multiple", "e.querySelectorAll('circle[data-estimate-id]').length"
        )
        calibrated_per_panel = all_of(
            page, "#chart-error .multiple", "e.querySelectorAll('.calibrated-point').length"
        )
        calibrated_lines = all_of(page, "#chart-error .calibrated-series", "e.getAttribute('d')")
        scatter = points_of(page, "#chart-scatter")
        bars = all_of(
            page, "#chart-coverage [data-kind]",
            "[e.dataset.group || e.textContent, e.dataset.kind, e.dataset.n,"
            " e.dataset.coverage ?? null]",
        )  # fmt: skip
        bar_labels = all_of(page, "#chart-coverage .bar-label", "e.textContent")
        nominal = page.evaluate(
            "+document.querySelector('#chart-coverage .nominal').getAttribute('x1')"
        )
        frame = page.evaluate(
            "[...document.querySelector('#chart-coverage .frame').attributes]"
            ".reduce((o, a) => (o[a.name] = a.value, o), {})"
        )
        factor_panels = segments_drawn(page, "#chart-factors")
        factor_lines = all_of(
            page, "#chart-factors .multiple",
            "[e.querySelectorAll('path.utilization').length,"
            " e.querySelectorAll('path.overhead').length, e.querySelectorAll('.band').length]",
        )  # fmt: skip
        factor_colors = all_of(page, "#chart-factors .multiple h3", "e.style.color")
        links = all_of(page, "#table-history a.run-link", "e.getAttribute('href')")
        history_rows = all_of(page, "#table-history tr[data-estimate-id]", "e.dataset.estimateId")
        history_labels = all_of(page, "#table-history tr[data-estimate-id] .label", "e.textContent")
        icons = all_of(page, "link[rel=icon]", "e.getAttribute('href')")  # inline: no request
        running_link = all_of(page, "#table-running a.run-link", "e.getAttribute('href')")
        at_risk = all_of(
            page, "#table-at-risk tr[data-run-id]",
            "[e.querySelector('a.run-link').getAttribute('href'), e.dataset.slip]",
        )  # fmt: skip
        spend_rows = all_of(
            page, "#table-spend tr[data-group]",
            "[e.dataset.group, e.dataset.currency, e.dataset.planned, e.dataset.observed,"
            " e.querySelector('td.over, td.under')?.className ?? null,"
            " e.querySelectorAll('rect').length]",
        )  # fmt: skip
        spend_note = text_of(page, "#table-spend .note")
        page.screenshot(screenshot)

    assert_only_local_requests(browser.requests)
    # each accuracy call runs a backtest: per-GPU scores wait for a GPU filter
    assert [query["by"] for query in stub.sent("/v1/accuracy")] == [["segment"], ["segment_week"]]
    assert states == dict.fromkeys(PANELS, "rendered")
    overall = CANNED["/v1/accuracy?by=segment"]["overall"]
    assert headline == [
        ["headline-median_ape", 14.0, 5.0, len(RUNS), len(RUNS) - 1, "false"],
        ["headline-coverage", 0.45, 0.8, len(RUNS), len(RUNS) - 1, "false"],
        ["headline-bias", overall["raw"]["bias"], 3.0, len(RUNS), len(RUNS) - 1, "false"],
    ]
    assert error_panels == sorted(SEGMENTS)  # one panel per segment
    assert runs_per_panel == [len(SPREAD)] * len(SEGMENTS)
    weeks = CANNED["/v1/accuracy?by=segment_week"]["groups"]
    assert calibrated_per_panel == [
        sum(1 for g in weeks if g["group"].startswith(segment + " "))
        for segment in sorted(SEGMENTS)
    ]
    assert len(calibrated_lines) == len(SEGMENTS)
    assert len(set(error_colors)) == len(SEGMENTS)  # a colour per segment, none repeated
    assert scatter.keys() == {row["estimate_id"] for row in RUNS}
    by_segment = {g["group"]: g for g in CANNED["/v1/accuracy?by=segment"]["groups"]}
    for group, kind, n, coverage in bars:  # n on every bar, the value from the data
        if group in by_segment:
            assert int(n) == by_segment[group][kind]["n"]
            assert coverage is None or float(coverage) == by_segment[group][kind]["coverage"]
    assert len(bar_labels) == 2 * (len(SEGMENTS) + 1)
    assert all("n = " in label for label in bar_labels)
    left, width = float(frame["x"]), float(frame["width"])
    assert nominal == pytest.approx(left + 0.8 * width, abs=0.2)
    assert factor_panels == [*sorted(FACTOR_KEYS[1:]), "*"]  # the pooled key last
    assert factor_lines == [[1, 1, 2]] * len(FACTOR_KEYS)
    assert len(set(factor_colors)) == len(FACTOR_KEYS)
    newest = sorted(RUNS, key=lambda row: row["ended_at"], reverse=True)[:15]
    assert history_rows == [row["estimate_id"] for row in newest]
    assert history_labels == [row["label"] for row in newest if row["label"]]
    assert len(icons) == 1 and icons[0].startswith("data:image/png;base64,")
    assert links == [f"{MLFLOW_UI}/#/runs/{row['run_ids'][0]}" for row in newest]
    assert running_link == [f"{MLFLOW_UI}/#/runs/live1"]
    assert at_risk == [[f"{MLFLOW_UI}/#/runs/live1", "21600"]]  # P90 6 hours after the deadline
    assert [stub_query["by"] for stub_query in stub.sent("/v1/spend")] == [["gpu"]]
    shown = [*SPEND_GROUPS, *({"group": "all", **total} for total in SPEND_TOTALS)]
    assert [row[:2] for row in spend_rows] == [[g["group"], g["currency"] or ""] for g in shown]
    amounts = [[float(x) if x else None for x in row[2:4]] for row in spend_rows]
    assert amounts == [[g["planned_cost"], g["observed_cost"]] for g in shown]
    over = [row[4] for row in spend_rows]  # over the plan in red, under in green
    assert over[:3] == ["num over", "num under", "num over"] and over[3] is None
    assert [row[5] for row in spend_rows] == [2 if g["currency"] else 0 for g in shown]
    assert "no price for mi300x" in spend_note
    keep_screenshot(capsys, screenshot)


def test_filters_in_the_url_narrow_every_panel(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    screenshot = tmp_path / "dashboard-h100-30d.png"

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/?gpu=h100-sxm&since=30d")
        page.wait_drawn()
        chosen = all_of(page, "#filters select", "[e.name, e.value]")
        error_panels = segments_drawn(page, "#chart-error")
        error_runs = sorted(points_of(page, "#chart-error"))
        scatter = sorted(points_of(page, "#chart-scatter"))
        coverage_groups = all_of(page, "#chart-coverage rect[data-group]", "e.dataset.group")
        factor_panels = segments_drawn(page, "#chart-factors")
        scale_panels = segments_drawn(page, "#chart-scale")
        scale_runs = sorted(points_of(page, "#chart-scale"))
        history_rows = all_of(page, "#table-history tr[data-estimate-id]", "e.dataset.estimateId")
        headline_n = page.evaluate("document.getElementById('headline-median_ape').dataset.rawN")
        form_gpu = page.evaluate("document.querySelector('#ask [name=gpu]').value")
        page.screenshot(screenshot)

    cutoff = NOW - timedelta(days=30)
    expected = sorted(
        row["estimate_id"]
        for row in RUNS
        if row["gpu"] == "h100-sxm" and datetime.fromisoformat(row["ended_at"]) >= cutoff
    )
    assert 0 < len(expected) < 12  # the time range cuts some h100 runs
    assert chosen == [["gpu", "h100-sxm"], ["segment", ""], ["since", "30d"]]
    assert error_panels == ["h100-sxm/bf16", "h100-sxm/fp8"]
    assert error_runs == scatter == sorted(history_rows) == expected
    assert set(coverage_groups) == {"h100-sxm (all)", "h100-sxm/bf16", "h100-sxm/fp8"}
    assert factor_panels == ["h100-sxm", "h100-sxm/bf16", "h100-sxm/fp8"]
    measured = {row["estimate_id"] for row in RUNS if row["implied_utilization"] is not None}
    assert scale_panels == ["h100-sxm/bf16", "h100-sxm/fp8"]
    assert scale_runs == [run for run in expected if run in measured]
    assert headline_n == "12"  # the h100-sxm group of accuracy by gpu_type
    assert form_gpu == "h100-sxm"
    assert [query.get("gpu") for query in stub.sent("/v1/spend")] == [["h100-sxm"]]
    sent = stub.sent("/v1/history") + stub.sent("/v1/accuracy") + stub.sent("/v1/spend")
    for query in sent:  # the time range reaches the API as an ISO time 30 days back
        since = datetime.fromisoformat(query["since"][0].replace("Z", "+00:00"))
        assert abs(since - cutoff) < timedelta(
            minutes=20
        )  # the test itself may take minutes on a loaded machine
    keep_screenshot(capsys, screenshot)


def segment_of(row: Mapping[str, Any]) -> str:
    return f"{row['gpu']}/{row['precision']}"


def scale_lines(page: Page) -> dict[str, list[tuple[float, float]]]:
    """Each segment's fitted line in the utilization-against-GPUs panel, as (x, y) points."""
    found = all_of(
        page, "#chart-scale .multiple",
        "[e.dataset.segment, e.querySelector('path.fit-line')?.getAttribute('d') ?? '']",
    )  # fmt: skip
    return {
        segment: [(float(x), float(y)) for x, y in re.findall(r"[ML]([-\d.]+) ([-\d.]+)", path)]
        for segment, path in found
    }


def test_utilization_against_gpu_count_draws_each_segment_with_its_fitted_slope(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 20 item 5: the dashboard draws utilization against GPU count per segment, with
    # the active set's line moved along the segment's GPU slope and its P10-P90 band.
    screenshot = tmp_path / "utilization-vs-gpus-canned.png"

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        state = state_of(page, "chart-scale")
        panels = segments_drawn(page, "#chart-scale")
        dots = all_of(
            page, "#chart-scale circle[data-estimate-id]",
            "[e.closest('.multiple').dataset.segment, e.dataset.estimateId, +e.dataset.gpus,"
            " +e.dataset.utilization, +e.getAttribute('cx'), +e.getAttribute('cy')]",
        )  # fmt: skip
        bands = all_of(page, "#chart-scale .multiple", "e.querySelectorAll('path.band').length")
        lines = scale_lines(page)
        captions = dict(
            all_of(page, "#chart-scale .multiple", "[e.dataset.segment,"
                   " e.querySelector('.caption.slope').textContent]")
        )  # fmt: skip
        line_captions = all_of(page, "#chart-scale .caption.line", "e.textContent")
        axis_labels = all_of(page, "#chart-scale .multiple:first-child .axis-label",
                             "e.textContent")  # fmt: skip
        page.screenshot_of("section:has(#chart-scale)", screenshot)

    active = next(v for v in _factor_history()["versions"] if v["active"])
    words = {entry["segment"]: entry["gpus_slope_words"] for entry in active["segments"]}
    measured = [row for row in RUNS if row["implied_utilization"] is not None]
    assert state == "rendered" and panels == sorted(SEGMENTS)
    assert sorted(dot[1] for dot in dots) == sorted(row["estimate_id"] for row in measured)
    for segment, estimate_id, gpus, utilization, _, _ in dots:
        row = next(r for r in RUNS if r["estimate_id"] == estimate_id)
        assert segment == segment_of(row) and utilization == row["implied_utilization"]
        assert gpus == GPU_COUNTS[int(estimate_id[-1])]  # observed, else planned
    for segment in SEGMENTS:  # more GPUs: further right, on a log2 axis
        xs = [cx for seg, _, gpus, _, cx, _ in sorted(dots, key=lambda d: d[2]) if seg == segment]
        steps = [b - a for a, b in itertools.pairwise(xs)]
        assert min(steps) > 0 and max(steps) - min(steps) < 0.3, steps  # a doubling: one step
    assert bands == [1] * len(SEGMENTS)
    for segment, points in lines.items():  # SVG y grows downwards: a falling line rises in y
        (_, y_left), (_, y_right) = points[0], points[-1]
        if segment in GPU_SLOPES:
            assert y_right > y_left + 5, segment
        else:
            assert y_right == pytest.approx(y_left), segment
    for segment in ("a100-80gb/bf16", "mi300x/bf16"):
        # u on a linear axis: a straight log-log slope falls slower to the right (about
        # 0.8 of its left end's steepness here), the bent one faster (about twice).
        points = lines[segment]
        third = len(points) // 3
        left, right = (
            (b[1] - a[1]) / (b[0] - a[0]) for a, b in ((points[0], points[third]),
                                                       (points[-third - 1], points[-1]))
        )  # fmt: skip
        if segment in GPU_CURVATURES:
            assert right > 1.3 * left, (segment, left, right)
        else:
            assert right < left, (segment, left, right)
    assert words["a100-80gb/bf16"] is not None and words["h100-sxm/bf16"] is None
    for segment in GPU_SLOPES:
        assert captions[segment] == (
            f"{words[segment]}, 5 runs (1 more logged no throughput: not drawn)"
        )
    assert "-6.0% utilization per doubling of GPUs (90% range -8.2%" in captions["a100-80gb/bf16"]
    assert captions["h100-sxm/bf16"].startswith("no GPU slope: the runs do not support one, ")
    assert "at 256 GPUs, bending: " in captions["mi300x/bf16"]  # and the slope at both ends
    assert "bending" not in captions["a100-80gb/bf16"]
    assert all(
        "its entry in factor set v3, at 7B params, the reference size (its runs span 1.3B–70B"
        in caption
        and "fitted on 64–1,024 GPUs" in caption
        for caption in line_captions
    ), line_captions
    assert axis_labels == ["GPU count (log₂ scale)", "implied utilization u"]
    keep_screenshot(capsys, screenshot)


@ONCE_ON_SQLITE
def test_utilization_against_gpu_count_after_a_real_refit(
    database_url: str,
    cli_env: str,
    engine: Engine,
    browser: Browser,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Runs whose utilization falls 8% per doubling of GPUs (A100) and runs that do not
    (H100), refitted for real: the panel draws the slope the set learned, in its words."""
    a100, h100 = Truth("a100-80gb", "bf16", 0.40, 0.10), Truth("h100-sxm", "bf16", 0.33, 0.15)
    simulate(engine, [a100], 60, gpu_counts=(8, 16, 32, 64, 128, 256), gpu_slope=-0.12)
    simulate(engine, [h100], 40, seed=5, gpu_counts=(64, 128, 256, 512))
    assert main(["refit", "--force"]) == 0
    capsys.readouterr()
    screenshot = tmp_path / "utilization-vs-gpus.png"

    with reckon_serve(dict(os.environ), tmp_path) as base, browser.page() as page:
        with urllib.request.urlopen(f"{base}/v1/factors", timeout=10) as response:
            served = {e["segment"]: e for e in json.load(response)["segments"]}
        page.goto(f"{base}/")
        page.wait_drawn()
        state = state_of(page, "chart-scale")
        dots = all_of(page, "#chart-scale circle[data-estimate-id]", "e.dataset.gpus")
        lines = scale_lines(page)
        captions = dict(
            all_of(page, "#chart-scale .multiple", "[e.dataset.segment,"
                   " e.querySelector('.caption.slope').textContent]")
        )  # fmt: skip
        page.screenshot_of("section:has(#chart-scale)", screenshot)

    slope = served["a100-80gb/bf16"]["gpus_slope"]
    assert state == "rendered" and len(dots) == 100
    assert slope == pytest.approx(-0.12, abs=0.04)
    assert captions["a100-80gb/bf16"] == f"{served['a100-80gb/bf16']['gpus_slope_words']}, 60 runs"
    (_, y_left), (_, y_right) = lines["a100-80gb/bf16"][0], lines["a100-80gb/bf16"][-1]
    assert y_right > y_left + 10  # falling utilization: lower on the page to the right
    # Two straight lines (A100 steep at 8-256 GPUs, H100 flat at 64-512) are no bend, though
    # together, without each segment's own slope, they look like one.
    assert all(entry["gpus_curvature"] == 0.0 for entry in served.values())
    h100_words = served["h100-sxm/bf16"]["gpus_slope_words"]
    assert captions["h100-sxm/bf16"].startswith(
        h100_words or "no GPU slope: the runs do not support one"
    )
    keep_screenshot(capsys, screenshot)


def test_utilization_against_gpu_count_without_a_factor_set_or_with_one_unreadable(
    browser: Browser,
) -> None:
    missing, failing = canned_routes(), canned_routes()
    del missing["/v1/factors/history"]  # 404: no factor set yet
    failing["/v1/factors/history"] = (500, {"detail": "database is locked"})

    with api_stub(missing) as stub, browser.page() as page:
        page.goto(f"{stub.base}/?segment=a100-80gb/bf16")
        page.wait_drawn()
        without = state_of(page, "chart-scale"), text_of(page, "#chart-scale")
        without_lines = all_of(page, "#chart-scale path.fit-line", "e")
        without_dots = all_of(page, "#chart-scale circle[data-estimate-id]", "e.dataset.gpus")
    with api_stub(failing) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        failed = state_of(page, "chart-scale"), text_of(page, "#chart-scale")

    assert without[0] == "rendered" and "no factor set yet: no fitted line, 5 runs" in without[1]
    assert without_lines == [] and without_dots == ["64", "128", "256", "512", "1024"]
    assert failed == ("error", "Factor history unavailable: database is locked")


def test_changing_a_filter_redraws_and_goes_into_the_url(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    screenshot = tmp_path / "dashboard-mi300x-worse.png"

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        page.choose_filter("#filter-segment", "mi300x/bf16")
        segment_query = query_of(page)
        error_panels = segments_drawn(page, "#chart-error")
        worse = page.evaluate("document.getElementById('headline-median_ape').dataset.worse")
        verdict = text_of(page, "#headline-median_ape .verdict")
        page.screenshot(screenshot)
        page.choose_filter("#filter-gpu", "h100-sxm")  # another GPU: the segment goes
        gpu_query = query_of(page)
        gpu_panels = segments_drawn(page, "#chart-error")
        page.choose_filter("#filter-since", "7d")
        since_query = query_of(page)
        week_runs = sorted(points_of(page, "#chart-error"))

    assert segment_query == {"gpu": ["mi300x"], "segment": ["mi300x/bf16"]}
    assert error_panels == ["mi300x/bf16"]
    assert worse == "true" and "worse than raw" in verdict
    assert gpu_query == {"gpu": ["h100-sxm"]}
    assert since_query == {"gpu": ["h100-sxm"], "since": ["7d"]}
    assert gpu_panels == ["h100-sxm/bf16", "h100-sxm/fp8"]
    cutoff = NOW - timedelta(days=7)
    assert week_runs == sorted(
        row["estimate_id"]
        for row in RUNS
        if row["gpu"] == "h100-sxm" and datetime.fromisoformat(row["ended_at"]) >= cutoff
    )
    assert "since" in stub.sent("/v1/history")[-1]
    keep_screenshot(capsys, screenshot)


def test_the_form_asks_the_api_and_shows_p10_p50_p90(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    screenshot, plan_screenshot = tmp_path / "dashboard-ask.png", tmp_path / "dashboard-plan.png"

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        page.fill("#ask [name=params]", "70B")
        page.fill("#ask [name=gpus]", "512")
        page.click("#ask button[type=submit]")
        page.wait_for("document.getElementById('ask-result').dataset.rendered")
        shown = text_of(page, "#ask-result .quantiles")
        quantiles = page.evaluate(
            "['p10', 'p50', 'p90'].map((k) => +document.getElementById('ask-result').dataset[k])"
        )
        page.screenshot(screenshot)
        page.click("#ask [name=mode][value=plan]")
        page.click("#ask [name=calibrated]")  # untick: the plan is asked for raw
        page.click("#ask button[type=submit]")
        page.wait_for("document.getElementById('ask-result').dataset.rendered")
        plan_text = text_of(page, "#ask-result")
        page.click("#ask [name=calibrated]")
        page.select("#ask [name=confidence]", "0.9")
        page.click("#ask button[type=submit]")
        page.wait_for("document.getElementById('ask-result').dataset.rendered")
        confident_text = text_of(page, "#ask-result")
        page.screenshot(plan_screenshot)

    estimate_query = stub.sent("/v1/estimate")[-1]
    assert estimate_query["params"] == ["70B"] and estimate_query["gpus"] == ["512"]
    assert estimate_query["calibrated"] == ["true"]
    assert quantiles == [8.0 * 86400, 9.5 * 86400, 12.25 * 86400]
    assert "P10" in shown and "8 d" in shown and "9.5 d" in shown and "12.3 d" in shown
    raw_plan, confident_plan = stub.sent("/v1/plan")[-2:]
    assert "calibrated" not in raw_plan and "confidence" not in raw_plan  # only when ticked
    assert "gpus" not in raw_plan and raw_plan["deadline"] == ["30d"]
    assert confident_plan["calibrated"] == ["true"] and confident_plan["confidence"] == ["0.9"]
    assert "392 × h100-sxm meet the deadline of 30 d" in plan_text
    assert 'No P10–P90 range: tick "calibrated"' in plan_text  # the canned plan has none
    assert "No P10–P90 range in the API's answer" in confident_text
    keep_screenshot(capsys, screenshot)
    keep_screenshot(capsys, plan_screenshot)


def test_dashboard_says_so_when_nothing_is_there_yet(browser: Browser) -> None:
    routes: Routes = {
        "/v1/history": (200, {"history": []}),
        "/v1/running": (200, {"running": []}),
        "/v1/jobs": (200, {"passes": []}),
        "/v1/accuracy": (200, {"by": None, "overall": {"raw": {"n": 0}}, "groups": []}),
        "/v1/mlflow": (200, {"ui_url": None, "run_url": None}),
        "/v1/spend": (200, {**SPEND, "groups": [], "totals": [], "note": None}),
    }

    with api_stub(routes) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        states = {panel_id: state_of(page, panel_id) for panel_id in PANELS}
        factors = text_of(page, "#chart-factors")
        scatter = text_of(page, "#chart-scatter")
        spend = text_of(page, "#table-spend")

    assert states == dict.fromkeys(PANELS, "empty")
    assert "No factor sets yet" in factors
    assert "No reconciled estimates yet" in scatter
    assert "No reconciled forecasts to price" in spend


def test_one_failing_endpoint_says_why_and_the_rest_still_draw(browser: Browser) -> None:
    routes = canned_routes()
    routes["/v1/running"] = (503, {"detail": "MLflow is unreachable"})
    routes["/v1/accuracy?by=segment_week"] = (422, {"detail": "cannot group by 'segment_week'"})

    with api_stub(routes) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        states = {panel_id: state_of(page, panel_id) for panel_id in PANELS}
        running = text_of(page, "#table-running")
        error = text_of(page, "#chart-error")
        calibrated = all_of(page, "#chart-error .calibrated-point", "e")
        passes = text_of(page, "#passes")

    assert states == {
        **dict.fromkeys(PANELS, "rendered"),
        "table-running": "error",
        "table-at-risk": "error",
    }
    assert "MLflow is unreachable" in running
    assert "calibrated series unavailable: cannot group by 'segment_week'" in error
    assert calibrated == []
    assert "MLflow unreachable" in passes and "failed" in passes


def test_a_gpu_alias_in_the_url_is_resolved_and_a_bad_filter_is_said(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 22 item 10: ?gpu=h100 found nothing (the CLI resolves the alias), ?since=banana
    # printed "runs ended since banana" over unfiltered data, and a form error read
    # "The API said: : unknown GPU".
    screenshot = tmp_path / "dashboard-alias-and-bad-since.png"
    routes = canned_routes()
    unknown = "unknown GPU 'h1000'; did you mean h100-sxm?"
    routes["/v1/estimate"] = (422, {"detail": [{"type": "value_error", "loc": [], "msg": unknown}]})

    with api_stub(routes) as stub, browser.page() as page:
        page.goto(f"{stub.base}/?gpu=h100&since=banana")
        page.wait_drawn()
        chosen = all_of(page, "#filters select", "[e.name, e.value]")
        panels = segments_drawn(page, "#chart-error")
        problem = page.evaluate("document.getElementById('scope').dataset.problem")
        query = query_of(page)
        page.fill("#ask [name=gpu]", "h1000")
        page.click("#ask button[type=submit]")
        page.wait_for("document.getElementById('ask-result').dataset.error")
        form_error = text_of(page, "#ask-result")
        page.screenshot(screenshot)
        page.goto(f"{stub.base}/?gpu=h1000")
        page.wait_drawn()
        unknown_problem = page.evaluate("document.getElementById('scope').dataset.problem")
        all_panels = segments_drawn(page, "#chart-error")

    assert chosen == [["gpu", "h100-sxm"], ["segment", ""], ["since", ""]]
    assert panels == ["h100-sxm/bf16", "h100-sxm/fp8"]
    assert query == {"gpu": ["h100-sxm"]}  # the URL says what is shown
    assert 'since="banana" is neither a number of days (30d) nor a date' in problem
    assert all("since" not in sent for sent in stub.sent("/v1/history"))
    assert form_error.strip() == unknown
    assert 'unknown GPU "h1000"' in unknown_problem
    assert len(all_panels) > 2  # every GPU's segments, said so above them
    keep_screenshot(capsys, screenshot)


def _with_fallbacks(history: dict[str, Any]) -> dict[str, Any]:
    """The canned factor history with the active set's mi300x/bf16 fallen back to raw and
    its h100-sxm/fp8 to the hand baseline."""
    versions = []
    for version in history["versions"]:
        segments = [dict(item) for item in version["segments"]]
        if version["active"]:
            for item in segments:
                if item["segment"] == "mi300x/bf16":
                    item.update(fallback=True, by_hand=False, fallback_to="raw")
                if item["segment"] == "h100-sxm/fp8":
                    item.update(fallback=True, by_hand=True, fallback_to="by_hand")
        versions.append({**version, "segments": segments})
    return {"versions": versions}


def test_the_headline_and_each_panel_say_what_is_served_where_calibration_fell_back(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 22 item 1: the API said `fallback: true` but the dashboard's headline said
    # "calibrated is no worse than raw" and its panels drew calibrated lines, never saying
    # that raw (or the hand baseline) is what estimates there get.
    screenshot = tmp_path / "dashboard-fallbacks.png"
    routes = canned_routes()
    routes["/v1/factors/history"] = (200, _with_fallbacks(_factor_history()))

    with api_stub(routes) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        summary = text_of(page, "#served-summary")
        error_tags = dict(
            all_of(page, "#chart-error .multiple", "[e.dataset.segment, "
                   "e.querySelector('.served').dataset.served]")
        )  # fmt: skip
        factor_tags = dict(
            all_of(page, "#chart-factors .multiple", "[e.dataset.segment, "
                   "e.querySelector('.served').dataset.served]")
        )  # fmt: skip
        page.screenshot(screenshot)
        page.goto(f"{stub.base}/?segment=mi300x/bf16")
        page.wait_drawn()
        verdict = text_of(page, "#headline-median_ape .verdict")

    assert "fell back to raw in mi300x/bf16" in summary
    assert "fell back to the hand baseline in h100-sxm/fp8" in summary
    segments = [k for k in FACTOR_KEYS if k.count("/") == 1 and not k.startswith("*/")]
    assert f"calibrated in {len(segments) - 2} of {len(segments)} segments" in summary
    assert error_tags == {
        "a100-80gb/bf16": "calibrated",
        "h100-sxm/bf16": "calibrated",
        "h100-sxm/fp8": "by_hand",
        "mi300x/bf16": "raw",
    }
    assert factor_tags["mi300x/bf16"] == "raw" and factor_tags["h100-sxm/fp8"] == "by_hand"
    assert factor_tags["a100-80gb"] == "calibrated"
    assert "worse than raw here: fell back to raw" in verdict
    keep_screenshot(capsys, screenshot)


def test_the_history_table_pages_sorts_and_searches_on_the_server(
    browser: Browser, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 22 item 7: the table showed the 15 newest of all rows and could not page, sort
    # by error or search; now each is a GET v1/history query, kept in the URL.
    screenshot = tmp_path / "dashboard-history-pages.png"
    ids = "[...document.querySelectorAll('#table-history tr[data-estimate-id]')]" \
        ".map((e) => e.dataset.estimateId)"  # fmt: skip

    with api_stub(canned_routes()) as stub, browser.page() as page:
        page.goto(f"{stub.base}/")
        page.wait_drawn()
        first = page.evaluate(ids)
        range_text = text_of(page, "#history-range")
        page.click("#history-next")
        shown_first = json.dumps(json.dumps(first, separators=(",", ":")))
        page.wait_for(f"{ids}.length && JSON.stringify({ids}) !== {shown_first}")
        second = page.evaluate(ids)
        paged_query = query_of(page)
        page.select("#history-sort", "worst")
        page.wait_for("new URLSearchParams(location.search).get('sort') === 'worst'")
        page.wait_for(f"{ids}.length === 15")
        worst = page.evaluate(ids)
        page.fill("#history-q", "sweep")
        page.evaluate("document.getElementById('history-q')"
                      ".dispatchEvent(new Event('change'))")  # fmt: skip
        page.wait_for("new URLSearchParams(location.search).get('q') === 'sweep'")
        page.wait_for(f"{ids}.length > 0 && {ids}.length < 15")
        searched = page.evaluate(ids)
        page.screenshot(screenshot)
        page.goto(f"{stub.base}/?sort=best&page=2")
        page.wait_drawn()
        reopened = page.evaluate(ids)

    newest = sorted(RUNS, key=lambda r: r["ended_at"], reverse=True)
    by_miss = sorted(RUNS, key=lambda r: abs(r["error_pct"]))
    assert first == [r["estimate_id"] for r in newest[:15]]
    assert range_text == f"rows 1–15 of {len(RUNS)}"
    assert second == [r["estimate_id"] for r in newest[15:30]]
    assert paged_query == {"page": ["2"]}
    assert worst == [r["estimate_id"] for r in reversed(by_miss)][:15]
    labelled = [r["estimate_id"] for r in RUNS if "sweep" in (r.get("label") or "")]
    assert searched and set(searched) <= set(labelled)
    assert reopened == [r["estimate_id"] for r in by_miss[15:30]]
    sent = stub.sent("/v1/history")
    assert any(query.get("sort") == ["worst"] and query.get("offset") == ["0"] for query in sent)
    assert any(query.get("q") == ["sweep"] for query in sent)
    keep_screenshot(capsys, screenshot)


def test_the_spend_panel_regroups_on_the_server_and_keeps_it_in_the_url(
    browser: Browser,
) -> None:
    # Issue 23 item 3: the dashboard showed no money; the Spend panel asks GET v1/spend by
    # GPU, month or experiment, with the page's filters.
    routes = canned_routes()
    by_month = [{**group, "group": "2026-11"} for group in SPEND_GROUPS[:2]]
    routes["/v1/spend?by=month"] = (200, {**SPEND, "by": "month", "groups": by_month})
    groups = "[...document.querySelectorAll('#table-spend tr[data-group]:not(.total)')]" \
        ".map((e) => e.dataset.group)"  # fmt: skip

    with api_stub(routes) as stub, browser.page() as page:
        page.goto(f"{stub.base}/?since=30d")
        page.wait_drawn()
        by_gpu = page.evaluate(groups)
        page.select("#spend-by", "month")
        page.wait_for("new URLSearchParams(location.search).get('spend_by') === 'month'")
        page.wait_for(f"{groups}.length === 2")
        month_groups = page.evaluate(groups)
        query = query_of(page)
        page.goto(f"{stub.base}/?spend_by=month")
        page.wait_drawn()
        reopened = page.evaluate(groups)

    assert by_gpu == [group["group"] for group in SPEND_GROUPS]
    assert month_groups == reopened == ["2026-11", "2026-11"]
    assert query == {"since": ["30d"], "spend_by": ["month"]}
    sent = stub.sent("/v1/spend")
    assert [query["by"] for query in sent] == [["gpu"], ["month"], ["month"]]
    assert "since" in sent[0] and "since" in sent[1] and "since" not in sent[2]
