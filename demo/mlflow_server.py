"""A real `mlflow server` for the demo, the tests and the benchmarks (a plain class, no
pytest), and builders that write MLflow runs the way a training job does: explicit start
and end times, metrics logged over several steps, tags."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from mlflow.entities import Metric, Param, RunTag
from mlflow.tracking import MlflowClient

READY_TIMEOUT_SECONDS = 90.0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The client side of every test session: fail fast instead of MLflow's ~4 minutes of
# retries against a dead server, and keep set_terminated from printing run URLs.
CLIENT_ENVIRONMENT = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class MlflowServer:
    """One `mlflow server` process (SQLite backend and artifacts under `root`). `stop()` and
    `start()` can be repeated: the port and the database stay the same, so a test can take
    MLflow away mid-pass and bring it back with its runs intact."""

    def __init__(
        self,
        root: Path,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        admin_password: str | None = None,
    ) -> None:
        """With `admin_password`, the server runs MLflow's basic-auth app: user `admin` with
        that password, every other user READ by default (MLflow's own default)."""
        self.root = root
        self.admin_password = admin_password
        self.host = host
        self.port = port or free_port(host)
        self.log_path = root / "server.log"
        self.startup_seconds: float | None = None  # of the last start()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://{self.host}:{self.port}"

    def uri_as(self, user: str, password: str) -> str:
        """The address with credentials in it, written as users write them (not encoded)."""
        return f"http://{user}:{password}@{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def command(self) -> list[str]:
        """The `mlflow server` command line this server runs (shown by `make demo --keep`)."""
        return [
            str(Path(sys.executable).parent / "mlflow"),
            "server",
            "--backend-store-uri",
            f"sqlite:///{self.root / 'mlflow.db'}",
            "--default-artifact-root",
            str(self.root / "artifacts"),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--workers",
            "1",
            # uvicorn drops an idle keep-alive connection after 5 s; a client request sent at
            # that moment fails with RemoteDisconnected (seen in CI). Keep them for 5 minutes.
            "--uvicorn-opts",
            "--timeout-keep-alive 300",
            *(["--app-name", "basic-auth"] if self.admin_password is not None else []),
        ]

    def _auth_environment(self) -> dict[str, str]:
        if self.admin_password is None:
            return {}
        config = self.root / "basic_auth.ini"
        config.write_text(
            "[mlflow]\n"
            "default_permission = READ\n"
            f"database_uri = sqlite:///{self.root / 'basic_auth.db'}\n"
            "admin_username = admin\n"
            "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        )
        return {
            "MLFLOW_AUTH_CONFIG_PATH": str(config),
            "MLFLOW_AUTH_ADMIN_PASSWORD": self.admin_password,
            "MLFLOW_FLASK_SERVER_SECRET_KEY": uuid.uuid4().hex,
        }

    def start(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        if self.running:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        command = self.command()
        # The defaults start ~15 processes and ~2.4 GB; one worker and no job runner is
        # enough for tests (docs/contract.md §8).
        env = {
            **os.environ,
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
            **self._auth_environment(),
        }
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            # A new session, so stop() can signal the whole group (gunicorn/uvicorn workers).
            self._process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"mlflow server exited with code {self._process.returncode}:\n"
                    + self.log_tail()
                )
            if self._healthy():
                self.startup_seconds = time.monotonic() - started
                return
            time.sleep(0.25)
        self.stop()
        raise RuntimeError(
            f"mlflow server not ready at {self.uri} after {timeout:.0f} s:\n" + self.log_tail()
        )

    @contextmanager
    def hung(self) -> Iterator[None]:
        """The server frozen (SIGSTOP to its process group): it still accepts connections
        (the kernel queues them) but answers nothing until the block ends (SIGCONT)."""
        assert self._process is not None and self.running
        os.killpg(self._process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.killpg(self._process.pid, signal.SIGCONT)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        self._wait_port_closed()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return "(no server log)"
        return "\n".join(text.splitlines()[-lines:])

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def _wait_port_closed(self, timeout: float = 10.0) -> None:
        # Orphaned workers could keep the socket open; a "dead server" test needs it refused.
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                if sock.connect_ex((self.host, self.port)) != 0:
                    return
            time.sleep(0.1)

    def __enter__(self) -> MlflowServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


# --- builders ------------------------------------------------------------------------------


def to_ms(moment: datetime) -> int:
    """Epoch milliseconds of an aware datetime, exactly (no float rounding)."""
    return (moment - EPOCH) // timedelta(milliseconds=1)


def unique_name(prefix: str = "reckon-test") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def _throughput_series(final: float, steps: int) -> list[float]:
    """A warm-up ramp that ends exactly at `final` (NaN and negatives pass through)."""
    return [final * (step + 1) / steps for step in range(steps - 1)] + [final]


def _metrics(values: Mapping[str, float], start_ms: int, steps: int) -> list[Metric]:
    metrics = []
    for key, final in values.items():
        for step, value in enumerate(_throughput_series(final, steps)):
            metrics.append(Metric(key, value, start_ms + 1000 * (step + 1), step))
    return metrics


def make_training_run(
    client: MlflowClient,
    experiment_id: str,
    *,
    start: datetime,
    end: datetime | None,
    status: str = "FINISHED",
    metrics: Mapping[str, float] | None = None,
    tags: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    steps: int = 4,
) -> str:
    """Create one run like a training job would and return its id. Each metric is logged at
    `steps` steps, the last (latest) step carrying the given value. `end=None` with status
    RUNNING leaves the run open; SCHEDULED is set without an end time."""
    start_ms = to_ms(start)
    run_id: str = client.create_run(experiment_id, start_time=start_ms).info.run_id
    client.log_batch(
        run_id,
        metrics=_metrics(metrics or {}, start_ms, steps),
        params=[Param(key, str(value)) for key, value in (params or {}).items()],
        tags=[RunTag(key, value) for key, value in (tags or {}).items()],
        synchronous=True,
    )
    if status in ("RUNNING", "SCHEDULED"):
        if end is not None:
            # A restarted run: it ended once and MLflow keeps that end time when the status
            # goes back to RUNNING, so only the status tells it is not terminated.
            client.set_terminated(run_id, "FAILED", end_time=to_ms(end))
        if status == "SCHEDULED" or end is not None:
            client.update_run(run_id, status=status)
        return run_id
    client.set_terminated(run_id, status, end_time=to_ms(end) if end is not None else None)
    return run_id


@dataclass(frozen=True)
class RunSpec:
    """One run for `create_runs`; defaults make a tagged, finished run."""

    start: datetime
    end: datetime | None
    status: str = "FINISHED"
    metrics: Mapping[str, float] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)


def create_runs(client: MlflowClient, experiment_id: str, specs: Iterable[RunSpec]) -> list[str]:
    """Create many runs quickly (one log_batch per run, one value per metric, one client).
    Returns run ids in the order of `specs`."""
    run_ids = []
    for spec in specs:
        start_ms = to_ms(spec.start)
        run_id: str = client.create_run(
            experiment_id, start_time=start_ms, tags=dict(spec.tags)
        ).info.run_id
        if spec.metrics:
            client.log_batch(
                run_id,
                metrics=[Metric(k, v, start_ms, 0) for k, v in spec.metrics.items()],
                synchronous=True,
            )
        if spec.status != "RUNNING":
            end_ms = to_ms(spec.end) if spec.end is not None else None
            client.set_terminated(run_id, spec.status, end_time=end_ms)
        run_ids.append(run_id)
    return run_ids
