"""The nightly pass on a cron schedule (APScheduler 3). One scheduler per process, an
in-memory job store, one instance of the job at a time, misfires coalesced within a grace
period. Exclusivity across processes and replicas is the pass's own lock, not the
scheduler's: two schedulers never share a job store (they would run every job twice)."""

from __future__ import annotations

import logging
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import BaseScheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.cron import CronTrigger

from service.app import Reckon
from service.domain.errors import InputError, ReckonError

log = logging.getLogger(__name__)

JOB_ID = "reckon-nightly-reconcile"
MISFIRE_GRACE_SECONDS = 6 * 3600  # a scheduler down at 02:00 still runs the pass by 08:00


def cron_trigger(schedule: str, timezone: str) -> CronTrigger:
    try:
        return CronTrigger.from_crontab(schedule, timezone=timezone)
    except (ValueError, LookupError) as error:
        raise InputError(
            f"bad RECKON_SCHEDULE {schedule!r} or RECKON_TIMEZONE {timezone!r}: {error}"
        ) from None


def nightly_pass(app: Reckon) -> None:
    """The scheduled job: one pass; failures are logged (the next run heals from the
    watermark), never raised into the scheduler."""
    try:
        outcome = app.loop.reconcile(trigger="scheduler")
        log.info("scheduled %s", outcome.summary)
    except ReckonError as error:
        log.error("scheduled reconcile pass failed: %s", error)
    except Exception:
        log.exception("scheduled reconcile pass crashed")


def build_scheduler(
    app: Reckon, *, blocking: bool = False, trigger: Any | None = None
) -> BaseScheduler:
    """A scheduler with the nightly job added (not started). `trigger` replaces the cron
    (tests use a date trigger a moment ahead)."""
    policy = app.policy
    chosen = trigger or cron_trigger(policy.schedule, policy.timezone)
    scheduler_class = BlockingScheduler if blocking else BackgroundScheduler
    scheduler = scheduler_class(timezone="UTC")
    scheduler.add_job(
        nightly_pass,
        trigger=chosen,
        args=[app],
        id=JOB_ID,
        name="reconcile MLflow runs against stored estimates",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=MISFIRE_GRACE_SECONDS,
    )
    return scheduler
