"""Routes for operators: readiness, Prometheus metrics, the dashboard page and the MLflow
UI address its run links point at."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse, Response

from service.entrypoints.api.deps import App
from service.presenters import dashboard, json_loop
from service.presenters.metrics import metrics_response

router = APIRouter(tags=["operations"])


@router.get("/livez", summary="Liveness: the process answers (no database, no MLflow)")
def livez() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/healthz", summary="Readiness: the database answers; MLflow is reported")
def healthz(app: App) -> JSONResponse:
    health = app.operations.health()
    return JSONResponse(json_loop.health_view(health), 200 if health.ready else 503)


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
def mlflow_links(app: App) -> dict[str, str | None]:
    return json_loop.mlflow_links_view(app.operations.mlflow_ui_url())


@router.get(
    "/",
    summary="The dashboard (one self-contained HTML page)",
    response_class=HTMLResponse,
    tags=["dashboard"],
)
def dashboard_page() -> HTMLResponse:
    return HTMLResponse(dashboard.page())
