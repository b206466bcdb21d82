"""Typed results as plain JSON-able dicts, shared by the CLI's --json and the HTTP API so
both speak the same field names (docs/contract.md §4). Only entry points import presenters.
Each view returns a document of json_documents.py or json_loop_documents.py (TypedDicts,
imported here for type checking only: the CLI never loads them)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from service.domain.comparison import human_line
from service.domain.forecast import iso_utc
from service.domain.hardware import GpuSpec
from service.domain.inputs import ESTIMATE_INPUTS
from service.domain.records import (
    HistoryPage,
    Reconciliation,
    RunningProjection,
    SavedEstimate,
)
from service.domain.spending import cost_of
from service.domain.units import format_duration
from service.domain.values import Estimate, EstimateRequest, fields_of
from service.presenters.memory import memory_view
from service.presenters.money import cost_view
from service.presenters.wording import (
    configuration_note,
    projected_finish,
    running_line,
)

if TYPE_CHECKING:
    from service.calibration.calibrated import Calibrated
    from service.presenters import json_documents as doc
    from service.presenters import json_loop_documents as loopdoc
    from service.usecases.results.answers import (
        Answer,
        EstimateDetail,
        PlanAnswer,
        SavedAnswer,
        Sensitivity,
        Unlinked,
    )

JSON = dict[str, Any]  # the CLI-only views (json_loop.py): schema, import, launch


def request_view(request: EstimateRequest) -> doc.EstimateInputs:
    """The validated inputs, under the names of `service.domain.inputs.ESTIMATE_INPUTS`."""
    model, hardware, factors = request.model, request.hardware, request.factors
    values: doc.EstimateInputs = {
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
        "global_batch_tokens": model.global_batch_tokens,
        "price_per_gpu_hour": request.price_per_gpu_hour,
        "currency": request.currency,
    }
    named: Mapping[str, object] = values
    return cast("doc.EstimateInputs", {spec.name: named[spec.name] for spec in ESTIMATE_INPUTS})


def estimate_view(result: Estimate) -> doc.Estimate:
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


def plan_view(answer: PlanAnswer) -> doc.Plan:
    """The plan, what bound its count (the deadline or the memory per GPU) and its memory."""
    plan = answer.plan
    return {
        "gpus": plan.gpus,
        "deadline_seconds": plan.deadline_seconds,
        "deadline_human": format_duration(plan.deadline_seconds),
        "multiple_of": plan.multiple_of,
        "estimate": estimate_view(plan.estimate),
        "bound": answer.bound,
        "time_bound_gpus": answer.time_gpus,
        "memory": memory_view(answer.memory),
    }


def plan_answer_view(answer: PlanAnswer) -> doc.Plan | doc.CalibratedPlan:
    """`reckon plan --json` and GET /v1/plan: the plan, what bound its count (the deadline
    or the memory per GPU) and its memory; calibrated, also the quantile it was made at
    (`confidence`) and the P10/P90 at the chosen GPU count."""
    document = plan_view(answer)
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


def sensitivity_view(table: Sensitivity) -> doc.Sensitivity | doc.CalibratedSensitivity:
    if table.calibrated is not None:
        return {
            "base": estimate_view(table.base),
            "factor_set": table.factor_set,
            "rows": [
                cast(  # every field of CalibratedSensitivityRow (tests/unit/test_json_documents.py)
                    "doc.CalibratedSensitivityRow",
                    {
                        **fields_of(row),
                        "wall_human": format_duration(row.wall_seconds),
                        "fits": table.fits[index],
                    },
                )
                for index, row in enumerate(table.calibrated)
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
                "fits": table.fits[index],
            }
            for index, row in enumerate(table.rows)
        ],
    }


def gpu_view(spec: GpuSpec) -> doc.Gpu:
    return {
        "name": spec.name,
        "aliases": list(spec.aliases),
        "vendor": spec.vendor,
        "memory_gb": spec.memory_gb,
        "peak_flops": dict(spec.peak_flops),
        "source": spec.source,
    }


def saved_view(
    saved: SavedEstimate, run_ids: list[str] | None = None
) -> doc.SavedEstimate | doc.ExternalEstimate:
    """A stored prediction: its identity (and runs), then the same keys as the estimate it
    was (an external one: its configuration and wall time), then its P10/P90 if it has one."""
    listed: doc.RunIds = {} if run_ids is None else {"run_ids": run_ids}
    if saved.estimate is not None:
        return {**_identity(saved), **listed, **estimate_view(saved.estimate), **_range(saved)}
    return {
        **_identity(saved),
        **listed,
        "gpu": saved.gpu,
        "gpus": saved.gpus,
        "precision": saved.precision,
        "wall_seconds": saved.predicted_wall_seconds,
        "wall_human": format_duration(saved.predicted_wall_seconds),
        **_range(saved),
    }


def _identity(saved: SavedEstimate) -> doc.EstimateIdentity:
    return {
        "id": saved.id,
        "kind": saved.kind,
        "created_at": saved.created_at.isoformat(),
        "label": saved.label,
        "predicted_seconds": saved.predicted_wall_seconds,
        "factor_set": saved.factor_set_version,
        "factor_source": saved.factor_source,
        "mlflow_tag": saved.mlflow_tag,
        "deadline": iso_time(saved.deadline),
    }


def _range(saved: SavedEstimate) -> doc.SavedRange:
    """The stored P10/P90 and P50 as the wall time (in this order, so that P10 and P90 follow
    the estimate's keys and its wall time is replaced where it stands)."""
    interval = saved.interval
    if interval is None:
        return {}
    return {
        "wall_seconds_p10": interval.p10,
        "wall_seconds": interval.p50,
        "wall_seconds_p90": interval.p90,
        "wall_human": format_duration(interval.p50),
    }


def reconciliation_view(item: Reconciliation) -> loopdoc.Reconciliation:
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
                "global_batch_tokens": item.global_batch_tokens,
            },
            "observed": {
                "gpus": item.observed_gpus,
                "tokens": item.observed_tokens,
                "precision": item.observed_precision,
                "global_batch_tokens": item.observed_global_batch_tokens,
            },
            "note": configuration_note(item),
        },
        "cost": cost_view(cost_of(item, None)),  # priced by the read (service.usecases.queries)
        "line": human_line(item.predicted_seconds, item.observed_seconds),
    }


