"""The migration tree is the only source of the schema: one head, up and down cleanly, and
exactly what the models describe, on SQLite and PostgreSQL."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, inspect, text

from service.adapters.db import migrate
from service.adapters.db.engine import make_engine, sqlite_file
from service.adapters.db.tables import Base
from service.domain.errors import NotFoundError
from tests.databases import empty_database

VERSIONS = migrate.migrations_dir() / "versions"


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


def test_a_checkout_migrates_from_the_top_level_tree() -> None:
    import service

    checkout = Path(service.__file__).resolve().parents[1]

    assert migrate.migrations_dir() == checkout / "migrations"
    assert sorted(VERSIONS.glob("*.py"))


# --- reads and writes of the embedded SQLite file ---------------------------------------------


@pytest.fixture
def missing_sqlite(tmp_path: Path) -> Iterator[tuple[Engine, Path]]:
    path = tmp_path / "nothing-saved-yet.db"
    engine = make_engine(f"sqlite:///{path}")
    yield engine, path
    engine.dispose()


def test_a_read_of_a_missing_sqlite_file_says_so_and_creates_nothing(
    missing_sqlite: tuple[Engine, Path],
) -> None:
    engine, path = missing_sqlite

    with pytest.raises(NotFoundError) as raised:
        migrate.ensure_schema(engine, create=False)

    message = str(raised.value)
    assert "no database yet" in message and str(path) in message
    assert "\n" not in message
    assert not path.exists()


def test_the_current_revision_of_a_missing_sqlite_file_is_none_and_creates_nothing(
    missing_sqlite: tuple[Engine, Path],
) -> None:
    engine, path = missing_sqlite

    revision = migrate.current_revision(engine)

    assert revision is None
    assert not path.exists()


def test_a_write_creates_and_migrates_the_missing_sqlite_file(
    missing_sqlite: tuple[Engine, Path],
) -> None:
    engine, path = missing_sqlite

    migrate.ensure_schema(engine)

    assert path.exists()
    assert migrate.current_revision(engine) == migrate.head_revision(engine)


def test_a_read_of_an_existing_sqlite_file_at_an_old_revision_upgrades_it(
    missing_sqlite: tuple[Engine, Path],
) -> None:
    engine, _path = missing_sqlite
    first = ScriptDirectory.from_config(migrate.alembic_config(engine)).get_base()
    assert isinstance(first, str)
    migrate.upgrade(engine, first)

    migrate.ensure_schema(engine, create=False)

    assert migrate.current_revision(engine) == migrate.head_revision(engine)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("sqlite:///reckon.db", Path("reckon.db")),
        ("sqlite:////var/lib/reckon/reckon.db", Path("/var/lib/reckon/reckon.db")),
        ("sqlite:///file:reckon.db?mode=rw&uri=true", Path("reckon.db")),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("postgresql+psycopg://reckon@db:5432/reckon", None),
    ],
)
def test_only_a_file_backed_sqlite_url_names_a_file(url: str, expected: Path | None) -> None:
    engine = make_engine(url)

    assert sqlite_file(engine.url) == expected


def _row(engine: Engine, table: str, given: dict[str, object]) -> dict[str, object]:
    """`given`, plus a plain value for every other NOT NULL column without a default."""
    fillers = {"INTEGER": 1, "FLOAT": 1.0, "DOUBLE": 1.0, "BOOLEAN": False}
    row = dict(given)
    for column in inspect(engine).get_columns(table):
        name, kind = column["name"], str(column["type"]).split("(")[0].upper()
        if name in row or column["nullable"] or column.get("default") is not None:
            continue
        if column.get("autoincrement") is True and name == "id":
            continue
        if "TIME" in kind or "DATE" in kind:
            row[name] = datetime(2026, 11, 1, tzinfo=UTC)
        else:
            row[name] = fillers.get(kind.replace(" PRECISION", ""), "x")
    return row


def test_0010_gives_stored_reconciliations_their_estimates_plan(empty_engine: Engine) -> None:
    migrate.upgrade(empty_engine, "0009")
    estimate = _row(empty_engine, "estimate", {
        "id": "e1", "kind": "computed", "gpu": "h100-sxm", "gpus": 64, "precision": "bf16",
        "params": 7e9, "tokens": 1e12,
    })  # fmt: skip
    result = _row(empty_engine, "reconciliation", {"estimate_id": "e1", "run_ids": "r1"})
    with empty_engine.begin() as connection:
        for table, row in (("estimate", estimate), ("reconciliation", result)):
            names = ", ".join(row)
            marks = ", ".join(f":{name}" for name in row)
            connection.execute(text(f"INSERT INTO {table} ({names}) VALUES ({marks})"), row)

    migrate.upgrade(empty_engine)

    with empty_engine.connect() as connection:
        stored = connection.execute(
            text(
                "SELECT planned_gpus, planned_tokens, planned_precision, params, observed_gpus, "
                "config_check FROM reconciliation"
            )
        ).one()
    assert tuple(stored) == (64, 1e12, "bf16", 7e9, None, None)
