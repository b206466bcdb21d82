"""The one place that wires settings to adapters: catalog, database, unit of work, clock.
Entry points call `build(settings)`; nothing here runs at import."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property

from sqlalchemy import Engine

from service.config import Settings
from service.db import migrate
from service.db.engine import make_engine
from service.db.unit_of_work import SqlUnitOfWork
from service.hardware import Catalog, build_catalog


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

    def close(self) -> None:
        """Release pooled connections (only if the engine was ever built)."""
        engine = self.__dict__.pop("engine", None)
        if isinstance(engine, Engine):
            engine.dispose()


def build(settings: Settings) -> Container:
    return Container(settings)
