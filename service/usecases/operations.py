"""Use cases for operators: health, the MLflow UI address, the report, the schema."""

from __future__ import annotations

from collections.abc import Callable

from service.domain.errors import InputError, ReckonError, UnavailableError
from service.domain.records import RunningProjection, SchemaStatus
from service.domain.redaction import public_url
from service.usecases.cached_probe import NOT_YET, CachedProbe
from service.usecases.context import Context
from service.usecases.factor_sets import FactorSets
from service.usecases.queries import Queries
from service.usecases.results.reads import Health, ReportData


class Operations:
    """Health, the MLflow UI address, the report, the schema."""

    def __init__(self, context: Context, queries: Queries, factor_sets: FactorSets) -> None:
        self._context = context
        self._queries = queries
        self._factor_sets = factor_sets
        self._mlflow = CachedProbe(lambda: self._check(self._ping_mlflow))
        # A damaged file can answer the ping and fail other reads: the database's own check
        # reads every page, so it runs in the background too, every 5 minutes.
        self._integrity = CachedProbe(
            lambda: self._check(self._context.adapters.schema().check_integrity),
            max_age_seconds=300.0,
        )

    def health(self) -> Health:
        """Readiness: the database must answer (checked now); MLflow is reported, not
        required, as last seen by a probe refreshed in the background (never awaited beyond
        half a second, so a slow or hung MLflow cannot time the readiness probe out)."""
        database = self._check(self._ping_database)
        if database == "ok":
            integrity = self._integrity.read().state
            database = "ok" if integrity in ("ok", NOT_YET) else integrity
        if not self._context.policy.mlflow_tracking_uri:
            return Health(database=database, mlflow="not configured", mlflow_age_seconds=None)
        mlflow = self._mlflow.read()
        return Health(database=database, mlflow=mlflow.state, mlflow_age_seconds=mlflow.age_seconds)

    def _ping_database(self) -> None:
        with self._context.adapters.reader() as uow:
            uow.passes.recent(1)

    def _ping_mlflow(self) -> None:
        self._context.adapters.run_source().ping()

    @staticmethod
    def _check(probe: Callable[[], None]) -> str:
        try:
            probe()
        except ReckonError as error:
            return str(error)
        return "ok"

    def mlflow_ui_url(self) -> str | None:
        """Where the MLflow UI is, for links to runs: the tracking server's http(s) address
        without credentials, query or fragment; None for a file store or no MLflow at all."""
        return public_url(self._context.policy.mlflow_tracking_uri or "")

    def report(self) -> ReportData:
        """What `reckon report` draws: the history, accuracy by GPU, every factor set and
        the running runs (left out, with the reason, when MLflow is down or unset)."""
        running: list[RunningProjection] = []
        running_error = None
        try:
            running = self._queries.running()
        except (UnavailableError, InputError) as error:
            running_error = str(error)
        return ReportData(
            history=self._queries.history(),
            accuracy=self._queries.accuracy(by="gpu_type"),
            factor_history=self._factor_sets.history(),
            running=running,
            running_error=running_error,
            generated_at=self._context.clock.now(),
        )

    def schema_status(self) -> SchemaStatus:
        return self._context.adapters.schema().status()

    def upgrade_schema(self) -> SchemaStatus:
        return self._context.adapters.schema().upgrade()

    def require_schema(self) -> None:
        """Refuse to serve on an out-of-date schema (SQLite upgrades itself here)."""
        self._context.adapters.schema().ensure()
