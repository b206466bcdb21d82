"""The HTTP API through FastAPI's test client, over real databases and a real MLflow
server: the routes that read or write them, auth on and off. The compute-only routes are
tested without either in test_api_planning.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from mlflow.tracking import MlflowClient

from demo.mlflow_server import MlflowServer, make_training_run
from service.bootstrap import build
from service.config import Settings
from service.domain.records import ESTIMATE_TAG
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main

pytestmark = pytest.mark.mlflow

SEED: dict[str, Any] = {
    "params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8,
    "precision": "bf16", "recompute": "full", "utilization": 0.4,
}  # fmt: skip
TOKEN = "s3cret-token"


def make_client(
    database_url: str, mlflow_uri: str, experiment: str, token: str | None
) -> TestClient:
    settings = Settings(
        database_url=database_url,
        mlflow_tracking_uri=mlflow_uri,
        experiments=experiment,
        api_token=token,
    )
    return TestClient(create_app(build(settings)))


@pytest.fixture
def api(database_url: str, mlflow_server: MlflowServer, experiment_id: str) -> Iterator[TestClient]:
    with make_client(database_url, mlflow_server.uri, experiment_id, None) as client:
        yield client


@pytest.fixture
def guarded_api(
    database_url: str, mlflow_server: MlflowServer, experiment_id: str
) -> Iterator[TestClient]:
    with make_client(database_url, mlflow_server.uri, experiment_id, TOKEN) as client:
        yield client


def test_saved_estimate_round_trips(api: TestClient) -> None:
    created = api.post("/v1/estimates", json={**SEED, "label": "plan A"})
    assert created.status_code == 201
    saved = created.json()
    shown = api.get(f"/v1/estimates/{saved['id']}")
    assert shown.status_code == 200
    assert {k: v for k, v in shown.json().items() if k != "run_ids"} == {
        k: v for k, v in saved.items() if k != "run_ids"
    }
    listed = api.get("/v1/estimates").json()["estimates"]
    assert [item["id"] for item in listed] == [saved["id"]]


def test_unknown_estimate_is_a_404(api: TestClient) -> None:
    response = api.get("/v1/estimates/nope")
    assert response.status_code == 404 and "nope" in response.json()["detail"]
    assert api.get("/v1/factors", params={"version": 9}).status_code == 404
    assert api.get("/v1/accuracy", params={"by": "nonsense"}).status_code == 422


def test_reconcile_history_jobs_and_metrics(
    api: TestClient,
    mlflow_client: MlflowClient,
    experiment_id: str,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    label = "llama-7b ablation"
    estimate_id = api.post("/v1/estimates", json={**SEED, "label": label}).json()["id"]
    end = datetime.now(UTC) - timedelta(hours=1)
    make_training_run(
        mlflow_client, experiment_id, start=end - timedelta(days=600), end=end,
        metrics={"tokens_per_second": 2.0e4}, tags={ESTIMATE_TAG: estimate_id},
    )  # fmt: skip

    reconciled = api.post("/v1/reconcile")
    history = api.get("/v1/history").json()["history"]
    jobs = api.get("/v1/jobs").json()
    metrics = api.get("/metrics")

    assert reconciled.status_code == 200 and reconciled.json()["reconciled"] == 1
    assert reconciled.json()["factor_set"] == 1  # every pass ends with a refit
    factors = api.get("/v1/factors").json()
    assert factors["version"] == 1 and factors["active"] is True
    assert api.get("/v1/factors/history").json()["versions"][0]["version"] == 1
    accuracy = api.get("/v1/accuracy", params={"by": "gpu_type"}).json()
    assert accuracy["groups"][0]["group"] == "a100-80gb" and accuracy["overall"]["raw"]["n"] == 1
    unplanned = {k: v for k, v in SEED.items() if k != "utilization"}
    calibrated = api.get("/v1/estimate", params={**unplanned, "calibrated": True})
    assert calibrated.json()["factor_set"] == 1 and "wall_seconds_p90" in calibrated.json()
    assert [row["estimate_id"] for row in history] == [estimate_id]
    assert history[0]["line"].startswith("predicted 649 days")
    assert history[0]["label"] == label  # the planner's name for the job, not only its id
    monkeypatch.setenv("RECKON_DATABASE_URL", database_url)
    assert main(["history"]) == 0
    assert f"{estimate_id} '{label}' a100-80gb/bf16: predicted 649 days" in capsys.readouterr().out
    assert jobs["passes"][0]["status"] == "succeeded" and jobs["schedule"] == "0 2 * * *"
    assert metrics.status_code == 200
    assert "reckon_reconciliations 1.0" in metrics.text
    assert "reckon_last_pass_success 1.0" in metrics.text


def test_history_filters_and_bad_dates(api: TestClient) -> None:
    assert api.get("/v1/history", params={"gpu": "h100"}).json()["history"] == []
    bad = api.get("/v1/history", params={"since": "yesterday"})
    assert bad.status_code == 422 and "date" in str(bad.json()["detail"])
    assert api.get("/v1/history", params={"gpu": "nosuch"}).status_code == 422
    assert (
        api.post("/v1/reconcile", params={"since": "2026-01-01", "full": True}).status_code == 422
    )


def test_running_runs_are_projected(
    api: TestClient, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    saved = api.post("/v1/estimates", json={**SEED, "gpus": 1488}).json()
    start = datetime.now(UTC) - timedelta(days=1)
    throughput = 1e12 / (saved["compute_seconds"] * 1.10)  # 10% slower than planned
    run_id = make_training_run(
        mlflow_client, experiment_id, start=start, end=None, status="RUNNING",
        metrics={"tokens_per_second": throughput}, tags={ESTIMATE_TAG: saved["id"]},
    )  # fmt: skip

    (item,) = api.get("/v1/running").json()["running"]

    assert item["run_id"] == run_id and item["estimate_id"] == saved["id"]
    assert item["slip_pct"] == pytest.approx(10.0, rel=1e-6)
    assert item["elapsed_seconds"] == pytest.approx(86400, abs=120)


def test_a_running_run_past_its_deadline_at_p90_is_at_risk_in_running_and_metrics(
    api: TestClient, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    saved = api.post("/v1/estimates", json={**SEED, "gpus": 1488, "deadline": "2d"}).json()
    assert saved["deadline"] is not None  # the plan takes 3.5 days: 2 days cannot be met
    start = datetime.now(UTC) - timedelta(hours=6)
    run_id = make_training_run(
        mlflow_client, experiment_id, start=start, end=None, status="RUNNING",
        metrics={"tokens_per_second": 1e12 / saved["compute_seconds"]},
        tags={ESTIMATE_TAG: saved["id"]},
    )  # fmt: skip
    ended = make_training_run(
        mlflow_client, experiment_id, start=start, end=datetime.now(UTC), status="FINISHED",
        metrics={"tokens_per_second": 1e12 / saved["compute_seconds"]},
        tags={ESTIMATE_TAG: saved["id"]},
    )  # fmt: skip

    (item,) = api.get("/v1/running").json()["running"]
    metrics = api.get("/metrics").text

    assert item["run_id"] == run_id and item["at_risk"] is True
    assert item["eta_p10"] <= item["eta"] <= item["eta_p90"] and item["slip_seconds"] > 86400
    assert "reckon_running_at_risk 1.0" in metrics
    (slip,) = [line for line in metrics.splitlines() if line.startswith("reckon_running_slip")]
    assert f'run_id="{run_id}"' in slip and float(slip.rsplit(" ", 1)[1]) > 86400
    assert ended not in metrics  # only runs RUNNING now have a series


def _settled_health(client: TestClient) -> Any:
    """/healthz once its background MLflow probe has reported (at once on a quiet machine)."""
    deadline = time.monotonic() + 10
    response = client.get("/healthz")
    while response.json()["mlflow_checked_seconds_ago"] is None and time.monotonic() < deadline:
        time.sleep(0.1)
        response = client.get("/healthz")
    return response


def test_healthz_reports_database_and_mlflow(api: TestClient) -> None:
    response = _settled_health(api)
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["database"], body["mlflow"]) == ("ok", "ok", "ok")
    assert 0 <= body["mlflow_checked_seconds_ago"] < 5


def test_healthz_answers_at_once_while_mlflow_hangs(
    database_url: str, mlflow_server: MlflowServer
) -> None:
    """Readiness must not wait on MLflow: the real server frozen (it accepts connections and
    answers nothing), then thawed, when readiness reports it again."""
    with make_client(database_url, mlflow_server.uri, "", None) as client:
        with mlflow_server.hung():
            for _ in range(3):  # the first read, and reads while the probe is still out
                started = time.monotonic()
                response = client.get("/healthz")
                seconds = time.monotonic() - started
                assert response.status_code == 200 and response.json()["database"] == "ok"
                # Waiting on the hung MLflow would take its request timeout (30 s); the probe
                # is awaited 0.5 s at most, and a loaded CI machine (three test workers, one
                # running the demo's commands) has taken 1.4 s to answer.
                assert seconds < 5.0, f"/healthz took {seconds:.1f} s on a hung MLflow"
            assert response.json()["mlflow"].startswith("not probed yet")
        assert _settled_health(client).json()["mlflow"] == "ok"


def test_healthz_is_503_when_the_database_is_down(mlflow_server: MlflowServer) -> None:
    with make_client(
        "postgresql+psycopg://reckon:pw@127.0.0.1:9/x", mlflow_server.uri, "", None
    ) as client:
        response = _settled_health(client)
    assert response.status_code == 503
    assert response.json()["mlflow"] == "ok" and "pw" not in response.text


def test_state_changing_routes_need_the_token_when_one_is_set(guarded_api: TestClient) -> None:
    assert guarded_api.post("/v1/estimates", json=SEED).status_code == 401
    assert guarded_api.post("/v1/reconcile").status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert guarded_api.post("/v1/estimates", json=SEED, headers=wrong).status_code == 401
    right = {"Authorization": f"Bearer {TOKEN}"}
    assert guarded_api.post("/v1/estimates", json=SEED, headers=right).status_code == 201
    assert guarded_api.post("/v1/reconcile", headers=right).status_code == 200
    assert guarded_api.post("/v1/refit").status_code == 401
    refit = guarded_api.post("/v1/refit", headers=right)
    assert refit.status_code == 200 and refit.json()["factor_set"] is None  # nothing to fit
    # Reads stay open: dashboards and planners need no token.
    assert guarded_api.get("/v1/estimate", params=SEED).status_code == 200
    assert guarded_api.get("/v1/history").status_code == 200


def test_runs_are_linked_and_unlinked_over_http(
    api: TestClient, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    estimate_id = api.post("/v1/estimates", json={**SEED, "gpus": 2048}).json()["id"]
    end = datetime.now(UTC) - timedelta(hours=1)
    run_id = make_training_run(
        mlflow_client, experiment_id, start=end - timedelta(hours=9), end=end
    )

    missing = api.post(f"/v1/estimates/{estimate_id}/runs", json={"run_id": "nope"})
    linked = api.post(f"/v1/estimates/{estimate_id}/runs", json={"run_id": run_id})
    unlinked = api.delete(f"/v1/estimates/{estimate_id}/runs/{run_id}")
    again = api.delete(f"/v1/estimates/{estimate_id}/runs/{run_id}")

    assert missing.status_code == 404 and "nope" in missing.json()["detail"]
    assert linked.status_code == 201 and linked.json()["run_ids"] == [run_id]
    assert unlinked.status_code == 200 and unlinked.json()["tag_removed"] is False
    assert again.status_code == 404


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/estimates", '{"params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8, '
         '"label": "plan \\ud800"}'),
        ("/v1/estimates", '{"params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": NaN}'),
        ("/v1/estimates", '{"params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", '
         '"gpus": Infinity}'),
        ("/v1/estimates", '{"params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 1e400}'),
        ("/v1/reconcile?since=0001-01-01", "{}"),
    ],
)  # fmt: skip
def test_bad_input_a_handmade_request_can_hold_is_a_4xx_never_a_500(
    api: TestClient, path: str, body: str
) -> None:
    response = api.post(path, content=body, headers={"content-type": "application/json"})

    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]


def test_a_run_id_that_is_not_unicode_text_is_refused_when_linking(api: TestClient) -> None:
    saved = api.post("/v1/estimates", json=SEED).json()

    response = api.post(
        f"/v1/estimates/{saved['id']}/runs",
        content='{"run_id": "run-\\udc80", "force": true}',
        headers={"content-type": "application/json"},
    )

    assert response.status_code == 422 and "unicode" in str(response.json()["detail"]).lower()
