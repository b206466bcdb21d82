"""INSERT ... ON CONFLICT DO UPDATE for both dialects: what makes re-running a pass write
the same rows instead of duplicates."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Select, Table, delete
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import DeclarativeBase, Session

from service.adapters.db.sets import among


def upsert(
    session: Session,
    model: type[DeclarativeBase],
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    update: Sequence[str],
) -> None:
    if not rows:
        return
    # PostgreSQL refuses one statement that touches a row twice: the last copy wins.
    rows = list({tuple(row[key] for key in keys): row for row in rows}.values())
    # executemany: one cached statement, batched by SQLAlchemy's insertmanyvalues.
    session.execute(_on_conflict(session, _table(model), None, keys, update), rows)


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
    session.execute(_on_conflict(session, _table(model), (columns, rows), keys, update))


def replace_staged(
    session: Session,
    model: type[DeclarativeBase],
    pass_id: int,
    key: str,
    rows: Sequence[Mapping[str, Any]],
) -> None:
    """Write a pass's staged rows, replacing any it staged before under the same key (a
    run seen again, an estimate judged again). On PostgreSQL: one DELETE and one COPY,
    where executemany would run one INSERT per row; SQLite's executemany is already a
    loop in C, so there it is the plain upsert."""
    if not rows:
        return
    table = _table(model)
    if session.get_bind().dialect.name != "postgresql":
        fields = [column.name for column in table.columns if column.name not in ("pass_id", key)]
        upsert(session, model, rows, ["pass_id", key], fields)
        return
    latest = list({row[key]: row for row in rows}.values())
    session.execute(
        delete(table).where(
            table.c.pass_id == pass_id, among(session, table.c[key], [row[key] for row in latest])
        )
    )
    columns = [column.name for column in table.columns]
    raw = session.connection().connection.dbapi_connection
    assert raw is not None
    with raw.cursor() as cursor:  # type: ignore[attr-defined]
        statement = f"COPY {table.name} ({', '.join(columns)}) FROM STDIN"
        with cursor.copy(statement) as copy:
            for row in latest:
                copy.write_row([row[name] for name in columns])


def _table(model: type[DeclarativeBase]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _on_conflict(
    session: Session,
    table: Table,
    source: tuple[Sequence[str], Select[Any]] | None,
    keys: Sequence[str],
    update: Sequence[str],
) -> Any:
    """The dialect's INSERT (of VALUES, or of `source`'s SELECT into its columns) that
    updates `update` on a key conflict, or skips the row when `update` is empty."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = insert(table)
    if source is not None:
        statement = statement.from_select(list(source[0]), source[1])
    if not update:
        return statement.on_conflict_do_nothing(index_elements=list(keys))
    return statement.on_conflict_do_update(
        index_elements=list(keys), set_={name: statement.excluded[name] for name in update}
    )
