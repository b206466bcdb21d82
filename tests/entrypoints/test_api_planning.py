"""The compute-only HTTP routes (and the page and schema), over the application object with
fakes of our ports: no database and no MLflow server are needed to answer them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.app import Policy
from service.entrypoints.api.app import create_app
from tests.fakes import fake_app

SEED: dict[str, Any] = {
    "params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8,
    "precision": "bf16", "recompute": "full", "utilization": 0.4,
}  # fmt: skip


@pytest.fixture
def api() -> Iterator[TestClient]:
    with TestClient(create_app(fake_app().app)) as client:
        yield client


def test_get_estimate_computes_the_corrected_seed_example(api: TestClient) -> None:
    response = api.get("/v1/estimate", params=SEED)
    assert response.status_code == 200
    body = response.json()
    assert body["flops"] == pytest.approx(5.6e22)
    assert body["wall_seconds"] == pytest.approx(5.609e7, rel=1e-3)
    assert body["peak_flops"] == 312e12 and "649 days" in body["wall_human"]


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"gpu": "nosuchgpu"}, "unknown GPU"),
        ({"precision": "fp8"}, "no fp8"),
        ({"utilization": 1.5}, "utilization"),
        ({"params": "abc"}, "params"),
        ({"gpus": 0}, "gpus"),
        ({"recompute": "sometimes"}, "recompute"),
    ],
)
def test_bad_estimate_input_is_a_422_with_a_reason(
    api: TestClient, change: dict[str, Any], fragment: str
) -> None:
    response = api.get("/v1/estimate", params={**SEED, **change})
    assert response.status_code == 422
    assert fragment in str(response.json()["detail"])


def test_missing_required_query_parameter_is_a_422(api: TestClient) -> None:
    assert api.get("/v1/estimate", params={"params": "7e9"}).status_code == 422


def test_dashboard_and_openapi_are_served(api: TestClient) -> None:
    page = api.get("/")
    assert page.status_code == 200 and "<html" in page.text.lower()
    paths = api.get("/openapi.json").json()["paths"]
    for route in ("/v1/estimate", "/v1/estimates", "/v1/history", "/v1/reconcile", "/healthz"):
        assert route in paths


def test_a_saved_estimate_round_trips_with_the_same_fields(api: TestClient) -> None:
    created = api.post("/v1/estimates", json={**SEED, "label": "plan A"})
    shown = api.get(f"/v1/estimates/{created.json()['id']}")

    assert created.status_code == 201 and shown.status_code == 200
    assert shown.json() == created.json() and created.json()["label"] == "plan A"


def test_bad_json_body_is_a_422(api: TestClient) -> None:
    assert api.post("/v1/estimates", json={"params": "7e9"}).status_code == 422
    assert api.post("/v1/estimates", json={**SEED, "gpus": -1}).status_code == 422
    assert api.post("/v1/estimates", content=b"not json").status_code == 422


def test_plan_answers_the_inverse_question_like_the_cli(api: TestClient) -> None:
    query = {k: v for k, v in SEED.items() if k != "gpus"}

    plan = api.get("/v1/plan", params={**query, "deadline": "3.5d"})
    nodes = api.get("/v1/plan", params={**query, "deadline": "3.5d", "multiple_of": 8})

    assert plan.status_code == 200 and plan.json()["gpus"] == 1484
    assert plan.json()["estimate"]["wall_seconds"] <= 3.5 * 86400
    assert nodes.json()["gpus"] == 1488
    bad = api.get("/v1/plan", params={**query, "deadline": "30"})
    assert bad.status_code == 422 and "duration" in str(bad.json()["detail"])


def test_sensitivity_returns_the_table_with_its_base_row(api: TestClient) -> None:
    response = api.get("/v1/sensitivity", params=SEED)

    assert response.status_code == 200
    body = response.json()
    assert body["base"]["wall_seconds"] == pytest.approx(5.609e7, rel=1e-3)
    assert any(row["is_base"] for row in body["rows"])
    assert {row["variable"] for row in body["rows"]} >= {"utilization", "gpus"}


def test_a_bad_input_is_a_422_in_the_shape_the_schema_promises(api: TestClient) -> None:
    response = api.get("/v1/estimate", params={**SEED, "gpu": "nosuchgpu"})

    (problem,) = response.json()["detail"]
    assert response.status_code == 422 and "unknown GPU" in problem["msg"]
    assert problem["type"] == "value_error" and problem["loc"] == []


def test_the_schema_documents_the_error_answers(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()
    answers = schema["paths"]["/v1/estimates/{estimate_id}"]["get"]["responses"]

    assert {"200", "404", "422", "503"} <= set(answers)
    assert "ErrorMessage" in schema["components"]["schemas"]


def test_liveness_answers_without_a_database() -> None:
    from service.bootstrap import build
    from service.config import Settings

    broken = Settings(database_url="postgresql+psycopg://nobody@127.0.0.1:9/none")
    with TestClient(create_app(build(broken))) as client:
        assert client.get("/livez").json() == {"status": "ok"}
        assert client.get("/healthz").status_code == 503


def test_readiness_reports_a_damaged_sqlite_file(tmp_path: Path) -> None:
    """A file whose pages are damaged can still answer the ping (one row of one table):
    readiness runs SQLite's own check in the background and reports what it found."""
    import sqlite3
    from datetime import UTC, datetime

    from service.adapters.db.engine import make_engine
    from service.adapters.db.unit_of_work import SqlUnitOfWork
    from service.bootstrap import build
    from service.config import Settings
    from service.usecases import registry
    from tests.builders import an_estimate

    path = tmp_path / "reckon.db"
    url = f"sqlite:///{path}"
    engine = make_engine(url)
    build(Settings(database_url=url)).operations.upgrade_schema()
    for _ in range(400):  # pages enough that one in the middle holds only estimates
        registry.save(SqlUnitOfWork(engine), an_estimate(), now=datetime.now(UTC))
    engine.dispose()
    with sqlite3.connect(path) as connection:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        pages, size = (
            connection.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_count", "page_size")
        )
    with TestClient(create_app(build(Settings(database_url=url)))) as client:
        assert client.get("/healthz").json()["database"] == "ok"  # intact, first
        with path.open("r+b") as damaged:
            damaged.seek((pages - 3) * size + 8)
            damaged.write(b"\xff" * 200)
        with TestClient(create_app(build(Settings(database_url=url)))) as fresh:
            answer = fresh.get("/healthz")
            deadline = time.monotonic() + 10
            while answer.status_code == 200 and time.monotonic() < deadline:
                time.sleep(0.1)
                answer = fresh.get("/healthz")
    assert answer.status_code == 503
    assert "is damaged" in answer.json()["database"] and "\n" not in answer.json()["database"]


