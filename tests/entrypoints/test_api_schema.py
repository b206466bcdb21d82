"""The OpenAPI document against the server that publishes it (schemathesis, bounded): every
operation, requests generated from its declared parameters and bodies, including ones the
schema forbids. Checked: no 5xx, only documented status codes, responses that match their
declared schemas and content types, an `Allow` header naming every method of the path, and
requests the schema forbids are refused.

Not checked: that every schema-valid request is accepted (schemathesis' "positive data
acceptance"). The inputs a planner types as text have grammars the schema can only name in
prose: `params` and `tokens` ("7e9", "7B"; positive), `deadline` and `since` (dates and
durations), and `gpu`, a catalog name that RECKON_HARDWARE_FILE extends at run time. Their
refusals are the domain's one-line 422s. Every bound the schema can state (counts from 1,
utilization in (0, 1], overhead in [0, 1), precision, recompute and grouping enums, the
currency pattern) is declared, from the same declaration the CLI's options come from."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from service.app import Policy
from service.domain.errors import UnavailableError
from service.domain.prices import Price, PriceTable
from service.entrypoints.api.app import create_app
from tests.fakes import FakeUnitOfWork, fake_app

TOKEN = "schema-token"
schema = schemathesis.openapi.from_asgi(
    "/openapi.json", create_app(fake_app(policy=Policy(api_token=TOKEN)).app)
)


@schema.parametrize()
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_keeps_its_published_contract(case: Any) -> None:
    case.call_and_validate(
        headers={"Authorization": f"Bearer {TOKEN}"}, excluded_checks=[positive_data_acceptance]
    )


def test_the_openapi_document_is_valid_tagged_and_says_every_media_type() -> None:
    """Issue 22 item 6 (part): openapi-spec-validator accepts /openapi.json; every operation
    has a tag (its area); `/` is HTML and `/metrics` Prometheus text, said so."""
    from fastapi.testclient import TestClient
    from openapi_spec_validator import validate

    with TestClient(create_app(fake_app().app)) as client:
        document = client.get("/openapi.json").json()

    validate(document)
    operations = [
        (path, method, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]
    assert [(p, m) for p, m, op in operations if not op.get("tags")] == []
    assert set(document["paths"]["/"]["get"]["responses"]["200"]["content"]) == {"text/html"}
    metrics = document["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert set(metrics) == {"text/plain"} and metrics["text/plain"]["schema"] == {"type": "string"}
    assert {tag["name"] for tag in document["tags"]} == {
        "planning",
        "the loop",
        "operations",
        "dashboard",
    }


# --- every JSON answer names its schema, and keeps to it ------------------------------------

JSON_MEDIA = "application/json"
# What a schema object can say about its values; one saying none of it is `{}`: any value.
TYPING = ("type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const", "not")


def openapi_document() -> dict[str, Any]:
    from fastapi.testclient import TestClient

    with TestClient(create_app(fake_app().app)) as client:
        document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def json_successes(document: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(METHOD, path, status) -> schema of every 2xx answer with a JSON body."""
    return {
        (method.upper(), path, status): response["content"][JSON_MEDIA]["schema"]
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for status, response in operation["responses"].items()
        if status.startswith("2") and JSON_MEDIA in response.get("content", {})
    }


def named(schema: dict[str, Any]) -> list[str] | None:
    """The components a response schema names: one `$ref`, or an anyOf/oneOf of `$ref`s (with
    FastAPI's title); None when it is anything else."""
    if set(schema) == {"$ref"}:
        return [schema["$ref"]]
    for key in ("anyOf", "oneOf"):
        options = schema.get(key) or [{}]
        if set(schema) <= {key, "title", "description"} and all(
            set(option) == {"$ref"} for option in options
        ):
            return [option["$ref"] for option in options]
    return None


