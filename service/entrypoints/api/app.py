"""The HTTP API (FastAPI): thin routes over the application object, with the CLI's field
names, one router per area (planning, loop, ops). Domain errors map to status codes in
one handler, from the one table `STATUS`; a bearer token guards every state-changing route
when RECKON_API_TOKEN is set. Built by `create_app`, never at import."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from service.app import Reckon
from service.domain.errors import (
    ConflictError,
    InputError,
    NotFoundError,
    ReckonError,
    UnavailableError,
)
from service.entrypoints.api import loop, ops, planning
from service.entrypoints.api.deps import Unauthorized
from service.entrypoints.api.docs import install_offline_docs
from service.entrypoints.api.guard import BodyGuard

STATUS: dict[type[ReckonError], int] = {
    InputError: 422,
    NotFoundError: 404,
    ConflictError: 409,
    UnavailableError: 503,
}

__all__ = ["STATUS", "create_app"]


class ErrorMessage(BaseModel):
    """A 401/404/409/503 answer: one line saying why."""

    detail: str


# Every route may answer these; 422 keeps FastAPI's own shape (a list of problems), which
# the domain's input errors use too, so a client reads one shape for every bad input.
ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    401: {"model": ErrorMessage, "description": "Missing or wrong bearer token (POST routes)"},
    404: {"model": ErrorMessage, "description": "No such estimate, factor set or run"},
    409: {"model": ErrorMessage, "description": "Conflicts with stored state"},
    413: {"model": ErrorMessage, "description": "Body over RECKON_MAX_REQUEST_BYTES (POST routes)"},
    503: {"model": ErrorMessage, "description": "The database or MLflow is unavailable"},
}


def create_app(
    app: Reckon,
    *,
    on_startup: Callable[[], None] | None = None,
    on_shutdown: Callable[[], None] | None = None,
) -> FastAPI:
    """The HTTP app over one application object. `on_startup`/`on_shutdown` let
    `reckon serve` run the scheduler inside the app's lifespan."""

    @asynccontextmanager
    async def lifespan(_api: FastAPI) -> AsyncIterator[None]:
        if on_startup is not None:
            on_startup()
        try:
            yield
        finally:
            if on_shutdown is not None:
                on_shutdown()
            app.close()

    api = FastAPI(
        title="Reckon",
        version="0.1.0",
        description="How many GPUs, and how long? Estimates that learn from MLflow.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        docs_url=None,  # FastAPI's pages load from a CDN; these ship with the install
        redoc_url=None,
        openapi_tags=[
            {"name": "planning", "description": "Estimates, plans, sensitivity, the catalog"},
            {"name": "the loop", "description": "History, accuracy, factors, refit, passes"},
            {"name": "operations", "description": "Liveness, readiness, metrics, MLflow links"},
            {"name": "dashboard", "description": "The page at /"},
        ],
    )
    install_offline_docs(api)
    api.state.reckon = app
    api.add_exception_handler(ReckonError, _domain_error)  # type: ignore[arg-type]
    api.add_exception_handler(RequestValidationError, _invalid_request)  # type: ignore[arg-type]
    api.add_exception_handler(Unauthorized, _unauthorized)
    api.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    for module in (planning, loop, ops):
        api.include_router(module.router)
    api.add_middleware(BodyGuard, reckon=app)
    return api


async def _invalid_request(_request: Request, error: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 without echoing the input: a value JSON cannot carry back (NaN, a lone
    surrogate, 1e400) made the default answer a 500, and a body is no business of the log."""
    problems = [
        {"type": str(item.get("type", "value_error")), "loc": list(item.get("loc", ())),
         "msg": str(item.get("msg", "invalid"))}
        for item in error.errors()
    ]  # fmt: skip
    return JSONResponse({"detail": problems}, status_code=422)


async def _domain_error(_request: Request, error: ReckonError) -> JSONResponse:
    code = next((c for kind, c in STATUS.items() if isinstance(error, kind)), 500)
    if code == 422:  # the shape FastAPI's own validation errors have (and OpenAPI promises)
        problem = {"type": "value_error", "loc": [], "msg": str(error)}
        return JSONResponse({"detail": [problem]}, status_code=code)
    return JSONResponse({"detail": str(error)}, status_code=code)


async def _http_error(request: Request, error: StarletteHTTPException) -> Response:
    """Starlette's own answers, two made honest: a body that cannot be parsed at all (not
    UTF-8, not JSON) is a 422 in the shape of every other bad input, not an undocumented
    400; a 405 lists in `Allow` every method the path has, not only those of the one route
    that matched it (GET and POST /v1/estimates are two routes)."""
    if error.status_code == 400:
        problem = {"type": "json_invalid", "loc": ["body"], "msg": str(error.detail)}
        return JSONResponse({"detail": [problem]}, status_code=422)
    if error.status_code == 405:
        allowed = sorted(
            {
                method
                for route in request.app.routes
                if isinstance(route, APIRoute) and route.path_regex.match(request.url.path)
                for method in route.methods or ()
            }
        )
        return JSONResponse(
            {"detail": str(error.detail)}, status_code=405, headers={"Allow": ", ".join(allowed)}
        )
    return await http_exception_handler(request, error)


async def _unauthorized(_request: Request, _error: Exception) -> JSONResponse:
    return JSONResponse(
        {"detail": "missing or wrong bearer token"},
        status_code=401,
        headers={"WWW-Authenticate": "Bearer"},
    )
