"""The unit of work: one transaction, its repositories, an explicit commit. Leaving the
block without commit rolls back, so a failure never leaves half-written rows."""

from __future__ import annotations

from types import TracebackType

from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from service.adapters.db.engine import translate_error
from service.adapters.db.factor_repositories import FactorSetRepository
from service.adapters.db.observation_repository import ObservationRepository
from service.adapters.db.outbox import OutboxRepository
from service.adapters.db.pass_records import PassRepository, SkipRepository, WatermarkRepository
from service.adapters.db.pass_repositories import (
    ReconciliationRepository,
    RunRepository,
    StagingRepository,
)
from service.adapters.db.repositories import EstimateRepository, RunLinkRepository


class SqlUnitOfWork:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._factory = sessionmaker(bind=engine, expire_on_commit=False)

    def __enter__(self) -> SqlUnitOfWork:
        self.session: Session = self._factory()
        self.estimates = EstimateRepository(self.session)
        self.links = RunLinkRepository(self.session)
        self.runs = RunRepository(self.session)
        self.staging = StagingRepository(self.session)
        self.reconciliations = ReconciliationRepository(self.session)
        self.skips = SkipRepository(self.session)
        self.passes = PassRepository(self.session)
        self.watermarks = WatermarkRepository(self.session)
        self.factor_sets = FactorSetRepository(self.session)
        self.observations = ObservationRepository(self.session)
        self.outbox = OutboxRepository(self.session)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        try:
            self.session.rollback()
        except Exception:  # the connection may already be gone; the original error matters
            pass
        finally:
            self.session.close()
        if error is not None:
            translated = translate_error(self._engine, error)
            if translated is not None:
                raise translated from None

    def commit(self) -> None:
        self.session.commit()
