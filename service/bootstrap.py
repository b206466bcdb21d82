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

from service import (
    accuracy,
    dashboard,
    estimates,
    factor_model,
    priors,
    queries,
    reconcile,
    running,
)
from service.config import Settings
from service.db import locks, migrate
from service.db.engine import make_engine
from service.db.unit_of_work import SqlUnitOfWork
from service.domain import (
    EstimateRequest,
    InputError,
    NotFoundError,
    ReckonError,
    UnavailableError,
)
from service.estimates import Calibrated
from service.factor_model import FitParameters, Prior
from service.hardware import Catalog, build_catalog
from service.mlflow_source import MlflowRunSource
from service.ports import PassLock, UnitOfWork
from service.reconcile import PassOptions, PassOutcome
from service.refit import RefitOutcome
from service.refit import refit as refit_use_case
from service.views import (
    JSON,
    factor_set_view,
    reconciliation_view,
    running_view,
    segment_view,
)

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

    @cached_property
    def prior(self) -> Prior:
        return priors.default_prior()

    @property
    def fit_parameters(self) -> FitParameters:
        return FitParameters(half_life_days=self.settings.half_life_days)

    def refit(self, *, force: bool = False) -> RefitOutcome:
        """`reckon refit`: one refit in its own transaction."""
        with self.uow() as uow:
            outcome = refit_use_case(
                uow, self.prior, self.fit_parameters, self.clock.now(), force=force
            )
            uow.commit()
        return outcome

    def _refit_in_pass(self, uow: UnitOfWork, _pass_id: int, now: datetime) -> int | None:
        """Every pass ends with a refit, in the pass's transaction; returns the active set."""
        refit_use_case(uow, self.prior, self.fit_parameters, now)
        active = uow.factor_sets.active()
        return None if active is None else active.version

    def calibrated(self, request: EstimateRequest, version: int | None) -> Calibrated:
        return estimates.calibrated(self.uow(), self.catalog, request, self.prior, version)

    def accuracy_document(self, by: str | None, since: datetime | None) -> JSON:
        return accuracy.accuracy(self.uow(), self.prior, self.fit_parameters, by=by, since=since)

    def factor_set(self, version: int | None) -> JSON:
        with self.uow() as uow:
            active = uow.factor_sets.active()
            chosen = active if version is None else uow.factor_sets.get(version)
        if chosen is None:
            if version is not None:
                raise NotFoundError(f"no factor set with version {version}")
            prior_set = {factor_model.PRIOR_KEY: factor_model.prior_factors(self.prior)}
            return {
                "version": None,
                "active": False,
                "message": "no factor set yet: calibrated estimates use the published prior",
                "prior_sources": list(self.prior.sources),
                "segments": [segment_view(item) for item in prior_set.values()],
            }
        return factor_set_view(chosen, None if active is None else active.version)

    def factor_history_document(self) -> JSON:
        with self.uow() as uow:
            active = uow.factor_sets.active()
            sets = uow.factor_sets.all()
        active_version = None if active is None else active.version
        return {"versions": [factor_set_view(item, active_version) for item in sets]}

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
            refit=self._refit_in_pass,
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

    def dashboard_html(self) -> str:
        return dashboard.page()

    def close(self) -> None:
        """Release pooled connections (only if the engine was ever built)."""
        engine = self.__dict__.pop("engine", None)
        if isinstance(engine, Engine):
            engine.dispose()


def build(settings: Settings) -> Container:
    return Container(settings)