def untyped_objects(document: dict[str, Any], refs: list[str]) -> list[str]:
    """Where a schema reachable from `refs` is an object with neither properties nor typed
    additional properties, or says nothing of its values at all."""
    components = document["components"]["schemas"]
    found: list[str] = []
    seen: set[str] = set()

    def walk(schema: dict[str, Any], where: str) -> None:
        if "$ref" in schema:
            name = schema["$ref"].removeprefix("#/components/schemas/")
            if name not in seen:
                seen.add(name)
                walk(components[name], name)
            return
        extra = schema.get("additionalProperties")
        typed_extra = isinstance(extra, dict) and any(key in extra for key in TYPING)
        if schema.get("type") == "object" and not schema.get("properties") and not typed_extra:
            found.append(where)
        if not any(key in schema for key in TYPING):
            found.append(where)
        for key, value in schema.get("properties", {}).items():
            walk(value, f"{where}.{key}")
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for index, option in enumerate(schema.get(key, [])):
                walk(option, f"{where}[{index}]")
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                walk(schema[key], f"{where}.{key}")

    for ref in refs:
        walk({"$ref": ref}, ref)
    return found


def test_every_json_success_names_its_schema_and_none_it_reaches_is_an_untyped_object() -> None:
    """Each 2xx answer with a JSON body is a `$ref` to a named component (or a choice of
    them), and every object schema reachable from one declares its keys (or types its
    values): no `{type: object, additionalProperties: true}` and no `{}`. /healthz's 503 and
    POST /v1/reconcile's 409 carry their documents too."""
    document = openapi_document()
    successes = json_successes(document)

    unnamed = {key: schema for key, schema in successes.items() if named(schema) is None}
    refs = sorted({ref for schema in successes.values() for ref in named(schema) or []})

    assert len(successes) >= 21 and unnamed == {}
    assert untyped_objects(document, refs) == []
    paths = document["paths"]
    health = paths["/healthz"]["get"]["responses"]["503"]["content"][JSON_MEDIA]["schema"]
    locked = paths["/v1/reconcile"]["post"]["responses"]["409"]["content"][JSON_MEDIA]
    assert named(health) == ["#/components/schemas/Health"]
    assert named(locked["schema"]) == [
        "#/components/schemas/PassOutcome",
        "#/components/schemas/ErrorMessage",
    ]
    assert {"PassOutcome", "ErrorMessage"} <= set(document["components"]["schemas"])


def test_an_untyped_object_or_an_unnamed_answer_would_be_caught() -> None:
    document = {
        "components": {
            "schemas": {
                "Open": {"type": "object", "additionalProperties": True},
                "Keyed": {"type": "object", "properties": {"x": {}, "y": {"type": "integer"}}},
                "Mapped": {"type": "object", "additionalProperties": {"type": "number"}},
            }
        }
    }

    assert named({"type": "object", "additionalProperties": True}) is None
    assert named({}) is None
    assert untyped_objects(document, ["#/components/schemas/Open"]) == ["Open"]
    assert untyped_objects(document, ["#/components/schemas/Keyed"]) == ["Keyed.x"]
    assert untyped_objects(document, ["#/components/schemas/Mapped"]) == []


