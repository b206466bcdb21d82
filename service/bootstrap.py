"""The one place that wires settings to adapters: catalog, database, unit of work, clock.
Entry points call `build(settings)`; nothing here runs at import."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property

from sqlalchemy import Engine

from service import dashboard, queries, reconcile, running
from service.config import Settings
from service.db import locks, migrate
from service.db.engine import make_engine
from service.db.unit_of_work import SqlUnitOfWork
from service.domain import InputError, ReckonError, UnavailableError
from service.hardware import Catalog, build_catalog
from service.mlflow_source import MlflowRunSource
from service.ports import PassLock
from service.reconcile import PassOptions, PassOutcome
from service.views import JSON, reconciliation_view, running_view

log = logging.getLogger(__name__)


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


@dataclass
class Container:
    """Adapters built lazily from settings, so `reckon estimate` never opens a database."""

    settings: Settings

    @cached_property
    def catalog(self) -> Catalog:
        return build_catalog(self.settings.hardware_file)

    @cached_property
    def engine(self) -> Engine:
        engine = make_engine(self.settings.database_url)
        try:
            migrate.ensure_schema(engine)
        except BaseException:
            engine.dispose()
            raise
        return engine

    def raw_engine(self) -> Engine:
        """The engine without the schema check (for `reckon db ...`)."""
        engine = make_engine(self.settings.database_url)
        self.__dict__["engine"] = engine  # so close() disposes it
        return engine

    def uow(self) -> SqlUnitOfWork:
        return SqlUnitOfWork(self.engine)

    @cached_property
    def clock(self) -> SystemClock:
        return SystemClock()

    def run_source(self) -> MlflowRunSource:
        uri = self.settings.mlflow_tracking_uri
        if not uri:
            raise InputError("MLFLOW_TRACKING_URI is not set; point it at the MLflow server")
        # MLflow's own client retries for minutes by default; the adapter retries briefly
        # on top, so a dead server fails a pass in seconds (unless the user chose otherwise).
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
        return MlflowRunSource(uri, self.settings.experiment_list, self.settings.throughput_metric)

    def pass_lock(self) -> PassLock:
        return locks.pass_lock(self.engine)

    def pass_options(
        self, *, trigger: str, since: datetime | None = None, full: bool = False
    ) -> PassOptions:
        return PassOptions(
            lookback=timedelta(hours=self.settings.lookback_hours),
            since=since,
            full=full,
            trigger=trigger,
            write_back=self.settings.write_back_tags,
        )

    def reconcile(
        self,
        *,
        trigger: str,
        since: datetime | None = None,
        full: bool = False,
        on_progress: Callable[[int], None] | None = None,
    ) -> PassOutcome:
        """The one pass every entry point runs (CLI, API, scheduler)."""
        return reconcile.run_pass(
            self.uow(),
            self.run_source(),
            self.pass_lock(),
            self.clock,
            self.pass_options(trigger=trigger, since=since, full=full),
            on_progress=on_progress,
        )

    def health(self) -> dict[str, str]:
        """'ok' or the one-line reason, for the database and for MLflow."""
        checks: dict[str, str] = {}
        try:
            with self.uow() as uow:
                uow.passes.recent(1)
            checks["database"] = "ok"
        except ReckonError as error:
            checks["database"] = str(error)
        try:
            self.run_source().ping()
            checks["mlflow"] = "ok"
        except ReckonError as error:
            checks["mlflow"] = str(error)
        return checks

    def report_data(
        self,
    ) -> tuple[list[JSON], JSON | None, JSON | None, list[JSON]]:
        """What `reckon report` draws: the same documents the API serves."""
        history = [reconciliation_view(row) for row in queries.history(self.uow())]
        accuracy = self.accuracy_document("gpu_type", None)
        factor_history = self.factor_history_document()
        try:
            items = running.running(self.uow(), self.run_source(), self.clock.now())
            running_rows = [running_view(item) for item in items]
        except (UnavailableError, InputError) as error:  # MLflow down or unset: the rest
            log.warning("running runs left out of the report: %s", error)
            running_rows = []
        return history, accuracy, factor_history, running_rows

    def accuracy_document(self, by: str, since: datetime | None) -> JSON | None:
        return None

    def factor_history_document(self) -> JSON | None:
        return None

    def dashboard_html(self) -> str:
        return dashboard.page()

    def close(self) -> None:
        """Release pooled connections (only if the engine was ever built)."""
        engine = self.__dict__.pop("engine", None)
        if isinstance(engine, Engine):
            engine.dispose()


def build(settings: Settings) -> Container:
    return Container(settings)
