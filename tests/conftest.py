"""Fixtures every layer shares: real databases on the migrated schema (SQLite always,
PostgreSQL when RECKON_TEST_DATABASE_URL is set), each test starting from empty tables;
and one real `mlflow server` per test session (it takes seconds to start), with a fresh
experiment per test so tests run in any order. Under pytest-xdist (`make test`) each worker
process is a session of its own: its own servers, SQLite files and PostgreSQL schemas, so
workers share nothing but the PostgreSQL database, in which each schema also keys its own
pass lock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine, delete

from demo.mlflow_server import CLIENT_ENVIRONMENT, MlflowServer, unique_name
from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.tables import Base
from tests.databases import DIALECTS, empty_database, postgres_base_url
from tests.mlflow_auth import ADMIN_PASSWORD


def _dialect_params() -> list[object]:
    skip_pg = pytest.mark.skipif(
        postgres_base_url() is None, reason="RECKON_TEST_DATABASE_URL is not set"
    )
    return [
        pytest.param(dialect, marks=skip_pg if dialect == "postgresql" else ())
        for dialect in DIALECTS
    ]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`@pytest.mark.only_dialect("sqlite", reason=...)`: the other dialects' variants are
    skipped before their fixtures are set up (a skip inside the test came after its
    servers and seeded data: 16 s per browser test's PostgreSQL variant)."""
    for item in items:
        marker = item.get_closest_marker("only_dialect")
        callspec = getattr(item, "callspec", None)
        if marker is None or callspec is None:
            continue
        dialect = callspec.params.get("migrated_database_url")
        if dialect is not None and dialect != marker.args[0]:
            item.add_marker(pytest.mark.skip(reason=marker.kwargs["reason"]))


@pytest.fixture(scope="session", autouse=True)
def mlflow_client_environment() -> Iterator[None]:
    """MLflow's client retries for minutes by default: every test gets the short budget of
    CLIENT_ENVIRONMENT from the start of its session, not only once some test has started a
    server (a test of a dead server that ran first on its worker would wait minutes)."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in CLIENT_ENVIRONMENT.items():
            env.setenv(name, value)
        yield


@pytest.fixture(scope="session", params=_dialect_params())
def migrated_database_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """One database per dialect per session, upgraded to head by Alembic."""
    with empty_database(request.param, tmp_path_factory.mktemp("db")) as url:
        engine = make_engine(url)
        migrate.upgrade(engine)
        engine.dispose()
        yield url


@pytest.fixture
def database_url(migrated_database_url: str) -> Iterator[str]:
    """The migrated database, emptied after the test. Emptying (not an outer rolled-back
    transaction) because tests here commit for real: concurrent passes, subprocesses."""
    yield migrated_database_url
    engine = make_engine(migrated_database_url)
    with engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(delete(table))
    engine.dispose()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Environment for running `reckon` against the test database."""
    monkeypatch.setenv("RECKON_DATABASE_URL", database_url)
    monkeypatch.delenv("RECKON_HARDWARE_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    return database_url


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


@pytest.fixture(scope="session")
def auth_mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MlflowServer]:
    """One server of MLflow's basic-auth app for the whole suite (started by the first test
    that asks): admin / tests.mlflow_auth.ADMIN_PASSWORD, other accounts READ by default."""
    with pytest.MonkeyPatch.context() as env:
        for name, value in CLIENT_ENVIRONMENT.items():
            env.setenv(name, value)
        server = MlflowServer(tmp_path_factory.mktemp("mlflow-auth"), admin_password=ADMIN_PASSWORD)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def admin_client(auth_mlflow_server: MlflowServer) -> MlflowClient:
    return MlflowClient(tracking_uri=auth_mlflow_server.uri_as("admin", ADMIN_PASSWORD))


@pytest.fixture
def mlflow_client(mlflow_server: MlflowServer) -> MlflowClient:
    if not mlflow_server.running:  # a previous test stopped it and failed before restarting
        mlflow_server.start()
    return MlflowClient(tracking_uri=mlflow_server.uri)


@pytest.fixture
def experiment_id(mlflow_client: MlflowClient) -> str:
    """A new, empty experiment for this test alone."""
    return str(mlflow_client.create_experiment(unique_name()))
