"""The scheduled pass: the real APScheduler firing the real pass; and two `reckon serve`
processes on one PostgreSQL told to reconcile at the same moment produce one pass."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.date import DateTrigger
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, select

from demo.mlflow_server import MlflowServer, RunSpec, create_runs, free_port
from service.adapters.db.tables import ReconcilePassRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import build
from service.config import Settings
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.scheduler import build_scheduler
from service.usecases import registry
from tests.builders import an_estimate
from tests.databases import postgres_base_url

pytestmark = pytest.mark.mlflow
RECKON = str(Path(sys.executable).with_name("reckon"))


def passes(engine: Engine) -> list[ReconcilePassRow]:
    with engine.connect() as connection:
        return list(connection.execute(select(ReconcilePassRow)).all())  # type: ignore[arg-type]


def seed_runs(engine: Engine, client: MlflowClient, experiment_id: str, count: int) -> None:
    end = datetime.now(UTC) - timedelta(hours=2)
    specs = []
    for i in range(count):
        saved = registry.save(SqlUnitOfWork(engine), an_estimate(), now=datetime.now(UTC))
        specs.append(
            RunSpec(start=end - timedelta(days=3), end=end + timedelta(seconds=i),
                    tags={ESTIMATE_TAG: saved.id})
        )  # fmt: skip
    create_runs(client, experiment_id, specs)


def test_the_scheduler_runs_the_pass_when_its_trigger_fires(
    engine: Engine,
    database_url: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
) -> None:
    seed_runs(engine, mlflow_client, experiment_id, 3)
    settings = Settings(
        database_url=database_url, mlflow_tracking_uri=mlflow_server.uri, experiments=experiment_id
    )
    app = build(settings)
    moment = datetime.now(UTC) + timedelta(seconds=1)
    scheduler = build_scheduler(app, trigger=DateTrigger(run_date=moment))
    scheduler.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not [
            row for row in passes(engine) if row.status != "running"
        ]:
            time.sleep(0.2)
    finally:
        scheduler.shutdown(wait=True)
        app.close()

    (row,) = passes(engine)
    assert row.trigger == "scheduler" and row.status == "succeeded"
    assert row.reconciled == 3 and row.started_at >= moment - timedelta(seconds=1)


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"reckon serve exited:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{url}/healthz", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise AssertionError(f"reckon serve at {url} not ready")


def _post(url: str) -> tuple[int, str]:
    request = urllib.request.Request(url, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.mark.skipif(postgres_base_url() is None, reason="RECKON_TEST_DATABASE_URL is not set")
def test_two_servers_told_to_reconcile_at_once_run_one_pass(
    engine: Engine,
    database_url: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("replicas share a PostgreSQL database")
    seed_runs(engine, mlflow_client, experiment_id, 300)
    env = {
        **os.environ,
        "RECKON_DATABASE_URL": database_url,
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "RECKON_EXPERIMENTS": experiment_id,
    }
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    logs = [tmp_path / f"serve-{index}.log" for index in range(2)]
    servers = []
    for url, log in zip(urls, logs, strict=True):
        with log.open("wb") as output:
            servers.append(
                subprocess.Popen(
                    [RECKON, "serve", "--port", url.rsplit(":", 1)[1]],
                    env=env, cwd=tmp_path, stdout=output, stderr=subprocess.STDOUT,
                )
            )  # fmt: skip
    try:
        for url, server, log in zip(urls, servers, logs, strict=True):
            _wait_ready(url, server, log)
        barrier = threading.Barrier(2)
        answers: list[tuple[int, str]] = []

        def trigger(url: str) -> None:
            barrier.wait()
            answers.append(_post(f"{url}/v1/reconcile"))

        threads = [threading.Thread(target=trigger, args=(url,)) for url in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=30)

    codes = sorted(code for code, _ in answers)
    assert codes == [200, 409], answers
    locked = next(text for code, text in answers if code == 409)
    assert "another reconcile pass is running" in locked
    (row,) = passes(engine)
    assert row.status == "succeeded" and row.reconciled == 300
