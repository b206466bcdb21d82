"""What a user meets when MLflow is down or not configured: one short line naming what to
fix, in the CLI, the API and the stored pass the dashboard shows; a server without an
MLflow URI starts, is ready, says "not configured" and answers 503 where MLflow is needed."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from demo.mlflow_server import free_port
from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from service.entrypoints.server import warn_without_mlflow

RECKON = str(Path(sys.executable).with_name("reckon"))


def test_mlflow_refusing_the_connection_is_one_short_line_in_the_cli_and_the_pass_table(
    cli_env: str, tmp_path: Path
) -> None:
    uri = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "RECKON_EXPERIMENTS": "0"}

    done = subprocess.run(
        [RECKON, "reconcile"], capture_output=True, text=True, env=env, cwd=tmp_path, check=False
    )

    assert done.returncode == 5 and done.stdout == ""
    (line,) = done.stderr.splitlines()  # no retry lines, no urllib3 detail
    assert line.startswith(f"reckon: error: MLflow at {uri}") and "refused the connection" in line
    assert len(line) < 200 and "HTTPConnectionPool" not in line
    settings = Settings(database_url=cli_env, mlflow_tracking_uri=uri, experiments="0")
    with TestClient(create_app(build(settings))) as api:
        (stored,) = api.get("/v1/jobs").json()["passes"]
    assert stored["status"] == "failed" and "refused the connection" in stored["error"]
    assert len(stored["error"]) < 200


def test_a_server_without_mlflow_is_ready_says_not_configured_and_answers_503_where_needed(
    database_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    app = build(Settings(database_url=database_url, mlflow_tracking_uri=None))
    with caplog.at_level(logging.WARNING):
        warn_without_mlflow(app)
    with TestClient(create_app(app)) as api:
        health = api.get("/healthz")
        reconcile = api.post("/v1/reconcile")
        running = api.get("/v1/running")
        estimate = api.get(
            "/v1/estimate", params={"params": 7e9, "tokens": 1e12, "gpu": "a100-80gb", "gpus": 8}
        )

    assert health.status_code == 200 and health.json()["mlflow"] == "not configured"
    assert health.json()["database"] == "ok"
    for answer in (reconcile, running):
        assert answer.status_code == 503, answer.text
        assert "MLFLOW_TRACKING_URI" in answer.json()["detail"]
    assert estimate.status_code == 200  # what needs no MLflow still works
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "MLFLOW_TRACKING_URI" in warning and "503" in warning
