"""Process runners: the API with (or without) the in-process scheduler, and the scheduler
alone. The CLI calls these; they compose the entry points so those never import each other."""

from __future__ import annotations

import logging
import signal
import socket

import uvicorn

from service.app import Reckon
from service.domain.errors import NOT_CONFIGURED, InputError
from service.entrypoints.api.app import create_app
from service.entrypoints.scheduler import build_scheduler

log = logging.getLogger(__name__)


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def check_address(host: str, port: int) -> None:
    """One line (InputError) when the server could not listen there: a host that does not
    resolve, an address this machine does not have, a port in use or not allowed."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError, OverflowError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise InputError(f"cannot listen on host {host!r}: {reason}") from None
    family, kind, proto, _name, address = found[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            raise InputError(f"cannot listen on {host}:{port}: {error.strerror}") from None


def serve(app: Reckon, *, host: str, port: int, with_scheduler: bool) -> None:
    check_address(host, port)  # before anything starts: one line, not uvicorn's nine
    app.operations.require_prices()  # a bad RECKON_PRICES_FILE: one line, exit 2
    app.operations.require_schema()  # refuse to start on an out-of-date schema, before binding
    scheduler = build_scheduler(app) if with_scheduler else None
    api = create_app(
        app,
        on_startup=None if scheduler is None else scheduler.start,
        # SIGTERM: uvicorn ends the lifespan; wait=True lets a running pass finish.
        on_shutdown=None if scheduler is None else lambda: scheduler.shutdown(wait=True),
    )
    configure_logging()
    warn_without_mlflow(app)
    uvicorn.run(api, host=host, port=port, log_level="info")


def warn_without_mlflow(app: Reckon) -> None:
    """Serving without MLflow is allowed (estimates, plans, history need none), but said at
    start: the nightly pass, import and running answer 503 until it is set."""
    if not app.policy.mlflow_tracking_uri:
        log.warning(
            "%s; until then the nightly pass, import and running fail (HTTP 503)", NOT_CONFIGURED
        )


def run_scheduler(app: Reckon) -> None:
    """The scheduler alone, in the foreground, until SIGTERM or SIGINT."""
    app.operations.require_schema()  # refuse to start on an out-of-date schema
    scheduler = build_scheduler(app, blocking=True)
    configure_logging()
    warn_without_mlflow(app)

    def stop(_signum: int, _frame: object) -> None:
        scheduler.shutdown(wait=True)  # a running pass finishes (or rolls back) first

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for job in scheduler.get_jobs():
        log.info("scheduler started: %s in %s", job.trigger, app.policy.timezone)
    scheduler.start()
