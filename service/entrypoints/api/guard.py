"""What every state-changing request meets before its body is read (plain ASGI, ahead of
FastAPI): the bearer token when RECKON_API_TOKEN is set (401), then the size limit
RECKON_MAX_REQUEST_BYTES (413), from the Content-Length header or, for a chunked body, while
it streams in. A refused request costs neither a parse nor more memory than the limit: an
800 MB body without a token is answered 401 unread, one with a token 413 after at most
the limit. Safe methods (GET, HEAD, OPTIONS) carry no body and pass straight through."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from service.app import Reckon
from service.entrypoints.api.deps import token_matches

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyGuard:
    """ASGI middleware: the token and the size limit of `reckon`'s policy, checked first."""

    def __init__(self, app: ASGIApp, reckon: Reckon) -> None:
        self.app = app
        self.reckon = reckon

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in SAFE_METHODS:
            await self.app(scope, receive, send)
            return
        policy = self.reckon.policy
        headers = {name.lower(): value for name, value in scope.get("headers", ())}
        if policy.api_token and not token_matches(
            headers.get(b"authorization", b"").decode("latin-1"), policy.api_token
        ):
            await _answer(send, 401, "missing or wrong bearer token", bearer=True)
            return
        limit = policy.max_request_bytes
        declared = headers.get(b"content-length", b"").strip()
        if declared and (not declared.isdigit() or int(declared) > limit):
            await _answer(send, 413, _too_large(limit))
            return
        body = await _read_at_most(receive, limit)
        if body is None:
            await _answer(send, 413, _too_large(limit))
            return
        await self.app(scope, _replay(body, receive), send)


def _too_large(limit: int) -> str:
    return f"request body larger than {limit:,} bytes (RECKON_MAX_REQUEST_BYTES)"


async def _read_at_most(receive: Receive, limit: int) -> list[Message] | None:
    """The body's messages, or None once more than `limit` bytes arrived (reading stops)."""
    messages: list[Message] = []
    size = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages  # a disconnect: the app sees it as it would have
        size += len(message.get("body", b""))
        if size > limit:
            return None
        if not message.get("more_body", False):
            return messages


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """A `receive` that hands the app the body already read, then the connection's own."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed


async def _answer(send: Send, status: int, detail: str, *, bearer: bool = False) -> None:
    body = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if bearer:
        headers.append((b"www-authenticate", b"Bearer"))
    # The unread body is not drained: the server closes the connection after the answer.
    headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
