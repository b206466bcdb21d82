"""JSON views of the loop's and the operators' results: passes, skips, factor sets, refits,
jobs, health, schema, import and launch. Same rule as json_views.py: the CLI's --json and
the API speak the same field names; the documents are json_loop_documents.py's (health
and MLflow links: json_documents.py's)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from service.domain.records import PassRecord, SchemaStatus, Skip
from service.domain.values import fields_of
from service.presenters.json_views import JSON, iso_time
from service.presenters.money import cost_totals_view
from service.presenters.wording import (
    NO_FACTOR_SET,
    accuracy_configuration_note,
    accuracy_counts_note,
    gpus_slope_words,
    is_thin,
    not_fallen_back_note,
)

if TYPE_CHECKING:
    from service.calibration.model import BacktestResult, FactorSet, SegmentFactors
    from service.presenters import json_documents as doc
    from service.presenters import json_forecast_documents as forecastdoc
    from service.presenters import json_loop_documents as loopdoc
    from service.usecases.results.loop import (
        ForecastRun,
        ImportOutcome,
        Jobs,
        LaunchOutcome,
        PassOutcome,
        RefitOutcome,
    )
    from service.usecases.results.reads import (
        Accuracy,
        FactorHistory,
        FactorsAnswer,
        Health,
        ScorePair,
        Scores,
    )


def skip_view(skip: Skip) -> loopdoc.Skip:
    return {
        "run_id": skip.run_id,
        "reason": skip.reason,
        "detail": skip.detail,
        "estimate_id": skip.estimate_id,
    }


def pass_view(record: PassRecord) -> loopdoc.PassRecord:
    return {
        "pass_id": record.id,
        "trigger": record.trigger,
        "status": record.status,
        "started_at": iso_time(record.started_at),
        "ended_at": iso_time(record.ended_at),
        "window_after": iso_time(record.window_after),
        "window_cutoff": iso_time(record.window_cutoff),
        "runs_seen": record.runs_seen,
        "reconciled": record.reconciled,
        "skipped": record.skipped,
        "factor_set": record.factor_set_version,
        "error": record.error,
    }


def outcome_view(outcome: PassOutcome) -> loopdoc.PassOutcome:
    """What `reckon reconcile --json` and POST /v1/reconcile return."""
    window = outcome.window
    return {
        "status": outcome.status,
        "pass_id": outcome.pass_id,
        "window_after": None if window is None else iso_time(window.after),
        "window_cutoff": None if window is None else iso_time(window.cutoff),
        "runs_seen": outcome.runs_seen,
        "reconciled": len(outcome.reconciled),
        "reconciled_estimates": [item.estimate_id for item in outcome.reconciled],
        "skipped": [skip_view(skip) for skip in outcome.skipped],
        "factor_set": outcome.factor_set,
        "tags_written": outcome.tags_written,
        "tags_pending": outcome.tags_pending,
        "tags_blocked": outcome.tags_blocked,
        "backfilled_experiments": list(outcome.backfilled_experiments),
        "blocked_reason": outcome.blocked_reason,
        "missed_before_window": outcome.missed_before_window,
        "missed_hint": outcome.missed_hint,
        "holder": outcome.holder,
        "message": outcome.summary,
    }


def segment_view(factors: SegmentFactors) -> loopdoc.Segment:
    return cast(  # every field of SegmentFactors (tests/unit/test_json_documents.py)
        "loopdoc.Segment",
        {
            **fields_of(factors),
            "effective": factors.effective,
            "fallback_to": factors.fallback_to,
            "gpus_slope_words": gpus_slope_words(factors),
        },
    )


def factor_set_view(factor_set: FactorSet, active_version: int | None) -> loopdoc.FactorSet:
    return {
        "version": factor_set.version,
        "created_at": factor_set.created_at.isoformat(),
        "activated_at": iso_time(factor_set.activated_at),
        "active": factor_set.version == active_version,
        "method": factor_set.method,
        "parameters": dict(factor_set.parameters),
        "provenance": dict(factor_set.provenance),
        "reconciliation_count": factor_set.reconciliation_count,
        "backtest_score": factor_set.backtest_score,
        "baseline_score": factor_set.baseline_score,
        "forced": factor_set.forced,
        "segments": [
            {**segment_view(item), "thin": is_thin(item, factor_set)}
            for item in factor_set.segments.values()
        ],
    }


def factors_view(answer: FactorsAnswer) -> loopdoc.Factors:
    if answer.factor_set is None:
        return {
            "version": None,
            "active": False,
            "message": NO_FACTOR_SET,
            "prior_sources": answer.prior_sources,
            "segments": [segment_view(item) for item in answer.prior_segments],
        }
    # A set has every key of Factors but `message` and `prior_sources`.
    return cast("loopdoc.Factors", factor_set_view(answer.factor_set, answer.active_version))


def factor_history_view(history: FactorHistory) -> loopdoc.FactorHistory:
    return {"versions": [factor_set_view(item, history.active_version) for item in history.sets]}


def refit_view(outcome: RefitOutcome) -> loopdoc.Refit:
    """`reckon refit --json` and POST /v1/refit."""
    return {
        "factor_set": None if outcome.factor_set is None else outcome.factor_set.version,
        "activated": outcome.activated,
        "backtest": None if outcome.candidate is None else _backtest(outcome.candidate),
        "baseline": None if outcome.baseline is None else _backtest(outcome.baseline),
        "message": outcome.message,
    }


def _backtest(result: BacktestResult) -> loopdoc.Backtest:
    return cast("loopdoc.Backtest", fields_of(result))  # tests/unit/test_json_documents.py


def forecast_view(run: ForecastRun) -> forecastdoc.ForecastRun:
    """What `reckon forecast --json` and POST /v1/forecast return."""
    from service.presenters.json_views import running_view

    return {
        "locked": run.locked,
        "holder": run.holder,
        "forecasts": [running_view(item) for item in run.forecasts],
        "at_risk": len(run.at_risk),
        "tags_written": run.written,
        "tags": {
            "pending": run.owed.pending,
            "blocked": run.owed.blocked,
            "blocked_reason": run.owed.blocked_reason,
        },
    }


def jobs_view(jobs: Jobs) -> loopdoc.Jobs:
    return {
        "schedule": jobs.schedule,
        "timezone": jobs.timezone,
        "passes": [pass_view(item) for item in jobs.passes],
        "tags": {
            "pending": jobs.tags.pending,
            "blocked": jobs.tags.blocked,
            "blocked_reason": jobs.tags.blocked_reason,
        },
    }


def health_view(health: Health) -> doc.Health:
    return {
        "status": "ok" if health.ready else "failing",
        "database": health.database,
        "mlflow": health.mlflow,
        "mlflow_checked_seconds_ago": (
            None if health.mlflow_age_seconds is None else round(health.mlflow_age_seconds, 1)
        ),
    }


def schema_view(status: SchemaStatus) -> JSON:
    return {
        "database": status.database,
        "current": status.current,
        "head": status.head,
        "up_to_date": status.up_to_date,
    }


def import_view(outcome: ImportOutcome) -> JSON:
    """`reckon import --json`: runs_seen, imported, skipped (each run_id and reason)."""
    return {
        "runs_seen": outcome.runs_seen,
        "imported": [fields_of(item) for item in outcome.imported],
        "skipped": [fields_of(item) for item in outcome.skipped],
        "reconciled": outcome.reconciled,
        "dry_run": outcome.dry_run,
        "pass_status": outcome.pass_status,
        "pass_id": outcome.pass_id,
        "factor_set": outcome.factor_set,
    }


def launch_view(outcome: LaunchOutcome) -> JSON:
    return {**fields_of(outcome), "child_run_ids": list(outcome.child_run_ids)}


def mlflow_links_view(ui_url: str | None) -> doc.MlflowLinks:
    """GET /v1/mlflow: where the dashboard links run ids. MLflow's UI opens a run from its id
    alone at `#/runs/<run_id>` (it looks up the experiment itself)."""
    return {"ui_url": ui_url, "run_url": None if ui_url is None else ui_url + "/#/runs/{run_id}"}


def scores_pair_view(pair: ScorePair) -> loopdoc.ScorePair:
    return {
        "raw": _scores(pair.raw),
        "calibrated": _scores(pair.calibrated),
        "calibrated_worse": pair.calibrated_worse,
        "by_hand": None if pair.by_hand is None else _scores(pair.by_hand),
    }


def _scores(scores: Scores) -> loopdoc.Scores:
    return cast("loopdoc.Scores", fields_of(scores))  # tests/unit/test_json_documents.py


def accuracy_view(accuracy: Accuracy) -> loopdoc.Accuracy:
    return {
        "by": accuracy.by,
        "since": iso_time(accuracy.since),
        "overall": scores_pair_view(accuracy.overall),
        "groups": [
            {
                "group": group.group,
                **scores_pair_view(group.scores),
                "fallback": group.fallback,
                "fallback_to": group.fallback_to,
                "note": None
                if group.not_fallen_back is None
                else not_fallen_back_note(group.not_fallen_back),
                "cost": cost_totals_view(group.cost),
            }
            for group in accuracy.groups
        ],
        "retrospective": scores_pair_view(accuracy.retrospective),
        "configuration": {
            "config_differs": accuracy.config_differs,
            "config_from_plan": accuracy.config_from_plan,
            "note": accuracy_configuration_note(accuracy),
        },
        "factor_set": accuracy.factor_set,
        "fitted_on": accuracy.fitted_on,
        "counts_note": accuracy_counts_note(accuracy),
        "cost": cost_totals_view(accuracy.cost),
    }
