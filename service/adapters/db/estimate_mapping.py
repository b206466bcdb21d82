"""SavedEstimate <-> EstimateRow. Every computed output is stored, so a saved estimate reads
back exactly as it was computed (no recomputation with a newer formula)."""

from __future__ import annotations

from typing import Any, cast

from service.adapters.db.tables import EstimateRow
from service.domain.prices import DEFAULT_CURRENCY, Price
from service.domain.records import EstimateKind, FactorSource, Planned, SavedEstimate
from service.domain.values import (
    Estimate,
    EstimateRequest,
    Factors,
    Hardware,
    Interval,
    Model,
    Recompute,
)


def to_row(saved: SavedEstimate) -> EstimateRow:
    row = EstimateRow(
        id=saved.id,
        kind=saved.kind,
        created_at=saved.created_at,
        label=saved.label,
        gpu=saved.gpu,
        gpus=saved.gpus,
        precision=saved.precision,
        predicted_wall_seconds=saved.predicted_wall_seconds,
        factor_set_version=saved.factor_set_version,
        factor_source=saved.factor_source,
        deadline=saved.deadline,
    )
    if saved.interval is not None:
        row.wall_seconds_p10 = saved.interval.p10
        row.wall_seconds_p50 = saved.interval.p50
        row.wall_seconds_p90 = saved.interval.p90
    result = saved.estimate
    if result is not None:
        request = result.request
        model = request.model
        row.params, row.tokens = model.params, model.tokens
        row.layers, row.hidden_size, row.seq_len = model.layers, model.hidden_size, model.seq_len
        row.global_batch_tokens = model.global_batch_tokens
        row.recompute = request.recompute
        row.recompute_factor_given = request.recompute_factor
        row.recompute_factor = result.recompute_factor
        row.utilization = request.factors.utilization
        row.overhead = request.factors.overhead
        row.price_per_gpu_hour = request.price_per_gpu_hour
        row.currency = request.currency
        row.peak_flops = result.peak_flops
        row.model_flops = result.model_flops
        row.flops = result.flops
        row.predicted_compute_seconds = result.compute_seconds
        row.gpu_hours = result.gpu_hours
        row.mfu = result.mfu
        row.hfu = result.hfu
        row.tokens_per_second = result.tokens_per_second
        row.cost = result.cost
        row.formula_version = result.formula_version
    return row


def from_row(row: EstimateRow | Any) -> SavedEstimate:
    """From an ORM row or a Core row of the estimate table (same attribute names)."""
    interval = None
    if row.wall_seconds_p10 is not None and row.wall_seconds_p90 is not None:
        p50 = (
            row.wall_seconds_p50 if row.wall_seconds_p50 is not None else row.predicted_wall_seconds
        )
        interval = Interval(row.wall_seconds_p10, p50, row.wall_seconds_p90)
    return SavedEstimate(
        id=row.id,
        kind=cast(EstimateKind, row.kind),
        created_at=row.created_at,
        gpu=row.gpu,
        gpus=row.gpus,
        precision=row.precision,
        predicted_wall_seconds=row.predicted_wall_seconds,
        estimate=_estimate(row) if row.kind in ("computed", "retrospective") else None,
        interval=interval,
        factor_set_version=row.factor_set_version,
        factor_source=cast(FactorSource, row.factor_source),
        label=row.label,
        deadline=getattr(row, "deadline", None),
    )


def planned(row: Any) -> Planned:
    """A `Planned` from a row carrying its columns (`EstimateRepository.plans`); the same
    reading as `Planned.of(from_row(row))`, without building the whole estimate."""
    computed = row.kind in ("computed", "retrospective")
    both = row.wall_seconds_p10 is not None and row.wall_seconds_p90 is not None
    return Planned(
        id=row.id,
        kind=cast(EstimateKind, row.kind),
        gpu=row.gpu,
        gpus=row.gpus,
        precision=row.precision,
        predicted_wall_seconds=row.predicted_wall_seconds,
        recompute=row.recompute if computed else None,
        p10=row.wall_seconds_p10 if both else None,
        p90=row.wall_seconds_p90 if both else None,
        params=row.params if computed else None,
        global_batch_tokens=row.global_batch_tokens if computed else None,
        tokens=row.tokens if computed else None,
        flops=row.flops if computed else None,
        peak_flops=row.peak_flops if computed else None,
    )


def own_price(price_per_gpu_hour: float | None, currency: str | None) -> Price | None:
    """An estimate's own price, from its columns: in its currency (USD for rows saved
    before estimates kept one, as `--price-per-gpu-hour` without `--currency`)."""
    if price_per_gpu_hour is None:
        return None
    return Price(price_per_gpu_hour, currency or DEFAULT_CURRENCY)


def _estimate(row: EstimateRow | Any) -> Estimate:
    assert row.params is not None and row.tokens is not None
    assert row.utilization is not None and row.overhead is not None
    request = EstimateRequest(
        model=Model(
            row.params,
            row.tokens,
            row.layers,
            row.hidden_size,
            row.seq_len,
            row.global_batch_tokens,
        ),
        hardware=Hardware(row.gpu, row.gpus, row.precision),
        factors=Factors(row.utilization, row.overhead),
        recompute=cast(Recompute, row.recompute),
        recompute_factor=row.recompute_factor_given,
        price_per_gpu_hour=row.price_per_gpu_hour,
        currency=row.currency or "USD",
    )
    return Estimate(
        request=request,
        peak_flops=_required(row.peak_flops),
        model_flops=_required(row.model_flops),
        flops=_required(row.flops),
        recompute_factor=_required(row.recompute_factor),
        compute_seconds=_required(row.predicted_compute_seconds),
        wall_seconds=row.predicted_wall_seconds,
        gpu_hours=_required(row.gpu_hours),
        mfu=_required(row.mfu),
        hfu=_required(row.hfu),
        tokens_per_second=_required(row.tokens_per_second),
        cost=row.cost,
        formula_version=row.formula_version or "",
    )


def _required(value: float | None) -> float:
    assert value is not None, "a computed estimate row lacks an output column"
    return value
