"""Utilization and overhead as functions of the job's scale (docs/calibration.md, "Scale"):
a model of log effective utilization within gpu/precision segments, fitted on the variation
within segments and kept term by term only where the data support it. Pure numpy.

    log e(G, N) = level(segment)
                  + b_G(segment) · Γ + b_GG · Γ², Γ = log G − log G_ref   GPU count, bending
                  + b_N · Δ + b_NN · Δ²,  Δ = log N − log N_ref   model size, bending
                  + log(1 − f_failures(G))                        failures

- b_G is shared by every segment plus a deviation per segment shrunk toward it (a prior
  spread of `slope_tau`): communication costs differ by interconnect and chip.
- b_GG bends the GPU term (utilization is flat while a job fits a few nodes and falls ever
  faster as communication grows); as b_NN, only within the GPU counts fitted on, along the
  tangent beyond them (never steeper than MAX_SLOPE).
- b_NN bends the model-size effect (utilization saturates as matmuls grow). Beyond the
  model sizes fitted on the curve is continued along its tangent at the edge, never bent
  further, and no tangent is steeper than MAX_PARAMS_SLOPE.
- Failures: each run's FAILED/KILLED segments per wall hour z is a regressor of its own,
  whose coefficient is the cost of one failure in hours (c: wall = running + failures · c,
  so log(running/wall) = log(1 − c·z) ≈ −c·z); the failure rate λ per GPU-hour is counted
  (failures over GPU-hours of the runs). A planned job of G GPUs expects λ·G failures per
  running hour, so its overhead grows: 1 − f = (1 − f₀) / (1 + c·λ·G).

The fit works at a reference scale with no failures: each run is moved there by its terms
before the segments are pooled (service.calibration.fit), so a segment's level is its
factors at the reference GPU count and model size, and an estimate moves it back to its
own (`at_scale`): utilization by the GPU and model-size terms (never above 1), overhead by
the failures it should expect; the interval widens by the terms' own uncertainty. Each
entry also records the GPU counts, parameter counts and tokens of the runs it was fitted
on, so an estimate outside them can say it is extrapolating."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.calibration import ranges
from service.calibration.curves import bent
from service.calibration.model import ALL_KEY, SegmentFactors, utilization_range
from service.calibration.observations import ObservationArrays
from service.calibration.robust import FloatArray, IntArray
from service.domain.units import SECONDS_PER_HOUR

# A GPU slope beyond this (log-log) is no physics Reckon knows: doubling the GPUs does not
# halve utilization; a fit claiming more is held at it.
MAX_SLOPE = 0.5
# The model-size slope may be steeper: across sizes it also carries what a segment does not
# separate (fine-tuning against pretraining, sequence length, batch). MLPerf's 87 rows show
# +0.94 per log of parameters (standard error 0.06) between Llama 2 70B LoRA and GPT-3 175B
# on the same chips; held at 0.5 the leave-one-out error was 0.108, at 1.0 0.073.
MAX_PARAMS_SLOPE = 1.0


@dataclass(frozen=True)
class Slopes:
    """One entry's scale terms (0 where the data do not support one), their standard
    errors, the reference (log) scale its level is at, the range of log parameters the
    curvature was fitted on, and the failure rate per GPU-hour with the cost of one
    failure in hours."""

    gpus: float = 0.0
    gpus_se: float = 0.0
    params: float = 0.0
    params_se: float = 0.0
    curvature: float = 0.0
    curvature_se: float = 0.0
    failure_cost_hours: float = 0.0
    failure_cost_se: float = 0.0
    failure_rate: float = 0.0  # failures per GPU-hour of wall time
    log_gpus_reference: float = 0.0
    log_params_reference: float = 0.0
    log_params_low: float = 0.0
    log_params_high: float = 0.0
    # Tokens per GPU per optimizer step (global batch tokens ÷ GPUs): a smaller share of the
    # batch per GPU leaves each step more communication and less matmul.
    batch: float = 0.0
    batch_se: float = 0.0
    log_batch_reference: float = 0.0
    # GPU count bends as model size does (log u gains b_GG·Δ², Δ = log G − log G_ref) within
    # the GPU counts fitted on, and goes on along its tangent beyond them.
    gpus_curvature: float = 0.0
    gpus_curvature_se: float = 0.0
    log_gpus_low: float = 0.0
    log_gpus_high: float = 0.0

    @property
    def any(self) -> bool:
        return any(
            value != 0.0
            for value in (
                self.gpus, self.params, self.curvature, self.failure_cost_hours, self.batch,
                self.gpus_curvature,
            )
        )  # fmt: skip


NONE = Slopes()


@dataclass(frozen=True)
class Scale:
    """A fit's scale model: the shared terms and each segment's own GPU slope (with its
    standard error), keyed "gpu/precision"."""

    shared: Slopes = NONE
    segment_gpus: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)

    def for_key(self, key: str) -> Slopes:
        """The terms an entry uses: a gpu/precision[/recompute] entry its segment's GPU
        slope, every broader entry the shared one."""
        segment = "/".join(key.split("/")[:2])
        own = self.segment_gpus.get(segment)
        if own is None:
            return self.shared
        return dataclasses.replace(self.shared, gpus=own[0], gpus_se=own[1])

    @property
    def any(self) -> bool:
        return self.shared.any or any(slope != 0.0 for slope, _ in self.segment_gpus.values())


NO_SCALE = Scale()


# --- what the fit and the moves share ------------------------------------------------------


def logs(data: ObservationArrays) -> tuple[FloatArray, FloatArray]:
    """log GPU count and log parameters per row (NaN where unknown)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(data.gpus), np.log(data.params)


