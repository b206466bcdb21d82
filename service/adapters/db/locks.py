"""Keeps reconcile passes exclusive across processes and replicas, and heals after a crash.

PostgreSQL: a session advisory lock on a connection of its own in autocommit, so no
transaction stays open while the pass talks to MLflow, and the lock dies with the process.
If that connection drops mid-pass (a restart, `idle_session_timeout`), `confirm()` takes the
lock again before the final write, or reports it lost when another pass has it by then, so
two passes never commit side by side; releasing a lock whose connection is gone is quiet.

SQLite: a claim row whose primary key is the lock. It names its holder (host, pid, token):
a holder on this host whose process is gone is taken over at once, and `confirm()` renews
the claim (a heartbeat), so a holder elsewhere that stops renewing frees it when the
claim expires."""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
import zlib
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from service.adapters.db.engine import database_errors
from service.adapters.db.tables import PassClaimRow

log = logging.getLogger(__name__)

LOCK_NAME = "reckon.reconcile"
# The forecast job's own lock (service.usecases.forecast): a different advisory key and
# claim row, so a forecast never waits on, blocks or takes the nightly pass's lock.
FORECAST_LOCK_NAME = "reckon.forecast"
# A live pass renews its claim after every page it stages; one that stops for this long
# (its host is gone) is presumed dead.
CLAIM_TTL = timedelta(minutes=15)

# Claim tokens held by lock objects of this process: a claim naming this pid but a token not
# in here belongs to an earlier process that had the same pid (a restarted container).
_HELD_HERE: set[str] = set()
_HELD_GUARD = threading.Lock()


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def holder_is_dead(holder: str) -> bool:
    """Whether the process named by a claim's holder is certainly gone. Only a holder on
    this host can be checked; one elsewhere is alive until its claim expires."""
    parts = holder.rsplit(":", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return False
    host, pid_text, _token = parts
    if host != socket.gethostname():
        return False
    pid = int(pid_text)
    if pid == os.getpid():
        with _HELD_GUARD:
            return holder not in _HELD_HERE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, owned by someone else
        return False
    return False


class PostgresAdvisoryLock:
    def __init__(self, engine: Engine, name: str = LOCK_NAME) -> None:
        self._engine = engine
        self._name = name
        self._connection: Connection | None = None
        self._key = 0
        self.holder: str | None = None

    def acquire(self) -> bool:
        with database_errors(self._engine):
            connection = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            try:
                # Advisory locks are per database; key on the schema too so that deployments
                # (or test runs) in different schemas of one database do not block each other.
                schema = connection.scalar(text("SELECT current_schema()")) or "public"
                self._key = zlib.crc32(f"{self._name}:{schema}".encode())
                got = connection.scalar(
                    text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}
                )
                if not got:
                    self.holder = self._current_holder(connection)
            except BaseException:
                connection.close()
                raise
        if not got:
            connection.close()
            return False
        self._connection = connection
        return True

    def confirm(self) -> bool:
        """Still ours: the lock connection answers, or (it dropped) the lock is free and
        taken again on a new one."""
        if self._connection is None:
            return False
        try:
            with database_errors(self._engine):
                self._connection.scalar(text("SELECT 1"))
            return True
        except Exception as error:
            log.warning("reconcile lock connection lost (%s); taking the lock again", error)
            self._close_quietly()
        try:
            return self.acquire()
        except Exception as error:
            log.warning("cannot take the reconcile lock again: %s", error)
            return False

    def release(self) -> None:
        if self._connection is None:
            return
        try:
            self._connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        except Exception:
            # The connection is gone, and a session lock goes with its session.
            log.info("reconcile lock connection already closed; the lock went with it")
        finally:
            self._close_quietly()

    def _close_quietly(self) -> None:
        connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.close()
        except Exception:
            connection.invalidate()

    def _current_holder(self, connection: Connection) -> str | None:
        row = connection.execute(
            text(
                "SELECT a.pid, a.client_addr, a.application_name FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                "AND l.granted AND l.objid = (:key)::bigint & 4294967295 LIMIT 1"
            ),
            {"key": self._key},
        ).first()
        return None if row is None else f"PostgreSQL backend {row.pid}"


class SqliteClaimLock:
    def __init__(self, engine: Engine, ttl: timedelta = CLAIM_TTL, name: str = LOCK_NAME) -> None:
        self._engine = engine
        self._name = name
        self._ttl = ttl
        self._holder = _holder()
        self.holder: str | None = None

    def acquire(self) -> bool:
        # Marked held before the claim is visible, so another lock object of this process
        # never mistakes the new claim for a dead process's.
        with _HELD_GUARD:
            _HELD_HERE.add(self._holder)
        try:
            got = self._claim()
        except BaseException:
            got = False
            raise
        finally:
            if not got:
                with _HELD_GUARD:
                    _HELD_HERE.discard(self._holder)
        return got

    def _claim(self) -> bool:
        now = datetime.now(UTC)
        with database_errors(self._engine), self._engine.begin() as connection:
            connection.execute(
                delete(PassClaimRow).where(
                    PassClaimRow.name == self._name, PassClaimRow.expires_at < now
                )
            )
            current = connection.scalar(
                select(PassClaimRow.holder).where(PassClaimRow.name == self._name)
            )
            if current is not None and current != self._holder and holder_is_dead(current):
                log.warning("taking over the reconcile claim of %s: its process is gone", current)
                connection.execute(
                    delete(PassClaimRow).where(
                        PassClaimRow.name == self._name, PassClaimRow.holder == current
                    )
                )
            try:
                with connection.begin_nested():
                    connection.execute(
                        insert(PassClaimRow).values(
                            name=self._name,
                            holder=self._holder,
                            claimed_at=now,
                            expires_at=now + self._ttl,
                        )
                    )
            except IntegrityError:
                self.holder = connection.scalar(
                    select(PassClaimRow.holder).where(PassClaimRow.name == self._name)
                )
                return False
        return True

    def confirm(self) -> bool:
        """Renew the claim (the heartbeat); False when it is no longer ours."""
        now = datetime.now(UTC)
        with database_errors(self._engine), self._engine.begin() as connection:
            renewed = connection.execute(
                update(PassClaimRow)
                .where(PassClaimRow.name == self._name, PassClaimRow.holder == self._holder)
                .values(expires_at=now + self._ttl)
            )
        return bool(renewed.rowcount == 1)

    def release(self) -> None:
        with _HELD_GUARD:
            _HELD_HERE.discard(self._holder)
        try:
            with database_errors(self._engine), self._engine.begin() as connection:
                connection.execute(
                    delete(PassClaimRow).where(
                        PassClaimRow.name == self._name, PassClaimRow.holder == self._holder
                    )
                )
        except Exception as error:
            # The claim expires on its own; the next pass also sees this process is gone.
            log.warning("could not release the reconcile claim: %s", error)


def pass_lock(engine: Engine, name: str = LOCK_NAME) -> PostgresAdvisoryLock | SqliteClaimLock:
    """The nightly pass's lock, or with `name` another job's (FORECAST_LOCK_NAME)."""
    if engine.dialect.name == "postgresql":
        return PostgresAdvisoryLock(engine, name)
    return SqliteClaimLock(engine, name=name)
