"""Issue 22 item 7 (server side): the history pages, sorts and searches in the database, on
SQLite and PostgreSQL, through `reckon history` and GET /v1/history."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, create_engine

from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.domain import comparison
from service.domain.records import ObservedRun
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main
from service.usecases import registry
from tests.builders import NOW, an_estimate
from tests.fakes import fake_app

# label, GPU, how long the run took against the plan (1.3: 30% longer)
RUNS = [
    ("lr sweep 1", "h100-sxm", 1.10),
    ("lr sweep 2", "h100-sxm", 1.45),
    ("ablation_50%", "a100-80gb", 0.95),
    ("7B pretraining", "a100-80gb", 1.02),
    ("lr sweep 3", "a100-80gb", 1.25),
]


def store(engine: Engine) -> dict[str, str]:
    """The RUNS, one a day (the last newest), reconciled; label -> estimate id."""
    ids, items = {}, []
    for day, (label, gpu, slower) in enumerate(RUNS):
        started = NOW + timedelta(days=day)
        saved = registry.save(SqlUnitOfWork(engine), an_estimate(gpu=gpu), now=started, label=label)
        run = ObservedRun(
            run_id=f"run-{day}", experiment_id="1", status="FINISHED", started_at=started,
            ended_at=started + timedelta(seconds=saved.predicted_wall_seconds * slower),
            estimate_id=saved.id, throughput=None,
        )  # fmt: skip
        item = comparison.reconcile(saved, [run])
        assert item is not None
        items.append(item)
        ids[label] = saved.id
    with SqlUnitOfWork(engine) as uow:
        uow.reconciliations.save_many(items, pass_id=None, now=NOW)
        uow.commit()
    return ids


def history(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    code = main(["history", *argv, "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    document: dict[str, object] = json.loads(out)
    return document


def labels(document: dict[str, object]) -> list[str]:
    rows = document["history"]
    assert isinstance(rows, list)
    return [row["label"] for row in rows]


def test_history_pages_sorts_and_searches_in_the_database(
    cli_env: str, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = create_engine(cli_env)
    try:
        store(engine)
    finally:
        engine.dispose()

    worst = history(capsys, "--sort", "worst", "--limit", "2")
    second_page = history(capsys, "--sort", "worst", "--limit", "2", "--offset", "2")
    oldest = history(capsys, "--sort", "oldest")
    sweeps = history(capsys, "--search", "SWEEP", "--sort", "best")
    literal = history(capsys, "--search", "50%")  # a LIKE wildcard matched as itself
    on_a100 = history(capsys, "--gpu", "a100-80gb", "--search", "sweep")
    code = main(["history", "--sort", "worst", "--limit", "2"])
    text, _ = capsys.readouterr()

    assert labels(worst) == ["lr sweep 2", "lr sweep 3"] and worst["total"] == 5
    assert labels(second_page) == ["lr sweep 1", "ablation_50%"]
    assert labels(oldest) == [label for label, _, _ in RUNS]
    assert labels(sweeps) == ["lr sweep 1", "lr sweep 3", "lr sweep 2"] and sweeps["total"] == 3
    assert labels(literal) == ["ablation_50%"]
    assert labels(on_a100) == ["lr sweep 3"] and on_a100["total"] == 1
    assert code == 0 and "rows 1-2 of 5 (--offset and --limit page through them)" in text


def test_the_api_pages_the_history_and_refuses_an_unknown_order() -> None:
    with TestClient(create_app(fake_app().app)) as client:
        empty = client.get("/v1/history", params={"sort": "worst", "q": "x", "offset": 3})
        unknown = client.get("/v1/history", params={"sort": "loudest"})
        long = client.get("/v1/history", params={"q": "x" * 201})
        negative = client.get("/v1/history", params={"offset": -1})

    assert empty.status_code == 200
    assert empty.json() == {
        "history": [], "total": 0, "offset": 3, "limit": None, "sort": "worst", "search": "x"
    }  # fmt: skip
    assert [r.status_code for r in (unknown, long, negative)] == [422, 422, 422]
