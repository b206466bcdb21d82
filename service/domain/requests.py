"""The forward and inverse questions over a hardware catalog: turn a user's raw inputs into
a validated request, then estimate, plan or tabulate. Pure: no I/O beyond the catalog
handed in (storing estimates is the registry's, in service/usecases)."""

from __future__ import annotations

from service.domain import flops
from service.domain.errors import InputError
from service.domain.hardware import PRECISIONS, Catalog, normalize_precision
from service.domain.inputs import RawInputs
from service.domain.values import (
    Estimate,
    EstimateRequest,
    Factors,
    Hardware,
    Model,
    Plan,
    Recompute,
    SensitivityRow,
)


def build_request(catalog: Catalog, raw: RawInputs) -> EstimateRequest:
    """Validate and canonicalise: the GPU name becomes the catalog's, the precision must be
    one the chip has (checked here so the error names the GPU)."""
    _require_plausible(raw)
    spec = catalog.resolve(raw.gpu)
    precision = normalize_precision(raw.precision)
    catalog.peak_flops(spec.name, precision)
    defaults = Factors()
    return EstimateRequest(
        model=Model(
            raw.params,
            raw.tokens,
            raw.layers,
            raw.hidden_size,
            raw.seq_len,
            raw.global_batch_tokens,
        ),
        hardware=Hardware(spec.name, raw.gpus, precision),
        factors=Factors(
            defaults.utilization if raw.utilization is None else raw.utilization,
            defaults.overhead if raw.overhead is None else raw.overhead,
        ),
        recompute=_recompute(raw.recompute),
        recompute_factor=raw.recompute_factor,
        price_per_gpu_hour=raw.price_per_gpu_hour,
        currency=raw.currency.strip().upper(),
    )


# A planner's count below this is a forgotten suffix (`--params 7` for 7B), never a model or
# a dataset: the answer would be "0 seconds". Small real jobs (a test model of 200k
# parameters on 8k tokens) stay above it. Imports and reconciliations never come here.
MIN_PLANNED_COUNT = 1_000


def _require_plausible(raw: RawInputs) -> None:
    for name, value, example in (("params", raw.params, "7B"), ("tokens", raw.tokens, "1T")):
        if value < MIN_PLANNED_COUNT:
            raise InputError(
                f"{name} {value:g} is under 1,000, too few to train; did you forget the "
                f"suffix? counts take K, M, B, T (e.g. {example})"
            )


def _recompute(text: str) -> Recompute:
    value = text.strip().lower()
    if value in ("none", "off", "no"):
        return "none"
    if value in ("full", "on", "yes"):
        return "full"
    if value == "selective":
        return "selective"
    # Let the domain type produce the one error message for an unknown mode.
    return value  # type: ignore[return-value]


def compute(catalog: Catalog, request: EstimateRequest) -> Estimate:
    peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
    return flops.estimate(request, peak)


def plan(
    catalog: Catalog, request: EstimateRequest, deadline_seconds: float, multiple_of: int = 1
) -> Plan:
    peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
    return flops.plan_gpus(request, peak, deadline_seconds, multiple_of)


def sensitivity(
    catalog: Catalog, request: EstimateRequest, extra: dict[str, list[str]]
) -> tuple[Estimate, list[SensitivityRow]]:
    """The seed's default table plus any variables the user names (theirs replace ours)."""
    rows = flops.sensitivity(request, catalog.peak_flops, variations(catalog, request, extra))
    return compute(catalog, request), rows


def variations(
    catalog: Catalog, request: EstimateRequest, extra: dict[str, list[str]]
) -> dict[str, list[str]]:
    """What the table varies: the defaults (the precisions this GPU has) and the user's."""
    spec = catalog.resolve(request.hardware.gpu)
    precisions = [p for p in PRECISIONS if p in spec.peak_flops]
    return {**flops.default_variations(request, precisions), **extra}
