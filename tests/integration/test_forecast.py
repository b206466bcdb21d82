"""The forecast job against a real MLflow server: a run started by `reckon launch` and left
RUNNING gets `reckon.eta*` tags from one scheduled forecast, a later forecast refreshes
them, and a forecast whose write-back meets an MLflow outage keeps them in the outbox until
the next pass writes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from apscheduler.triggers.date import DateTrigger
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer
from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import build
from service.config import Settings
from service.domain.records import ObservedRun
from service.entrypoints.cli.main import main
from service.entrypoints.scheduler import build_scheduler
from service.usecases.forecast import forecast
from tests.builders import SEED_ARGS
from tests.serving import wait_or_kill

pytestmark = pytest.mark.mlflow

# A training job as a user writes it: fluent MLflow, one throughput, then hours of work.
TRAINING_SCRIPT = """
import sys, time, mlflow
run = mlflow.start_run()
mlflow.log_metric("tokens_per_second", float(sys.argv[2]))
open(sys.argv[1], "w").write(run.info.run_id)
time.sleep(600)
"""
ETA_TAGS = {"reckon.eta", "reckon.eta_p10", "reckon.eta_p90", "reckon.at_risk"}


def wait_for(check: object, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s: {check}")


@pytest.fixture
def launched(
    cli_env: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Iterator[str]:
    """An estimate saved with a 30-day deadline (the plan says 649 days: at risk), and its
    run started by `reckon launch`, left RUNNING; yields the run id."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)
    assert main(["estimate", *SEED_ARGS, "--save", "--deadline", "30d", "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)
    assert saved["deadline"] is not None
    train, marker = tmp_path / "train.py", tmp_path / "run_id"
    train.write_text(TRAINING_SCRIPT)
    name = str(mlflow_client.get_experiment(experiment_id).name)
    reckon = str(Path(sys.executable).with_name("reckon"))
    process = subprocess.Popen(
        [reckon, "launch", "--estimate", saved["id"], "--experiment", name, "--",
         sys.executable, str(train), str(marker), "2e4"],
        env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(lambda: marker.exists() and marker.read_text())
        yield marker.read_text()
    finally:
        process.terminate()
        wait_or_kill(process)


def eta_tags(client: MlflowClient, run_id: str) -> dict[str, str]:
    tags = client.get_run(run_id).data.tags
    return {key: value for key, value in tags.items() if key in ETA_TAGS}


def test_a_launched_running_run_is_tagged_by_one_scheduled_forecast_and_refreshed(
    launched: str,
    database_url: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert mlflow_client.get_run(launched).info.status == "RUNNING"
    settings = Settings(
        database_url=database_url, mlflow_tracking_uri=mlflow_server.uri, experiments=experiment_id
    )
    app = build(settings)
    soon = datetime.now(UTC) + timedelta(seconds=1)
    scheduler = build_scheduler(
        app,
        trigger=DateTrigger(run_date=soon + timedelta(days=365)),  # the nightly pass: not now
        forecast_trigger=DateTrigger(run_date=soon),
    )
    scheduler.start()
    try:
        wait_for(lambda: eta_tags(mlflow_client, launched), 30)
    finally:
        scheduler.shutdown(wait=True)
        app.close()
    first = eta_tags(mlflow_client, launched)
    assert set(first) == ETA_TAGS and first["reckon.at_risk"] == "true"
    assert first["reckon.eta_p10"] <= first["reckon.eta"] <= first["reckon.eta_p90"]
    assert first["reckon.eta"].endswith("Z")

    # The run slows to a tenth: the next forecast moves its finish out.
    mlflow_client.log_metric(launched, "tokens_per_second", 2e3, step=1)
    assert main(["forecast"]) == 0
    out = capsys.readouterr().out
    assert "1 at risk" in out and "AT RISK" in out
    second = eta_tags(mlflow_client, launched)
    assert second["reckon.eta"] > first["reckon.eta"]


class StopsBeforeWriting:
    """The real MLflow source, with the server taken away once the running runs are read."""

    def __init__(self, inner: MlflowRunSource, server: MlflowServer) -> None:
        self._inner, self._server = inner, server

    def running_runs(self) -> Iterator[ObservedRun]:
        runs = list(self._inner.running_runs())
        self._server.stop()
        yield from runs

    def set_tags(self, run_id: str, tags: dict[str, str]) -> None:
        self._inner.set_tags(run_id, tags)


# MLflow outages run on SQLite only, as the kill tests' do: the outbox is the same code on
# both dialects (its PostgreSQL side: test_kills, test_permissions), and each stop and
# restart of the server costs seconds of the suite's budget.
@pytest.mark.only_dialect("sqlite", reason="MLflow outages run on SQLite only")
def test_tags_of_a_forecast_that_meets_an_outage_are_written_by_the_next_pass(
    launched: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
) -> None:
    source = MlflowRunSource(mlflow_server.uri, [experiment_id], "tokens_per_second", retries=0)
    try:
        done = forecast(
            SqlUnitOfWork(engine),
            SqlUnitOfWork(engine),
            StopsBeforeWriting(source, mlflow_server),  # type: ignore[arg-type]
            None,
            datetime.now(UTC),
        )
    finally:
        mlflow_server.start()
    assert len(done.tagged) == 1 and done.written == 0 and done.owed.pending == 1
    assert eta_tags(mlflow_client, launched) == {}

    assert main(["reconcile"]) == 0  # the nightly pass drains the outbox

    tags = eta_tags(mlflow_client, launched)
    (item,) = done.tagged
    assert item.eta is not None and set(tags) == ETA_TAGS
    assert tags["reckon.eta_p90"] == item.eta.p90.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_forecast_exits_4_when_another_forecast_holds_its_lock_and_ignores_the_pass_lock(
    cli_env: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    experiment_id: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)
    nightly = locks.pass_lock(engine)
    assert nightly.acquire()  # a nightly pass is running: the forecast neither waits nor stops
    try:
        assert main(["forecast", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["locked"] is False
        other = locks.pass_lock(engine, locks.FORECAST_LOCK_NAME)
        assert other.acquire()
        try:
            started = time.monotonic()
            assert main(["forecast"]) == 4
            assert time.monotonic() - started < 10
        finally:
            other.release()
    finally:
        nightly.release()
    assert "another forecast run holds the lock" in capsys.readouterr().err