def log_batch(batch_tokens: FloatArray, gpus: FloatArray) -> FloatArray:
    """log tokens per GPU per optimizer step (NaN where the batch or the GPU count is
    unknown)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        result: FloatArray = np.log(batch_tokens / gpus)
    return result


def wall_hours(data: ObservationArrays) -> FloatArray:
    """Each run's wall time in hours (at least a second)."""
    result: FloatArray = np.maximum(data.ended_at - data.started_at, 1.0) / SECONDS_PER_HOUR
    return result


def failures_per_hour(data: ObservationArrays) -> FloatArray:
    """Each run's failed segments per wall hour (NaN where not counted)."""
    result: FloatArray = data.failures / wall_hours(data)
    return result


def segment_codes(data: ObservationArrays) -> IntArray:
    result: IntArray = (data.gpu * len(data.precision_names) + data.precision).astype(np.intp)
    return result


def segment_key(data: ObservationArrays, code: int) -> str:
    gpu, precision = divmod(code, len(data.precision_names))
    return f"{data.gpu_names[gpu]}/{data.precision_names[precision]}"


# --- moving factors between scales -----------------------------------------------------------


def utilization_change(
    slopes: Slopes, log_g: FloatArray, log_n: FloatArray, log_b: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Per row: the change of log utilization from the reference scale, and its variance
    from the terms' standard errors (an unknown covariate: no change). Beyond the model
    sizes fitted on, the bent model-size curve goes on along its tangent at the edge (its
    slope held within ±MAX_PARAMS_SLOPE)."""
    dg = np.where(np.isfinite(log_g), log_g - slopes.log_gpus_reference, 0.0)
    dn = np.where(np.isfinite(log_n), log_n - slopes.log_params_reference, 0.0)
    params_change, curve = bent(
        dn, slopes.params, slopes.curvature, MAX_PARAMS_SLOPE,
        slopes.log_params_low - slopes.log_params_reference,
        slopes.log_params_high - slopes.log_params_reference,
    )  # fmt: skip
    gpus_change, gpus_curve = bent(
        dg, slopes.gpus, slopes.gpus_curvature, MAX_SLOPE,
        slopes.log_gpus_low - slopes.log_gpus_reference,
        slopes.log_gpus_high - slopes.log_gpus_reference,
    )  # fmt: skip
    db = np.zeros_like(dg)
    if log_b is not None and slopes.batch != 0.0:
        db = np.where(np.isfinite(log_b), log_b - slopes.log_batch_reference, 0.0)
    change: FloatArray = gpus_change + params_change + slopes.batch * db
    variance: FloatArray = (
        (dg * slopes.gpus_se) ** 2 * (slopes.gpus != 0.0)
        + (gpus_curve * slopes.gpus_curvature_se) ** 2 * (slopes.gpus_curvature != 0.0)
        + (dn * slopes.params_se) ** 2 * (slopes.params != 0.0)
        + (curve * slopes.curvature_se) ** 2 * (slopes.curvature != 0.0)
        + (db * slopes.batch_se) ** 2 * (slopes.batch != 0.0)
    )
    return change, variance


def failure_change(slopes: Slopes, gpus: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Per planned job of `gpus` GPUs: the change of log(1 − f) from the failures it should
    expect, −log(1 + c·λ·G), and its variance from c's standard error."""
    load = slopes.failure_rate * np.where(np.isfinite(gpus), gpus, 0.0)
    if slopes.failure_cost_hours == 0.0:
        zero: FloatArray = np.zeros_like(load)
        return zero, zero
    change: FloatArray = -np.log1p(slopes.failure_cost_hours * load)
    variance: FloatArray = (
        load * slopes.failure_cost_se / (1.0 + slopes.failure_cost_hours * load)
    ) ** 2
    return change, variance


def to_reference(data: ObservationArrays, scale: Scale) -> ObservationArrays:
    """The runs as if each had run at the reference scale without failures: utilization
    (and effective) moved by its GPU and model-size terms, 1 − overhead (and effective) by
    the failures it had."""
    if not scale.any:
        return data
    log_g, log_n = logs(data)
    log_b = log_batch(data.batch_tokens, data.gpus)
    segment = segment_codes(data)
    change = np.zeros(len(data))
    for code in np.unique(segment).tolist():
        mine = segment == code
        slopes = scale.for_key(segment_key(data, code))
        change[mine] = utilization_change(slopes, log_g[mine], log_n[mine], log_b[mine])[0]
    z = failures_per_hour(data)
    keep_change = np.where(np.isfinite(z), -scale.shared.failure_cost_hours * z, 0.0)
    return dataclasses.replace(
        data,
        effective_utilization=data.effective_utilization * np.exp(-change - keep_change),
        utilization=data.utilization * np.exp(-change),
        overhead=1.0 - (1.0 - data.overhead) * np.exp(-keep_change),
    )


# Each Slopes field and the SegmentFactors field that stores it.
_STORED_AS = {
    "gpus": "gpus_slope",
    "gpus_se": "gpus_slope_se",
    "params": "params_slope",
    "params_se": "params_slope_se",
    "curvature": "params_curvature",
    "curvature_se": "params_curvature_se",
    "batch": "batch_slope",
    "batch_se": "batch_slope_se",
    **{
        name: name
        for name in (
            "failure_cost_hours", "failure_cost_se", "failure_rate", "log_gpus_reference",
            "log_params_reference", "log_params_low", "log_params_high", "log_batch_reference",
            "gpus_curvature", "gpus_curvature_se", "log_gpus_low", "log_gpus_high",
        )
    },
}  # fmt: skip


def entry_slopes(entry: SegmentFactors) -> Slopes:
    return Slopes(**{name: getattr(entry, stored) for name, stored in _STORED_AS.items()})


def with_slopes(entry: SegmentFactors, slopes: Slopes) -> SegmentFactors:
    return dataclasses.replace(entry, **_stored(slopes))


def _stored(slopes: Slopes) -> dict[str, Any]:
    """The slopes under the names a factor entry stores them as."""
    return {stored: getattr(slopes, name) for name, stored in _STORED_AS.items()}


def attach(
    factors: Mapping[str, SegmentFactors], data: ObservationArrays, scale: Scale
) -> dict[str, SegmentFactors]:
    """Every entry with its scale terms (`Scale.for_key`) and the ranges of the runs it
    covers (a gpu/precision[/recompute] entry its segment's, a GPU's its GPU's, "*"
    everyone's)."""
    spans = ranges.covariate_ranges(data, factors)
    result: dict[str, SegmentFactors] = {}
    for key, entry in factors.items():
        (gpus_min, gpus_max), (params_min, params_max), (tokens_min, tokens_max) = spans[key]
        result[key] = dataclasses.replace(
            entry,
            **_stored(scale.for_key(key)),
            gpus_min=gpus_min,
            gpus_max=gpus_max,
            params_min=params_min,
            params_max=params_max,
            tokens_min=tokens_min,
            tokens_max=tokens_max,
        )
    return result


def log_effective_change(
    slopes: Slopes,
    log_u: float,
    gpus: FloatArray,
    params: FloatArray,
    batch_tokens: FloatArray | None = None,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per job: the change of log utilization (never above 1: log u + change ≤ 0), of
    log(1 − f) and the variance both add, for an entry of log utilization `log_u`."""
    with np.errstate(invalid="ignore", divide="ignore"):
        log_g, log_n = np.log(gpus), np.log(params)
    log_b = None if batch_tokens is None else log_batch(batch_tokens, gpus)
    u_change, u_variance = utilization_change(slopes, log_g, log_n, log_b)
    u_change = np.minimum(log_u + u_change, 0.0) - log_u
    keep_change, keep_variance = failure_change(slopes, gpus)
    return u_change, keep_change, u_variance + keep_variance


def at_scale(
    entry: SegmentFactors,
    gpus: float | None,
    params: float | None,
    batch_tokens: float | None = None,
) -> SegmentFactors:
    """The entry's factors for a job of this GPU count, parameter count and global batch
    (tokens per optimizer step): utilization moved by the GPU, model-size and batch terms
    (never above 1), overhead by the failures a job of that many GPUs should expect, the
    interval widened by the terms' uncertainty. A fallback entry (the planner's own
    factors) is not moved."""
    slopes = entry_slopes(entry)
    if entry.fallback or not slopes.any:
        return entry
    u_change, keep_change, variance = (
        float(v[0])
        for v in log_effective_change(
            slopes,
            math.log(entry.utilization),
            np.array([math.nan if gpus is None else gpus], dtype=np.float64),
            np.array([math.nan if params is None else params], dtype=np.float64),
            np.array([math.nan if batch_tokens is None else batch_tokens], dtype=np.float64),
        )
    )
    if u_change == 0.0 and keep_change == 0.0 and variance == 0.0:
        return entry
    utilization = min(entry.utilization * math.exp(u_change), 1.0)
    spread = entry.utilization / entry.utilization_p10 if entry.utilization_p10 > 0 else 1.0
    u_p10, u_p90 = utilization_range(utilization, spread)
    keep = math.exp(keep_change)
    return dataclasses.replace(
        entry,
        utilization=utilization,
        utilization_p10=u_p10,
        utilization_p90=u_p90,
        overhead=1.0 - (1.0 - entry.overhead) * keep,
        overhead_p10=1.0 - (1.0 - entry.overhead_p10) * keep,
        overhead_p90=1.0 - (1.0 - entry.overhead_p90) * keep,
        log_sigma=math.sqrt(entry.log_sigma**2 + variance),
        log_sigma_low=math.sqrt(entry.log_sigma_low**2 + variance),
        log_sigma_high=math.sqrt(entry.log_sigma_high**2 + variance),
    )


def for_job(
    entry: SegmentFactors,
    gpus: float | None,
    params: float | None,
    tokens: float | None,
    *,
    move: bool = True,
    batch_tokens: float | None = None,
) -> tuple[SegmentFactors, tuple[str, ...]]:
    """What an estimate or plan uses for a job of this size: the entry at its scale (left
    as it is with `move=False`: a utilization the planner gave) and what of the job lies
    outside the runs the entry was fitted on."""
    outside = ranges.extrapolation(entry, gpus, params, tokens)
    return (at_scale(entry, gpus, params, batch_tokens) if move else entry), outside


def terms_of(factors: Mapping[str, SegmentFactors] | None) -> frozenset[str]:
    """The shared scale terms a factor set kept (its "*" entry's non-zero ones)."""
    entry = None if factors is None else factors.get(ALL_KEY)
    if entry is None:
        return frozenset()
    values = {
        "gpus": entry.gpus_slope,
        "gpus_curvature": entry.gpus_curvature,
        "params": entry.params_slope,
        "curvature": entry.params_curvature,
        "batch": entry.batch_slope,
    }
    return frozenset(term for term, value in values.items() if value != 0.0)
