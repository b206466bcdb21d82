"""`column IN (values)` for the pass's lookups of a page's worth of ids. SQLAlchemy renders IN with
one placeholder per value, so each page's query is new SQL text: psycopg re-parses it per value
(docs/architecture.md, "Measured reasons") and PostgreSQL plans it anew. On PostgreSQL the values
go as one array parameter instead (`= ANY(...)`): the same text every time."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, String, any_, bindparam
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session


def among(session: Session, column: Any, values: Iterable[str]) -> ColumnElement[bool]:
    wanted = list(dict.fromkeys(values))
    if session.get_bind().dialect.name == "postgresql":
        array = bindparam(None, wanted, type_=ARRAY(String()))
        return column == any_(array)  # type: ignore[no-any-return]
    return column.in_(wanted)  # type: ignore[no-any-return]
