"""The refit's observations repository: the full read, the early read a pass makes beside
MLflow's pages (from the last pass's snapshot where it holds) and its completion with what a
pass wrote. Read only, apart from storing the next snapshot."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Select, select
from sqlalchemy.orm import Session

from service.adapters.db import observation_snapshot as snapshots
from service.adapters.db.observation_reader import (
    RECON_COLUMNS,
    STAGED_COLUMNS,
    build_observations,
    fetch_rows,
    observation_conditions,
    observation_query,
    read_observations,
)
from service.adapters.db.observation_snapshot import ObservationRows
from service.adapters.db.repositories import RunLinkRepository
from service.adapters.db.tables import ReconciliationRow
from service.calibration.observations import ObservationArrays, concatenate


class ObservationRepository:
    """The refit's observations, read from the reconciliations of computed estimates."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def read(self, since: datetime | None = None) -> tuple[ObservationArrays, list[str]]:
        """Every reconciled computed estimate that ended at or after `since` (all when None)
        as refit columns, ordered by end time (ties by estimate id), with the estimate ids
        in the same order."""
        data, ids = read_observations(self._session, since, with_ids=True)
        assert ids is not None
        return data, ids

    def prefetch(self, since: datetime | None, pass_id: int | None = None) -> ObservationRows:
        """The refit's read made ahead, while a pass pages MLflow: the rows as columns, each
        with its reconciliation's row id, so that `arrays` can complete them with what the
        pass then writes instead of reading everything again. With `pass_id` (the pass
        holding the lock, opened after every earlier pass ended or was abandoned, so none
        of theirs can commit later): the snapshot an earlier pass kept, completed with the
        rows passes wrote after it, when the links have not changed since (a link, unlink or
        import is the only other writer of reconciliations); `keep` stores the result for
        the next pass."""
        if pass_id is None:
            return self._read_all(since)
        # The version is read before the rows: a change between the two makes the next
        # pass find the snapshot older than the links, never newer.
        version = RunLinkRepository(self._session).version()
        stored = snapshots.load(self._session, version, since)
        if stored is None:
            rows = self._read_all(since)
        else:
            later = RECON_COLUMNS.pass_id > stored.through_pass_id
            touched = select(RECON_COLUMNS.id).where(later)
            rows = self._completed(stored, touched, later, RECON_COLUMNS, since, ids=True)
        return dataclasses.replace(rows, links_version=version, through_pass_id=pass_id - 1)

    def keep(self, ahead: object) -> None:
        """Store `prefetch`'s rows (made with a pass id) as the next pass's snapshot, in the
        caller's transaction, which must begin after the read's ended (on SQLite a read
        transaction may not start writing once the pass has committed a page since)."""
        if isinstance(ahead, ObservationRows) and ahead.links_version is not None:
            snapshots.save(self._session, ahead, now=datetime.now(UTC))

    def _read_all(self, since: datetime | None) -> ObservationRows:
        query = observation_query(self._dialect, since, with_ids=False, row_ids=True)
        data, _, row_ids = build_observations(
            self._dialect, fetch_rows(self._session, query), since, with_ids=False, row_ids=True
        )
        assert row_ids is not None
        return ObservationRows(since, data, row_ids)

    def arrays(
        self,
        since: datetime | None = None,
        *,
        ahead: object | None = None,
        pass_id: int | None = None,
    ) -> tuple[ObservationArrays, tuple[str, str] | None]:
        """The refit's read: the same columns in the same order as `read` (ties in
        end time in the database's row order), with only the first and the last estimate id
        (the provenance): reading and holding a million ids would cost a third more. With
        `ahead` (this session's `prefetch`, nothing but pass `pass_id` having
        written reconciliations since) only that pass's rows are read and built: its updated
        rows replace their old copies, its new ones join (so only ties in end time can come
        in another order than a full read's)."""
        if _covers(ahead, since) and pass_id is not None:
            assert isinstance(ahead, ObservationRows)
            touched = select(RECON_COLUMNS.id).where(RECON_COLUMNS.pass_id == pass_id)
            fresh = RECON_COLUMNS.pass_id == pass_id
            data = self._completed(ahead, touched, fresh, RECON_COLUMNS, since).data
        else:
            data, _ = read_observations(self._session, since, with_ids=False)
        return data, self.ends(since) if len(data) else None

    def judged(self, ahead: object, pass_id: int, since: datetime | None) -> ObservationArrays:
        """What `arrays(since, ahead=ahead, pass_id=pass_id)` will read once pass `pass_id`
        has applied its staged reconciliations, read before it does (from the staged copies,
        which `staging.apply` copies column for column): the early read with the estimates
        the pass staged replaced and its new ones joined."""
        if not _covers(ahead, since):
            raise ValueError("the early read does not cover the refit's window")
        assert isinstance(ahead, ObservationRows)
        staged = select(STAGED_COLUMNS.estimate_id).where(STAGED_COLUMNS.pass_id == pass_id)
        touched = select(RECON_COLUMNS.id).where(RECON_COLUMNS.estimate_id.in_(staged))
        fresh = STAGED_COLUMNS.pass_id == pass_id
        return self._completed(ahead, touched, fresh, STAGED_COLUMNS, since).data

    def ends(self, since: datetime | None) -> tuple[str, str] | None:
        """The first and the last estimate id by end time (ties by id) of what `arrays` reads."""
        ends: list[str] = []
        for newest_first in (False, True):
            keys = (RECON_COLUMNS.ended_at, RECON_COLUMNS.estimate_id)
            query = (
                select(RECON_COLUMNS.estimate_id)
                .where(*observation_conditions(self._dialect, since, scan=False))
                .order_by(*(key.desc() for key in keys) if newest_first else keys)
                .limit(1)
            )
            found = self._session.scalar(query)
            if found is None:
                return None
            ends.append(str(found))
        return ends[0], ends[1]

    def changed_since(self, moment: datetime, pass_id: int | None = None) -> bool:
        """Whether any reconciliation was written after `moment`, or by pass `pass_id`.
        Newest rows first, so the usual answer (a pass just wrote some) comes without
        reading the whole table; a pass's rows are found by their index."""
        by_pass = select(ReconciliationRow.id).where(ReconciliationRow.pass_id == pass_id)
        if pass_id is not None and self._session.scalar(by_pass.limit(1)) is not None:
            return True
        later = select(ReconciliationRow.id).where(ReconciliationRow.updated_at > moment)
        return (
            self._session.scalar(later.order_by(ReconciliationRow.id.desc()).limit(1)) is not None
        )

    def _completed(
        self,
        ahead: ObservationRows,
        touched: Select[Any],
        fresh: ColumnElement[bool],
        columns: Any,
        since: datetime | None,
        *,
        ids: bool = False,
    ) -> ObservationRows:
        """The early read's columns with rows read again (`fresh`, from `columns`' table):
        the early rows whose ids `touched` selects are replaced, new ones join, all in
        end-time order (a tie in end time may come in another order than a full read's),
        then `since` applied. `ids`: the new rows' reconciliation ids are read too (else
        they are -1: rows of the staged copy have none yet)."""
        data, row_ids = ahead.data, ahead.row_ids
        replaced = np.fromiter(self._session.scalars(touched), np.int64)
        query = observation_query(
            self._dialect, ahead.since, with_ids=False, row_ids=ids, columns=columns
        )
        new, _, new_ids = build_observations(
            self._dialect,
            fetch_rows(self._session, query.where(fresh)),
            ahead.since,
            with_ids=False,
            row_ids=ids,
        )
        if len(new) or replaced.size:
            if replaced.size:
                kept = np.flatnonzero(~np.isin(row_ids, replaced))
                data, row_ids = data.take(kept), row_ids[kept]
            # (nothing replaced, the usual night: no copy of every row before the join)
            data = concatenate(data, new)
            added = new_ids if new_ids is not None else np.full(len(new), -1, np.int64)
            row_ids = np.concatenate([row_ids, added])
            if np.any(data.ended_at[1:] < data.ended_at[:-1]):  # else already in order
                order = np.argsort(data.ended_at, kind="stable")
                data, row_ids = data.take(order), row_ids[order]
        window = ahead.since
        if since is not None and (ahead.since is None or since > ahead.since):
            window = since
            recent = data.ended_at >= since.timestamp()
            if not recent.all():  # usually nothing ended in the moments between the two
                keep = np.flatnonzero(recent)
                data, row_ids = data.take(keep), row_ids[keep]
        return ObservationRows(window, data, row_ids)

    @property
    def _dialect(self) -> str:
        return self._session.get_bind().dialect.name


def _covers(ahead: object | None, since: datetime | None) -> bool:
    """Whether an early read (`prefetch`) holds every row a read from `since` needs."""
    return isinstance(ahead, ObservationRows) and ahead.covers(since)
