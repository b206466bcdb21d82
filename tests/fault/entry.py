"""The ONE way the fault suite reaches the entry points, so their internals can change
(the application object, the CLI split) without touching the suite: the real console
entry point `reckon` run as a subprocess or in process, and the HTTP app as a client."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str

    @property
    def traceback(self) -> bool:
        return "Traceback (most recent call last)" in self.out + self.err


def reckon(args: list[str], env: Mapping[str, str] | None = None, timeout: float = 60) -> Result:
    """`reckon ARGS` in a fresh process (the console script's own code path)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", "from service.entrypoints.cli.main import run; run()", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


def reckon_in_process(args: list[str], capsys: object) -> Result:
    """`reckon ARGS` through service.entrypoints.cli.main in this process (fast, for fuzzing)."""
    from service.entrypoints.cli.main import main

    code = main(args)
    captured = capsys.readouterr()  # type: ignore[attr-defined]
    return Result(code, captured.out, captured.err)


def api_client(database_url: str, mlflow_uri: str | None, token: str | None = None) -> object:
    """A TestClient on the real app over these settings."""
    from fastapi.testclient import TestClient

    from service.bootstrap import build
    from service.config import Settings
    from service.entrypoints.api.app import create_app

    settings = Settings(database_url=database_url, mlflow_tracking_uri=mlflow_uri, api_token=token)
    return TestClient(create_app(build(settings)), raise_server_exceptions=False)
