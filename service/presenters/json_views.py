"""Typed results as plain JSON-able dicts, shared by the CLI's --json and the HTTP API so
both speak the same field names (docs/contract.md §4). Only entry points import presenters."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from service.domain.comparison import human_line
from service.domain.hardware import GpuSpec
from service.domain.inputs import ESTIMATE_INPUTS
from service.domain.records import (
    HistoryPage,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
)
from service.domain.units import format_duration
from service.domain.values import Estimate, EstimateRequest, Plan, fields_of
from service.presenters.wording import (
    configuration_note,
    projected_finish,
    running_line,
)

if TYPE_CHECKING:
    from service.calibration.calibrated import Calibrated
    from service.usecases.results.answers import (
        Answer,
        EstimateDetail,
        PlanAnswer,
        SavedAnswer,
        Sensitivity,
        Unlinked,
    )

JSON = dict[str, Any]


def request_view(request: EstimateRequest) -> JSON:
    """The validated inputs, under the names of `service.domain.inputs.ESTIMATE_INPUTS`."""
    model, hardware, factors = request.model, request.hardware, request.factors
    values = {
        "params": model.params,
        "tokens": model.tokens,
        "gpu": hardware.gpu,
        "gpus": hardware.gpus,
        "precision": hardware.precision,
        "recompute": request.recompute,
        "recompute_factor": request.recompute_factor,
        "utilization": factors.utilization,
        "overhead": factors.overhead,
        "layers": model.layers,
        "hidden_size": model.hidden_size,
        "seq_len": model.seq_len,
        "price_per_gpu_hour": request.price_per_gpu_hour,
        "currency": request.currency,
    }
    return {spec.name: values[spec.name] for spec in ESTIMATE_INPUTS}


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


def plan_answer_view(answer: PlanAnswer) -> JSON:
    """`reckon plan --json` and GET /v1/plan: the plan; calibrated, also the quantile it
    was made at (`confidence`) and the P10/P90 at the chosen GPU count."""
    document = plan_view(answer.plan)
    fitted = answer.calibrated
    if fitted is None:
        return document
    wall = fitted.wall
    return {
        **document,
        "confidence": fitted.confidence,
        "wall_seconds_at_confidence": wall.wall_seconds_at_confidence,
        "wall_seconds_p10": wall.interval.p10,
        "wall_seconds": wall.interval.p50,
        "wall_seconds_p90": wall.interval.p90,
        "factor_set": answer.factor_set,
        "factor_source": wall.factors.level,
        "factor_segment": wall.factors.segment,
        "fallback": wall.factors.fallback,
        "fallback_to": wall.factors.fallback_to,
        "extrapolated": list(wall.extrapolated),
    }


def sensitivity_view(table: Sensitivity) -> JSON:
    if table.calibrated is not None:
        return {
            "base": estimate_view(table.base),
            "factor_set": table.factor_set,
            "rows": [
                {**fields_of(row), "wall_human": format_duration(row.wall_seconds)}
                for row in table.calibrated
            ],
        }
    return {
        "base": estimate_view(table.base),
        "rows": [
            {
                "variable": row.variable,
                "value": row.value,
                "wall_seconds": row.wall_seconds,
                "wall_human": format_duration(row.wall_seconds),
                "change_pct": row.change_pct,
                "is_base": row.is_base,
            }
            for row in table.rows
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
        "label": item.label,
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
        "kind": item.kind,
        "profile": item.profile,
        "note": item.note,
        "configuration": {
            "check": item.config_check,
            "planned": {
                "gpus": item.planned_gpus,
                "tokens": item.planned_tokens,
                "precision": item.planned_precision,
            },
            "observed": {
                "gpus": item.observed_gpus,
                "tokens": item.observed_tokens,
                "precision": item.observed_precision,
            },
            "note": configuration_note(item),
        },
        "line": human_line(item.predicted_seconds, item.observed_seconds),
    }


def iso_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def running_view(item: RunningProjection) -> JSON:
    return {
        "run_id": item.run_id,
        "estimate_id": item.estimate_id,
        "started_at": item.started_at.isoformat(),
        "elapsed_seconds": item.elapsed_seconds,
        "predicted_seconds": item.predicted_seconds,
        "projected_seconds": item.projected_seconds,
        "projected_finish": iso_time(projected_finish(item)),
        "slip_pct": item.slip_pct,
        "line": running_line(item),
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
        "fallback_to": factors.fallback_to,
        "extrapolated": list(result.extrapolated),
    }


def answer_view(answer: Answer) -> JSON:
    """`reckon estimate --json` and GET /v1/estimate."""
    if answer.calibrated is not None:
        return calibrated_view(answer.calibrated)
    return {**estimate_view(answer.estimate), "factor_source": answer.factor_source}


def saved_answer_view(item: SavedAnswer) -> JSON:
    """`reckon estimate --save --json` and POST /v1/estimates: the answer and its identity."""
    return {**answer_view(item.answer), **saved_view(item.saved, [])}


def unlinked_view(done: Unlinked) -> JSON:
    item = done.reconciliation
    return {
        "estimate_id": done.estimate_id,
        "run_id": done.run_id,
        "tag_removed": done.tag_removed,
        "reconciliation": None if item is None else reconciliation_view(item),
    }


def detail_view(detail: EstimateDetail) -> JSON:
    return saved_view(detail.saved, detail.run_ids)


def hardware_view(specs: list[GpuSpec]) -> JSON:
    return {"gpus": [gpu_view(spec) for spec in specs]}


def history_view(rows: list[Reconciliation]) -> JSON:
    return {"history": [reconciliation_view(row) for row in rows]}


def history_page_view(page: HistoryPage) -> JSON:
    """GET /v1/history and `reckon history --json`: the rows, how many match in all, and the
    paging and order they came in."""
    query = page.query
    return {
        **history_view(page.rows),
        "total": page.total,
        "offset": query.offset,
        "limit": query.limit,
        "sort": query.sort,
        "search": query.search,
    }


def estimates_view(saved: list[SavedEstimate]) -> JSON:
    return {"estimates": [saved_view(item) for item in saved]}


def running_list_view(items: list[RunningProjection]) -> JSON:
    return {"running": [running_view(item) for item in items]}
