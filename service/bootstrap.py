"""The composition root: wires settings to adapters (catalog, database, MLflow, lock,
clock, prior) and builds the application object. It decides nothing a use case decides;
it only chooses implementations. Nothing here runs at import, and nothing is opened until
a use case asks for it, so `reckon estimate` never touches a database."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import cached_property
from typing import TYPE_CHECKING

from service import environment
from service.app import Adapters, Policy, Reckon
from service.domain.errors import MlflowNotConfigured
from service.domain.hardware import Catalog, build_catalog
from service.domain.prices import PriceTable, load_prices
from service.domain.records import SchemaStatus
from service.ports import Clock

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from service.adapters.db.unit_of_work import SqlUnitOfWork
    from service.adapters.mlflow.launch import MlflowLaunchRuns
    from service.adapters.mlflow.source import MlflowRunSource
    from service.calibration.model import Prior
    from service.config import Settings
    from service.ports import PassLock
    from service.profiles.profile_set import ProfileSet


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class _Wiring:
    """Adapters built on first use and kept for the life of the application object."""

    def __init__(self, settings: Callable[[], Settings], explicit: bool) -> None:
        self._load_settings = settings
        self._explicit = explicit

    @cached_property
    def settings(self) -> Settings:
        return self._load_settings()

    @cached_property
    def catalog(self) -> Catalog:
        # The catalog-only commands must not load pydantic-settings (see service.environment).
        path = self.settings.hardware_file if self._explicit else environment.hardware_file()
        return build_catalog(path)

    @cached_property
    def prices(self) -> PriceTable | None:
        path = self.settings.prices_file
        return None if path is None else load_prices(path, self.catalog)

    @cached_property
    def raw_engine(self) -> Engine:
        from service.adapters.db.engine import make_engine

        return make_engine(self.settings.database_url)

    @cached_property
    def engine(self) -> Engine:
        """The engine for writes, once the schema is at head (an embedded SQLite database is
        created and migrated here, as a newcomer expects)."""
        self.schema.ensure()
        self.__dict__["read_engine"] = self.raw_engine
        return self.raw_engine

    @cached_property
    def read_engine(self) -> Engine:
        """The engine for reads: the schema must be at head, and a SQLite file that does not
        exist yet is a NoDatabaseYet rather than created by looking."""
        self.schema.ensure(create=False)
        return self.raw_engine

    @cached_property
    def schema(self) -> _Schema:
        return _Schema(lambda: self.raw_engine)

    def unit_of_work(self) -> SqlUnitOfWork:
        from service.adapters.db.unit_of_work import SqlUnitOfWork

        return SqlUnitOfWork(self.engine)

    def reader(self) -> SqlUnitOfWork:
        from service.adapters.db.unit_of_work import SqlUnitOfWork

        return SqlUnitOfWork(self.read_engine)

    def run_source(self) -> MlflowRunSource:
        from service.adapters.mlflow.source import MlflowRunSource

        settings = self.settings
        if not settings.mlflow_tracking_uri:
            raise MlflowNotConfigured()
        return MlflowRunSource(
            settings.mlflow_tracking_uri,
            settings.experiment_list,
            settings.throughput_metric,
            profiles=self.profiles,
        )

    @cached_property
    def profiles(self) -> ProfileSet:
        from service.profiles.profile_set import load_profile_set

        settings = self.settings
        return load_profile_set(settings.profiles_file, settings.throughput_metric)

    def launch_runs(self) -> MlflowLaunchRuns:
        from service.adapters.mlflow.launch import MlflowLaunchRuns

        if not self.settings.mlflow_tracking_uri:
            raise MlflowNotConfigured()
        return MlflowLaunchRuns(self.settings.mlflow_tracking_uri)

    def pass_lock(self) -> PassLock:
        from service.adapters.db import locks

        return locks.pass_lock(self.engine)

    def forecast_lock(self) -> PassLock:
        from service.adapters.db import locks

        return locks.pass_lock(self.engine, locks.FORECAST_LOCK_NAME)

    @cached_property
    def prior(self) -> Prior:
        from service.calibration import priors

        return priors.default_prior()

    def close(self) -> None:
        """Release pooled connections (only if an engine was ever built)."""
        engine = self.__dict__.pop("raw_engine", None)
        self.__dict__.pop("engine", None)
        self.__dict__.pop("read_engine", None)
        if engine is not None:
            engine.dispose()


class _Schema:
    """SchemaAdmin over Alembic (service/adapters/db/migrate.py)."""

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self._engine = engine

    def status(self) -> SchemaStatus:
        from service.adapters.db import migrate
        from service.adapters.db.engine import safe_url

        engine = self._engine()
        return SchemaStatus(
            database=safe_url(engine.url),
            current=migrate.current_revision(engine),
            head=migrate.head_revision(engine),
        )

    def upgrade(self) -> SchemaStatus:
        from service.adapters.db import migrate

        migrate.upgrade(self._engine())
        return self.status()

    def ensure(self, *, create: bool = True) -> None:
        from service.adapters.db import migrate

        migrate.ensure_schema(self._engine(), create=create)

    def check_integrity(self) -> None:
        from service.adapters.db.engine import check_integrity

        check_integrity(self._engine())


def build(settings: Settings | None = None, *, clock: Clock | None = None) -> Reckon:
    """The application over these settings; without any, they are read from the
    environment when a use case first needs them (the catalog-only commands never do)."""

    def load() -> Settings:
        if settings is not None:
            return settings
        from service.config import load_settings

        return load_settings()

    wiring = _Wiring(load, explicit=settings is not None)
    adapters = Adapters(
        catalog=lambda: wiring.catalog,
        unit_of_work=wiring.unit_of_work,
        reader=wiring.reader,
        run_source=wiring.run_source,
        pass_lock=wiring.pass_lock,
        forecast_lock=wiring.forecast_lock,
        launch_runs=wiring.launch_runs,
        schema=lambda: wiring.schema,
        prior=lambda: wiring.prior,
        clock=clock or SystemClock(),
        close=wiring.close,
        prices=lambda: wiring.prices,
    )
    return Reckon(adapters, lambda: _policy(wiring.settings))


def _policy(settings: Settings) -> Policy:
    return Policy(
        lookback_hours=settings.lookback_hours,
        write_back_tags=settings.write_back_tags,
        half_life_days=settings.half_life_days,
        schedule=settings.schedule,
        running_schedule=settings.running_schedule,
        timezone=settings.timezone,
        api_token=settings.api_token,
        max_request_bytes=settings.max_request_bytes,
        experiments=tuple(settings.experiment_list),
        mlflow_tracking_uri=settings.mlflow_tracking_uri,
    )
