"""Domain objects as plain JSON-able dicts, shared by the CLI's --json and the HTTP API so
both speak the same field names (DESIGN §4)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from service.comparison import human_line
from service.domain import (
    Estimate,
    EstimateRequest,
    PassRecord,
    Plan,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
    SensitivityRow,
    Skip,
    fields_of,
)
from service.estimates import Calibrated
from service.factor_model import FactorSet, SegmentFactors
from service.hardware import GpuSpec
from service.reconcile import PassOutcome
from service.units import format_duration

JSON = dict[str, Any]


def request_view(request: EstimateRequest) -> JSON:
    model, hardware = request.model, request.hardware
    return {
        "params": model.params,
        "tokens": model.tokens,
        "layers": model.layers,
        "hidden_size": model.hidden_size,
        "seq_len": model.seq_len,
        "gpu": hardware.gpu,
        "gpus": hardware.gpus,
        "precision": hardware.precision,
        "recompute": request.recompute,
        "utilization": request.factors.utilization,
        "overhead": request.factors.overhead,
        "price_per_gpu_hour": request.price_per_gpu_hour,
    }


def estimate_view(result: Estimate) -> JSON:
    return {
        **request_view(result.request),
        "flops": result.flops,
        "model_flops": result.model_flops,
        "recompute_factor": result.recompute_factor,
        "peak_flops": result.peak_flops,
        "compute_seconds": result.compute_seconds,
        "wall_seconds": result.wall_seconds,
        "wall_human": format_duration(result.wall_seconds),
        "gpu_hours": result.gpu_hours,
        "mfu": result.mfu,
        "hfu": result.hfu,
        "tokens_per_second": result.tokens_per_second,
        "tokens_per_second_per_gpu": result.tokens_per_second / result.request.hardware.gpus,
        "cost": result.cost,
        "formula_version": result.formula_version,
    }


def plan_view(plan: Plan) -> JSON:
    return {
        "gpus": plan.gpus,
        "deadline_seconds": plan.deadline_seconds,
        "deadline_human": format_duration(plan.deadline_seconds),
        "multiple_of": plan.multiple_of,
        "estimate": estimate_view(plan.estimate),
    }


def sensitivity_view(base: Estimate, rows: list[SensitivityRow]) -> JSON:
    return {
        "base": estimate_view(base),
        "rows": [
            {
                "variable": row.variable,
                "value": row.value,
                "wall_seconds": row.wall_seconds,
                "wall_human": format_duration(row.wall_seconds),
                "change_pct": row.change_pct,
                "is_base": row.is_base,
            }
            for row in rows
        ],
    }


def gpu_view(spec: GpuSpec) -> JSON:
    return {
        "name": spec.name,
        "aliases": list(spec.aliases),
        "vendor": spec.vendor,
        "memory_gb": spec.memory_gb,
        "peak_flops": dict(spec.peak_flops),
        "source": spec.source,
    }


def saved_view(saved: SavedEstimate, run_ids: list[str] | None = None) -> JSON:
    """A stored prediction: the same keys as the estimate it was, plus its identity."""
    body: JSON = (
        estimate_view(saved.estimate)
        if saved.estimate is not None
        else {
            "gpu": saved.gpu,
            "gpus": saved.gpus,
            "precision": saved.precision,
            "wall_seconds": saved.predicted_wall_seconds,
            "wall_human": format_duration(saved.predicted_wall_seconds),
        }
    )
    if saved.interval is not None:
        body["wall_seconds_p10"] = saved.interval.p10
        body["wall_seconds"] = saved.interval.p50
        body["wall_seconds_p90"] = saved.interval.p90
        body["wall_human"] = format_duration(saved.interval.p50)
    return {
        "id": saved.id,
        "kind": saved.kind,
        "created_at": saved.created_at.isoformat(),
        "label": saved.label,
        "predicted_seconds": saved.predicted_wall_seconds,
        "factor_set": saved.factor_set_version,
        "factor_source": saved.factor_source,
        "mlflow_tag": saved.mlflow_tag,
        **({} if run_ids is None else {"run_ids": run_ids}),
        **body,
    }


def reconciliation_view(item: Reconciliation) -> JSON:
    return {
        "estimate_id": item.estimate_id,
        "run_ids": list(item.run_ids),
        "gpu": item.gpu,
        "precision": item.precision,
        "started_at": item.started_at.isoformat(),
        "ended_at": item.ended_at.isoformat(),
        "predicted_seconds": item.predicted_seconds,
        "observed_seconds": item.observed_seconds,
        "observed_compute_seconds": item.observed_compute_seconds,
        "ratio": item.ratio,
        "error_pct": item.error_pct,
        "abs_error_pct": item.abs_error_pct,
        "implied_utilization": item.implied_utilization,
        "implied_overhead": item.implied_overhead,
        "implied_effective_utilization": item.implied_effective_utilization,
        "factors_kind": item.factors_kind,
        "failed_segments": item.failed_segments,
        "line": human_line(item.predicted_seconds, item.observed_seconds),
    }


def skip_view(skip: Skip) -> JSON:
    return {
        "run_id": skip.run_id,
        "reason": skip.reason,
        "detail": skip.detail,
        "estimate_id": skip.estimate_id,
    }


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def pass_view(record: PassRecord) -> JSON:
    return {
        "pass_id": record.id,
        "trigger": record.trigger,
        "status": record.status,
        "started_at": _iso(record.started_at),
        "ended_at": _iso(record.ended_at),
        "window_after": _iso(record.window_after),
        "window_cutoff": _iso(record.window_cutoff),
        "runs_seen": record.runs_seen,
        "reconciled": record.reconciled,
        "skipped": record.skipped,
        "factor_set": record.factor_set_version,
        "error": record.error,
    }


def outcome_view(outcome: PassOutcome) -> JSON:
    """What `reckon reconcile --json` and POST /v1/reconcile return."""
    window = outcome.window
    return {
        "status": outcome.status,
        "pass_id": outcome.pass_id,
        "window_after": None if window is None else _iso(window.after),
        "window_cutoff": None if window is None else _iso(window.cutoff),
        "runs_seen": outcome.runs_seen,
        "reconciled": len(outcome.reconciled),
        "reconciled_estimates": [item.estimate_id for item in outcome.reconciled],
        "skipped": [skip_view(skip) for skip in outcome.skipped],
        "factor_set": outcome.factor_set,
        "tags_written": outcome.tags_written,
        "message": outcome.summary,
    }


def running_view(item: RunningProjection) -> JSON:
    projected = item.projected_seconds
    return {
        "run_id": item.run_id,
        "estimate_id": item.estimate_id,
        "started_at": item.started_at.isoformat(),
        "elapsed_seconds": item.elapsed_seconds,
        "predicted_seconds": item.predicted_seconds,
        "projected_seconds": projected,
        "projected_finish": None
        if projected is None
        else (item.started_at + timedelta(seconds=projected)).isoformat(),
        "slip_pct": item.slip_pct,
        "line": (
            f"running {format_duration(item.elapsed_seconds)} of a predicted "
            f"{format_duration(item.predicted_seconds)}"
            + (
                ""
                if projected is None
                else f"; projected {format_duration(projected)} ({item.slip_pct:+.1f}%)"
            )
        ),
    }


def calibrated_view(result: Calibrated) -> JSON:
    """An estimate with fitted factors: the estimate's keys, P50 as `wall_seconds`, the
    P10/P90 around it and where the factors came from."""
    factors = result.factors
    return {
        **estimate_view(result.estimate),
        "wall_seconds_p10": result.interval.p10,
        "wall_seconds_p90": result.interval.p90,
        "wall_human_p10": format_duration(result.interval.p10),
        "wall_human_p90": format_duration(result.interval.p90),
        "factor_set": result.factor_set,
        "factor_source": factors.level,
        "factor_segment": factors.segment,
        "factor_n": factors.n,
        "combined_only": factors.combined_only,
        "fallback": factors.fallback,
    }


def segment_view(factors: SegmentFactors) -> JSON:
    return {**fields_of(factors), "effective": factors.effective}


def factor_set_view(factor_set: FactorSet, active_version: int | None) -> JSON:
    return {
        "version": factor_set.version,
        "created_at": factor_set.created_at.isoformat(),
        "activated_at": _iso(factor_set.activated_at),
        "active": factor_set.version == active_version,
        "method": factor_set.method,
        "parameters": dict(factor_set.parameters),
        "provenance": dict(factor_set.provenance),
        "reconciliation_count": factor_set.reconciliation_count,
        "backtest_score": factor_set.backtest_score,
        "baseline_score": factor_set.baseline_score,
        "forced": factor_set.forced,
        "segments": [segment_view(item) for item in factor_set.segments.values()],
    }
