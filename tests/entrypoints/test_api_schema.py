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

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from service.app import Policy
from service.entrypoints.api.app import create_app
from tests.fakes import fake_app

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
