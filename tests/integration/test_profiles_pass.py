"""The nightly pass reads linked runs through their logging profile: a Composer run linked
to a forecast reconciles with both factors (not "combined only"), a short Lightning run with
no rate records why, and only runs whose profile needs a metric history cost a history read."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, make_training_run
from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow import source as mlflow_source
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain.records import ESTIMATE_TAG
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.integration import framework_runs as frameworks
from tests.integration.framework_runs import Truth

pytestmark = pytest.mark.mlflow


def reconcile(engine: Engine, server: MlflowServer, experiment_id: str) -> PassOutcome:
    source = MlflowRunSource(server.uri, [experiment_id], "tokens_per_second", retries=0)
    return run_pass(
        SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(),
        PassOptions(write_back=False, full=True),
    )  # fmt: skip


def test_a_linked_composer_run_reconciles_both_factors_through_its_profile(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    truth = Truth(gpus=8, recompute=4 / 3)  # the seed estimate plans full recomputation
    forecast = an_estimate(params=truth.params, tokens=truth.tokens, gpu="h100-sxm", gpus=8)
    saved = registry.save(SqlUnitOfWork(engine), forecast, now=datetime.now(UTC))
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    composer = frameworks.composer_run(mlflow_client, experiment_id, truth, start)
    mlflow_client.set_tag(composer, ESTIMATE_TAG, saved.id)
    other = make_training_run(
        mlflow_client, experiment_id, start=start, end=start + timedelta(hours=1),
        metrics={"tokens_per_second": 1e6}, tags={ESTIMATE_TAG: "nosuch"},
    )  # fmt: skip
    reads: list[tuple[str, str]] = []
    original = MlflowRunSource._history

    def counted(
        self: MlflowRunSource, run_id: str, latest: dict[str, float], key: str
    ) -> list[tuple[int, float]]:
        reads.append((run_id, key))
        return original(self, run_id, latest, key)

    monkeypatch.setattr(mlflow_source.MlflowRunSource, "_history", counted)

    outcome = reconcile(engine, mlflow_server, experiment_id)

    [result] = outcome.reconciled
    assert (result.profile, result.factors_kind) == ("composer", "separate")
    assert result.implied_utilization == pytest.approx(truth.utilization, rel=0.01)
    assert result.implied_overhead == pytest.approx(truth.overhead, rel=0.01)
    assert {run_id for run_id, _ in reads} == {composer}  # Reckon's own profile needs none
    assert {key for _, key in reads} == {
        "throughput/tokens_per_sec",
        "throughput/device/tokens_per_sec",
        "throughput/flops_per_sec",
        "throughput/device/flops_per_sec",
    }
    assert other not in {run_id for run_id, _ in reads}


def test_the_tokens_per_step_a_run_logged_reach_the_refit_before_the_plans(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    truth = Truth(gpus=8, recompute=4 / 3)
    planned = an_estimate(
        params=truth.params, tokens=truth.tokens, gpu="h100-sxm", gpus=8,
        global_batch_tokens=1_000_000,  # the plan said 1M tokens a step
    )  # fmt: skip
    saved = registry.save(SqlUnitOfWork(engine), planned, now=datetime.now(UTC))
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    run_id = frameworks.composer_run(mlflow_client, experiment_id, truth, start, batches=200)
    mlflow_client.set_tag(run_id, ESTIMATE_TAG, saved.id)

    outcome = reconcile(engine, mlflow_server, experiment_id)
    with SqlUnitOfWork(engine) as uow:
        data, _ = uow.observations.read()

    [result] = outcome.reconciled
    ran = truth.tokens / 200  # Composer's time/token over time/batch
    assert result.global_batch_tokens == 1_000_000
    assert result.observed_global_batch_tokens == pytest.approx(ran)
    assert data.batch_tokens.tolist() == pytest.approx([ran])


def test_a_short_lightning_run_without_rates_reconciles_combined_and_says_why(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    # 256 GPUs: about 20 days planned, so a 20-day run implies a plausible utilization.
    saved = registry.save(SqlUnitOfWork(engine), an_estimate(gpus=256), now=datetime.now(UTC))
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=25)
    run_id = make_training_run(
        mlflow_client, experiment_id, start=start, end=start + timedelta(days=20),
        metrics={"train/time": 600.0, "train/batches": 30.0, "train/samples": 240.0},
        tags={ESTIMATE_TAG: saved.id},
    )  # fmt: skip

    outcome = reconcile(engine, mlflow_server, experiment_id)

    [result] = outcome.reconciled
    assert result.factors_kind == "combined" and result.implied_utilization is None
    [skip] = outcome.skipped
    assert (skip.run_id, skip.reason) == (run_id, "no_throughput")
    assert "window_size" in skip.detail


POISON = {
    "hf batch of 1e-320": (
        {"total_flos": 1e20, "train_runtime": 1000.0, "train_samples_per_second": 100.0,
         "train_steps_per_second": 10.0},
        {"per_device_train_batch_size": "1e-320", "gradient_accumulation_steps": "1e-10"},
    ),
    "hf samples/s of 1e308": (
        {"total_flos": 1e20, "train_runtime": 1000.0, "train_samples_per_second": 1e308,
         "train_steps_per_second": 10.0},
        {"per_device_train_batch_size": "1e-10"},
    ),
    "composer with 1e308 GPUs a node": (
        {"time/token": 1e9}, {"num_nodes": "10", "num_gpus_per_node": "1e308"},
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(POISON))
def test_a_poison_run_is_an_unreadable_skip_and_the_pass_goes_on(
    case: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
) -> None:
    metrics, params = POISON[case]
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    ids = []
    for extra in ({"metrics": metrics, "params": params}, {"metrics": {"tokens_per_second": 1e6}}):
        saved = registry.save(SqlUnitOfWork(engine), an_estimate(), now=datetime.now(UTC))
        make_training_run(
            mlflow_client, experiment_id, start=start, end=start + timedelta(hours=20),
            tags={ESTIMATE_TAG: saved.id}, **extra,
        )  # fmt: skip
        ids.append(saved.id)

    outcome = reconcile(engine, mlflow_server, experiment_id)
    again = reconcile(engine, mlflow_server, experiment_id)

    assert outcome.status == "succeeded" and again.status == "succeeded"
    assert {item.estimate_id for item in outcome.reconciled} == set(ids)  # wall time counts
    (skip,) = [s for s in outcome.skipped if s.reason == "unreadable_run"]
    assert skip.estimate_id == ids[0]
    assert "Error" in skip.detail and "keys" in skip.detail