def iso_time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def running_view(item: RunningProjection) -> loopdoc.Running:
    due = item.eta
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
        "eta": None if due is None else iso_utc(due.p50),
        "eta_p10": None if due is None else iso_utc(due.p10),
        "eta_p90": None if due is None else iso_utc(due.p90),
        "deadline": None if due is None or due.deadline is None else iso_utc(due.deadline),
        "at_risk": due is not None and due.at_risk,
        "slip_seconds": None if due is None else due.slip_seconds,
    }


def calibrated_view(result: Calibrated) -> doc.CalibratedEstimate:
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


def answer_view(answer: Answer) -> doc.GivenAnswer | doc.CalibratedAnswer:
    """`reckon estimate --json` and GET /v1/estimate: the estimate and its memory per GPU."""
    memory = memory_view(answer.memory)
    if answer.calibrated is not None:
        return {**calibrated_view(answer.calibrated), "memory": memory}
    return {**_given_view(answer), "memory": memory}


def _given_view(answer: Answer) -> doc.EstimateAnswer:
    return {**estimate_view(answer.estimate), "factor_source": answer.factor_source}


def saved_answer_view(item: SavedAnswer) -> doc.SavedAnswer | doc.CalibratedSavedAnswer:
    """`reckon estimate --save --json` and POST /v1/estimates: the answer and its identity.
    The stored estimate is the answer's own (and its range the calibrated answer's), so only
    the identity's keys and the stored P50 as the wall time go over the answer's. Its memory
    is not stored (nor shown here): the saved estimate reads back as it was answered."""
    saved = item.saved
    if item.answer.calibrated is not None:
        return {
            **calibrated_view(item.answer.calibrated),
            **_identity(saved),
            "run_ids": [],
            **_range(saved),
        }
    return {**_given_view(item.answer), **_identity(saved), "run_ids": []}


def unlinked_view(done: Unlinked) -> doc.Unlinked:
    item = done.reconciliation
    return {
        "estimate_id": done.estimate_id,
        "run_id": done.run_id,
        "tag_removed": done.tag_removed,
        "reconciliation": None if item is None else reconciliation_view(item),
    }


def detail_view(detail: EstimateDetail) -> doc.SavedEstimate | doc.ExternalEstimate:
    return saved_view(detail.saved, detail.run_ids)


def linked_view(
    detail: EstimateDetail, created: bool
) -> doc.LinkedEstimate | doc.LinkedExternalEstimate:
    """POST /v1/estimates/{id}/runs: the estimate's detail; `created`: the link is new."""
    return cast(  # a detail (either shape) and one key more
        "doc.LinkedEstimate | doc.LinkedExternalEstimate",
        {**detail_view(detail), "created": created},
    )


def hardware_view(specs: list[GpuSpec]) -> doc.Hardware:
    return {"gpus": [gpu_view(spec) for spec in specs]}


def history_view(rows: list[Reconciliation]) -> loopdoc.History:
    return {"history": [reconciliation_view(row) for row in rows]}


def history_page_view(page: HistoryPage) -> loopdoc.HistoryPage:
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


def estimates_view(saved: list[SavedEstimate]) -> doc.EstimateList:
    return {"estimates": [saved_view(item) for item in saved]}


def running_list_view(items: list[RunningProjection]) -> loopdoc.RunningList:
    return {"running": [running_view(item) for item in items]}
