"""Use cases for operators: health, the MLflow UI address, the report, the schema."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from service.domain.errors import InputError, ReckonError, UnavailableError
from service.domain.records import RunningProjection, SchemaStatus
from service.usecases.context import Context
from service.usecases.factor_sets import FactorSets
from service.usecases.queries import Queries
from service.usecases.results.reads import Health, ReportData

if TYPE_CHECKING:
    pass


class Operations:
    """Health, the MLflow UI address, the report, the schema."""

    def __init__(self, context: Context, queries: Queries, factor_sets: FactorSets) -> None:
        self._context = context
        self._queries = queries
        self._factor_sets = factor_sets

    def health(self) -> Health:
        """Readiness: the database must answer; MLflow is reported, not required."""
        database = self._check(self._ping_database)
        return Health(database=database, mlflow=self._check(self._ping_mlflow))

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
        parts = urlsplit(self._context.policy.mlflow_tracking_uri or "")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))

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
