"""Estimates made with fitted factors (a factor set, else the published prior) and their
P10/P50/P90. Pure; apart from service/domain/requests.py because it needs the refit's
numerical model (numpy), which the planning commands must not pay for at start-up."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from service.calibration import model as factor_model
from service.calibration import scaling
from service.calibration.model import FactorSet, Prior, SegmentFactors
from service.domain.hardware import Catalog
from service.domain.requests import compute
from service.domain.values import Estimate, EstimateRequest, Factors, Interval


@dataclass(frozen=True)
class Calibrated:
    """An estimate made with fitted factors, its P10/P50/P90 and where the factors came
    from (the factor set version, None for the published prior, and the pooling level)."""

    estimate: Estimate
    interval: Interval
    factors: SegmentFactors
    factor_set: int | None
    # What of the request lies outside the runs its factors were fitted on, as sentences
    # ("4,096 GPUs, history 8–1,024"); empty when inside (service.calibration.scaling).
    extrapolated: tuple[str, ...] = ()


def calibrated_estimate(
    catalog: Catalog, request: EstimateRequest, chosen_set: FactorSet | None, prior: Prior
) -> Calibrated:
    """With the chosen factor set (without one, the published prior with its deliberately
    wide range), moved to the request's GPU count and model size by the set's scale slopes
    (service.calibration.scaling). A fitted utilization above 1 (a sign of a wrong peak in
    the catalog) is capped at 1."""
    segments = (
        chosen_set.segments
        if chosen_set is not None
        else {factor_model.PRIOR_KEY: factor_model.prior_factors(prior)}
    )
    hardware = request.hardware
    factors = factor_model.choose(
        segments, hardware.gpu, hardware.precision, request.recompute, request.factors
    )
    model = request.model
    factors, outside = scaling.for_job(
        factors, hardware.gpus, model.params, model.tokens,
        batch_tokens=model.global_batch_tokens,
    )  # fmt: skip
    fitted = Factors(min(factors.utilization, 1.0), factors.overhead)
    result = compute(catalog, dataclasses.replace(request, factors=fitted))
    return Calibrated(
        estimate=result,
        interval=factor_model.interval(result.wall_seconds, factors),
        factors=factors,
        factor_set=None if chosen_set is None else chosen_set.version,
        extrapolated=outside,
    )
