"""Schema management through Alembic: upgrade, current revision and the head check that
commands run before touching the database. The migration tree ships inside the package
(`service/migrations/`), so a wheel install migrates exactly as a checkout does. Reading a
SQLite file that does not exist creates nothing: only writes create the embedded database."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from service.db.engine import database_errors, safe_url, sqlite_file
from service.domain import NoDatabaseYet, UnavailableError

MIGRATIONS_DIR = Path(__file__).resolve().parents[1] / "migrations"


def migrations_dir() -> Path:
    if not (MIGRATIONS_DIR / "env.py").is_file():  # a broken install, not a user's mistake
        raise UnavailableError(f"migration scripts not found at {MIGRATIONS_DIR}; reinstall reckon")
    return MIGRATIONS_DIR


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


def require_database(engine: Engine) -> None:
    """For commands that only read: a missing SQLite file is a NoDatabaseYet (not found), and
    is not created (connecting would create an empty file as a side effect of looking)."""
    if not database_exists(engine):
        raise NoDatabaseYet(
            f"no database yet at {sqlite_file(engine.url)}: nothing has been saved; "
            "`reckon estimate --save` or `reckon db upgrade` creates it"
        )


def current_revision(engine: Engine) -> str | None:
    """The schema revision, None for an empty database or a SQLite file not created yet
    (which this does not create)."""
    if not database_exists(engine):
        return None
    with database_errors(engine), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    with database_errors(engine):
        command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with database_errors(engine):
        command.downgrade(alembic_config(engine), revision)


def ensure_schema(engine: Engine, *, create: bool = True) -> None:
    """Make sure the schema is at head before a command uses it. The embedded SQLite
    database upgrades itself (a newcomer needs no extra step); a server database is shared,
    so its upgrade is a deliberate `reckon db upgrade`, never a side effect. With
    `create=False` (a read) a SQLite file that does not exist is a NoDatabaseYet instead."""
    if not create:
        require_database(engine)
    current = current_revision(engine)
    head = head_revision(engine)
    if current == head:
        return
    if engine.dialect.name == "sqlite":
        upgrade(engine)
        return
    state = "empty" if current is None else f"at revision {current}, head is {head}"
    raise UnavailableError(
        f"database {safe_url(engine.url)} schema is {state}; run `reckon db upgrade`"
    )
