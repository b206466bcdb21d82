"""Process runners: the API with (or without) the in-process scheduler, and the scheduler
alone. The CLI calls these; they compose the entry points so those never import each other."""

from __future__ import annotations

import logging
import signal

import uvicorn

from service.app import Reckon
from service.entrypoints.api.app import create_app
from service.entrypoints.scheduler import build_scheduler

log = logging.getLogger(__name__)


def configure_logging() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def serve(app: Reckon, *, host: str, port: int, with_scheduler: bool) -> None:
    app.operations.require_schema()  # refuse to start on an out-of-date schema, before binding
    scheduler = build_scheduler(app) if with_scheduler else None
    api = create_app(
        app,
        on_startup=None if scheduler is None else scheduler.start,
        # SIGTERM: uvicorn ends the lifespan; wait=True lets a running pass finish.
        on_shutdown=None if scheduler is None else lambda: scheduler.shutdown(wait=True),
    )
    configure_logging()
    uvicorn.run(api, host=host, port=port, log_level="info")


def run_scheduler(app: Reckon) -> None:
    """The scheduler alone, in the foreground, until SIGTERM or SIGINT."""
    app.operations.require_schema()  # refuse to start on an out-of-date schema
    scheduler = build_scheduler(app, blocking=True)
    configure_logging()

    def stop(_signum: int, _frame: object) -> None:
        scheduler.shutdown(wait=True)  # a running pass finishes (or rolls back) first

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    for job in scheduler.get_jobs():
        log.info("scheduler started: %s in %s", job.trigger, app.policy.timezone)
    scheduler.start()
