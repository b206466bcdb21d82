"""The write-back outbox: tags owed to MLflow runs, queued with the reconciliation they
report and removed once written. None of these methods commits."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from service.adapters.db.tables import TagOutboxRow
from service.adapters.db.upsert import upsert
from service.domain.records import PendingTags, TagsOwed


class OutboxRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def queue(self, items: Sequence[PendingTags], *, pass_id: int | None, now: datetime) -> None:
        """Owe these tags, merged over the tags the run is owed already (a newer value of a
        tag replaces the older one; the others stay): a forecast's `reckon.eta*` queued
        while a result is owed, or the other way round, loses neither. `pass_id` None for
        the forecast job (service.usecases.forecast), which is no reconcile pass."""
        table = TagOutboxRow.__table__
        earlier: dict[str, dict[str, str]] = {}
        wanted = sorted({item.run_id for item in items})
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            for row in self._session.execute(
                select(table.c.run_id, table.c.tags).where(table.c.run_id.in_(chunk))
            ):
                earlier[row.run_id] = json.loads(row.tags)
        rows = [
            {
                "run_id": item.run_id,
                "estimate_id": item.estimate_id,
                "tags": json.dumps({**earlier.get(item.run_id, {}), **item.tags}, sort_keys=True),
                "pass_id": pass_id,
                "queued_at": now,
                "attempts": 0,
                "last_error": None,
                "blocked": False,
            }
            for item in items
        ]
        fields = (
            "estimate_id",
            "tags",
            "pass_id",
            "queued_at",
            "attempts",
            "last_error",
            "blocked",
        )
        upsert(self._session, TagOutboxRow, rows, ["run_id"], fields)

    def pending(self, limit: int) -> list[PendingTags]:
        """The oldest owed tags first (fewest attempts first among equals)."""
        table = TagOutboxRow.__table__
        rows = self._session.execute(
            select(table.c.run_id, table.c.estimate_id, table.c.tags)
            .order_by(table.c.attempts, table.c.queued_at, table.c.run_id)
            .limit(limit)
        )
        return [PendingTags(row.run_id, row.estimate_id, json.loads(row.tags)) for row in rows]

    def written(self, run_ids: Sequence[str]) -> None:
        if run_ids:
            self._session.execute(delete(TagOutboxRow).where(TagOutboxRow.run_id.in_(run_ids)))

    def failed(self, run_ids: Sequence[str], error: str, *, blocked: bool = False) -> None:
        """MLflow did not take these; `blocked` when it refused for want of permission."""
        if run_ids:
            self._session.execute(
                update(TagOutboxRow)
                .where(TagOutboxRow.run_id.in_(run_ids))
                .values(
                    attempts=TagOutboxRow.attempts + 1, last_error=error[:2000], blocked=blocked
                )
            )

    def owed(self) -> TagsOwed:
        table = TagOutboxRow.__table__
        pending, blocked = self._session.execute(
            select(func.count(), func.count().filter(table.c.blocked))
        ).one()
        reason = None
        if blocked:
            reason = self._session.scalar(
                select(table.c.last_error).where(table.c.blocked).limit(1)
            )
        return TagsOwed(int(pending or 0), int(blocked or 0), reason)
