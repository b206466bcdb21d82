"""Schema management through Alembic: upgrade, current revision and the head check that
commands run before touching the database. The migration tree is `migrations/` beside the
package (or RECKON_MIGRATIONS_DIR when installed elsewhere)."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from service.db.engine import database_errors, safe_url
from service.domain import UnavailableError


def migrations_dir() -> Path:
    configured = os.environ.get("RECKON_MIGRATIONS_DIR")
    path = Path(configured) if configured else Path(__file__).resolve().parents[2] / "migrations"
    if not (path / "env.py").is_file():
        raise UnavailableError(f"migration scripts not found at {path}; set RECKON_MIGRATIONS_DIR")
    return path


def alembic_config(engine: Engine) -> Config:
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    config.attributes["engine"] = engine
    return config


def head_revision(engine: Engine) -> str:
    head = ScriptDirectory.from_config(alembic_config(engine)).get_current_head()
    assert head is not None, "the migration tree has no head"
    return head


def current_revision(engine: Engine) -> str | None:
    with database_errors(engine), engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    with database_errors(engine):
        command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str) -> None:
    with database_errors(engine):
        command.downgrade(alembic_config(engine), revision)


def ensure_schema(engine: Engine) -> None:
    """Make sure the schema is at head before a command uses it. The embedded SQLite
    database upgrades itself (a newcomer needs no extra step); a server database is shared,
    so its upgrade is a deliberate `reckon db upgrade`, never a side effect."""
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
