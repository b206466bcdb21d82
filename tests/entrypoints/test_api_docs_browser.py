"""The API documentation pages on a machine with no route to the internet: `/docs` (Swagger
UI) and `/redoc` load only what Reckon's install serves, and draw every route. The app is the
real `create_app`, served by uvicorn on 127.0.0.1; Chromium resolves every other host to
nothing, so a page that still needed a CDN would come up blank.

Chromium is the Debian package (`apt-get install chromium`); without it the browser tests
skip, or fail when CI is set."""

from __future__ import annotations

import re
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import uvicorn

from demo.mlflow_server import free_port
from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from service.entrypoints.api.docs import ASSETS_URL
from tests.browser import Browser  # the one headless Chromium driver

SERVER_READY_SECONDS = 20.0
# Routes a reader of the docs must find, whatever else the API grows.
DOCUMENTED = ("/v1/estimate", "/v1/estimates", "/v1/history", "/v1/accuracy", "/healthz")
# Chromium's own form-autofill lookup, made on the page's behalf for ReDoc's search box; the
# browser asks, not the page (and the resolver rules keep it off the network anyway).
BROWSER_OWN_HOSTS = {"content-autofill.googleapis.com"}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real app on a free port. The docs need no database: the SQLite file is never
    opened by these pages."""
    root = tmp_path_factory.mktemp("api-docs")
    settings = Settings(database_url=f"sqlite:///{root / 'reckon.db'}")
    port = free_port()
    config = uvicorn.Config(
        create_app(build(settings)), host="127.0.0.1", port=port, log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + SERVER_READY_SECONDS
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped before it was ready"
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def fetch(url: str) -> tuple[int, str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.headers.get_content_type(), response.read()


def page_urls(html: str) -> list[str]:
    """Every script, stylesheet and icon URL the page names."""
    return re.findall(r"""(?:src|href)\s*[=:]\s*['"]([^'"]+)['"]""", html)


# --- without a browser: what the pages point at ----------------------------------------------


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_name_only_assets_the_server_itself_serves(base_url: str, page: str) -> None:
    status, _type, body = fetch(base_url + page)
    html = body.decode()

    assert status == 200
    urls = page_urls(html)
    assert urls, "the page names no assets"
    assert [url for url in urls if urlsplit(url).netloc] == []
    for url in urls:
        asset_status, _asset_type, asset = fetch(base_url + url)
        assert asset_status == 200 and asset, url


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_forbid_the_browser_to_load_from_elsewhere(base_url: str, page: str) -> None:
    with urllib.request.urlopen(base_url + page, timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]

    assert "default-src 'self'" in policy and "img-src 'self' data:" in policy


def test_the_swagger_bundle_is_served_as_javascript(base_url: str) -> None:
    status, content_type, body = fetch(f"{base_url}{ASSETS_URL}/swagger-ui-bundle.js")

    assert status == 200
    assert content_type in ("text/javascript", "application/javascript")
    assert len(body) > 100_000


# --- in a browser with no network -------------------------------------------------------------


def rendered(browser: Browser, url: str, *, shot: Path | None = None) -> tuple[str, list[str]]:
    """The DOM once the page has drawn every documented route, and what the page requested."""
    drawn = " && ".join(f"document.body.innerText.includes({path!r})" for path in DOCUMENTED)
    with browser.page() as page:
        page.goto(url)
        page.wait_for(drawn)
        dom = str(page.evaluate("document.documentElement.outerHTML"))
        if shot is not None:
            page.screenshot(shot)
    return dom, browser.requests


def assert_stayed_on_the_server(requests: list[str]) -> None:
    assert any(urlsplit(url).path.startswith(ASSETS_URL) for url in requests), requests
    outside = [
        url for url in requests if urlsplit(url).hostname not in ("127.0.0.1", *BROWSER_OWN_HOSTS)
    ]
    assert outside == [], f"the page reached beyond the server: {outside}"


def test_swagger_ui_draws_every_route_with_no_network(browser: Browser, base_url: str) -> None:
    dom, requests = rendered(browser, f"{base_url}/docs")

    assert 'class="swagger-ui"' in dom
    paths = set(re.findall(r'data-path="([^"]+)"', dom))
    assert set(DOCUMENTED) <= paths, sorted(paths)
    assert "Reckon" in dom
    assert_stayed_on_the_server(requests)


def test_redoc_draws_every_route_with_no_network(browser: Browser, base_url: str) -> None:
    dom, requests = rendered(browser, f"{base_url}/redoc")

    assert "Reckon" in dom
    for path in DOCUMENTED:
        assert f">{path}<" in dom or f"{path}</" in dom, path
    assert_stayed_on_the_server(requests)


def test_swagger_ui_screenshot_shows_the_page(
    browser: Browser, base_url: str, tmp_path: Path
) -> None:
    shot = tmp_path / "docs.png"

    rendered(browser, f"{base_url}/docs", shot=shot)

    assert shot.stat().st_size > 20_000  # a blank page is a few kB
