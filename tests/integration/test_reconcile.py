"""The nightly pass end to end: a real MLflow server, real databases (SQLite and, when
configured, PostgreSQL), the real adapters. Each test checks what ended up stored."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, func, select

from demo.mlflow_server import MlflowServer, RunSpec, create_runs, make_training_run
from service.adapters.db import locks
from service.adapters.db.pass_records import WatermarkRepository
from service.adapters.db.tables import (
    ReconcilePassRow,
    ReconciliationRow,
    SkippedRunRow,
    StagedRunRow,
)
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain.errors import UnavailableError
from service.domain.hardware import build_catalog
from service.domain.records import ESTIMATE_TAG, ObservedRun, ScanWindow
from service.entrypoints.cli.main import main
from service.usecases import queries, registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate

pytestmark = pytest.mark.mlflow

METRIC = "tokens_per_second"
HOUR = timedelta(hours=1)


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def source_for(server: MlflowServer, experiment_id: str, page_size: int = 1000) -> MlflowRunSource:
    return MlflowRunSource(server.uri, [experiment_id], METRIC, page_size=page_size, retries=0)


def reconcile(
    engine: Engine, source: MlflowRunSource, *, write_back: bool = True, full: bool = False
) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine),
        source,
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(write_back=write_back, full=full),
    )


def count(engine: Engine, table: type) -> int:
    with engine.connect() as connection:
        return int(connection.scalar(select(func.count()).select_from(table)) or 0)


def watermark(engine: Engine) -> datetime | None:
    with SqlUnitOfWork(engine) as uow:
        return WatermarkRepository(uow.session).get()


def save_seed_estimate(engine: Engine, **overrides: object) -> str:
    saved = registry.save(SqlUnitOfWork(engine), an_estimate(**overrides), now=now())
    return saved.id


def test_seed_case_prints_the_articles_comparison(
    cli_env: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)
    assert main(["record", "--predicted", "3.5d", "--gpu", "a100-80gb", "--gpus", "8"]) == 0
    estimate_id = capsys.readouterr().out.strip()
    end = now() - HOUR
    run_id = make_training_run(
        mlflow_client,
        experiment_id,
        start=end - timedelta(hours=80),
        end=end,
        tags={ESTIMATE_TAG: estimate_id},
    )

    assert main(["reconcile", "--json"]) == 0
    outcome = json.loads(capsys.readouterr().out)
    assert main(["history", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["history"]
    assert main(["history"]) == 0
    human = capsys.readouterr().out

    assert outcome["runs_seen"] == 1 and outcome["reconciled"] == 1 and outcome["skipped"] == []
    assert row["estimate_id"] == estimate_id and row["run_ids"] == [run_id]
    assert row["predicted_seconds"] == 84 * 3600 and row["observed_seconds"] == 80 * 3600
    assert round(row["error_pct"], 1) == 5.0
    assert "predicted 3 days 12 hours, observed 3 days 8 hours, +5.0% over" in human
    assert "observed/predicted 0.952" in human
    tags = mlflow_client.get_run(run_id).data.tags
    assert tags["reckon.error_pct"] == "+5.0" and tags["reckon.predicted_seconds"] == "302400"


def test_throughput_separates_utilization_from_overhead_across_restarts(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    result = an_estimate(gpus=1024)  # ~5.1 days of compute at u = 0.4
    estimate_id = registry.save(SqlUnitOfWork(engine), result, now=now()).id
    true_u = 0.35
    throughput = result.request.model.tokens / (result.compute_seconds * 0.4 / true_u)
    start = now() - timedelta(days=10)
    crashed_end = start + timedelta(days=2)
    resumed = crashed_end + 6 * HOUR
    end = resumed + timedelta(days=5)
    tags = {ESTIMATE_TAG: estimate_id}
    metrics = {METRIC: throughput}
    make_training_run(
        mlflow_client, experiment_id, start=start, end=crashed_end, status="FAILED",
        metrics=metrics, tags=tags,
    )  # fmt: skip
    make_training_run(
        mlflow_client, experiment_id, start=resumed, end=end, metrics=metrics, tags=tags
    )

    outcome = reconcile(engine, source_for(mlflow_server, experiment_id))

    (item,) = outcome.reconciled
    assert item.observed_seconds == (end - start).total_seconds()
    assert item.failed_segments == 1 and item.factors_kind == "separate"
    assert item.implied_utilization == pytest.approx(true_u, rel=1e-9)
    compute = result.request.model.tokens / throughput
    assert item.implied_overhead == pytest.approx(1 - compute / item.observed_seconds, rel=1e-9)
    assert count(engine, ReconciliationRow) == 1


def test_a_run_without_throughput_yields_only_the_combined_factor(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    result = an_estimate(gpus=1024)
    estimate_id = registry.save(SqlUnitOfWork(engine), result, now=now()).id
    end = now() - HOUR
    make_training_run(
        mlflow_client, experiment_id, start=end - timedelta(days=6), end=end,
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip

    (item,) = reconcile(engine, source_for(mlflow_server, experiment_id)).reconciled

    assert item.factors_kind == "combined"
    assert item.implied_utilization is None and item.implied_overhead is None
    expected = result.flops / (1024 * result.peak_flops * item.observed_seconds)
    assert item.implied_effective_utilization == pytest.approx(expected)


def test_second_pass_changes_nothing(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    estimate_id = save_seed_estimate(engine)
    end = now() - HOUR
    make_training_run(
        mlflow_client, experiment_id, start=end - timedelta(days=3), end=end,
        metrics={METRIC: 1e6}, tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip
    source = source_for(mlflow_server, experiment_id)
    first = reconcile(engine, source)
    with engine.connect() as connection:
        before = connection.execute(select(ReconciliationRow)).all()

    second = reconcile(engine, source)

    with engine.connect() as connection:
        after = connection.execute(select(ReconciliationRow)).all()
    assert len(first.reconciled) == 1
    assert second.status == "succeeded" and second.runs_seen == 1 and second.reconciled == []
    assert before == after
    assert count(engine, ReconcilePassRow) == 2


def test_a_late_arrival_inside_the_lookback_is_still_reconciled(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    source = source_for(mlflow_server, experiment_id)
    first = reconcile(engine, source)
    assert first.window is not None
    cutoff = first.window.cutoff
    estimate_id = save_seed_estimate(engine)
    # The training client's clock put the end before the first pass's cutoff, but the run
    # was committed to MLflow only after that pass had looked.
    late_end = cutoff - timedelta(minutes=30)
    make_training_run(
        mlflow_client, experiment_id, start=late_end - timedelta(days=2), end=late_end,
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip

    second = reconcile(engine, source)

    assert [item.estimate_id for item in second.reconciled] == [estimate_id]
    assert second.window is not None and second.window.after is not None
    assert second.window.after < late_end <= cutoff
    assert watermark(engine) == second.window.cutoff


def test_running_runs_wait_and_bad_runs_are_skipped_with_reasons(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    # 4096 GPUs: the one-day runs below are then physically plausible for these estimates.
    waiting = save_seed_estimate(engine, gpus=4096)
    nan_throughput = save_seed_estimate(engine, gpus=4096)
    owner = save_seed_estimate(engine, gpus=4096)
    other = save_seed_estimate(engine, gpus=4096)
    end = now() - HOUR
    day = timedelta(days=1)
    make_training_run(
        mlflow_client, experiment_id, start=end - day, end=None, status="RUNNING",
        tags={ESTIMATE_TAG: waiting},
    )  # fmt: skip
    nan_run = make_training_run(
        mlflow_client, experiment_id, start=end - day, end=end,
        metrics={METRIC: float("nan")}, tags={ESTIMATE_TAG: nan_throughput},
    )  # fmt: skip
    orphan = make_training_run(
        mlflow_client, experiment_id, start=end - day, end=end, tags={ESTIMATE_TAG: "nosuch"}
    )
    backwards = make_training_run(
        mlflow_client, experiment_id, start=end, end=end - day, tags={ESTIMATE_TAG: owner}
    )
    contested = make_training_run(
        mlflow_client, experiment_id, start=end - day, end=end, tags={ESTIMATE_TAG: other}
    )
    registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), owner, contested, now=now())

    outcome = reconcile(engine, source_for(mlflow_server, experiment_id))

    reasons = {(skip.run_id, skip.reason) for skip in outcome.skipped}
    assert reasons == {
        (nan_run, "bad_throughput"),
        (orphan, "unknown_estimate"),
        (backwards, "end_before_start"),
        (contested, "claimed_by_two_estimates"),
    }
    reconciled = {item.estimate_id: item for item in outcome.reconciled}
    assert set(reconciled) == {nan_throughput, owner}
    assert reconciled[nan_throughput].factors_kind == "combined"
    assert reconciled[owner].run_ids == (contested,)
    assert count(engine, SkippedRunRow) == 4
    with engine.connect() as connection:
        stored = connection.scalar(select(ReconcilePassRow.skipped))
    assert stored == 4


def test_a_run_linked_by_hand_without_a_tag_is_found_by_id(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    estimate_id = save_seed_estimate(engine)
    end = now() - HOUR
    untagged = make_training_run(
        mlflow_client, experiment_id, start=end - timedelta(days=3), end=end
    )
    registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), estimate_id, untagged, now=now())

    outcome = reconcile(engine, source_for(mlflow_server, experiment_id))

    assert [item.run_ids for item in outcome.reconciled] == [(untagged,)]


class StopsMidScan:
    """The real MLflow source, with the server taken away after the first page arrived."""

    def __init__(self, inner: MlflowRunSource, server: MlflowServer) -> None:
        self._inner, self._server = inner, server

    def terminated_runs(self, window: ScanWindow) -> Iterator[ObservedRun]:
        for index, run in enumerate(self._inner.terminated_runs(window)):
            if index == 0:
                self._server.stop()
            yield run

    def latest_terminated_runs(self, window: ScanWindow, limit: int) -> list[ObservedRun]:
        return self._inner.latest_terminated_runs(window, limit)

    def terminated_without_end(self, started_after: datetime, limit: int) -> list[ObservedRun]:
        return self._inner.terminated_without_end(started_after, limit)

    def runs_by_id(self, run_ids: Sequence[str]) -> list[ObservedRun]:
        return self._inner.runs_by_id(run_ids)

    def finished_runs(
        self,
        experiments: Sequence[str] = (),
        since: datetime | None = None,
        fallback_gpus: int | None = None,
        linked: Callable[[Sequence[str]], Mapping[str, str]] | None = None,
    ) -> Iterator[ObservedRun]:
        return self._inner.finished_runs(experiments, since, fallback_gpus, linked)

    def delete_tag(self, run_id: str, key: str) -> None:
        self._inner.delete_tag(run_id, key)

    def running_runs(self) -> Iterator[ObservedRun]:
        return self._inner.running_runs()

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self._inner.set_tags(run_id, tags)

    def ping(self) -> None:
        self._inner.ping()

    def missing_experiments(self) -> list[str]:
        return self._inner.missing_experiments()

    def experiment_ids(self) -> list[str]:
        return self._inner.experiment_ids()


def test_mlflow_stopping_mid_pass_loses_nothing(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    end = now() - 2 * HOUR
    ids = [save_seed_estimate(engine) for _ in range(30)]
    specs = [
        RunSpec(start=end - timedelta(days=2), end=end + timedelta(seconds=i),
                metrics={METRIC: 1e6}, tags={ESTIMATE_TAG: estimate_id})
        for i, estimate_id in enumerate(ids)
    ]  # fmt: skip
    create_runs(mlflow_client, experiment_id, specs)
    source = source_for(mlflow_server, experiment_id, page_size=10)
    try:
        with pytest.raises(UnavailableError):
            run_pass(
                SqlUnitOfWork(engine), StopsMidScan(source, mlflow_server),
                locks.pass_lock(engine), SystemClock(), PassOptions(),
            )  # fmt: skip
    finally:
        mlflow_server.start()

    with engine.connect() as connection:
        failed = connection.execute(select(ReconcilePassRow)).one()
    assert failed.status == "failed" and failed.error
    assert watermark(engine) is None
    assert count(engine, ReconciliationRow) == 0 and count(engine, StagedRunRow) == 0

    caught_up = reconcile(engine, source)

    assert caught_up.runs_seen == 30 and len(caught_up.reconciled) == 30
    assert count(engine, ReconciliationRow) == 30


def test_two_concurrent_passes_reconcile_each_estimate_exactly_once(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    end = now() - 2 * HOUR
    ids = [save_seed_estimate(engine) for _ in range(60)]
    specs = [
        RunSpec(start=end - timedelta(days=2), end=end + timedelta(seconds=i),
                tags={ESTIMATE_TAG: estimate_id})
        for i, estimate_id in enumerate(ids)
    ]  # fmt: skip
    create_runs(mlflow_client, experiment_id, specs)
    outcomes: list[PassOutcome] = []
    barrier = threading.Barrier(2)

    def one_pass() -> None:
        barrier.wait()
        outcomes.append(reconcile(engine, source_for(mlflow_server, experiment_id, page_size=10)))

    threads = [threading.Thread(target=one_pass) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert len(outcomes) == 2
    assert sum(len(outcome.reconciled) for outcome in outcomes) == 60
    assert count(engine, ReconciliationRow) == 60
    assert {o.status for o in outcomes} <= {"succeeded", "locked"}
    histories = queries.history(SqlUnitOfWork(engine))
    assert sorted(item.estimate_id for item in histories) == sorted(ids)
    assert build_catalog()  # the catalog is untouched by passes


def test_a_tagged_run_marked_finished_without_an_end_time_is_a_recorded_skip(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    """`update_run(status=FINISHED)` (an in-house trainer's way to finish) leaves MLflow
    without an end time; no end-time window finds such a run, the probe does."""
    estimate_id = save_seed_estimate(engine)
    start = now() - 20 * HOUR
    run_id = mlflow_client.create_run(
        experiment_id, start_time=int(start.timestamp() * 1000), tags={ESTIMATE_TAG: estimate_id}
    ).info.run_id
    mlflow_client.update_run(run_id, status="FINISHED")
    assert mlflow_client.get_run(run_id).info.end_time is None

    first = reconcile(engine, source_for(mlflow_server, experiment_id))

    assert first.reconciled == []
    assert [(skip.run_id, skip.reason) for skip in first.skipped] == [(run_id, "missing_end_time")]
    with engine.connect() as connection:
        stored = connection.execute(select(SkippedRunRow.run_id, SkippedRunRow.reason)).all()
    assert [tuple(row) for row in stored] == [(run_id, "missing_end_time")]
    # Recorded once: the next night does not report it again.
    assert reconcile(engine, source_for(mlflow_server, experiment_id)).skipped == []


def test_an_unlink_made_while_a_pass_pages_is_not_undone(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    """`reckon unlink E R` (which removes R's tag in MLflow) while a `--full` pass pages: the
    pass had read R with its tag on page 1, and must not link R to E again at its end."""
    estimate, other = save_seed_estimate(engine), save_seed_estimate(engine)
    start = now() - 30 * HOUR
    run = make_training_run(
        mlflow_client, experiment_id, start=start, end=start + 10 * HOUR,
        tags={ESTIMATE_TAG: estimate}, metrics={METRIC: 2e6},
    )  # fmt: skip
    for hours in (12, 14):
        make_training_run(
            mlflow_client, experiment_id, start=start, end=start + hours * HOUR,
            tags={ESTIMATE_TAG: other}, metrics={METRIC: 2e6},
        )  # fmt: skip
    reconcile(engine, source_for(mlflow_server, experiment_id), write_back=False)

    def unlink_by_hand(seen: int) -> None:
        if seen == 1:  # page 1 (one run a page) held R and its tag
            registry.unlink(
                SqlUnitOfWork(engine), SqlUnitOfWork(engine), estimate, run, now=now(),
                source=lambda: source_for(mlflow_server, experiment_id),
            )  # fmt: skip

    run_pass(
        SqlUnitOfWork(engine),
        source_for(mlflow_server, experiment_id, page_size=1),
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(write_back=False, full=True, batch_size=1),
        on_progress=unlink_by_hand,
    )
    assert ESTIMATE_TAG not in mlflow_client.get_run(run).data.tags
    with SqlUnitOfWork(engine) as uow:
        assert uow.links.estimate_for_run(run) is None
        assert uow.reconciliations.for_estimates([estimate]) == {}
        assert set(uow.reconciliations.for_estimates([other])) == {other}
    # and the next pass, reading the run without its tag, leaves it so
    reconcile(engine, source_for(mlflow_server, experiment_id), write_back=False, full=True)
    with SqlUnitOfWork(engine) as uow:
        assert uow.links.estimate_for_run(run) is None
