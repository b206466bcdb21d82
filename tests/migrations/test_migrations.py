"""The migration tree is the only source of the schema: one head, up and down cleanly, and
exactly what the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect

from service.db import migrate
from service.db.engine import make_engine
from service.db.tables import Base
from tests.databases import empty_database

VERSIONS = Path(__file__).resolve().parents[2] / "migrations" / "versions"


@pytest.fixture
def empty_engine(migrated_database_url: str, tmp_path: Path) -> Iterator[Engine]:
    """A new empty database of the same dialect as the session's migrated one."""
    dialect = make_engine(migrated_database_url).dialect.name
    with empty_database(dialect, tmp_path) as url:
        engine = make_engine(url)
        yield engine
        engine.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_the_tree_has_a_single_head(engine: Engine) -> None:
    heads = ScriptDirectory.from_config(migrate.alembic_config(engine)).get_heads()
    assert len(heads) == 1


def test_upgrade_from_empty_creates_every_model_table(empty_engine: Engine) -> None:
    assert _tables(empty_engine) == set()
    migrate.upgrade(empty_engine)
    assert _tables(empty_engine) == set(Base.metadata.tables)
    assert migrate.current_revision(empty_engine) == migrate.head_revision(empty_engine)


def test_downgrade_to_base_and_up_again(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine)
    migrate.downgrade(empty_engine, "base")
    assert _tables(empty_engine) == set()
    assert migrate.current_revision(empty_engine) is None
    migrate.upgrade(empty_engine)
    assert _tables(empty_engine) == set(Base.metadata.tables)


def test_migrated_schema_matches_the_models(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        differences = compare_metadata(context, Base.metadata)
    assert differences == []


def test_a_model_change_without_a_migration_is_detected(engine: Engine) -> None:
    from sqlalchemy import Column, Integer, MetaData, Table

    changed = MetaData(naming_convention=Base.metadata.naming_convention)
    for table in Base.metadata.tables.values():
        table.to_metadata(changed)
    Table("estimate", changed, Column("new_column", Integer), extend_existing=True)
    with engine.connect() as connection:
        differences = compare_metadata(MigrationContext.configure(connection), changed)
    assert any(diff[0] == "add_column" and diff[3].name == "new_column" for diff in differences)


@pytest.mark.parametrize("path", sorted(VERSIONS.glob("*.py")), ids=lambda p: p.name)
def test_revisions_import_nothing_from_service_and_really_downgrade(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = [
        node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
    ] + [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    ]
    assert not [name for name in imported if name.startswith("service")]
    downgrade = next(
        node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "downgrade"
    )
    assert not all(isinstance(statement, ast.Pass) for statement in downgrade.body)