class Served:
    """A world with data (tests/fakes.py) served through the API: saved estimates (given,
    calibrated and external), reconciliations (one a planned-against-observed difference,
    one with a failed segment), a skipped run, a running one, a spare one to link, and the
    factor set the first pass makes."""

    def __init__(self) -> None:
        from fastapi.testclient import TestClient

        from service.domain.inputs import parse_inputs
        from tests.builders import SEED_INPUTS
        from tests.fakes import FixedClock
        from tests.unit.test_app import START, a_run

        now = START + timedelta(days=700)  # the runs take 600 days: plausible at 8 GPUs
        policy = Policy(mlflow_tracking_uri="http://mlflow.example:5000")
        prices = PriceTable({"a100-80gb": Price(1.5, "USD")})
        self.world = world = fake_app(clock=FixedClock(now), policy=policy, prices=prices)
        app, runs = world.app, world.source.runs
        self.ids = [
            app.planning.save(parse_inputs(SEED_INPUTS), label=f"job {i}").saved.id
            for i in range(6)
        ]
        for index, estimate_id in enumerate(self.ids):
            stated = {"gpus": 4} if index == 1 else {}  # not the 8 planned
            runs.append(
                a_run(f"run-{index}", estimate_id, 14400 + 10 * index, throughput=5e3, **stated)
            )
        runs.append(a_run("run-failed", self.ids[2], 24, status="FAILED", throughput=5e3))
        runs.append(a_run("run-unknown", "nosuchestimate", 90))
        self.external = app.registry.record(
            predicted_seconds=84 * 3600.0, gpu="a100-80gb", gpus=8, precision="bf16"
        ).id
        runs.append(a_run("run-external", self.external, 80))
        busy = app.planning.save(
            parse_inputs({**SEED_INPUTS, "gpus": 1488}), deadline="1d"
        ).saved.id
        live = {"status": "RUNNING", "started_at": now - timedelta(days=1), "ended_at": None}
        runs.append(a_run("run-live", busy, 0, throughput=2e6, **live))
        runs.append(a_run("run-spare", None, 14405, throughput=5e3))
        self.client = TestClient(create_app(app))


def database_down(_uow: object) -> object:
    raise UnavailableError("the database does not answer (test)")


SEED = {
    "params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8, "precision": "bf16",
    "recompute": "full",
}  # fmt: skip
SHAPED = {**SEED, "layers": 32, "hidden_size": 4096, "seq_len": 4096, "price_per_gpu_hour": 2.5}
CALIBRATED = {**SEED, "calibrated": True}


