"""Input edges (issue 10 #7): numbers and text no column can hold, a plan that used to spin
for minutes, a corrupt or too-new database, a bad MLflow URI, processes racing to create a
new SQLite file. Each is one line on the way out, never a traceback."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.adapters.mlflow.support import from_ms
from service.domain import bounds, flops
from service.domain.errors import InputError, UnavailableError
from service.domain.records import SavedEstimate
from service.domain.values import Hardware, Model
from service.usecases import registry
from tests.builders import a_request, an_estimate
from tests.fault.entry import ROOT, reckon

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize("gpus", [2**31, 2**63, 10**400])
def test_counts_no_integer_column_holds_are_input_errors(gpus: int) -> None:
    with pytest.raises(InputError, match="gpus must be a whole number from 1 to 2147483647"):
        Hardware("a100-80gb", gpus, "bf16")
    with pytest.raises(InputError, match="layers"):
        Model(7e9, 1e12, layers=gpus, hidden_size=4096, seq_len=2048)


def external(**changes: object) -> SavedEstimate:
    values: dict[str, object] = {
        "id": registry.new_estimate_id(), "kind": "external", "created_at": NOW,
        "gpu": "a100-80gb", "gpus": 8, "precision": "bf16",
        "predicted_wall_seconds": 3600.0, "factor_source": "external",
    }  # fmt: skip
    values.update(changes)
    return SavedEstimate(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"label": "x" * 201}, "at most 200 fit"),
        ({"label": "a\x00b"}, "NUL byte"),
        ({"predicted_wall_seconds": math.inf}, "finite"),
        ({"predicted_wall_seconds": math.nan}, "finite"),
    ],
)
def test_values_no_column_holds_are_refused_before_the_write(
    engine: Engine, changes: dict[str, object], fragment: str
) -> None:
    with pytest.raises(InputError, match=fragment), SqlUnitOfWork(engine) as uow:
        uow.estimates.add(external(**changes))
        uow.commit()
    with SqlUnitOfWork(engine) as uow:
        assert uow.estimates.list() == []  # nothing half-written; and listing still works


@pytest.mark.parametrize("run_id", ["r" * 65, "ab\x00c"])
def test_run_ids_no_column_holds_are_refused_by_link(engine: Engine, run_id: str) -> None:
    saved = registry.save(SqlUnitOfWork(engine), an_estimate(), now=NOW)
    with pytest.raises(InputError, match="run id"):
        registry.link(SqlUnitOfWork(engine), SqlUnitOfWork(engine), saved.id, run_id, now=NOW)


def test_a_plan_for_an_impossible_deadline_answers_at_once() -> None:
    request = a_request(params=1e20, tokens=1e20)
    started = time.perf_counter()
    with pytest.raises(InputError, match="needs more than 2147483647 GPUs"):
        flops.plan_gpus(request, 312e12, deadline_seconds=1.0)
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize("deadline_days", [1e-3, 0.37, 1.0, 30.0, 649.0, 1e4])
def test_the_bisection_finds_the_fewest_gpus(deadline_days: float) -> None:
    request = a_request()
    plan = flops.plan_gpus(request, 312e12, deadline_seconds=deadline_days * 86400)
    assert flops._wall(request, 312e12, plan.gpus) <= plan.deadline_seconds
    assert plan.gpus == 1 or flops._wall(request, 312e12, plan.gpus - 1) > plan.deadline_seconds


def test_a_corrupt_sqlite_file_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "reckon.db"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(UnavailableError, match="file is not a database"):
        migrate.ensure_schema(make_engine(f"sqlite:///{path}"))


def test_a_schema_newer_than_the_code_is_one_line(engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    try:
        with pytest.raises(UnavailableError, match="newer than this Reckon"):
            migrate.ensure_schema(engine)
        with pytest.raises(UnavailableError, match="newer than this Reckon"):
            migrate.upgrade(engine)
    finally:
        with engine.begin() as connection:
            connection.execute(
                text("UPDATE alembic_version SET version_num = :head"),
                {"head": migrate.head_revision(engine)},
            )


@pytest.mark.parametrize(
    "uri", ["nosuch://x", "foo", "sqlite:///x.db", "http://", "http://[::1", "http://h:port"]
)
def test_a_bad_tracking_uri_is_one_line(uri: str) -> None:
    with pytest.raises(InputError, match="MLFLOW_TRACKING_URI"):
        MlflowRunSource(uri, [], "tokens_per_second")


@pytest.mark.parametrize("value", [0, -5, 2**62, None])
def test_mlflow_times_no_datetime_holds_are_missing(value: int | None) -> None:
    assert from_ms(value) is None


def test_column_bounds_match_the_tables() -> None:
    from service.adapters.db.tables import EstimateRow, MlflowRunRow, RunLinkRow, SkippedRunRow

    assert EstimateRow.__table__.c.id.type.length == bounds.ESTIMATE_ID_CHARS  # type: ignore[attr-defined]
    assert SkippedRunRow.__table__.c.estimate_id.type.length == bounds.ESTIMATE_ID_CHARS  # type: ignore[attr-defined]
    assert EstimateRow.__table__.c.label.type.length == bounds.LABEL_CHARS  # type: ignore[attr-defined]
    assert RunLinkRow.__table__.c.run_id.type.length == bounds.RUN_ID_CHARS  # type: ignore[attr-defined]
    assert MlflowRunRow.__table__.c.experiment_id.type.length == bounds.EXPERIMENT_ID_CHARS  # type: ignore[attr-defined]
    assert MlflowRunRow.__table__.c.status.type.length == bounds.STATUS_CHARS  # type: ignore[attr-defined]


_OPEN = """
import sys
from service.adapters.db import migrate
from service.adapters.db.engine import make_engine
migrate.ensure_schema(make_engine(sys.argv[1]))
"""


def test_processes_opening_a_new_sqlite_file_at_once_all_succeed(tmp_path: Path) -> None:
    failures = []
    for trial in range(3):
        url = f"sqlite:///{tmp_path / f'new-{trial}.db'}"
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _OPEN, url],
                env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        for child in children:
            _, err = child.communicate(timeout=120)
            if child.returncode != 0:
                failures.append(err.strip().splitlines()[-1:])
    assert failures == []


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "--params", "1e20", "--tokens", "1e20", "--gpu", "a100-80gb", "--deadline", "1s"],
        ["record", "--predicted", "9" * 400 + "d", "--gpu", "a100-80gb", "--gpus", "8"],
        ["record", "--predicted", "1d", "--gpu", "a100-80gb", "--gpus", str(2**63)],
        ["record", "--predicted", "1d", "--gpu", "a100-80gb", "--gpus", "8", "--label", "x" * 300],
        ["serve", "--host", "no.such.host.invalid"],
        ["serve", "--host", "10.255.255.254"],
        ["reconcile", "--since", "0001-01-01"],
        ["report", "--out", "/dev/null/x"],
        ["report", "--out", "a" * 300 + "/report.html"],
    ],
    ids=[
        "plan-huge",
        "predicted-400-nines",
        "gpus-2**63",
        "label-300",
        "serve-unknown-host",
        "serve-foreign-address",
        "since-year-1",
        "report-under-a-file",
        "report-long-name",
    ],
)
def test_the_cli_answers_bad_input_with_one_line(
    args: list[str], tmp_path: Path, database_url: str
) -> None:
    result = reckon(args, env={"RECKON_DATABASE_URL": database_url}, timeout=60)
    assert result.code != 0 and not result.traceback
    assert len(result.err.strip().splitlines()) == 1, result.err


def test_the_cli_names_a_corrupt_database_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "reckon.db"
    path.write_bytes(b"garbage" * 500)
    result = reckon(["estimates", "list"], env={"RECKON_DATABASE_URL": f"sqlite:///{path}"})
    assert result.code == 5 and not result.traceback
    assert "file is not a database" in result.err and len(result.err.splitlines()) == 1
