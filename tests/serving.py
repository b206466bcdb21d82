"""`reckon serve` as a user starts it: a real process on a free port, for the tests that
need the real server (the browser, memory under a large request)."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from demo.mlflow_server import free_port

RECKON = str(Path(sys.executable).parent / "reckon")
SERVER_READY_SECONDS = 30.0


@dataclass(frozen=True)
class Served:
    base: str  # http://127.0.0.1:PORT
    pid: int
    log: Path


@contextmanager
def serve_process(env: Mapping[str, str], cwd: Path) -> Iterator[Served]:
    """`reckon serve --no-scheduler` on a free port, once `/healthz` answers 200."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log_path = cwd / "serve.log"
    command = [RECKON, "serve", "--no-scheduler", "--host", "127.0.0.1", "--port", str(port)]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + SERVER_READY_SECONDS
        while not _answers(f"{base}/healthz"):
            assert process.poll() is None, "reckon serve exited:\n" + log_path.read_text()
            assert time.monotonic() < deadline, "reckon serve never answered:\n" + (
                log_path.read_text()
            )
            time.sleep(0.2)
        yield Served(base, process.pid, log_path)
    finally:
        process.terminate()
        wait_or_kill(process)


def wait_or_kill(process: subprocess.Popen[bytes], grace_seconds: float = 15.0) -> None:
    """Wait for a process told to stop; kill it after `grace_seconds`."""
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)


@contextmanager
def reckon_serve(env: Mapping[str, str], cwd: Path) -> Iterator[str]:
    """`reckon serve --no-scheduler` on a free port; yields its base URL once healthy."""
    with serve_process(env, cwd) as served:
        yield served.base


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
