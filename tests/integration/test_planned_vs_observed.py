"""A launched run that trained another job than its estimate planned (real captured runs,
tagged as `reckon launch` tags them): the pass judges its factors at what the run logged,
its error against the plan, and records the difference (issue 19)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer
from service.adapters.db import locks
from service.adapters.db.observation_repository import ObservationRepository
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain import requests
from service.domain.configuration import CONFIG_DIFFERS
from service.domain.hardware import Catalog
from service.domain.inputs import RawInputs
from service.domain.records import SavedEstimate
from service.presenters import json_views, text_loop
from service.usecases import registry
from service.usecases.launch import configuration_tags
from service.usecases.nightly.passes import PassOptions, run_pass
from tests.integration import framework_runs as frameworks
from tests.integration.conftest import CAPTURE_FP32

pytestmark = pytest.mark.mlflow

DATA = Path(__file__).parents[1] / "data" / "trainer_runs"
NON_EMBEDDING = 195_392  # the captured Llama's parameters without embeddings (capture notes)


def planned_estimate(
    engine: Engine, catalog: Catalog, gpus: int, tokens: float, batch: float | None = None
) -> SavedEstimate:
    raw = RawInputs(
        params=NON_EMBEDDING, tokens=tokens, gpu="capture-cpu", gpus=gpus, precision="fp32",
        recompute="none", utilization=0.4, global_batch_tokens=batch,
    )  # fmt: skip
    result = requests.compute(catalog, requests.build_request(catalog, raw))
    return registry.save(SqlUnitOfWork(engine), result, now=datetime.now(UTC))


def reconcile(engine: Engine, server: MlflowServer, experiment_id: str, catalog: Catalog):  # type: ignore[no-untyped-def]
    source = MlflowRunSource(server.uri, [experiment_id], "tokens_per_second", retries=0)
    return run_pass(
        SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(),
        PassOptions(write_back=False, full=True, peaks=catalog.known_peak),
    )  # fmt: skip


def test_an_hf_run_on_half_the_planned_processes_is_judged_at_what_ran(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    # Planned: 4 GPUs, 245,760 tokens. Ran: torchrun with 2 processes over 122,880 tokens,
    # HF's defaults (no token count; total_flos, train_runtime and rates logged).
    saved = planned_estimate(engine, capture_catalog, gpus=4, tokens=245_760)
    path = DATA / "planned_vs_observed_1.json"
    run_id, notes = frameworks.replay_captured(
        mlflow_client, experiment_id, path, configuration_tags(saved)
    )
    logged = json.loads(path.read_text())["latest_metrics"]

    outcome = reconcile(engine, mlflow_server, experiment_id, capture_catalog)

    [item] = outcome.reconciled
    assert item.run_ids == (run_id,) and item.config_check == CONFIG_DIFFERS
    assert (item.planned_gpus, item.observed_gpus) == (4, notes["world_size"])
    assert item.observed_tokens == pytest.approx(notes["tokens_trained_whole_job"], rel=1e-6)
    mfu = logged["total_flos"] / (notes["world_size"] * CAPTURE_FP32 * logged["train_runtime"])
    assert item.implied_utilization == pytest.approx(mfu, rel=0.01)
    assert item.error_pct == pytest.approx(
        100 * (saved.predicted_wall_seconds / item.observed_seconds - 1)
    )  # the prediction was for the planned job: its error stays against it
    with SqlUnitOfWork(engine) as uow:
        [stored] = uow.reconciliations.history()
    assert stored == item  # kept as judged
    line = text_loop.history_text([stored])
    assert "config_differs: planned 4 GPUs, 245,760 tokens, fp32" in line
    assert "observed 2 GPUs, 122,880 tokens, fp32" in line
    view = json_views.reconciliation_view(stored)["configuration"]
    assert view["planned"]["gpus"] == 4 and view["observed"]["gpus"] == 2


def test_the_global_batch_the_run_took_reaches_the_refit_beside_the_planned_one(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    # The batch an estimate planned (--global-batch-tokens) is stored with it and copied to
    # its reconciliation; the captured HF run ran on 2 processes, not the 4 planned, so it
    # took 2 x 8 x 2 x 128 = 4,096 tokens a step (its tokens over its steps), and that is
    # what the refit learns from.
    saved = planned_estimate(engine, capture_catalog, gpus=4, tokens=245_760, batch=8192.0)
    path = DATA / "planned_vs_observed_1.json"
    frameworks.replay_captured(mlflow_client, experiment_id, path, configuration_tags(saved))

    [item] = reconcile(engine, mlflow_server, experiment_id, capture_catalog).reconciled

    assert (item.global_batch_tokens, item.observed_global_batch_tokens) == (8192.0, 4096.0)
    with SqlUnitOfWork(engine) as uow:
        [stored] = uow.reconciliations.history()
        data, _ = ObservationRepository(uow.session).read()
    assert stored == item
    assert data.batch_tokens.tolist() == [4096.0]
    view = json_views.reconciliation_view(stored)["configuration"]
    assert view["planned"]["global_batch_tokens"] == 8192.0
    assert view["observed"]["global_batch_tokens"] == 4096.0


def test_a_composer_run_on_one_process_of_two_planned_is_judged_at_one(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    # The trial from the issue: planned 2 GPUs and 61,440 tokens, ran one process over 30,720.
    saved = planned_estimate(engine, capture_catalog, gpus=2, tokens=61_440)
    path = DATA / "composer_1.json"
    _, notes = frameworks.replay_captured(
        mlflow_client, experiment_id, path, configuration_tags(saved)
    )

    [item] = reconcile(engine, mlflow_server, experiment_id, capture_catalog).reconciled

    assert item.config_check == CONFIG_DIFFERS
    assert (item.observed_gpus, item.observed_tokens) == (1, notes["tokens_trained"])
    assert item.observed_compute_seconds is not None and item.implied_utilization is not None
    # judged at the plan (2 GPUs, twice the tokens at the same rate) u would be half this
    flops = 6.0 * NON_EMBEDDING * notes["tokens_trained"]
    assert item.implied_utilization == pytest.approx(
        flops / (1 * CAPTURE_FP32 * item.observed_compute_seconds)
    )
    # Composer logs no precision by default: the plan's stands in, and is named
    assert item.observed_precision is None and item.precision == "fp32"