def test_a_token_without_the_bearer_scheme_is_refused() -> None:
    world = fake_app(policy=Policy(api_token="s3cret"))
    with TestClient(create_app(world.app)) as client:
        bare = client.post("/v1/estimates", json=SEED, headers={"Authorization": "s3cret"})
        right = client.post("/v1/estimates", json=SEED, headers={"Authorization": "Bearer s3cret"})

    assert bare.status_code == 401 and right.status_code == 201


def test_a_calibrated_plan_over_http_meets_the_deadline_at_its_confidence(
    api: TestClient,
) -> None:
    query = {k: v for k, v in SEED.items() if k not in ("gpus", "utilization")}

    plan = api.get("/v1/plan", params={**query, "deadline": "30d", "calibrated": True,
                                       "confidence": 0.9}).json()  # fmt: skip
    fewer = api.get("/v1/estimate", params={**query, "gpus": plan["gpus"] - 1,
                                            "calibrated": True}).json()  # fmt: skip
    bad = api.get("/v1/plan", params={**query, "deadline": "30d", "confidence": 1.5})

    assert plan["confidence"] == 0.9 and plan["wall_seconds_p90"] <= 30 * 86400
    assert fewer["wall_seconds_p90"] > 30 * 86400
    assert bad.status_code == 422
