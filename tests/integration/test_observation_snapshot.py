"""The refit's early read kept between passes (service/adapters/db/observation_snapshot.py): a
pass reads the snapshot the last pass kept plus the reconciliations written since, and what it
reads must be what reading every row gives, whatever happened in between (a new pass, a run
re-reconciled, an unlink, a damaged or foreign snapshot). Real databases (SQLite, and PostgreSQL
when configured); runs from an in-memory source."""

from __future__ import annotations

import threading
from datetime import timedelta

import numpy as np
from sqlalchemy import Engine, func, select, update

from service.adapters.db import observation_snapshot as snapshots
from service.adapters.db.observation_snapshot import ObservationRows
from service.adapters.db.tables import ObservationSnapshotRow, ReconcilePassRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.calibration.model import FitParameters
from service.calibration.observations import FLOAT_COLUMNS, ObservationArrays
from service.calibration.priors import default_prior
from service.domain.records import ObservedRun
from service.usecases import registry
from service.usecases.refit import InPass
from service.usecases.results.loop import PassOutcome
from tests.integration.test_pass_pages import HOUR, NOW, a_run, save
from tests.integration.test_pass_refit import Watched
from tests.integration.test_pass_refit import a_pass as refit_pass

SINCE = NOW - 400 * 24 * HOUR


def a_pass(engine: Engine, runs: list[ObservedRun]) -> PassOutcome:
    """A pass with its refit (which reads ahead, from the snapshot, and keeps one)."""
    in_pass = InPass(default_prior(), FitParameters(), lambda: SqlUnitOfWork(engine))
    outcome = refit_pass(engine, runs, Watched(in_pass))
    for thread in threading.enumerate():  # the snapshot is kept beside the pass's end
        if thread.name == "reckon-refit-keep":
            thread.join(timeout=60)
    return outcome


def kept(engine: Engine) -> tuple[int, int] | None:
    """The snapshot's (through pass, row count), None without one."""
    with SqlUnitOfWork(engine) as uow:
        row = uow.session.execute(
            select(ObservationSnapshotRow.through_pass_id, ObservationSnapshotRow.payload)
        ).first()
    if row is None:
        return None
    rows = snapshots.decode(bytes(row.payload))
    assert rows is not None
    return row.through_pass_id, len(rows)


def next_read(engine: Engine) -> tuple[ObservationRows, ObservationArrays, bool]:
    """What the next pass's early read gives, what reading every row gives, and whether the
    snapshot held (was used)."""
    with SqlUnitOfWork(engine) as uow:
        next_pass = (uow.session.scalar(select(func.max(ReconcilePassRow.id))) or 0) + 1
        version = uow.links.version()
        held = snapshots.load(uow.session, version, SINCE) is not None
        early = uow.observations.prefetch(SINCE, next_pass)
        full, _ = uow.observations.arrays(SINCE)
    assert isinstance(early, ObservationRows)
    return early, full, held


def assert_same(early: ObservationRows, full: ObservationArrays) -> None:
    assert len(early) == len(full)
    for name in FLOAT_COLUMNS:
        assert np.array_equal(getattr(early.data, name), getattr(full, name), equal_nan=True), name
    assert early.data.combination().tolist() == full.combination().tolist()


def test_a_pass_reads_the_last_passs_snapshot_and_the_rows_written_since(engine: Engine) -> None:
    first, second, third = save(engine), save(engine), save(engine)
    one = a_pass(engine, [a_run("a-1", first, 60, 50)])
    assert one.pass_id is not None
    assert kept(engine) == (one.pass_id - 1, 0)  # read as it opened: nothing yet
    two = a_pass(engine, [a_run("a-1", first, 60, 50), a_run("b-1", second, 45, 40)])
    assert two.pass_id is not None and kept(engine) == (two.pass_id - 1, 1)
    # Pass three adds a run to `first` (its reconciliation is rewritten) and a new estimate.
    runs = [a_run("a-1", first, 60, 50), a_run("a-2", first, 49, 30), a_run("c-1", third, 20, 9)]
    runs.append(a_run("b-1", second, 45, 40))
    three = a_pass(engine, runs)
    assert {item.estimate_id for item in three.reconciled} == {first, third}
    assert three.pass_id is not None and kept(engine) == (three.pass_id - 1, 2)

    early, full, held = next_read(engine)
    assert held  # the snapshot through pass two, completed with pass three's rows
    assert len(full) == 3
    assert_same(early, full)
    # The rewritten reconciliation is there once, with its new end (30 hours ago).
    assert np.count_nonzero(early.data.ended_at == (NOW - 30 * HOUR).timestamp()) == 1
    assert not np.any(early.data.ended_at == (NOW - 50 * HOUR).timestamp())


def test_an_unlink_since_the_snapshot_makes_the_next_pass_read_everything(engine: Engine) -> None:
    first, second = save(engine), save(engine)
    runs = [a_run("a-1", first, 60, 50), a_run("b-1", second, 45, 40)]
    a_pass(engine, runs)
    a_pass(engine, runs)  # keeps a snapshot holding both reconciliations
    registry.unlink(
        SqlUnitOfWork(engine), SqlUnitOfWork(engine), first, "a-1", now=NOW
    )  # forgets `first`'s reconciliation: not a pass, so only the links' version says so

    early, full, held = next_read(engine)
    assert not held
    assert len(full) == 1
    assert_same(early, full)


def test_a_snapshot_of_another_format_or_damaged_is_ignored(engine: Engine) -> None:
    first, second = save(engine), save(engine)
    runs = [a_run("a-1", first, 60, 50), a_run("b-1", second, 45, 40)]
    a_pass(engine, runs)
    a_pass(engine, runs)
    with SqlUnitOfWork(engine) as uow:
        payload = uow.session.scalar(select(ObservationSnapshotRow.payload))
    assert payload is not None
    for broken in (bytes(payload)[:-8], b"\x02\x00\x00\x00{}", b"", bytes(payload) + b"x"):
        with SqlUnitOfWork(engine) as uow:
            uow.session.execute(update(ObservationSnapshotRow).values(payload=broken))
            uow.commit()
        early, full, held = next_read(engine)
        assert not held
        assert_same(early, full)


def test_a_snapshot_read_from_later_than_asked_is_not_used(engine: Engine) -> None:
    """A read from further back than the snapshot holds (a longer half-life configured since)
    reads everything; so does one at other links' version."""
    first = save(engine)
    a_pass(engine, [a_run("a-1", first, 60, 50)])
    a_pass(engine, [a_run("a-1", first, 60, 50)])
    with SqlUnitOfWork(engine) as uow:
        version = uow.links.version()
        stored = snapshots.load(uow.session, version, SINCE)
        assert stored is not None and stored.since is not None
        since = stored.since
        assert snapshots.load(uow.session, version, since) is not None
        assert snapshots.load(uow.session, version, since - timedelta(seconds=1)) is None
        assert snapshots.load(uow.session, version, None) is None
        assert snapshots.load(uow.session, version + 1, since) is None
