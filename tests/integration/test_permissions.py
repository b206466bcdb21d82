"""Write-back against MLflow's basic-auth app, as a platform team runs it: an account with
MLflow's default READ permission cannot tag runs (403). Its owed tags are kept, counted as
blocked and shown (outcome, /metrics, /v1/jobs, one warning naming the permission), and
written by the first pass after EDIT is granted. Both databases, a real server."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, make_training_run, unique_name
from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock, build
from service.config import Settings
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.api.app import create_app
from service.usecases import registry
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate
from tests.mlflow_auth import create_user, grant

pytestmark = pytest.mark.mlflow

RESULT_TAGS = ("reckon.predicted_seconds", "reckon.observed_seconds", "reckon.error_pct")


def a_linked_run(engine: Engine, client: MlflowClient, experiment_id: str) -> str:
    """The id of a 29-hour run tagged for a newly saved estimate, ended an hour ago."""
    now = datetime.now(UTC).replace(microsecond=0)
    estimate_id = registry.save(SqlUnitOfWork(engine), an_estimate(), now=now).id
    run_id = make_training_run(
        client, experiment_id, start=now - timedelta(hours=30), end=now - timedelta(hours=1),
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip
    return run_id


def reconcile(engine: Engine, uri: str, experiment_id: str) -> PassOutcome:
    source = MlflowRunSource(uri, [experiment_id], "tokens_per_second", retries=0)
    return run_pass(
        SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(), PassOptions()
    )


def test_a_read_only_accounts_tags_are_kept_shown_and_written_once_edit_is_granted(
    engine: Engine,
    database_url: str,
    auth_mlflow_server: MlflowServer,
    admin_client: MlflowClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    experiment_id = str(admin_client.create_experiment(unique_name()))
    reader_uri, reader = create_user(auth_mlflow_server)
    run_id = a_linked_run(engine, admin_client, experiment_id)

    with caplog.at_level(logging.WARNING):
        denied = reconcile(engine, reader_uri, experiment_id)

    assert denied.status == "succeeded" and len(denied.reconciled) == 1
    assert (denied.tags_written, denied.tags_pending, denied.tags_blocked) == (0, 1, 1)
    assert "1 blocked" in denied.summary and "EDIT" in (denied.blocked_reason or "")
    warnings = [r.getMessage() for r in caplog.records if "write-back blocked" in r.getMessage()]
    assert len(warnings) == 1 and "needs EDIT permission" in warnings[0]
    assert not set(RESULT_TAGS) & set(admin_client.get_run(run_id).data.tags)
    settings = Settings(database_url=database_url, mlflow_tracking_uri=reader_uri)
    with TestClient(create_app(build(settings))) as api:
        assert "reckon_tags_blocked 1.0" in api.get("/metrics").text
        tags = api.get("/v1/jobs").json()["tags"]
    assert tags["pending"] == 1 and tags["blocked"] == 1 and "EDIT" in tags["blocked_reason"]

    again = reconcile(engine, reader_uri, experiment_id)  # still READ: kept, not dropped
    assert (again.tags_pending, again.tags_blocked) == (1, 1)

    grant(auth_mlflow_server, reader, experiment_id, "EDIT")
    granted = reconcile(engine, reader_uri, experiment_id)

    assert granted.reconciled == []  # nothing new to judge: the outbox alone is retried
    assert (granted.tags_written, granted.tags_pending, granted.tags_blocked) == (1, 0, 0)
    tags_now = admin_client.get_run(run_id).data.tags
    assert {key: tags_now[key] for key in RESULT_TAGS} == {
        "reckon.predicted_seconds": f"{denied.reconciled[0].predicted_seconds:.0f}",
        "reckon.observed_seconds": f"{29 * 3600}",
        "reckon.error_pct": f"{denied.reconciled[0].error_pct:+.1f}",
    }


def test_a_run_that_is_gone_is_still_dropped_from_the_outbox(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = a_linked_run(engine, mlflow_client, experiment_id)
    source = MlflowRunSource(mlflow_server.uri, [experiment_id], "tokens_per_second", retries=0)
    options = PassOptions(write_back=False)
    uow = SqlUnitOfWork(engine)
    first = run_pass(uow, source, locks.pass_lock(engine), SystemClock(), options)
    assert first.tags_pending == 0 and len(first.reconciled) == 1  # queued, not written
    mlflow_client.delete_run(run_id)

    drained = reconcile(engine, mlflow_server.uri, experiment_id)

    assert (drained.tags_written, drained.tags_pending, drained.tags_blocked) == (0, 0, 0)
