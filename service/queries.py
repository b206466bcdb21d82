"""Read-side use cases: reconciliation history and pass history. Read only; one short
transaction each."""

from __future__ import annotations

from datetime import datetime

from service.domain import PassRecord, Reconciliation
from service.ports import UnitOfWork


def history(
    uow: UnitOfWork,
    *,
    since: datetime | None = None,
    gpu: str | None = None,
    limit: int | None = None,
) -> list[Reconciliation]:
    with uow:
        return uow.reconciliations.history(since=since, gpu=gpu, limit=limit)


def passes(uow: UnitOfWork, limit: int = 20) -> list[PassRecord]:
    with uow:
        return uow.passes.recent(limit)
