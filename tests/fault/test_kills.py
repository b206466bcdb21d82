"""Kills, outages and races against the real parts: `reckon reconcile` processes SIGKILLed
at random moments (then one clean rerun), two passes started at once, MLflow stopped
mid-scan and during the write-back. After each: every estimate reconciled exactly once,
no pass left 'running', and every result tag eventually on its MLflow run."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, func, select

from demo.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer, RunSpec, create_runs
from service.adapters.db import locks
from service.adapters.db.tables import ReconcilePassRow, ReconciliationRow, TagOutboxRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain.records import ESTIMATE_TAG, ObservedRun, ScanWindow
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.fault.entry import ROOT

pytestmark = pytest.mark.mlflow

METRIC = "tokens_per_second"
KILL_TRIALS = 10  # per database: 20 with PostgreSQL
RUNS_PER_TRIAL = 4


def add_linked_runs(engine: Engine, client: MlflowClient, experiment_id: str, n: int) -> list[str]:
    now = datetime.now(UTC).replace(microsecond=0)
    ids = [
        registry.save(SqlUnitOfWork(engine), an_estimate(gpus=4096), now=now).id for _ in range(n)
    ]
    end = now - timedelta(hours=1)
    specs = [
        RunSpec(
            start=end - timedelta(days=1),
            end=end - timedelta(seconds=i),
            metrics={METRIC: 1.5e7},
            tags={ESTIMATE_TAG: estimate_id},
        )
        for i, estimate_id in enumerate(ids)
    ]
    create_runs(client, experiment_id, specs)
    return ids


def reckon_process(
    database_url: str, server: MlflowServer, experiment_id: str
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        **CLIENT_ENVIRONMENT,
        "PYTHONPATH": str(ROOT),
        "RECKON_DATABASE_URL": database_url,
        "MLFLOW_TRACKING_URI": server.uri,
        "RECKON_EXPERIMENTS": experiment_id,
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from service.entrypoints.cli.main import run; run()",
            "reconcile",
            "--full",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_a_running_pass(engine: Engine, processes: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(p.poll() is None for p in processes):
        with engine.connect() as connection:
            if connection.scalar(select(func.count()).where(ReconcilePassRow.status == "running")):
                return
        time.sleep(0.02)


def assert_exactly_once(engine: Engine, estimate_ids: list[str]) -> None:
    with engine.connect() as connection:
        rows = connection.execute(select(ReconciliationRow.estimate_id)).scalars().all()
        running = connection.scalar(
            select(func.count()).where(ReconcilePassRow.status == "running")
        )
        owed = connection.scalar(select(func.count()).select_from(TagOutboxRow))
    assert sorted(rows) == sorted(estimate_ids)  # none lost, none doubled
    assert running == 0  # a killed pass is marked abandoned by the next
    assert owed == 0


def assert_all_tagged(client: MlflowClient, experiment_id: str, n: int) -> None:
    runs = client.search_runs([experiment_id], max_results=1000)
    tagged = [run for run in runs if "reckon.error_pct" in run.data.tags]
    assert len(runs) == n and len(tagged) == n


def test_passes_killed_at_random_moments_then_rerun_reconcile_exactly_once(
    database_url: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
) -> None:
    seed = int(os.environ.get("RECKON_FAULT_SEED") or random.SystemRandom().randrange(10**6))
    print(f"kill trials: seed {seed} (RECKON_FAULT_SEED={seed} replays)")
    rng = random.Random(seed)
    estimate_ids: list[str] = []
    killed = 0
    for trial in range(KILL_TRIALS):
        estimate_ids += add_linked_runs(engine, mlflow_client, experiment_id, RUNS_PER_TRIAL)
        # Two at once in some trials: the race on the lock, then the kill.
        processes = [reckon_process(database_url, mlflow_server, experiment_id)]
        if trial % 3 == 0:
            processes.append(reckon_process(database_url, mlflow_server, experiment_id))
        # Kill at a random moment of the pass itself (process start-up is slow and would
        # take most kills): after its pass row appears, within about a pass's length.
        wait_for_a_running_pass(engine, processes)
        delay = rng.uniform(0.0, 0.8)
        time.sleep(delay)
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                killed += 1
            process.communicate(timeout=60)
        print(f"trial {trial}: {len(processes)} process(es), kill after {delay:.2f} s")
    final = reckon_process(database_url, mlflow_server, experiment_id)
    out, err = final.communicate(timeout=120)
    assert final.returncode == 0, err
    assert "Traceback" not in out + err
    print(f"{KILL_TRIALS} trials, {killed} processes killed mid-pass")
    print(f"rerun: {out.splitlines()[0] if out else err}")
    assert_exactly_once(engine, estimate_ids)
    assert_all_tagged(mlflow_client, experiment_id, len(estimate_ids))


class StopsServer:
    """The real MLflow adapter, with the server stopped at one chosen moment."""

    def __init__(self, inner: MlflowRunSource, server: MlflowServer, *, on: str) -> None:
        self._inner, self._server, self._on = inner, server, on

    def terminated_runs(self, window):  # type: ignore[no-untyped-def]
        for index, run in enumerate(self._inner.terminated_runs(window)):
            if self._on == "scan" and index == 3 and self._server.running:
                self._server.stop()
            yield run

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        return self._inner.latest_terminated_runs(window, limit)

    def terminated_without_end(self, started_after: datetime, limit: int) -> list[ObservedRun]:
        return self._inner.terminated_without_end(started_after, limit)

    def runs_by_id(self, run_ids):  # type: ignore[no-untyped-def]
        return self._inner.runs_by_id(run_ids)

    def running_runs(self):  # type: ignore[no-untyped-def]
        return self._inner.running_runs()

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        if self._on == "write-back" and self._server.running:
            self._server.stop()
        self._inner.set_tags(run_id, tags)

    def ping(self) -> None:
        self._inner.ping()

    def missing_experiments(self) -> list[str]:
        return self._inner.missing_experiments()

    def experiment_ids(self) -> list[str]:
        return self._inner.experiment_ids()


def one_pass(engine: Engine, source: object) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine),
        source,  # type: ignore[arg-type]
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(full=True),
    )


@pytest.mark.parametrize("moment", ["scan", "write-back"])
def test_mlflow_stopped_mid_pass_heals_on_the_next_pass(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    moment: str,
) -> None:
    if engine.dialect.name != "sqlite":
        # An MLflow outage is the same fault whatever the database (kills and races run on
        # both); once keeps the suite inside its time budget (each restart costs ~10 s).
        pytest.skip("MLflow outages run on SQLite only")
    ids = add_linked_runs(engine, mlflow_client, experiment_id, 12)
    inner = MlflowRunSource(mlflow_server.uri, [experiment_id], METRIC, page_size=2, retries=0)
    started = time.perf_counter()
    try:
        first = one_pass(engine, StopsServer(inner, mlflow_server, on=moment))
        assert moment == "write-back", "a scan cut short must fail the pass"
        assert first.status == "succeeded" and first.tags_pending == 12 - first.tags_written
        assert first.tags_pending > 0
    except Exception as error:
        assert moment == "scan" and "MLflow" in str(error)
    finally:
        outage_seconds = time.perf_counter() - started
        mlflow_server.start()
    assert outage_seconds < 60  # one bounded wait, not minutes of retries

    second = one_pass(engine, inner)

    assert second.status == "succeeded" and second.tags_pending == 0
    assert_exactly_once(engine, ids)
    assert_all_tagged(mlflow_client, experiment_id, 12)
