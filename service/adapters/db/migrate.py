"""Schema management through Alembic: upgrade, current revision and the head check that
commands run before touching the database. The migration tree is `migrations/` at the top
of a checkout and ships inside the package as `service/migrations/` (the wheel's package-dir
mapping), so a wheel install migrates exactly as a checkout does. Reading a
SQLite file that does not exist creates nothing: only writes create the embedded database."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util.exc import CommandError
from sqlalchemy import Engine

from service.adapters.db.engine import database_errors, safe_url, sqlite_file
from service.domain.errors import InputError, NoDatabaseYet, UnavailableError

_PACKAGE = Path(__file__).resolve().parents[2]  # service/
# installed: service/migrations/; a checkout (editable or not): migrations/ beside service/
_CANDIDATES = (_PACKAGE / "migrations", _PACKAGE.parent / "migrations")


def migrations_dir() -> Path:
    for candidate in _CANDIDATES:
        if (candidate / "env.py").is_file():
            return candidate
    # a broken install, not a user's mistake
    raise UnavailableError(f"migration scripts not found at {_CANDIDATES[0]}; reinstall reckon")


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["engine"] = engine
    return config


def head_revision(engine: Engine) -> str:
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    assert head is not None, "the migration tree has no head"
    return head


def database_exists(engine: Engine) -> bool:
    """False only for a SQLite file that is not there yet (a server database is assumed to
    exist; connecting to it says otherwise)."""
    path = sqlite_file(engine.url)
    return path is None or path.exists()


def require_folder(engine: Engine) -> None:
    """A SQLite file can only be made in a folder that exists: name the missing folder (the
    driver's own word is "unable to open database file", and opening it to lock it would
    raise FileNotFoundError)."""
    path = sqlite_file(engine.url)
    if path is not None and not path.parent.is_dir():
        raise InputError(
            f"the folder {path.parent} of the SQLite database {path.name} does not exist; "
            "create it, or set RECKON_DATABASE_URL to a file in a folder that exists"
        )


def require_database(engine: Engine) -> None:
    """For commands that only read: a missing SQLite file is a NoDatabaseYet (not found), and
    is not created (connecting would create an empty file as a side effect of looking)."""
    require_folder(engine)
    path = sqlite_file(engine.url)
    if path is not None and not path.exists():  # database_exists, with the path kept
        where = str(path.absolute())
        raise NoDatabaseYet(
            f"no database yet at {where}: nothing has been saved; "
            "`reckon estimate --save` or `reckon db upgrade` creates it",
            where,
        )


def current_revision(engine: Engine) -> str | None:
    """The schema revision, None for an empty database or a SQLite file not created yet
    (which this does not create)."""
    if not database_exists(engine):
        return None
    with database_errors(engine), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    require_folder(engine)
    _refuse_newer(engine, current_revision(engine), head_revision(engine))
    with database_errors(engine), _alembic_errors(engine):
        command.upgrade(alembic_config(engine), revision)
        if engine.dialect.name == "sqlite":
            # Write-ahead logging (see engine._sqlite_pragmas) is a property of the file:
            # set once here, by the one process that upgrades it, never raced on connect.
            with engine.connect() as connection:
                connection.exec_driver_sql("PRAGMA journal_mode=WAL")


def downgrade(engine: Engine, revision: str) -> None:
    with database_errors(engine), _alembic_errors(engine):
        command.downgrade(alembic_config(engine), revision)


def _refuse_newer(engine: Engine, current: str | None, head: str) -> None:
    if current is not None and current not in known_revisions(engine):
        raise UnavailableError(
            f"database {safe_url(engine.url)} schema is at revision {current}, newer than "
            f"this Reckon (head {head}); upgrade Reckon"
        )


@contextmanager
def _alembic_errors(engine: Engine) -> Iterator[None]:
    try:
        yield
    except CommandError as error:
        reason = " ".join(str(error).split())
        raise UnavailableError(f"cannot migrate {safe_url(engine.url)}: {reason}") from None


@contextmanager
def _sqlite_upgrade_turn(engine: Engine) -> Iterator[None]:
    """Hold an exclusive flock on the database file while upgrading it (SQLite's own locks
    are byte-range locks, which flock does not touch), so that processes opening a new
    file at once migrate it one after another instead of racing on CREATE TABLE."""
    database = engine.url.database
    if not database or database == ":memory:" or database.startswith("file:"):
        yield
        return
    with open(database, "ab") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def known_revisions(engine: Engine) -> set[str]:
    script = ScriptDirectory.from_config(alembic_config(engine))
    return {revision.revision for revision in script.walk_revisions()}


def ensure_schema(engine: Engine, *, create: bool = True) -> None:
    """Make sure the schema is at head before a command uses it. The embedded SQLite
    database upgrades itself (a newcomer needs no extra step; processes starting together
    take turns); a server database is shared, so its upgrade is a deliberate
    `reckon db upgrade`, never a side effect. A schema newer than this code is refused.
    With `create=False` (a read) a SQLite file that does not exist is a NoDatabaseYet."""
    if create:
        require_folder(engine)
    else:
        require_database(engine)
    current = current_revision(engine)
    head = head_revision(engine)
    if current == head:
        return
    _refuse_newer(engine, current, head)
    if engine.dialect.name == "sqlite":
        with _sqlite_upgrade_turn(engine):
            current = current_revision(engine)  # another process may have just done it
            if current != head:
                upgrade(engine)
        return
    state = "empty" if current is None else f"at revision {current}, head is {head}"
    raise UnavailableError(
        f"database {safe_url(engine.url)} schema is {state}; run `reckon db upgrade`"
    )
