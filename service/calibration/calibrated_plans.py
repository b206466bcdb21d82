"""Calibrated planning: wall time at a chosen quantile of the predictive distribution, the
fewest GPUs whose wall time at that quantile meets a deadline, and the sensitivity table
with P10/P50/P90 per row. Pure: a factor set's segments in, numbers out. The method, its
choices and their measurements: docs/calibration.md, "Calibrated plans"."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from service.calibration import scaling
from service.calibration.model import SegmentFactors, choose, interval, wall_quantile
from service.domain import flops
from service.domain.bounds import INT_MAX
from service.domain.errors import InputError
from service.domain.flops import PeakLookup
from service.domain.memory_plans import Bound
from service.domain.units import format_duration
from service.domain.values import Estimate, EstimateRequest, Factors, Interval


@dataclass(frozen=True)
class CalibratedWall:
    """An estimate at the calibrated P50 factors, its P10/P50/P90, and the wall time at
    quantile `confidence` (`wall_seconds_at_confidence`)."""

    estimate: Estimate
    factors: SegmentFactors
    interval: Interval
    confidence: float
    wall_seconds_at_confidence: float
    extrapolated: tuple[str, ...] = ()  # outside the runs fitted on (see Calibrated)


@dataclass(frozen=True)
class CalibratedPlan:
    """The fewest GPUs (a multiple of `multiple_of`, and at least the fewest whose memory
    fits) whose wall time at quantile `confidence` is within the deadline, and the calibrated
    estimate at that count. `bound` says what decided it: "time" (the deadline) or "memory";
    `time_gpus` is what the deadline alone needs."""

    deadline_seconds: float
    gpus: int
    multiple_of: int
    confidence: float
    wall: CalibratedWall
    bound: Bound = "time"
    time_gpus: int | None = None


@dataclass(frozen=True)
class CalibratedSensitivityRow:
    variable: str
    value: str
    wall_seconds: float  # P50
    wall_seconds_p10: float
    wall_seconds_p90: float
    change_pct: float  # P50 against the base case's P50
    is_base: bool
    factor_segment: str
    fallback: bool


def calibrated_wall(
    request: EstimateRequest,
    peak_flops: float,
    segments: Mapping[str, SegmentFactors],
    confidence: float = 0.5,
) -> CalibratedWall:
    """Wall time of `request` at quantile `confidence` in (0, 1) with the set's factors."""
    _check_confidence(confidence)
    hardware = request.hardware
    factors = choose(segments, hardware.gpu, hardware.precision, request.recompute, request.factors)
    return _wall_with(request, peak_flops, factors, confidence)


