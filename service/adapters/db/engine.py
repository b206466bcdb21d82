"""Engines from URLs: the psycopg 3 driver for PostgreSQL, foreign keys and a busy timeout
on SQLite, and one-line errors that never show a password."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import (
    ArgumentError,
    DatabaseError,
    DataError,
    DBAPIError,
    InterfaceError,
    InternalError,
    NoSuchModuleError,
    OperationalError,
    StatementError,
)

from service.domain.errors import InputError, ReckonError, UnavailableError

SQLITE_BUSY_TIMEOUT_SECONDS = 30


def parse_url(url: str) -> URL:
    """A validated SQLAlchemy URL; `postgresql://` and `postgres://` mean psycopg 3."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InputError(
            "malformed database URL in RECKON_DATABASE_URL; expected e.g. "
            "sqlite:///reckon.db or postgresql+psycopg://user@host:5432/db"
        ) from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InputError(
            f"unsupported database {safe_url(parsed)}; use sqlite or postgresql+psycopg"
        )
    return parsed


def safe_url(url: URL | str) -> str:
    parsed = url if isinstance(url, URL) else make_url(url)
    return parsed.render_as_string(hide_password=True)


def sqlite_file(url: URL) -> Path | None:
    """The file a SQLite URL names (relative to the working directory, as SQLite opens it),
    or None for an in-memory database or another dialect."""
    if url.get_backend_name() != "sqlite":
        return None
    database = url.database or ""
    if database.startswith("file:"):  # a URI filename (`?uri=true`): drop its own query
        database = database.removeprefix("file:").split("?", 1)[0]
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    return Path(database)


def make_engine(url: str, **options: Any) -> Engine:
    parsed = parse_url(url)
    try:
        if parsed.get_backend_name() == "sqlite":
            engine = create_engine(
                parsed, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_SECONDS}, **options
            )
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(
                parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10}, **options
            )
    except NoSuchModuleError:
        raise InputError(f"no driver for {safe_url(parsed)}") from None
    return engine


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    """Foreign keys on. A migrated file is in write-ahead-log mode (`migrate.upgrade` sets
    it once): readers (the API, the dashboard) never block the pass's writes nor it
    theirs, and with `synchronous=NORMAL` a commit appends to the log without an fsync. A
    killed process loses nothing committed; a power cut may undo the last commits, each
    whole (a pass then simply runs again). NORMAL is set only in WAL mode, where it cannot
    corrupt the file. WAL needs a local disk, as SQLite does anyway."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA foreign_keys=ON")
    mode = cursor.execute("PRAGMA journal_mode").fetchone()
    if mode is not None and str(mode[0]).lower() == "wal":
        cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def translate_error(engine: Engine, error: BaseException) -> ReckonError | None:
    """The one-line domain error for a driver failure (password-free URL), else None (a
    programming error, kept as it is). The database being unreachable, locked, corrupt or
    not a database at all is UnavailableError; a value the column cannot hold (out of
    range, NUL byte) that got past validation is InputError."""
    if isinstance(error, (DataError, OverflowError)) or (
        # SQLite raises a bare OverflowError for an int beyond 64 bits.
        isinstance(error, StatementError) and isinstance(error.orig, OverflowError)
    ):
        return InputError(f"a value does not fit the database: {_first_line(error)}")
    if (
        isinstance(error, (OperationalError, InterfaceError, InternalError))
        or type(error) is DatabaseError  # e.g. SQLite "file is not a database"
        or (isinstance(error, DBAPIError) and error.connection_invalidated)
    ):
        reason = _first_line(error) or "connection failed"
        return UnavailableError(f"cannot use database {safe_url(engine.url)}: {reason}")
    return None


def _first_line(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error).strip()
    return text.splitlines()[0] if text else ""


@contextmanager
def database_errors(engine: Engine) -> Iterator[None]:
    """Turn driver failures into one UnavailableError line naming the (password-free) URL."""
    try:
        yield
    except StatementError as error:
        translated = translate_error(engine, error)
        if translated is None:
            raise
        raise translated from None


def check_integrity(engine: Engine) -> None:
    """Raise UnavailableError when the database's own check finds it damaged. SQLite:
    `PRAGMA quick_check` (reads every page; seconds on a large file, so callers run it in
    the background); PostgreSQL verifies each page as it reads it, so there is no separate
    check to run."""
    if engine.dialect.name != "sqlite":
        return
    with database_errors(engine), engine.connect() as connection:
        rows = [str(row[0]) for row in connection.exec_driver_sql("PRAGMA quick_check(3)")]
    if rows != ["ok"]:
        detail = " ".join("; ".join(rows).split())[:200]
        raise UnavailableError(f"database {safe_url(engine.url)} is damaged: {detail}")
