"""No channel carries a credential from MLFLOW_TRACKING_URI, whatever form the user wrote it
in: stdout, stderr, log records, the database and HTTP bodies are searched for a planted
password. The forms are the ones users write (an unencoded `@` or `/` in the password, no
scheme, a query-string token); MLflow is down, so the errors that echo addresses happen.
Launch runs against MLflow's basic-auth app, whose own client prints run URLs."""

from __future__ import annotations

import logging
import sys

import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, String, Text, select

from demo.mlflow_server import MlflowServer, free_port, unique_name
from service.adapters.db.tables import Base
from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main
from tests.mlflow_auth import ADMIN_PASSWORD

pytestmark = pytest.mark.mlflow

FIRST, SECOND = "Zq7Sekr1tA", "Zq7Sekr1tB"  # the planted secret, in two parts


def forms(port: int) -> dict[str, str]:
    host = f"127.0.0.1:{port}"
    return {
        "unencoded @ in the password": f"http://admin:{FIRST}@{SECOND}@{host}",
        "no scheme": f"admin:{FIRST}{SECOND}@{host}",
        "unencoded / in the password": f"http://admin:{FIRST}/{SECOND}@{host}:5000",
        "a query-string token": f"http://{host}/?token={FIRST}{SECOND}",
    }


def leaks(text: str) -> bool:
    return FIRST in text or SECOND in text


def stored_text(engine: Engine) -> str:
    """Every text value of every table, joined."""
    parts: list[str] = []
    with engine.connect() as connection:
        for table in Base.metadata.sorted_tables:
            columns = [c for c in table.columns if isinstance(c.type, String | Text)]
            if columns:
                for row in connection.execute(select(*columns)):
                    parts.extend(str(value) for value in row if value is not None)
    return "\n".join(parts)


@pytest.mark.parametrize("form", list(forms(1)))
def test_a_planted_password_reaches_no_channel(
    form: str,
    engine: Engine,
    cli_env: str,
    mlflow_server: MlflowServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    uri = forms(free_port())[form]  # nothing listens there: every call fails
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", "0")
    caplog.set_level(logging.DEBUG)
    printed: list[str] = []
    for command in (["reconcile"], ["running"], ["import", "--gpu", "h100-sxm", "--dry-run"]):
        code = main(command)
        captured = capsys.readouterr()
        assert code != 0 and "Traceback" not in captured.err, (command, captured.err)
        printed += [captured.out, captured.err]
    settings = Settings(database_url=cli_env, mlflow_tracking_uri=uri, experiments="0")
    with TestClient(create_app(build(settings)), raise_server_exceptions=False) as api:
        answers = [
            api.get("/healthz"), api.get("/v1/running"), api.post("/v1/reconcile"),
            api.get("/v1/mlflow"), api.get("/v1/jobs"), api.get("/"),
        ]  # fmt: skip
    assert all(answer.status_code < 500 or answer.status_code == 503 for answer in answers)
    bodies = [answer.text for answer in answers]
    logged = [record.getMessage() + (record.exc_text or "") for record in caplog.records]

    assert not [text for text in printed if leaks(text)]
    assert not [text for text in bodies if leaks(text)]
    assert not [text for text in logged if leaks(text)]
    assert not leaks(stored_text(engine))
    assert "MLflow" in " ".join(printed)  # the errors were shown, only without the secret


def test_a_password_with_an_unencoded_at_sign_authenticates(
    cli_env: str,
    auth_mlflow_server: MlflowServer,
    admin_client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    experiment_id = str(admin_client.create_experiment(unique_name()))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", auth_mlflow_server.uri_as("admin", ADMIN_PASSWORD))
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)

    assert main(["reconcile"]) == 0
    assert "succeeded" in capsys.readouterr().out


def test_launch_prints_no_credentials_from_mlflow_or_its_child(
    cli_env: str,
    auth_mlflow_server: MlflowServer,
    admin_client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    # The suite's own environment silences MLflow; a user's shell does not.
    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", auth_mlflow_server.uri_as("admin", ADMIN_PASSWORD))
    assert main(["record", "--predicted", "2h", "--gpu", "h100-sxm", "--gpus", "8"]) == 0
    estimate_id = capfd.readouterr().out.strip()
    trainer = "import mlflow\nwith mlflow.start_run():\n    mlflow.log_metric('loss', 1.0)\n"

    code = main(["launch", "--estimate", estimate_id, "--experiment", unique_name(), "--",
                 sys.executable, "-c", trainer])  # fmt: skip
    captured = capfd.readouterr()

    assert code == 0, captured.err
    assert "View run" not in captured.out + captured.err
    assert "Secret-9" not in captured.out + captured.err
