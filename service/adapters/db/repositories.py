"""Repositories over one Session: they read and write rows and return domain objects.
They never commit; the unit of work does."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Table, delete, func, inspect, select
from sqlalchemy.orm import Session

from service.adapters.db import estimate_mapping
from service.adapters.db.sets import among
from service.adapters.db.tables import EstimateRow, LinkChangeRow, RunLinkRow
from service.adapters.db.upsert import upsert
from service.adapters.db.values import check_values
from service.domain import bounds
from service.domain.records import Planned, SavedEstimate

_PLANNED_COLUMNS = (
    "id", "kind", "gpu", "gpus", "precision", "predicted_wall_seconds", "recompute",
    "wall_seconds_p10", "wall_seconds_p90", "params", "tokens", "flops", "peak_flops",
    "global_batch_tokens",
)  # fmt: skip


class EstimateRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, saved: SavedEstimate) -> None:
        row = estimate_mapping.to_row(saved)
        state = inspect(row)
        table = EstimateRow.__table__
        assert isinstance(table, Table)
        check_values(table, {attr.key: attr.value for attr in state.attrs})
        self._session.add(row)
        self._session.flush()

    def get(self, estimate_id: str) -> SavedEstimate | None:
        row = self._session.get(EstimateRow, estimate_id)
        return None if row is None else estimate_mapping.from_row(row)

    def get_many(self, estimate_ids: Sequence[str]) -> dict[str, SavedEstimate]:
        if not estimate_ids:
            return {}
        # Core rows, not ORM instances: a pass reads thousands and the identity map is
        # pure overhead for read-only values (about 3x faster).
        table = EstimateRow.__table__
        rows = self._session.execute(select(table).where(table.c.id.in_(list(set(estimate_ids)))))
        return {row.id: estimate_mapping.from_row(row) for row in rows}

    def plans(self, estimate_ids: Sequence[str]) -> dict[str, Planned]:
        """What the reconcile pass judges against, read as a dozen columns."""
        if not estimate_ids:
            return {}
        table = EstimateRow.__table__
        columns = [table.c[name] for name in _PLANNED_COLUMNS]
        rows = self._session.execute(
            select(*columns).where(among(self._session, table.c.id, estimate_ids))
        )
        return {row.id: estimate_mapping.planned(row) for row in rows.all()}

    def existing(self, estimate_ids: Sequence[str]) -> set[str]:
        if not estimate_ids:
            return set()
        query = select(EstimateRow.id).where(among(self._session, EstimateRow.id, estimate_ids))
        return set(self._session.scalars(query))

    def list(
        self, *, limit: int = 50, since: datetime | None = None, gpu: str | None = None
    ) -> list[SavedEstimate]:
        query = select(EstimateRow).order_by(EstimateRow.created_at.desc(), EstimateRow.id)
        if since is not None:
            query = query.where(EstimateRow.created_at >= since)
        if gpu is not None:
            query = query.where(EstimateRow.gpu == gpu)
        rows = self._session.scalars(query.limit(limit))
        return [estimate_mapping.from_row(row) for row in rows]


class RunLinkRepository:
    """run id -> estimate id; a run belongs to at most one estimate (unique run_id)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def estimate_for_run(self, run_id: str) -> str | None:
        if bounds.text_problem(run_id, bounds.RUN_ID_CHARS) is not None:
            return None  # no such id can be stored, so none is linked (PG refuses NUL)
        return self._session.scalar(
            select(RunLinkRow.estimate_id).where(RunLinkRow.run_id == run_id)
        )

    def estimates_for_runs(self, run_ids: Sequence[str]) -> dict[str, str]:
        if not run_ids:
            return {}
        rows = self._session.execute(
            select(RunLinkRow.run_id, RunLinkRow.estimate_id).where(
                among(self._session, RunLinkRow.run_id, run_ids)
            )
        )
        return {run_id: estimate_id for run_id, estimate_id in rows}

    def runs_for(self, estimate_id: str) -> list[str]:
        rows = self._session.scalars(
            select(RunLinkRow.run_id)
            .where(RunLinkRow.estimate_id == estimate_id)
            .order_by(RunLinkRow.id)
        )
        return list(rows)

    def add(self, estimate_id: str, run_id: str, source: str, created_at: datetime) -> None:
        self._insert([(estimate_id, run_id)], source, created_at)
        self._changed("link", run_id, created_at)

    def remove(self, estimate_id: str, run_id: str, removed_at: datetime) -> bool:
        result = self._session.execute(
            delete(RunLinkRow).where(
                RunLinkRow.estimate_id == estimate_id, RunLinkRow.run_id == run_id
            )
        )
        removed = bool(result.rowcount)  # type: ignore[attr-defined]
        if removed:
            self._changed("unlink", run_id, removed_at)
        return removed

    def add_many(self, pairs: Sequence[tuple[str, str]], source: str, created_at: datetime) -> None:
        """Link (estimate id, run id) pairs; a run already linked keeps its estimate."""
        if pairs:
            self._insert(pairs, source, created_at)
            self._changed("import", None, created_at)

    def version(self) -> int:
        return self._session.scalar(select(func.max(LinkChangeRow.id))) or 0

    def unlinked_since(self, version: int) -> set[str]:
        query = select(LinkChangeRow.run_id).where(
            LinkChangeRow.id > version, LinkChangeRow.change == "unlink"
        )
        return {run_id for run_id in self._session.scalars(query) if run_id is not None}

    def prune_changes(self) -> None:
        newest = self.version()
        self._session.execute(delete(LinkChangeRow).where(LinkChangeRow.id < newest))

    def _changed(self, change: str, run_id: str | None, at: datetime) -> None:
        self._session.add(LinkChangeRow(change=change, run_id=run_id, changed_at=at))
        self._session.flush()

    def _insert(self, pairs: Sequence[tuple[str, str]], source: str, created_at: datetime) -> None:
        rows = [
            {"estimate_id": estimate_id, "run_id": run_id, "source": source,
             "created_at": created_at}
            for estimate_id, run_id in pairs
        ]  # fmt: skip
        table = RunLinkRow.__table__
        assert isinstance(table, Table)
        for row in rows:
            check_values(table, row)
        upsert(self._session, RunLinkRow, rows, ["run_id"], [])
