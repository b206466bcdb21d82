"""The API's documentation pages, `/docs` (Swagger UI) and `/redoc`, served from assets that
were installed with Reckon (the `fastapi-offline` package ships Swagger UI and ReDoc), so
they work on a network with no route to a CDN. FastAPI's own pages load from a CDN: the app
is built with `docs_url=None, redoc_url=None` and calls `install_offline_docs(app)`."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
ASSETS_URL = "/docs-assets"
# The pages may load only from this server: ReDoc's sidebar logo points at its CDN (the
# image hides itself when blocked) and Swagger UI would ask an online validator for a badge.
# Inline script and style are the pages' own bootstrap; ReDoc runs its search in a blob worker.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:"
)


def assets_dir() -> Path:
    """The installed directory holding the Swagger UI and ReDoc bundles."""
    return Path(str(files("fastapi_offline") / "static"))


def install_offline_docs(app: FastAPI) -> None:
    """Add `/docs`, its OAuth2 redirect page, `/redoc` and the assets they load. Every URL
    is relative to the app's root path, so the pages also work behind a path prefix."""
    if app.openapi_url is None:
        raise ValueError("the app publishes no OpenAPI document to document")
    openapi_url = app.openapi_url
    oauth2_redirect_url = app.swagger_ui_oauth2_redirect_url
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")

    @app.get(DOCS_URL, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            oauth2_redirect_url=None if oauth2_redirect_url is None else root + oauth2_redirect_url,
            swagger_ui_parameters={"validatorUrl": None, **(app.swagger_ui_parameters or {})},
        )
        return _local_only(page)

    if oauth2_redirect_url is not None:

        @app.get(oauth2_redirect_url, include_in_schema=False)
        def swagger_ui_redirect() -> HTMLResponse:
            return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,  # fonts from Google would be a request off the network
        )
        return _local_only(page)


def _local_only(page: HTMLResponse) -> HTMLResponse:
    page.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return page


def _root(request: Request) -> str:
    return str(request.scope.get("root_path", "")).rstrip("/")
