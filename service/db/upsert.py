"""INSERT ... ON CONFLICT DO UPDATE for both dialects: what makes re-running a pass write
the same rows instead of duplicates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Session


def upsert(
    session: Session,
    model: type[DeclarativeBase],
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    update: Sequence[str],
) -> None:
    if not rows:
        return
    table = model.__table__
    assert isinstance(table, Table)
    # PostgreSQL refuses one statement that touches a row twice: the last copy wins.
    rows = list({tuple(row[key] for key in keys): row for row in rows}.values())
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table)
    if update:
        statement = statement.on_conflict_do_update(
            index_elements=list(keys), set_={name: statement.excluded[name] for name in update}
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=list(keys))
    # executemany: one cached statement, batched by SQLAlchemy's insertmanyvalues.
    session.execute(statement, rows)


def upsert_from(
    session: Session,
    model: type[DeclarativeBase],
    columns: Sequence[str],
    rows: Select[Any],
    keys: Sequence[str],
    update: Sequence[str],
) -> None:
    """INSERT INTO model (columns) SELECT ... ON CONFLICT: set-based, one statement however
    many rows (the pass's final copy out of its staging tables). `rows` must select unique
    keys (PostgreSQL refuses a statement that touches a row twice) and have a WHERE clause
    (SQLite's parser needs one before ON CONFLICT)."""
    table = model.__table__
    assert isinstance(table, Table)
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table).from_select(list(columns), rows)
    if update:
        statement = statement.on_conflict_do_update(
            index_elements=list(keys), set_={name: statement.excluded[name] for name in update}
        )
    else:
        statement = statement.on_conflict_do_nothing(index_elements=list(keys))
    session.execute(statement)
