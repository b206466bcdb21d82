"""Prometheus exposition for /metrics, from the snapshot the application reads at scrape
time (one short transaction), so every replica reports the same numbers and nothing is
kept in memory."""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

if TYPE_CHECKING:
    from service.usecases.results.loop import Snapshot


def metrics_response(snap: Snapshot) -> tuple[bytes, str]:
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
        snap.tags_pending,
    )
    gauge(
        "reckon_tags_blocked",
        "Of the owed result tags, those MLflow refused for want of permission (401/403); "
        "written by the first pass after EDIT is granted.",
        snap.tags_blocked,
    )
    gauge(
        "reckon_median_abs_error_pct",
        f"Median absolute % error of the last {snap.median_window} reconciliations (raw).",
        snap.median_abs_error_pct,
    )
    backtest = Gauge(
        "reckon_backtest_median_abs_error_pct",
        "The active factor set's time-ordered backtest: median absolute % error of the raw "
        "and of the calibrated predictions on the same targets.",
        ["prediction"],
        registry=registry,
    )
    for prediction, value in (
        ("raw", snap.backtest_raw_pct),
        ("calibrated", snap.backtest_calibrated_pct),
    ):
        if value is not None:
            backtest.labels(prediction=prediction).set(value)
    gauge(
        "reckon_backtest_coverage_ratio",
        "Share of the active set's backtest targets inside their calibrated P10-P90 (aim 0.8).",
        snap.backtest_coverage,
    )
    gauge(
        "reckon_backtest_targets",
        "How many runs the active set's backtest scored (the n behind the two above).",
        snap.backtest_targets,
    )
    if snap.running is not None:
        forecast = [item for item in snap.running if item.eta is not None]
        gauge(
            "reckon_running_at_risk",
            "Linked runs RUNNING now whose P90 finish is after their estimate's deadline.",
            sum(1 for item in forecast if item.eta is not None and item.eta.at_risk),
        )
        slip = Gauge(
            "reckon_running_slip_seconds",
            "P90 finish less the estimate's deadline, per linked run RUNNING now that has a "
            "deadline (> 0: at risk by that much; < 0: that much margin).",
            ["run_id", "estimate_id"],
            registry=registry,
        )
        for item in forecast:
            if item.eta is not None and item.eta.slip_seconds is not None:
                slip.labels(run_id=item.run_id, estimate_id=item.estimate_id).set(
                    item.eta.slip_seconds
                )
    return generate_latest(registry), CONTENT_TYPE_LATEST
