"""What the dashboard asks of the service beyond the existing routes: where the MLflow UI is
(for links to runs, never leaking credentials from the tracking URI) and the accuracy
groupings that give each segment's calibrated error over time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from service.app import Policy
from service.domain.records import ACCURACY_GROUPINGS, Reconciliation
from service.entrypoints.api.app import create_app
from service.usecases.accuracy import GROUPINGS
from tests.fakes import fake_app


def ui_url(tracking_uri: str | None) -> str | None:
    return fake_app(policy=Policy(mlflow_tracking_uri=tracking_uri)).app.operations.mlflow_ui_url()


@pytest.mark.parametrize(
    ("tracking_uri", "expected"),
    [
        ("http://127.0.0.1:5000", "http://127.0.0.1:5000"),
        ("http://mlflow:5000/", "http://mlflow:5000"),
        ("https://alice:s3cret@mlflow.corp:8443/ml/?token=x#frag", "https://mlflow.corp:8443/ml"),
        ("http://[::1]:5000", "http://[::1]:5000"),
        ("file:///var/mlruns", None),
        ("databricks", None),
        ("sqlite:///mlflow.db", None),
        (None, None),
    ],
)
def test_the_mlflow_ui_is_the_tracking_server_without_credentials(
    tracking_uri: str | None, expected: str | None
) -> None:
    assert ui_url(tracking_uri) == expected


def test_the_api_gives_the_page_a_run_link_template() -> None:
    world = fake_app(policy=Policy(mlflow_tracking_uri="https://bob:pw@mlflow.corp/"))
    with TestClient(create_app(world.app)) as api:
        linked = api.get("/v1/mlflow").json()
    with TestClient(create_app(fake_app().app)) as api:
        unlinked = api.get("/v1/mlflow").json()

    assert linked == {
        "ui_url": "https://mlflow.corp",
        "run_url": "https://mlflow.corp/#/runs/{run_id}",
    }
    assert unlinked == {"ui_url": None, "run_url": None}


def a_reconciliation(ended_at: datetime) -> Reconciliation:
    return Reconciliation(
        estimate_id="e1", run_ids=("r1",), gpu="h100-sxm", precision="bf16", recompute=None,
        started_at=ended_at, ended_at=ended_at, predicted_seconds=10.0,
        predicted_seconds_p10=None, predicted_seconds_p90=None, observed_seconds=11.0,
        observed_compute_seconds=None, ratio=1.1, error_pct=-9.1, abs_error_pct=9.1,
        implied_utilization=None, implied_overhead=None, implied_effective_utilization=None,
        factors_kind="none", failed_segments=0,
    )  # fmt: skip


def test_segment_periods_group_by_iso_week_and_month() -> None:
    new_years_day = a_reconciliation(datetime(2027, 1, 1, 6, tzinfo=UTC))  # a Friday

    assert GROUPINGS["segment"](new_years_day) == "h100-sxm/bf16"
    assert GROUPINGS["segment_week"](new_years_day) == "h100-sxm/bf16 2026-W53"  # ISO year
    assert GROUPINGS["segment_month"](new_years_day) == "h100-sxm/bf16 2027-01"


def test_every_grouping_the_entry_points_offer_is_one_accuracy_knows() -> None:
    assert set(ACCURACY_GROUPINGS) <= set(GROUPINGS)
