"""Routes for operators: readiness, Prometheus metrics, the dashboard page and the MLflow
UI address its run links point at."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

from service.entrypoints.api.deps import App
from service.presenters import dashboard, json_loop
from service.presenters import json_documents as doc
from service.presenters.metrics import metrics_response

router = APIRouter(tags=["operations"])


@router.get("/livez", summary="Liveness: the process answers (no database, no MLflow)")
def livez() -> doc.Liveness:
    return {"status": "ok"}


@router.get(
    "/healthz",
    summary="Readiness: the database answers; MLflow is reported",
    responses={503: {"model": doc.Health, "description": "The database does not answer"}},
)
def healthz(app: App, response: Response) -> doc.Health:
    health = app.operations.health()
    if not health.ready:
        response.status_code = 503
    return json_loop.health_view(health)


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "The Prometheus text exposition format",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(app: App) -> Response:
    body, content_type = metrics_response(app.queries.metrics())
    return Response(body, media_type=content_type)


@router.get("/v1/mlflow", summary="The MLflow UI address, for links to runs")
def mlflow_links(app: App) -> doc.MlflowLinks:
    return json_loop.mlflow_links_view(app.operations.mlflow_ui_url())


@router.get(
    "/",
    summary="The dashboard (one self-contained HTML page)",
    response_class=HTMLResponse,
    tags=["dashboard"],
)
def dashboard_page() -> HTMLResponse:
    return HTMLResponse(dashboard.page())