def test_every_json_route_answers_within_its_declared_schema(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each JSON route, in every shape of its answer, on an app with data: all answer 2xx
    (or their documented 409 and 503), so FastAPI's response validation found each key the
    views emit declared (the documents forbid others) and of its declared type."""
    served = Served()
    ids, external = served.ids, served.external
    answered: dict[tuple[str, str], list[int]] = {}

    with served.client as client:

        def call(method: str, route: str, path: str | None = None, **options: Any) -> Any:
            response = client.request(method, path or route, **options)
            answered.setdefault((method, route), []).append(response.status_code)
            return response

        call("GET", "/v1/factors")  # none yet: the published prior
        call("GET", "/v1/estimate", params={**SHAPED, "utilization": 0.4})
        call("GET", "/v1/plan", params={**SEED, "deadline": "30d"})
        call("GET", "/v1/sensitivity", params=SEED)
        call("POST", "/v1/refit")  # nothing to fit
        call("POST", "/v1/reconcile")  # reconciles, skips one, makes factor set 1
        served.world.lock.free = False
        locked = call("POST", "/v1/reconcile")
        served.world.lock.free = True
        call("POST", "/v1/refit", params={"force": True})
        call("POST", "/v1/factors/{version}/activate", "/v1/factors/1/activate")
        call("GET", "/v1/factors")
        call("GET", "/v1/factors/history")
        call("GET", "/v1/history", params={"sort": "worst", "limit": 3})
        for by in ("gpu_type", "segment", "month"):
            call("GET", "/v1/accuracy", params={"by": by})
        call("GET", "/v1/accuracy")
        for by in ("experiment", "gpu", "month"):
            call("GET", "/v1/spend", params={"by": by, "since": "2026-01-01"})
        call("GET", "/v1/spend", params={"gpu": "a100-80gb"})
        call("GET", "/v1/estimate", params=CALIBRATED)
        call("GET", "/v1/plan", params={**CALIBRATED, "deadline": "300d", "confidence": 0.8})
        call("GET", "/v1/sensitivity", params=CALIBRATED)
        call("POST", "/v1/estimates", json={**SHAPED, "label": "plan A", "deadline": "7d"})
        saved = call("POST", "/v1/estimates", json=CALIBRATED).json()["id"]
        for estimate_id in (ids[2], external, saved):
            call("GET", "/v1/estimates/{estimate_id}", f"/v1/estimates/{estimate_id}")
        call("GET", "/v1/estimates")
        call("GET", "/v1/hardware")
        call("GET", "/v1/running")
        call("POST", "/v1/forecast")  # tags run-live, at risk
        served.world.forecast_lock.free = False
        call("POST", "/v1/forecast")
        served.world.forecast_lock.free = True
        call("GET", "/v1/jobs")
        link = "/v1/estimates/{estimate_id}/runs"
        call("POST", link, f"/v1/estimates/{ids[3]}/runs", json={"run_id": "run-spare"})
        call("POST", link, f"/v1/estimates/{external}/runs", json={"run_id": "x", "force": True})
        unlink = "/v1/estimates/{estimate_id}/runs/{run_id}"
        call("DELETE", unlink, f"/v1/estimates/{ids[3]}/runs/run-spare")  # another run stays
        call("DELETE", unlink, f"/v1/estimates/{ids[4]}/runs/run-4", params={"force": True})
        call("GET", "/livez")
        call("GET", "/v1/mlflow")
        call("GET", "/healthz")
        monkeypatch.setattr(FakeUnitOfWork, "passes", property(database_down))
        down = call("GET", "/healthz")

    expected = {(method, path) for method, path, _ in json_successes(openapi_document())}
    assert set(answered) == expected
    refused = {key: codes for key, codes in answered.items() if max(codes) >= 300}
    assert refused == {
        ("POST", "/v1/reconcile"): [200, 409],
        ("POST", "/v1/forecast"): [200, 409],
        ("GET", "/healthz"): [200, 503],
    }
    assert locked.json()["status"] == "locked" and down.json()["status"] == "failing"


def test_the_api_answers_what_the_views_return_key_for_key() -> None:
    """Response validation drops nothing, converts nothing and keeps the views' key order:
    the API's documents are those the views (and so the CLI's --json) make, key for key."""
    from service.domain.inputs import parse_inputs
    from service.domain.units import parse_duration_seconds
    from service.presenters import json_loop, json_views, money

    served = Served()
    app = served.world.app
    app.loop.reconcile(trigger="test")
    inputs, days = parse_inputs(SEED), parse_duration_seconds("300d")
    page = app.queries.history_page(
        since=None, gpu=None, search=None, sort="newest", limit=None, offset=0, precision=None
    )
    views: dict[str, object] = {
        "/v1/history": json_views.history_page_view(page),
        "/v1/accuracy": json_loop.accuracy_view(app.queries.accuracy(by="segment")),
        "/v1/spend": money.spend_view(app.queries.spend(by="experiment")),
        "/v1/factors": json_loop.factors_view(app.factor_sets.show()),
        "/v1/factors/history": json_loop.factor_history_view(app.factor_sets.history()),
        "/v1/jobs": json_loop.jobs_view(app.queries.jobs(20)),
        "/v1/running": json_views.running_list_view(app.queries.running()),
        f"/v1/estimates/{served.external}": json_views.detail_view(
            app.registry.estimate_detail(served.external)
        ),
        f"/v1/estimates/{served.ids[1]}": json_views.detail_view(
            app.registry.estimate_detail(served.ids[1])
        ),
        "/v1/estimate": json_views.answer_view(app.planning.estimate(inputs, calibrated=True)),
        "/v1/plan": json_views.plan_answer_view(
            app.planning.plan(parse_inputs(SEED, gpus=1), days, 1, calibrated=True)
        ),
        "/v1/sensitivity": json_views.sensitivity_view(
            app.planning.sensitivity(inputs, {}, calibrated=True)
        ),
    }
    queries: dict[str, dict[str, Any]] = {
        "/v1/accuracy": {"by": "segment"},
        "/v1/spend": {"by": "experiment"},
        "/v1/estimate": CALIBRATED,
        "/v1/plan": {**CALIBRATED, "deadline": "300d"},
        "/v1/sensitivity": CALIBRATED,
    }

    with served.client as client:
        for path, view in views.items():
            response = client.get(path, params=queries.get(path))

            assert response.status_code == 200, response.text
            assert json.dumps(response.json()) == json.dumps(view), path
