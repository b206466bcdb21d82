"""RECKON_EXPERIMENTS as operators keep it: names with commas (a JSON list), and an entry
that was deleted or misspelled, which is a recorded skip with a warning while the pass,
`running` and `import` go on with the rest. A real server, both databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, select

from demo.mlflow_server import MlflowServer, make_training_run, unique_name
from service.adapters.db.tables import SkippedRunRow
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.cli.main import main

pytestmark = pytest.mark.mlflow


def test_a_missing_experiment_is_a_recorded_skip_and_the_rest_are_read(
    engine: Engine,
    cli_env: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    kept = unique_name("ablations, lr sweep")  # a comma in the name
    kept_id = mlflow_client.create_experiment(kept)
    deleted = unique_name("old")
    mlflow_client.delete_experiment(mlflow_client.create_experiment(deleted))
    listed = [kept, "no-such-experiment-typo", deleted]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", json.dumps(listed))
    assert main(["record", "--predicted", "30h", "--gpu", "a100-80gb", "--gpus", "8"]) == 0
    estimate_id = capsys.readouterr().out.strip()
    end = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    make_training_run(
        mlflow_client, kept_id, start=end - timedelta(hours=29), end=end,
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip
    make_training_run(
        mlflow_client, kept_id, start=end, end=None, status="RUNNING",
        tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip

    assert main(["reconcile", "--json"]) == 0
    reconciled = capsys.readouterr()
    assert main(["running", "--json"]) == 0
    running = capsys.readouterr()
    assert main(["import", "--gpu", "h100-sxm", "--dry-run", "--json"]) == 0
    imported = capsys.readouterr()

    outcome = json.loads(reconciled.out)
    assert outcome["status"] == "succeeded" and outcome["reconciled"] == 1
    skipped = {(s["run_id"], s["reason"]) for s in outcome["skipped"]}
    assert skipped == {
        ("experiment:no-such-experiment-typo", "missing_experiment"),
        (f"experiment:{deleted}", "missing_experiment"),
    }
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sum("'no-such-experiment-typo' not found" in line for line in warned) == 3  # a command
    with engine.connect() as connection:
        stored = set(connection.execute(select(SkippedRunRow.run_id, SkippedRunRow.reason)))
    assert skipped <= stored
    assert len(json.loads(running.out)["running"]) == 1
    import_skips = {s["reason"] for s in json.loads(imported.out)["skipped"]}
    assert "missing_experiment" in import_skips
