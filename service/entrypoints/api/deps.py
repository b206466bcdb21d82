"""What every route depends on: the application object (on the app's state) and the
bearer token that guards state-changing routes when RECKON_API_TOKEN is set."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Header, Request

from service.app import Reckon


class Unauthorized(Exception):
    """Raised by `require_token`; answered 401 with a WWW-Authenticate header."""


async def reckon(request: Request) -> Reckon:
    """Async, so FastAPI runs it on the event loop instead of a worker thread (it only reads
    an attribute): one thread hop less per request."""
    app: Reckon = request.app.state.reckon
    return app


App = Annotated[Reckon, Depends(reckon)]


def token_matches(authorization: str | None, expected: str) -> bool:
    """Whether an Authorization header carries `expected` as a bearer token. The scheme is
    required (RFC 6750): a bare token in the header is refused, not guessed."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), expected.encode()
    )


async def require_token(app: App, authorization: Annotated[str | None, Header()] = None) -> None:
    """The route's own check (and its OpenAPI header); `guard.BodyGuard` has already
    refused a wrong token before the body was read."""
    expected = app.policy.api_token
    if expected and not token_matches(authorization, expected):
        raise Unauthorized()


GUARDED = [Depends(require_token)]
