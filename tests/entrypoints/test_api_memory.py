"""Training memory per GPU over HTTP (issue 23 item 2): the planning routes take the memory
settings as query parameters with their bounds in the schema, /v1/plan says what bound its
count, /v1/estimate carries the memory, /v1/sensitivity the fits column, and input that no
count can hold is a 422 with a reason. Over the application object with fakes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.entrypoints.api.app import create_app
from tests.fakes import fake_app

DONE: dict[str, Any] = {"params": "70e9", "tokens": "1e11", "gpu": "h100-sxm"}


@pytest.fixture
def api() -> Iterator[TestClient]:
    with TestClient(create_app(fake_app().app)) as client:
        yield client


def test_the_done_line_over_http(api: TestClient) -> None:
    week = api.get("/v1/plan", params={**DONE, "deadline": "7d"})
    year = api.get("/v1/plan", params={**DONE, "deadline": "365d"})
    nodes = api.get("/v1/plan", params={**DONE, "deadline": "365d", "multiple_of": 8})

    assert week.status_code == year.status_code == nodes.status_code == 200
    assert (week.json()["bound"], week.json()["gpus"]) == ("time", 176)
    body = year.json()
    assert (body["bound"], body["gpus"], body["time_bound_gpus"]) == ("memory", 15, 4)
    assert body["memory"]["fits"] is True and body["memory"]["min_gpus_that_fit"] == 15
    assert body["memory"]["needed_bytes"] <= body["memory"]["chip_bytes"]
    assert (nodes.json()["bound"], nodes.json()["gpus"]) == ("memory", 16)


def test_a_calibrated_plan_takes_the_memory_bound_too(api: TestClient) -> None:
    query = {**DONE, "tokens": "1e10", "deadline": "365d", "calibrated": True}

    body = api.get("/v1/plan", params={**query, "confidence": 0.9}).json()

    assert body["bound"] == "memory" and body["gpus"] == 15 and body["confidence"] == 0.9


def test_the_estimate_carries_its_memory_and_says_when_it_does_not_fit(api: TestClient) -> None:
    fits = api.get("/v1/estimate", params={**DONE, "gpus": 16})
    crowded = api.get("/v1/estimate", params={**DONE, "gpus": 2, "sharding": "none"})

    assert fits.status_code == crowded.status_code == 200
    assert fits.json()["memory"]["fits"] is True
    memory = crowded.json()["memory"]
    assert memory["fits"] is False and memory["sharding"] == "none"
    assert memory["min_gpus_verdict"] == "never" and memory["needed_gib"] > 1000


def test_sensitivity_rows_say_whether_they_fit(api: TestClient) -> None:
    body = api.get("/v1/sensitivity", params={**DONE, "gpus": 8}).json()

    fits = {(row["variable"], row["value"]): row["fits"] for row in body["rows"]}
    assert fits[("gpus", "8")] is False and fits[("gpus", "16")] is True


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"sharding": "none"}, "no count of h100-sxm fits"),
        ({"sharding": "zero3"}, "unknown sharding"),
        ({"optimizer": "lion"}, "unknown optimizer"),
        ({"micro_batch": 0}, "micro_batch"),
    ],
)
def test_bad_memory_input_is_a_422_with_a_reason(
    api: TestClient, change: dict[str, Any], fragment: str
) -> None:
    response = api.get("/v1/plan", params={**DONE, "deadline": "365d", **change})

    assert response.status_code == 422
    assert fragment in str(response.json()["detail"])


def test_the_schema_declares_the_memory_settings_with_their_bounds(api: TestClient) -> None:
    document = api.get("/openapi.json").json()

    for path in ("/v1/estimate", "/v1/plan", "/v1/sensitivity"):
        parameters = {p["name"]: p["schema"] for p in document["paths"][path]["get"]["parameters"]}
        assert parameters["sharding"]["enum"] == ["none", "zero1", "zero2", "fsdp"]
        assert parameters["sharding"]["default"] == "fsdp"
        assert parameters["optimizer"]["enum"] == ["adam", "sgd"]
        assert parameters["micro_batch"]["minimum"] == 1  # as `layers`: beside its anyOf
    plan = document["components"]["schemas"]["Plan"]["properties"]
    assert plan["bound"]["enum"] == ["time", "memory"]
    assert "MemoryPerGpu" in document["components"]["schemas"]
