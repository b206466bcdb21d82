"""Keeps reconcile passes exclusive across processes and replicas. PostgreSQL: a session
advisory lock on a connection of its own in autocommit, so no transaction stays open while
the pass talks to MLflow, and the lock dies with the process. SQLite: a claim row whose
primary key is the lock and whose expiry frees it after a crash."""

from __future__ import annotations

import os
import socket
import uuid
import zlib
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, delete, insert, select, text
from sqlalchemy.exc import IntegrityError

from service.db.engine import database_errors
from service.db.tables import PassClaimRow

LOCK_NAME = "reckon.reconcile"
CLAIM_TTL = timedelta(hours=2)


def _holder() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class PostgresAdvisoryLock:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._connection: Connection | None = None
        self._key = 0

    def acquire(self) -> bool:
        with database_errors(self._engine):
            connection = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            # Advisory locks are per database; key on the schema too so that deployments
            # (or test runs) in different schemas of one database do not block each other.
            schema = connection.scalar(text("SELECT current_schema()")) or "public"
            self._key = zlib.crc32(f"{LOCK_NAME}:{schema}".encode())
            got = connection.scalar(text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key})
        if not got:
            connection.close()
            return False
        self._connection = connection
        return True

    def release(self) -> None:
        if self._connection is None:
            return
        try:
            self._connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": self._key})
        finally:
            self._connection.close()  # closing alone would also free a session lock
            self._connection = None


class SqliteClaimLock:
    def __init__(self, engine: Engine, ttl: timedelta = CLAIM_TTL) -> None:
        self._engine = engine
        self._ttl = ttl
        self._holder = _holder()

    def acquire(self) -> bool:
        now = datetime.now(UTC)
        with database_errors(self._engine), self._engine.begin() as connection:
            connection.execute(
                delete(PassClaimRow).where(
                    PassClaimRow.name == LOCK_NAME, PassClaimRow.expires_at < now
                )
            )
            try:
                with connection.begin_nested():
                    connection.execute(
                        insert(PassClaimRow).values(
                            name=LOCK_NAME,
                            holder=self._holder,
                            claimed_at=now,
                            expires_at=now + self._ttl,
                        )
                    )
            except IntegrityError:
                return False
            holder = connection.scalar(
                select(PassClaimRow.holder).where(PassClaimRow.name == LOCK_NAME)
            )
        return holder == self._holder

    def release(self) -> None:
        with database_errors(self._engine), self._engine.begin() as connection:
            connection.execute(
                delete(PassClaimRow).where(
                    PassClaimRow.name == LOCK_NAME, PassClaimRow.holder == self._holder
                )
            )


def pass_lock(engine: Engine) -> PostgresAdvisoryLock | SqliteClaimLock:
    if engine.dialect.name == "postgresql":
        return PostgresAdvisoryLock(engine)
    return SqliteClaimLock(engine)
