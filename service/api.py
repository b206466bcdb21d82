"""The HTTP API (FastAPI): thin routes over the same use cases as the CLI, with the CLI's
field names. Domain errors map to status codes in one handler; a bearer token guards every
state-changing route when RECKON_API_TOKEN is set. Built by `create_app`, never at import."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from service import estimates, queries, running
from service.api_docs import install_offline_docs
from service.bootstrap import Container
from service.domain import (
    ConflictError,
    Estimate,
    EstimateRequest,
    InputError,
    NotFoundError,
    ReckonError,
    UnavailableError,
)
from service.estimates import RawInputs
from service.metrics import metrics_response
from service.units import parse_count, parse_since
from service.views import (
    JSON,
    calibrated_view,
    estimate_view,
    outcome_view,
    pass_view,
    reconciliation_view,
    running_view,
    saved_view,
)

STATUS: dict[type[ReckonError], int] = {
    InputError: 422,
    NotFoundError: 404,
    ConflictError: 409,
    UnavailableError: 503,
}


class EstimateBody(BaseModel):
    """POST /v1/estimates: the inputs of `reckon estimate`, plus a label."""

    params: str | float = Field(description="(Active) parameters: 7e9 or 7B")
    tokens: str | float = Field(description="Training tokens: 1e12 or 1T")
    gpu: str
    gpus: int = Field(ge=1)
    precision: str = "bf16"
    recompute: str = "none"
    recompute_factor: float | None = None
    utilization: float | None = None
    overhead: float | None = None
    layers: int | None = None
    hidden_size: int | None = None
    seq_len: int | None = None
    price_per_gpu_hour: float | None = None
    label: str | None = Field(default=None, max_length=200)
    calibrated: bool = False
    factor_set: int | None = None


def _raw(body: EstimateBody) -> RawInputs:
    return RawInputs(
        params=parse_count(str(body.params), "params"),
        tokens=parse_count(str(body.tokens), "tokens"),
        **body.model_dump(exclude={"params", "tokens", "label", "calibrated", "factor_set"}),
    )


def create_app(
    container: Container,
    *,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The app over one container. `on_startup`/`on_shutdown` let `reckon serve` run the
    scheduler inside the app's lifespan."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if on_startup is not None:
            on_startup()
        try:
            yield
        finally:
            if on_shutdown is not None:
                on_shutdown()
            container.close()

    app = FastAPI(
        title="Reckon",
        version="0.1.0",
        description="How many GPUs, and how long? Estimates that learn from MLflow.",
        lifespan=lifespan,
        docs_url=None,  # FastAPI's pages load from a CDN; these ship with the install
        redoc_url=None,
    )
    install_offline_docs(app)

    @app.exception_handler(ReckonError)
    async def domain_error(_request: Request, error: ReckonError) -> JSONResponse:
        code = next((c for kind, c in STATUS.items() if isinstance(error, kind)), 500)
        return JSONResponse({"detail": str(error)}, status_code=code)

    def require_token(authorization: Annotated[str | None, Header()] = None) -> None:
        expected = container.settings.api_token
        if not expected:
            return
        given = (authorization or "").removeprefix("Bearer ").strip()
        if not hmac.compare_digest(given.encode(), expected.encode()):
            raise _Unauthorized()

    @app.exception_handler(_Unauthorized)
    async def unauthorized(_request: Request, _error: _Unauthorized) -> JSONResponse:
        return JSONResponse(
            {"detail": "missing or wrong bearer token"},
            status_code=401,
            headers={"WWW-Authenticate": "Bearer"},
        )

    guarded = [Depends(require_token)]

    def request_of(body: EstimateBody) -> EstimateRequest:
        return estimates.build_request(container.catalog, _raw(body))

    def compute(body: EstimateBody) -> Estimate:
        return estimates.compute(container.catalog, request_of(body))

    def wants_calibration(body: EstimateBody) -> bool:
        chosen = body.calibrated or body.factor_set is not None
        if chosen and (body.utilization is not None or body.overhead is not None):
            raise InputError("calibrated uses fitted factors; drop utilization/overhead")
        return chosen

    @app.get("/v1/estimate", summary="Compute an estimate (no side effects)")
    def get_estimate(
        params: str,
        tokens: str,
        gpu: str,
        gpus: Annotated[int, Query(ge=1)],
        precision: str = "bf16",
        recompute: str = "none",
        recompute_factor: float | None = None,
        utilization: float | None = None,
        overhead: float | None = None,
        layers: int | None = None,
        hidden_size: int | None = None,
        seq_len: int | None = None,
        price_per_gpu_hour: float | None = None,
        calibrated: bool = False,
        factor_set: int | None = None,
    ) -> JSON:
        body = EstimateBody(
            params=params, tokens=tokens, gpu=gpu, gpus=gpus, precision=precision,
            recompute=recompute, recompute_factor=recompute_factor, utilization=utilization,
            overhead=overhead, layers=layers, hidden_size=hidden_size, seq_len=seq_len,
            price_per_gpu_hour=price_per_gpu_hour, calibrated=calibrated, factor_set=factor_set,
        )  # fmt: skip
        if wants_calibration(body):
            return calibrated_view(container.calibrated(request_of(body), body.factor_set))
        return estimate_view(compute(body))

    @app.post(
        "/v1/estimates",
        status_code=201,
        dependencies=guarded,
        summary="Compute and store an estimate",
    )
    def post_estimate(body: EstimateBody) -> JSON:
        if wants_calibration(body):
            answer = container.calibrated(request_of(body), body.factor_set)
            saved = estimates.save(
                container.uow(), answer.estimate, now=container.clock.now(), label=body.label,
                interval=answer.interval, factor_set_version=answer.factor_set,
                factor_source=answer.factors.level,
            )  # fmt: skip
            return saved_view(saved, [])
        result = compute(body)
        given = body.utilization is not None or body.overhead is not None
        saved = estimates.save(
            container.uow(),
            result,
            now=container.clock.now(),
            label=body.label,
            factor_source="given" if given else "default",
        )
        return saved_view(saved, [])

    @app.get("/v1/estimates/{estimate_id}", summary="One stored estimate and its runs")
    def get_saved(estimate_id: str) -> JSON:
        saved, run_ids = estimates.show(container.uow(), estimate_id)
        return saved_view(saved, run_ids)

    @app.get("/v1/estimates", summary="Stored estimates, newest first")
    def list_saved(limit: Annotated[int, Query(ge=1, le=10_000)] = 50) -> JSON:
        saved = estimates.list_saved(container.uow(), limit=limit)
        return {"estimates": [saved_view(item) for item in saved]}

    @app.get("/v1/history", summary="Predicted against observed, per estimate")
    def history(
        since: str | None = None,
        gpu: str | None = None,
        limit: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    ) -> JSON:
        rows = queries.history(
            container.uow(),
            since=None if since is None else parse_since(since),
            gpu=None if gpu is None else container.catalog.resolve(gpu).name,
            limit=limit,
        )
        return {"history": [reconciliation_view(row) for row in rows]}

    @app.get("/v1/accuracy", summary="Prediction accuracy, raw and calibrated")
    def get_accuracy(by: str | None = None, since: str | None = None) -> JSON:
        return container.accuracy_document(by, None if since is None else parse_since(since))

    @app.get("/v1/factors", summary="The active (or a pinned) factor set, per segment")
    def get_factors(version: int | None = None) -> JSON:
        return container.factor_set(version)

    @app.get("/v1/factors/history", summary="Every factor set, oldest first")
    def factor_history() -> JSON:
        return container.factor_history_document()

    @app.post("/v1/refit", dependencies=guarded, summary="Refit the factors now")
    def post_refit(force: bool = False) -> JSON:
        outcome = container.refit(force=force)
        version = None if outcome.factor_set is None else outcome.factor_set.version
        return {"factor_set": version, "activated": outcome.activated, "message": outcome.message}

    @app.post("/v1/reconcile", dependencies=guarded, summary="Run one reconcile pass now")
    def reconcile(since: str | None = None, full: bool = False) -> JSONResponse:
        if since is not None and full:
            raise InputError("since and full are alternatives; give one")
        outcome = container.reconcile(
            trigger="api", since=None if since is None else parse_since(since), full=full
        )
        code = 409 if outcome.status == "locked" else 200
        return JSONResponse(outcome_view(outcome), status_code=code)

    @app.get("/v1/jobs", summary="Recent reconcile passes and the schedule")
    def jobs(limit: Annotated[int, Query(ge=1, le=1000)] = 20) -> JSON:
        return {
            "schedule": container.settings.schedule,
            "timezone": container.settings.timezone,
            "passes": [pass_view(item) for item in queries.passes(container.uow(), limit)],
        }

    @app.get("/v1/running", summary="Linked runs still RUNNING, projected")
    def running_runs() -> JSON:
        items = running.running(container.uow(), container.run_source(), container.clock.now())
        return {"running": [running_view(item) for item in items]}

    @app.get("/healthz", summary="Database and MLflow reachable")
    def healthz() -> JSONResponse:
        checks = container.health()
        code = 200 if checks["database"] == "ok" else 503
        return JSONResponse({"status": "ok" if code == 200 else "failing", **checks}, code)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    def metrics() -> Response:
        body, content_type = metrics_response(container)
        return Response(body, media_type=content_type)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def dashboard() -> HTMLResponse:
        return HTMLResponse(container.dashboard_html())

    return app


class _Unauthorized(Exception):
    pass
