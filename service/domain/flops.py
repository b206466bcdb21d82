"""The estimator's math (docs/contract.md §2): FLOPs, compute and wall time, the inverse plan
and the sensitivity table. Pure functions of values; the peak FLOP/s comes in from the
caller."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

from service.domain import bounds
from service.domain.errors import InputError
from service.domain.units import parse_count
from service.domain.values import Estimate, EstimateRequest, Model, Plan, SensitivityRow

SECONDS_PER_HOUR = 3600.0
FULL_RECOMPUTE_FACTOR = 4.0 / 3.0  # one extra forward pass: (6+2)/6

PeakLookup = Callable[[str, str], float]  # (gpu, precision) -> dense FLOP/s


def model_flops(model: Model) -> float:
    """C = 6·N·D, or (6·N + 12·L·d·T)·D with the attention term (PaLM App. B, nanoGPT)."""
    per_token = 6.0 * model.params
    if model.has_shape:
        assert model.layers and model.hidden_size and model.seq_len
        per_token += 12.0 * model.layers * model.hidden_size * model.seq_len
    return per_token * model.tokens


def recompute_factor(request: EstimateRequest) -> float:
    """Hardware FLOPs / model FLOPs for the activation-recomputation mode.

    `full` repeats the forward pass (x4/3). `selective` repeats only the attention core
    (Korthikanti et al. 2022), 4·L·d·T·D extra FLOPs, so it needs the model's shape or an
    explicit factor; guessing one would hide the assumption from the planner.
    """
    if request.recompute_factor is not None:
        return request.recompute_factor
    if request.recompute == "none":
        return 1.0
    if request.recompute == "full":
        return FULL_RECOMPUTE_FACTOR
    model = request.model
    if not model.has_shape:
        raise InputError(
            "selective recompute needs --layers, --hidden-size and --seq-len "
            "(or an explicit --recompute-factor)"
        )
    assert model.layers and model.hidden_size and model.seq_len
    extra = 4.0 * model.layers * model.hidden_size * model.seq_len * model.tokens
    return 1.0 + extra / model_flops(model)


def estimate(request: EstimateRequest, peak_flops: float) -> Estimate:
    """Forward question: how long does this job take on this hardware?"""
    if not math.isfinite(peak_flops) or peak_flops <= 0:
        raise InputError(f"peak FLOP/s must be positive, got {peak_flops!r}")
    factors = request.factors
    gpus = request.hardware.gpus
    c_model = model_flops(request.model)
    factor = recompute_factor(request)
    c_hardware = c_model * factor
    compute_seconds = c_hardware / (gpus * peak_flops * factors.utilization)
    wall_seconds = compute_seconds / (1.0 - factors.overhead)
    gpu_hours = gpus * wall_seconds / SECONDS_PER_HOUR
    if not all(math.isfinite(x) and x > 0 for x in (c_hardware, wall_seconds, gpu_hours)):
        raise InputError("params x tokens is too large to estimate (the FLOPs overflow)")
    price = request.price_per_gpu_hour
    return Estimate(
        request=request,
        peak_flops=peak_flops,
        model_flops=c_model,
        flops=c_hardware,
        recompute_factor=factor,
        compute_seconds=compute_seconds,
        wall_seconds=wall_seconds,
        gpu_hours=gpu_hours,
        mfu=factors.utilization / factor,  # = model FLOPs / (gpus x peak x compute time)
        hfu=factors.utilization,
        tokens_per_second=request.model.tokens / compute_seconds,
        cost=None if price is None else gpu_hours * price,
    )


def plan_gpus(
    request: EstimateRequest, peak_flops: float, deadline_seconds: float, multiple_of: int = 1
) -> Plan:
    """Inverse question: the fewest GPUs (a multiple of `multiple_of`) whose wall time fits.

    Wall time is exactly proportional to 1/gpus here, so the answer is a ceiling; a short
    bisection only guards against floating-point rounding at the boundary.
    """
    if not math.isfinite(deadline_seconds) or deadline_seconds <= 0:
        raise InputError(f"deadline must be positive, got {deadline_seconds!r}")
    if multiple_of < 1:
        raise InputError(f"GPU multiple must be at least 1, got {multiple_of!r}")
    one_gpu = estimate(_with_gpus(request, 1), peak_flops)
    needed = one_gpu.wall_seconds / deadline_seconds
    if not math.isfinite(needed) or needed > bounds.INT_MAX:
        raise InputError(
            f"meeting a {deadline_seconds:g} s deadline needs more than {bounds.INT_MAX} GPUs"
        )
    gpus = _fewest_gpus(request, peak_flops, deadline_seconds, max(1, math.ceil(needed)))
    gpus = math.ceil(gpus / multiple_of) * multiple_of
    if gpus > bounds.INT_MAX:
        raise InputError(f"the GPU count {gpus} is above {bounds.INT_MAX}")
    return Plan(
        deadline_seconds=deadline_seconds,
        gpus=gpus,
        multiple_of=multiple_of,
        estimate=estimate(_with_gpus(request, gpus), peak_flops),
    )


def _fewest_gpus(request: EstimateRequest, peak_flops: float, deadline: float, guess: int) -> int:
    """The smallest g with wall(g) <= deadline near the closed-form `guess`. Rounding can put
    the guess off by a few GPUs either way; a bisection over a bracket that doubles out from
    the guess settles it in O(log) steps whatever the magnitude (counting one GPU at a time
    from 10^26 would take minutes)."""

    def fits(gpus: int) -> bool:
        return _wall(request, peak_flops, gpus) <= deadline

    low, high = guess - 1, guess  # invariant once bracketed: not fits(low), fits(high)
    step = 1
    while not fits(high):
        low, high = high, min(bounds.INT_MAX, high + step)
        if low == high:
            return bounds.INT_MAX + 1  # even the most GPUs a count can hold miss it
        step *= 2
    step = 1
    while low >= 1 and fits(low):
        high, low = low, max(0, low - step)
        step *= 2
    while high - low > 1:  # low == 0 stands for "no smaller count" (one GPU always exists)
        middle = (low + high) // 2
        if middle >= 1 and fits(middle):
            high = middle
        else:
            low = middle
    return high


def _with_gpus(request: EstimateRequest, gpus: int) -> EstimateRequest:
    hardware = dataclasses.replace(request.hardware, gpus=gpus)
    return dataclasses.replace(request, hardware=hardware)


def _wall(request: EstimateRequest, peak_flops: float, gpus: int) -> float:
    return estimate(_with_gpus(request, gpus), peak_flops).wall_seconds


# --- sensitivity ---------------------------------------------------------------------------

VARIABLES = (
    "utilization",
    "overhead",
    "recompute",
    "gpus",
    "precision",
    "gpu",
    "params",
    "tokens",
)


def vary(request: EstimateRequest, variable: str, value: str) -> EstimateRequest:
    """The request with one input replaced; `value` is text as a user would type it."""
    try:
        if variable == "utilization":
            factors = dataclasses.replace(request.factors, utilization=float(value))
            return dataclasses.replace(request, factors=factors)
        if variable == "overhead":
            factors = dataclasses.replace(request.factors, overhead=float(value))
            return dataclasses.replace(request, factors=factors)
        if variable == "recompute":
            return dataclasses.replace(request, recompute=value, recompute_factor=None)  # type: ignore[arg-type]
        if variable == "gpus":
            return _with_gpus(request, int(value))
        if variable == "precision":
            hardware = dataclasses.replace(request.hardware, precision=value)
            return dataclasses.replace(request, hardware=hardware)
        if variable == "gpu":
            hardware = dataclasses.replace(request.hardware, gpu=value)
            return dataclasses.replace(request, hardware=hardware)
        if variable == "params":
            model = dataclasses.replace(request.model, params=parse_count(value, "params"))
            return dataclasses.replace(request, model=model)
        if variable == "tokens":
            model = dataclasses.replace(request.model, tokens=parse_count(value, "tokens"))
            return dataclasses.replace(request, model=model)
    except ValueError:
        raise InputError(f"cannot vary {variable} to {value!r}: not a number") from None
    raise InputError(f"cannot vary {variable!r}; choose from {', '.join(VARIABLES)}")


def default_variations(request: EstimateRequest, precisions: Sequence[str]) -> dict[str, list[str]]:
    """The seed's §4 table around the base case: utilization 30–50%, recompute on/off,
    half and double the GPUs, and every precision the chip has."""
    base = request.factors.utilization
    neighbours = {round(min(1.0, u), 4) for u in (base - 0.1, base + 0.1) if u > 0}
    utilizations = sorted(neighbours | {base})
    gpus = request.hardware.gpus
    gpu_counts = sorted({max(1, gpus // 2), gpus, gpus * 2})
    recompute = ["none", "full"] + (["selective"] if request.model.has_shape else [])
    return {
        "utilization": [str(u) for u in utilizations],
        "recompute": recompute,
        "gpus": [str(g) for g in gpu_counts],
        "precision": list(precisions),
    }


def sensitivity(
    request: EstimateRequest, peak: PeakLookup, variations: dict[str, list[str]]
) -> list[SensitivityRow]:
    """Wall time as each named input takes each of its values, all else at the base case."""
    base = estimate(request, peak(request.hardware.gpu, request.hardware.precision))
    rows: list[SensitivityRow] = []
    for variable, values in variations.items():
        for value in values:
            varied = vary(request, variable, value)
            result = estimate(varied, peak(varied.hardware.gpu, varied.hardware.precision))
            rows.append(
                SensitivityRow(
                    variable=variable,
                    value=value,
                    wall_seconds=result.wall_seconds,
                    change_pct=100.0 * (result.wall_seconds / base.wall_seconds - 1.0),
                    is_base=varied == request,
                )
            )
    return rows
