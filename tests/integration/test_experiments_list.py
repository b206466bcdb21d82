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


def test_a_newly_listed_experiment_is_backfilled_once_from_its_beginning(
    engine: Engine,
    cli_env: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An experiment added to RECKON_EXPERIMENTS after passes have run: its tagged runs
    that ended long before the window are read by the next pass (and only by that one)."""
    first, later = unique_name("pretrain"), unique_name("finetune")
    first_id, later_id = (
        mlflow_client.create_experiment(first),
        mlflow_client.create_experiment(later),
    )
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", json.dumps([first]))

    def estimate() -> str:
        assert main(["record", "--predicted", "30h", "--gpu", "a100-80gb", "--gpus", "8"]) == 0
        return capsys.readouterr().out.strip()

    def run_in(experiment_id: str, estimate_id: str, days_ago: int) -> None:
        end = datetime.now(UTC).replace(microsecond=0) - timedelta(days=days_ago)
        make_training_run(
            mlflow_client, experiment_id, start=end - timedelta(hours=29), end=end,
            tags={ESTIMATE_TAG: estimate_id},
        )  # fmt: skip

    def reconcile() -> dict[str, object]:
        assert main(["reconcile", "--json"]) == 0
        outcome: dict[str, object] = json.loads(capsys.readouterr().out)
        return outcome

    run_in(first_id, estimate(), 20)
    old = estimate()
    run_in(later_id, old, 10)  # ten days ago: far behind the 48 h lookback
    assert reconcile()["reconciled"] == 1  # the first pass reads `first` from its start
    assert reconcile()["reconciled"] == 0  # the watermark is now; `later` is not listed

    monkeypatch.setenv("RECKON_EXPERIMENTS", json.dumps([first, later]))
    backfill = reconcile()
    assert backfill["backfilled_experiments"] == [later_id]
    assert backfill["reconciled_estimates"] == [old]

    older = estimate()
    run_in(later_id, older, 30)  # arrives later still, older still: no second backfill
    again = reconcile()
    assert again["backfilled_experiments"] == [] and again["reconciled"] == 0
