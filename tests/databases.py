"""Real databases for tests: SQLite always, PostgreSQL when RECKON_TEST_DATABASE_URL is set.

Each PostgreSQL use gets its own schema (search_path in the URL), so runs never collide
and nothing else in the `test` database is touched. Schemas are built by Alembic, never
by create_all."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_ENV = "RECKON_TEST_DATABASE_URL"
DIALECTS = ("sqlite", "postgresql")


def postgres_base_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


@contextmanager
def empty_database(dialect: str, tmp_dir: Path, base_url: str | None = None) -> Iterator[str]:
    """The URL of a new, empty database of this dialect, removed afterwards; PostgreSQL is
    a fresh schema in `base_url` (default: RECKON_TEST_DATABASE_URL)."""
    if dialect == "sqlite":
        yield f"sqlite:///{tmp_dir / f'reckon-{uuid.uuid4().hex[:8]}.db'}"
        return
    base = base_url or postgres_base_url()
    assert base is not None
    schema = f"reckon_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(make_url(base).set(drivername="postgresql+psycopg"))
    with admin.begin() as connection:
        connection.execute(text(f'CREATE SCHEMA "{schema}"'))
    separator = "&" if "?" in base else "?"
    try:
        yield f"{base}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with admin.begin() as connection:
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
