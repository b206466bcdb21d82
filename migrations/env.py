"""Alembic environment: one tree for SQLite and PostgreSQL, batch mode so SQLite can alter
tables. Reckon passes its engine in `config.attributes`; the bare `alembic` command falls
back to RECKON_DATABASE_URL."""

from __future__ import annotations

import os
from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Engine

from service.adapters.db.columns import UtcDateTime
from service.adapters.db.engine import make_engine
from service.adapters.db.tables import Base

config = context.config
target_metadata = Base.metadata


def _engine() -> Engine:
    engine = config.attributes.get("engine")
    if isinstance(engine, Engine):
        return engine
    return make_engine(os.environ.get("RECKON_DATABASE_URL", "sqlite:///reckon.db"))


def render_item(type_: str, obj: Any, autogen_context: AutogenContext) -> str | Literal[False]:
    """Revisions must not import `service`: render our UTC column as a plain DateTime."""
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def run_migrations_offline() -> None:
    context.configure(
        url=_engine().url.render_as_string(hide_password=False),
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=True,
        render_item=render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    with _engine().connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            render_as_batch=True,
            compare_type=True,
            render_item=render_item,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
