"""Faults that must heal by themselves (issue 10 #3, #4, #5): tags owed during an outage
are written by a later pass, a claim left by a dead process is taken over, a pass left
'running' by a dead process is marked abandoned, a dropped PostgreSQL lock connection
neither raises nor lets a second pass commit beside the first."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, insert, select, text

from service.adapters.db import locks
from service.adapters.db.tables import PassClaimRow, ReconcilePassRow, TagOutboxRow
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.bootstrap import SystemClock
from service.domain.errors import ConflictError, UnavailableError
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.nightly.write_back import WRITE_BACK_THREADS, owed_tags
from service.usecases.results.loop import PassOutcome
from tests.fakes import FakeRunSource
from tests.fault.test_bad_data import a_run, save

HOST = socket.gethostname()


def run_once(engine: Engine, source: FakeRunSource, **options: object) -> PassOutcome:
    return run_pass(
        SqlUnitOfWork(engine),
        source,
        locks.pass_lock(engine),
        SystemClock(),
        PassOptions(**options),  # type: ignore[arg-type]
    )


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


class TagsDown(FakeRunSource):
    """Runs can be read, but every tag write fails slowly, as a server going down would."""

    tags_down = True

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        if self.tags_down:
            self.tag_calls += 1
            time.sleep(0.05)  # calls in flight overlap
            raise UnavailableError("MLflow at http://fake: cannot connect")
        super().set_tags(run_id, tags)


def test_tags_owed_during_an_outage_are_written_by_a_later_pass(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    ids = [save(engine) for _ in range(40)]
    source = TagsDown([a_run(f"run-{i}", estimate_id) for i, estimate_id in enumerate(ids)])
    with caplog.at_level(logging.WARNING):
        first = run_once(engine, source)

    assert len(first.reconciled) == 40 and first.tags_written == 0
    assert first.tags_pending == 40
    assert source.tag_calls <= WRITE_BACK_THREADS  # one bounded wait, not one per run
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "40 tags pending" in warnings[0].getMessage()

    source.tags_down = False
    second = run_once(engine, source)  # nothing new to reconcile; the outbox still drains

    assert second.reconciled == [] and second.tags_written == 40 and second.tags_pending == 0
    assert set(source.tags) == {f"run-{i}" for i in range(40)}
    assert all(tags["reckon.error_pct"] for tags in source.tags.values())
    with engine.connect() as connection:
        assert connection.scalar(select(TagOutboxRow.run_id).limit(1)) is None


def test_tags_of_a_pass_killed_before_its_write_back_are_written_next_time(
    engine: Engine,
) -> None:
    estimate_id = save(engine)
    source = FakeRunSource([a_run("run-1", estimate_id)])
    run_once(engine, source, write_back=False)  # committed, tags never written...
    with SqlUnitOfWork(engine) as uow:  # ...as if killed between the commit and the tags
        uow.outbox.queue(
            owed_tags(uow.reconciliations.history()),
            pass_id=None,
            now=datetime.now(UTC),
        )
        uow.commit()

    again = run_once(engine, source, full=True)

    assert again.tags_written == 1 and "reckon.error_pct" in source.tags["run-1"]


def test_a_claim_left_by_a_dead_process_is_taken_over(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the claim row is SQLite's lock")
    now = datetime.now(UTC)
    with engine.begin() as connection:
        connection.execute(
            insert(PassClaimRow).values(
                name=locks.LOCK_NAME,
                holder=f"{HOST}:{dead_pid()}:deadbeef",
                claimed_at=now,
                expires_at=now + timedelta(hours=2),
            )
        )
        connection.execute(
            insert(ReconcilePassRow).values(
                trigger="cli", started_at=now - timedelta(minutes=5), status="running",
                runs_seen=0, reconciled=0, skipped=0,
            )
        )  # fmt: skip

    outcome = run_once(engine, FakeRunSource([a_run("run-1", save(engine))]))

    assert outcome.status == "succeeded" and len(outcome.reconciled) == 1
    with engine.connect() as connection:
        statuses = connection.execute(
            select(ReconcilePassRow.status).order_by(ReconcilePassRow.id)
        ).scalars()
        assert list(statuses) == ["abandoned", "succeeded"]


def test_a_live_holder_blocks_with_a_clear_locked_outcome(engine: Engine) -> None:
    holder = locks.pass_lock(engine)
    assert holder.acquire()
    try:
        outcome = run_once(engine, FakeRunSource())
    finally:
        holder.release()
    assert outcome.locked and outcome.summary.startswith("locked: another reconcile pass")


def test_a_claim_of_this_process_held_by_another_lock_object_is_respected(
    engine: Engine,
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the claim row is SQLite's lock")
    first, second = locks.pass_lock(engine), locks.pass_lock(engine)
    assert first.acquire()
    try:
        assert not second.acquire()  # same pid, but alive: the scheduler and an API call
    finally:
        first.release()
    assert second.acquire()
    second.release()


def _terminate_lock_backend(engine: Engine) -> None:
    """pg_terminate_backend on the connection holding THIS schema's pass lock only (the
    database is shared with other test sessions and their locks), then wait until the
    lock is gone: termination is asynchronous, and on a loaded machine the backend can
    hold the lock a while after the call returns."""
    held = (
        "FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = :key "
        "AND pid <> pg_backend_pid()"
    )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        schema = connection.scalar(text("SELECT current_schema()"))
        key = zlib.crc32(f"{locks.LOCK_NAME}:{schema}".encode())
        connection.execute(text(f"SELECT pg_terminate_backend(pid) {held}"), {"key": key})
        deadline = time.monotonic() + 10
        while connection.scalar(text(f"SELECT count(*) {held}"), {"key": key}):
            assert time.monotonic() < deadline, "the terminated backend kept the lock"
            time.sleep(0.01)


def _wait_for_a_pass_row(engine: Engine) -> None:
    deadline = time.monotonic() + 10
    with engine.connect() as connection:
        while not connection.scalar(select(ReconcilePassRow.id).limit(1)):
            assert time.monotonic() < deadline, "the pass never recorded itself"
            time.sleep(0.01)
            connection.rollback()


def test_a_dropped_lock_connection_neither_raises_nor_admits_a_second_pass(
    engine: Engine,
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("the advisory lock is PostgreSQL's")
    estimate_id = save(engine)
    rival: list[PassOutcome] = []

    class DropsTheLockMidScan(FakeRunSource):
        def terminated_runs(self, window):  # type: ignore[no-untyped-def]
            # The reader thread starts paging before the pass has recorded itself; the
            # lock is dropped mid-scan, so once the first pass's row exists.
            _wait_for_a_pass_row(engine)
            _terminate_lock_backend(engine)
            # The lock is free now: a second pass gets in and runs to completion...
            rival.append(run_once(engine, FakeRunSource([a_run("run-1", estimate_id)])))
            yield from super().terminated_runs(window)

    with pytest.raises(ConflictError, match="lock was lost"):
        run_once(engine, DropsTheLockMidScan([a_run("run-1", estimate_id)]))

    # ...and the first, finding its lock taken, commits nothing beside it.
    assert rival[0].status == "succeeded" and len(rival[0].reconciled) == 1
    with engine.connect() as connection:
        statuses = list(connection.execute(select(ReconcilePassRow.status)).scalars())
    assert sorted(statuses) == ["failed", "succeeded"]


def test_a_dropped_lock_connection_after_the_commit_is_quiet(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("the advisory lock is PostgreSQL's")
    lock = locks.pass_lock(engine)
    assert lock.acquire()
    _terminate_lock_backend(engine)
    lock.release()  # no traceback: the lock went with its session
    again = locks.pass_lock(engine)
    assert again.acquire()
    again.release()


def test_a_lock_connection_lost_while_nobody_else_runs_is_taken_again(engine: Engine) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("the advisory lock is PostgreSQL's")
    estimate_id = save(engine)

    class DropsTheLock(FakeRunSource):
        def terminated_runs(self, window):  # type: ignore[no-untyped-def]
            _terminate_lock_backend(engine)
            yield from super().terminated_runs(window)

    outcome = run_once(engine, DropsTheLock([a_run("run-1", estimate_id)]))

    assert outcome.status == "succeeded" and len(outcome.reconciled) == 1
