"""Repositories of the passes' own records: each pass, the skips it recorded, and the
watermark it advanced. Plain entities in, plain entities out; no session leaves here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from service.adapters.db.tables import (
    ReconcilePassRow,
    ScannedExperimentRow,
    SkippedRunRow,
    SyncStateRow,
)
from service.adapters.db.upsert import upsert
from service.domain.records import (
    PassRecord,
    Skip,
)

MLFLOW_SOURCE = "mlflow"


class SkipRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def record(self, skips: Sequence[Skip], *, pass_id: int, now: datetime) -> None:
        rows = [
            {
                "run_id": skip.run_id,
                "reason": skip.reason,
                "detail": skip.detail,
                "estimate_id": skip.estimate_id,
                "pass_id": pass_id,
                "seen_at": now,
            }
            for skip in {(s.run_id, s.reason): s for s in skips}.values()
        ]
        fields = ("detail", "estimate_id", "pass_id", "seen_at")
        upsert(self._session, SkippedRunRow, rows, ["run_id", "reason"], fields)

    def count(self) -> int:
        return self._session.scalar(select(func.count(SkippedRunRow.id))) or 0

    def for_pass(self, pass_id: int) -> list[Skip]:
        rows = self._session.scalars(
            select(SkippedRunRow).where(SkippedRunRow.pass_id == pass_id).order_by(SkippedRunRow.id)
        )
        return [Skip(r.run_id, r.reason, r.detail, r.estimate_id) for r in rows]


class PassRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def start(self, trigger: str, now: datetime) -> int:
        row = ReconcilePassRow(
            trigger=trigger, started_at=now, status="running", runs_seen=0, reconciled=0, skipped=0
        )
        self._session.add(row)
        self._session.flush()
        return row.id

    def finish(self, record: PassRecord) -> None:
        self._session.execute(
            update(ReconcilePassRow)
            .where(ReconcilePassRow.id == record.id)
            .values(
                ended_at=record.ended_at,
                status=record.status,
                window_after=record.window_after,
                window_cutoff=record.window_cutoff,
                runs_seen=record.runs_seen,
                reconciled=record.reconciled,
                skipped=record.skipped,
                factor_set_version=record.factor_set_version,
                error=record.error,
            )
        )

    def abandon_running(self, now: datetime) -> int:
        """Mark every pass still 'running' as 'abandoned' (called by the lock holder: no other
        pass can be running, so these belong to processes that died); returns how many."""
        result = self._session.execute(
            update(ReconcilePassRow)
            .where(ReconcilePassRow.status == "running")
            .values(status="abandoned", ended_at=now, error="its process ended mid-pass")
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def started_after(self, pass_id: int) -> bool:
        """Whether a later pass has started (it could only while this one lost its lock)."""
        later = self._session.scalar(
            select(ReconcilePassRow.id).where(ReconcilePassRow.id > pass_id).limit(1)
        )
        return later is not None

    def get(self, pass_id: int) -> PassRecord | None:
        row = self._session.get(ReconcilePassRow, pass_id)
        return None if row is None else _pass(row)

    def recent(self, limit: int = 20) -> list[PassRecord]:
        rows = self._session.scalars(
            select(ReconcilePassRow)
            .order_by(ReconcilePassRow.started_at.desc(), ReconcilePassRow.id.desc())
            .limit(limit)
        )
        return [_pass(row) for row in rows]


def _pass(row: ReconcilePassRow) -> PassRecord:
    return PassRecord(
        id=row.id,
        trigger=row.trigger,
        started_at=row.started_at,
        ended_at=row.ended_at,
        status=row.status,
        window_after=row.window_after,
        window_cutoff=row.window_cutoff,
        runs_seen=row.runs_seen,
        reconciled=row.reconciled,
        skipped=row.skipped,
        factor_set_version=row.factor_set_version,
        error=row.error,
    )


class WatermarkRepository:
    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, source: str = MLFLOW_SOURCE) -> datetime | None:
        return self._session.scalar(
            select(SyncStateRow.high_water_mark).where(SyncStateRow.source == source)
        )

    def advance(
        self, value: datetime, *, pass_id: int, now: datetime, source: str = MLFLOW_SOURCE
    ) -> None:
        """Move forward only: a backfill (--since) never moves the mark back."""
        current = self.get(source)
        if current is not None and current >= value:
            return
        row = self._session.get(SyncStateRow, source)
        if row is None:
            self._session.add(
                SyncStateRow(source=source, high_water_mark=value, updated_at=now, pass_id=pass_id)
            )
        else:
            row.high_water_mark, row.updated_at, row.pass_id = value, now, pass_id
        self._session.flush()

    def scanned_experiments(self) -> set[str]:
        return set(self._session.scalars(select(ScannedExperimentRow.experiment_id)))

    def record_scanned(self, experiment_ids: Sequence[str], *, pass_id: int, now: datetime) -> None:
        """These experiments are read from their beginning (an id already recorded stays)."""
        rows = [
            {"experiment_id": experiment_id, "pass_id": pass_id, "recorded_at": now}
            for experiment_id in dict.fromkeys(experiment_ids)
        ]
        if rows:
            upsert(self._session, ScannedExperimentRow, rows, ["experiment_id"], [])
