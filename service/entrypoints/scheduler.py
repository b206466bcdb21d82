"""The nightly pass and the forecast job on their cron schedules (APScheduler 3). One
scheduler per process, an in-memory job store, one instance of each job at a time, misfires
coalesced within a grace period. Exclusivity across processes and replicas is each job's own
lock (the pass's, and the forecast's: a different one, so neither waits on the other), not
the scheduler's: two schedulers never share a job store (they would run every job twice)."""

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
FORECAST_JOB_ID = "reckon-running-forecast"
MISFIRE_GRACE_SECONDS = 6 * 3600  # a scheduler down at 02:00 still runs the pass by 08:00
# A missed forecast is worth running late only within its own (hourly) period.
FORECAST_MISFIRE_GRACE_SECONDS = 30 * 60


def cron_trigger(schedule: str, timezone: str, variable: str = "RECKON_SCHEDULE") -> CronTrigger:
    try:
        return CronTrigger.from_crontab(schedule, timezone=timezone)
    except (ValueError, LookupError) as error:
        raise InputError(
            f"bad {variable} {schedule!r} or RECKON_TIMEZONE {timezone!r}: {error}"
        ) from None


def running_forecast(app: Reckon) -> None:
    """The scheduled forecast: every linked RUNNING run tagged `reckon.eta*`; failures are
    logged, never raised into the scheduler (the outbox keeps what MLflow did not take)."""
    try:
        done = app.loop.forecast()
        if done.locked:
            log.info("scheduled forecast skipped: another forecast run holds the lock")
        else:
            log.info(
                "scheduled forecast: %d running runs, %d at risk, %d tags written, %d owed",
                len(done.tagged), len(done.at_risk), done.written, done.owed.pending,
            )  # fmt: skip
    except ReckonError as error:
        log.error("scheduled forecast failed: %s", error)
    except Exception:
        log.exception("scheduled forecast crashed")


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
    app: Reckon,
    *,
    blocking: bool = False,
    trigger: Any | None = None,
    forecast_trigger: Any | None = None,
) -> BaseScheduler:
    """A scheduler with the nightly job and the forecast job added (not started). `trigger`
    and `forecast_trigger` replace their crons (tests use a date trigger a moment ahead)."""
    policy = app.policy
    chosen = trigger or cron_trigger(policy.schedule, policy.timezone)
    hourly = forecast_trigger or cron_trigger(
        policy.running_schedule, policy.timezone, "RECKON_RUNNING_SCHEDULE"
    )
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
    scheduler.add_job(
        running_forecast,
        trigger=hourly,
        args=[app],
        id=FORECAST_JOB_ID,
        name="forecast linked RUNNING runs and tag them reckon.eta*",
        max_instances=1,
        coalesce=True,
        misfire_grace_time=FORECAST_MISFIRE_GRACE_SECONDS,
    )
    return scheduler
