"""Use cases for operators: health, the MLflow UI address, the report, the schema."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta

from service.domain.errors import InputError, ReckonError, UnavailableError
from service.domain.records import Reconciliation, RunningProjection, SchemaStatus
from service.domain.redaction import public_url
from service.usecases.cached_probe import NOT_YET, CachedProbe
from service.usecases.context import Context
from service.usecases.factor_sets import FactorSets
from service.usecases.queries import Queries
from service.usecases.results.reads import (
    Accuracy,
    FactorHistory,
    Health,
    ReportData,
    ReportScope,
    ScorePair,
    Scores,
)


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

    def report_scope(self, *, gpu: str | None = None, since: str | None = None) -> ReportScope:
        """`reckon report`'s filters read (an unknown GPU or an unreadable date is an
        InputError), before anything is written or read."""
        return ReportScope(gpu=self._context.gpu_name(gpu), since=self._context.since(since))

    def report(self, scope: ReportScope | None = None) -> ReportData:
        """What `reckon report` draws, in `scope`: the history, accuracy by segment (overall
        the GPU's with a GPU), the same by segment and week (month past 120 days) for the
        error chart, the factor sets made since `since` and the active one, and the running
        runs of the GPU's estimates (left out, with the reason, when MLflow is down or
        unset; --since does not apply to them: they have not ended)."""
        scope = scope or ReportScope()
        since = None if scope.since is None else scope.since.isoformat()
        history = self._queries.history(since=since, gpu=scope.gpu)
        period = _period(history)
        accuracy, series, by_gpu = self._queries.accuracies(
            ("segment", f"segment_{period}", "gpu_type"), since=since
        )
        if scope.gpu is not None:
            accuracy = _for_gpu(accuracy, scope.gpu, by_gpu)
            series = _for_gpu(series, scope.gpu, None)
        factor_history = self._factor_sets.history()
        active = factor_history.active
        if scope.since is not None:
            made = [s for s in factor_history.sets if s.created_at >= scope.since]
            factor_history = FactorHistory(made, factor_history.active_version)
        running, running_error = self._running(scope.gpu)
        return ReportData(
            history=history,
            accuracy=accuracy,
            factor_history=factor_history,
            running=running,
            running_error=running_error,
            generated_at=self._context.clock.now(),
            scope=scope,
            series=series,
            period=period,
            active=active,
        )

    def _running(self, gpu: str | None) -> tuple[list[RunningProjection], str | None]:
        try:
            running = self._queries.running()
        except (UnavailableError, InputError) as error:
            return [], str(error)
        if gpu is None or not running:
            return running, None
        with self._context.adapters.reader() as uow:
            saved = uow.estimates.get_many([item.estimate_id for item in running])
        mine = {estimate_id for estimate_id, item in saved.items() if item.gpu == gpu}
        return [item for item in running if item.estimate_id in mine], None

    def schema_status(self) -> SchemaStatus:
        return self._context.adapters.schema().status()

    def upgrade_schema(self) -> SchemaStatus:
        return self._context.adapters.schema().upgrade()

    def require_schema(self) -> None:
        """Refuse to serve on an out-of-date schema (SQLite upgrades itself here)."""
        self._context.adapters.schema().ensure()

    def require_prices(self) -> None:
        """Refuse to serve with a prices file (RECKON_PRICES_FILE) that cannot be used: an
        InputError naming the file and the entry, before anything starts."""
        self._context.adapters.prices()


_WEEKLY_SPAN = timedelta(days=120)  # weekly bias points up to this span, monthly beyond


def _period(history: Sequence[Reconciliation]) -> str:
    """The error chart's bucket, as the dashboard chooses it: weeks for a few months of
    runs, months beyond."""
    ends = [item.ended_at for item in history]
    return "week" if not ends or max(ends) - min(ends) <= _WEEKLY_SPAN else "month"


def _for_gpu(accuracy: Accuracy, gpu: str, by_gpu: Accuracy | None) -> Accuracy:
    """`accuracy` grouped by segment (or segment and period) cut to one GPU's groups, its
    overall the GPU's own scores (`by_gpu`'s group) when given."""
    prefix = f"{gpu}/"
    groups = tuple(group for group in accuracy.groups if group.group.startswith(prefix))
    overall = accuracy.overall
    if by_gpu is not None:
        found = [group.scores for group in by_gpu.groups if group.group == gpu]
        overall = found[0] if found else _nothing(accuracy.overall)
    return replace(accuracy, groups=groups, overall=overall)


def _nothing(pair: ScorePair) -> ScorePair:
    empty = Scores(0, None, None, None, None, None)
    return ScorePair(empty, empty, False, None if pair.by_hand is None else empty)
