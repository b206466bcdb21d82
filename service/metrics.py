"""Prometheus exposition for /metrics: read from the database at scrape time (one short
transaction), so every replica reports the same numbers and nothing is kept in memory."""

from __future__ import annotations

from typing import Protocol

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from service import queries
from service.ports import UnitOfWork


class _HasUow(Protocol):
    def uow(self) -> UnitOfWork: ...


def metrics_response(container: _HasUow) -> tuple[bytes, str]:
    snap = queries.snapshot(container.uow())
    with container.uow() as uow:
        tags_pending = uow.outbox.count()
    registry = CollectorRegistry()

    def gauge(name: str, doc: str, value: float | None) -> None:
        if value is not None:
            Gauge(name, doc, registry=registry).set(value)

    last, good = snap.last_pass, snap.last_success
    gauge(
        "reckon_last_pass_start_timestamp_seconds",
        "Start of the most recent reconcile pass (Unix time).",
        None if last is None else last.started_at.timestamp(),
    )
    gauge(
        "reckon_last_pass_success",
        "1 if the most recent reconcile pass succeeded, 0 if it failed or is running.",
        None if last is None else float(last.status == "succeeded"),
    )
    gauge(
        "reckon_last_success_timestamp_seconds",
        "End of the most recent successful pass (Unix time); alert when it grows old.",
        None if good is None or good.ended_at is None else good.ended_at.timestamp(),
    )
    gauge(
        "reckon_last_pass_runs_seen", "Runs the most recent pass read from MLflow.",
        None if last is None else last.runs_seen,
    )  # fmt: skip
    gauge("reckon_reconciliations", "Estimates reconciled so far.", snap.reconciliations)
    gauge("reckon_skipped_runs", "Runs skipped with a recorded reason so far.", snap.skips)
    gauge(
        "reckon_tags_pending",
        "Result tags owed to MLflow runs (write-back outbox); retried by every pass.",
        tags_pending,
    )
    gauge(
        "reckon_median_abs_error_pct",
        f"Median absolute % error of the last {queries.RECENT_FOR_MEDIAN} reconciliations.",
        snap.median_abs_error_pct,
    )
    return generate_latest(registry), CONTENT_TYPE_LATEST