def calibrated_plan(
    request: EstimateRequest,
    peak_flops: float,
    segments: Mapping[str, SegmentFactors],
    deadline_seconds: float,
    confidence: float = 0.5,
    multiple_of: int = 1,
    min_gpus: int = 1,
) -> CalibratedPlan:
    """The fewest GPUs, a multiple of `multiple_of` (8 for whole nodes of eight), whose
    wall time at quantile `confidence` meets `deadline_seconds`, and no fewer than
    `min_gpus` (the fewest whose memory fits, a multiple of `multiple_of`)."""
    if not math.isfinite(deadline_seconds) or deadline_seconds <= 0:
        raise InputError(f"deadline must be positive, got {deadline_seconds!r}")
    if multiple_of < 1:
        raise InputError(f"GPU multiple must be at least 1, got {multiple_of!r}")
    _check_confidence(confidence)
    hardware = request.hardware
    factors = choose(segments, hardware.gpu, hardware.precision, request.recompute, request.factors)

    def wall_at(steps: int) -> float:
        with_gpus = _with_gpus(request, steps * multiple_of)
        return _wall_with(with_gpus, peak_flops, factors, confidence).wall_seconds_at_confidence

    fastest = _fastest(wall_at, INT_MAX // multiple_of)
    if wall_at(fastest) > deadline_seconds:
        shortest = format_duration(wall_at(fastest))
        quantile = f"P{round(100 * confidence)}"
        if fastest * multiple_of < INT_MAX - multiple_of:
            raise InputError(
                f"no count of {hardware.gpu} meets the deadline at {quantile}: more GPUs stop "
                f"helping beyond {fastest * multiple_of:,} (the failures a bigger job expects "
                f"cost more than the GPUs add), where the wall time is {shortest}"
            )
        raise InputError(f"no count of {hardware.gpu} meets the deadline at {quantile}")
    # Wall time falls with the count up to `fastest`: the fewest that meet the deadline.
    low, steps = 1, fastest
    while low < steps:
        middle = (low + steps) // 2
        if wall_at(middle) <= deadline_seconds:
            steps = middle
        else:
            low = middle + 1
    time_gpus = gpus = steps * multiple_of
    bound: Bound = "time"
    if min_gpus > time_gpus:
        # Past `fastest` wall time rises again: the count memory needs may miss the deadline.
        gpus, bound = math.ceil(min_gpus / multiple_of) * multiple_of, "memory"
        if wall_at(gpus // multiple_of) > deadline_seconds:
            raise InputError(
                f"no count of {hardware.gpu} both fits in memory and meets the deadline at "
                f"P{round(100 * confidence)}: the fewest that fit, {gpus:,}, take "
                f"{format_duration(wall_at(gpus // multiple_of))} (more GPUs stop helping "
                f"beyond {fastest * multiple_of:,})"
            )
    chosen = _wall_with(_with_gpus(request, gpus), peak_flops, factors, confidence)
    return CalibratedPlan(deadline_seconds, gpus, multiple_of, confidence, chosen, bound, time_gpus)


def _fastest(wall_at: Callable[[int], float], most: int) -> int:
    """The count (in steps) with the shortest wall time. With the scale terms wall time
    falls as GPUs are added until the failures a bigger job expects (overhead 1 − f =
    (1 − f₀)/(1 + c·λ·G)) cost more than the GPUs add, then rises: one minimum, found by
    ternary search (about 60 evaluations up to INT_MAX GPUs); without a failure term it
    is the largest count."""
    low, high = 1, most
    while high - low > 2:
        first, second = low + (high - low) // 3, high - (high - low) // 3
        if wall_at(first) <= wall_at(second):
            high = second
        else:
            low = first
    return min(range(low, high + 1), key=wall_at)


def calibrated_sensitivity(
    request: EstimateRequest,
    peak: PeakLookup,
    segments: Mapping[str, SegmentFactors],
    variations: dict[str, list[str]],
) -> list[CalibratedSensitivityRow]:
    """`flops.sensitivity` with calibrated factors: each row's P10/P50/P90 from the factors
    of its own segment (varying the GPU or precision changes the segment). Rows that vary
    utilization or overhead use that value in place of the calibrated one."""
    base = _row_wall(request, request, "", peak, segments)
    rows = []
    for variable, values in variations.items():
        for value in values:
            varied = flops.vary(request, variable, value)
            wall = _row_wall(request, varied, variable, peak, segments)
            rows.append(
                CalibratedSensitivityRow(
                    variable=variable,
                    value=value,
                    wall_seconds=wall.interval.p50,
                    wall_seconds_p10=wall.interval.p10,
                    wall_seconds_p90=wall.interval.p90,
                    change_pct=100.0 * (wall.interval.p50 / base.interval.p50 - 1.0),
                    is_base=varied == request,
                    factor_segment=wall.factors.segment,
                    fallback=wall.factors.fallback,
                )
            )
    return rows


def _row_wall(
    base: EstimateRequest,
    varied: EstimateRequest,
    variable: str,
    peak: PeakLookup,
    segments: Mapping[str, SegmentFactors],
) -> CalibratedWall:
    hardware = varied.hardware
    factors = choose(segments, hardware.gpu, hardware.precision, varied.recompute, base.factors)
    if variable == "utilization":
        factors = dataclasses.replace(factors, utilization=varied.factors.utilization)
    elif variable == "overhead":
        factors = dataclasses.replace(factors, overhead=varied.factors.overhead)
    peak_flops = peak(hardware.gpu, hardware.precision)
    return _wall_with(varied, peak_flops, factors, 0.5, scaled=variable != "utilization")


def _wall_with(
    request: EstimateRequest,
    peak_flops: float,
    factors: SegmentFactors,
    confidence: float,
    *,
    scaled: bool = True,
) -> CalibratedWall:
    """The request's wall time with the entry's factors moved to its own GPU count and
    model size (service.calibration.scaling; `scaled=False`: a utilization the planner gave)."""
    model = request.model
    factors, outside = scaling.for_job(
        factors, request.hardware.gpus, model.params, model.tokens, move=scaled,
        batch_tokens=model.global_batch_tokens,
    )  # fmt: skip
    # A fitted utilization above 1 means a wrong peak in the catalog: capped, as estimates do.
    fitted = Factors(min(factors.utilization, 1.0), factors.overhead)
    result = flops.estimate(dataclasses.replace(request, factors=fitted), peak_flops)
    return CalibratedWall(
        estimate=result,
        factors=factors,
        interval=interval(result.wall_seconds, factors),
        confidence=confidence,
        wall_seconds_at_confidence=wall_quantile(result.wall_seconds, factors, confidence),
        extrapolated=outside,
    )


def _with_gpus(request: EstimateRequest, gpus: int) -> EstimateRequest:
    return dataclasses.replace(request, hardware=dataclasses.replace(request.hardware, gpus=gpus))


def _check_confidence(confidence: float) -> None:
    if not (math.isfinite(confidence) and 0.0 < confidence < 1.0):
        raise InputError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
