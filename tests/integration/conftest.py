"""Fixtures for tests against real services: one `mlflow server` per test session (it takes
several seconds to start), and a fresh experiment per test so tests run in any order."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mlflow.tracking import MlflowClient

from tests.integration.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer, unique_name


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """A running MLflow server (`.uri`). A test may `.stop()` it to simulate an outage; it
    must `.start()` it again (same port, same runs) before it ends."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in CLIENT_ENVIRONMENT.items():
            env.setenv(name, value)
        server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def mlflow_client(mlflow_server: MlflowServer) -> MlflowClient:
    if not mlflow_server.running:  # a previous test stopped it and failed before restarting
        mlflow_server.start()
    return MlflowClient(tracking_uri=mlflow_server.uri)


@pytest.fixture
def experiment_id(mlflow_client: MlflowClient) -> str:
    """A new, empty experiment for this test alone."""
    return str(mlflow_client.create_experiment(unique_name()))
