"""Requests refused before their body is read: a state-changing request without the token
is a 401 whatever it carries, and one over RECKON_MAX_REQUEST_BYTES a 413. The last test
sends a 300 MB body to a real `reckon serve` and reads the server's peak memory (VmHWM)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from tests.serving import RECKON, serve_process

TOKEN = "s3cret-token"
RIGHT = {"Authorization": f"Bearer {TOKEN}"}
LIMIT_BYTES = 64 * 1024
SEED: dict[str, Any] = {
    "params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8,
    "precision": "bf16", "utilization": 0.4,
}  # fmt: skip


@pytest.fixture
def api(database_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=database_url, api_token=TOKEN, max_request_bytes=LIMIT_BYTES)
    with TestClient(create_app(build(settings))) as client:
        yield client


def test_without_the_token_the_body_is_never_parsed(api: TestClient) -> None:
    junk = b"{" * 10_000  # not JSON: parsed, it would be a 422
    as_json = {"Content-Type": "application/json"}
    answer = api.post("/v1/estimates", content=junk, headers=as_json)
    assert answer.status_code == 401 and answer.headers["www-authenticate"] == "Bearer"
    assert api.post("/v1/estimates", content=junk, headers={**RIGHT, **as_json}).status_code == 422


def test_a_body_over_the_limit_is_a_413_declared_or_streamed(api: TestClient) -> None:
    big = b" " * (LIMIT_BYTES + 1)
    declared = api.post("/v1/estimates", content=big, headers=RIGHT)
    assert declared.status_code == 413
    assert "RECKON_MAX_REQUEST_BYTES" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
        for _ in range(8):
            yield b" " * (LIMIT_BYTES // 4)

    assert api.post("/v1/estimates", content=chunks(), headers=RIGHT).status_code == 413
    # A body within the limit, declared or streamed, reaches the route as it was sent.
    assert api.post("/v1/estimates", json=SEED, headers=RIGHT).status_code == 201

    def small() -> Iterator[bytes]:
        text = b'{"params": "7e9", "tokens": "1e12", "gpu": "a100-80gb", "gpus": 8}'
        yield text[:20]
        yield text[20:]

    as_json = {**RIGHT, "Content-Type": "application/json"}
    assert api.post("/v1/estimates", content=small(), headers=as_json).status_code == 201
    assert api.get("/v1/estimate", params=SEED).status_code == 200  # reads need no token


def _peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc status")


def _post_huge(base: str, body_bytes: int, headers: dict[str, str], *, chunked: bool) -> int:
    """POST `body_bytes` of JSON-looking junk as fast as the socket takes it; the status the
    server answered (read concurrently: it may answer long before the body is sent)."""
    host, port = base.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=30)
    framing = {"Transfer-Encoding": "chunked"} if chunked else {"Content-Length": str(body_bytes)}
    head = "".join(f"{k}: {v}\r\n" for k, v in {**headers, **framing}.items())
    conn.sendall(f"POST /v1/estimates HTTP/1.1\r\nHost: {host}\r\n{head}\r\n".encode())
    answer = bytearray()

    def read() -> None:
        try:
            while data := conn.recv(65536):
                answer.extend(data)
        except OSError:
            pass

    reader = threading.Thread(target=read)
    reader.start()
    piece = b"[" * (1 << 20)
    if chunked:
        piece = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    try:
        for _ in range(body_bytes >> 20):
            conn.sendall(piece)
    except OSError:
        pass  # the server answered and closed: the rest of the body is never read
    reader.join(timeout=30)
    conn.close()
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_300_mb_body_leaves_the_servers_memory_flat(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("RECKON_")}
    env.update(RECKON_DATABASE_URL=f"sqlite:///{tmp_path / 'reckon.db'}", RECKON_API_TOKEN=TOKEN)
    env.pop("MLFLOW_TRACKING_URI", None)
    subprocess.run([RECKON, "db", "upgrade"], env=env, cwd=tmp_path, check=True)
    with serve_process(env, tmp_path) as served:
        before_kib = _peak_rss_kib(served.pid)
        huge = 300 << 20
        assert _post_huge(served.base, huge, {}, chunked=False) == 401
        assert _post_huge(served.base, huge, {}, chunked=True) == 401
        assert _post_huge(served.base, huge, RIGHT, chunked=False) == 413
        assert _post_huge(served.base, huge, RIGHT, chunked=True) == 413
        grown_mib = (_peak_rss_kib(served.pid) - before_kib) / 1024
    assert grown_mib < 20, f"peak memory grew {grown_mib:.0f} MiB under 4 x 300 MB bodies"
