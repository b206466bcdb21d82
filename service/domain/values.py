"""The value types of the forward and inverse questions: model, hardware, factors, the
request and its estimate, intervals, plans. Frozen dataclasses only: no I/O, no clock, no
framework imports, so the math and the use cases can be tested with plain values."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from service.domain.errors import InputError, require_count, require_fraction, require_positive

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[Recompute, ...] = ("none", "selective", "full")
FORMULA_VERSION = "reckon-flops-1"  # bump when the math in flops.py changes meaning
DEFAULT_UTILIZATION = 0.4  # the seed's baseline; used only when no factor set is asked for
DEFAULT_OVERHEAD = 0.0
_CURRENCY = re.compile(r"[A-Z]{3}")  # ISO 4217 style
DEFAULT_HALF_LIFE_DAYS = 45.0  # the refit's recency weighting: a run this old weighs half


def fields_of(item: object) -> dict[str, Any]:
    """A dataclass's fields as a shallow dict (dataclasses.asdict deep-copies: 10x slower,
    and a reconcile pass converts thousands)."""
    return {field.name: getattr(item, field.name) for field in dataclasses.fields(item)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Model:
    """What is trained: N (active) parameters over D tokens; L, d, T make attention exact."""

    params: float
    tokens: float
    layers: int | None = None
    hidden_size: int | None = None
    seq_len: int | None = None
    # Tokens per optimizer step over all GPUs (global batch × sequence length): not in the
    # FLOPs, a covariate of the calibrated factors (tokens per GPU per step).
    global_batch_tokens: float | None = None

    def __post_init__(self) -> None:
        require_positive(self.params, "params")
        require_positive(self.tokens, "tokens")
        if self.global_batch_tokens is not None:
            require_positive(self.global_batch_tokens, "global_batch_tokens")
        shape = (self.layers, self.hidden_size, self.seq_len)
        for name, value in zip(("layers", "hidden_size", "seq_len"), shape, strict=True):
            if value is not None:
                require_count(value, name)

    @property
    def has_shape(self) -> bool:
        return None not in (self.layers, self.hidden_size, self.seq_len)


@dataclass(frozen=True)
class Hardware:
    """Where it runs: GPU model (canonical catalog name), count and numeric precision."""

    gpu: str
    gpus: int
    precision: str

    def __post_init__(self) -> None:
        require_count(self.gpus, "gpus")


@dataclass(frozen=True)
class Factors:
    """The two efficiency factors: utilization u (hardware FLOPs / peak while computing) and
    overhead f (share of wall time not spent computing)."""

    utilization: float = DEFAULT_UTILIZATION
    overhead: float = DEFAULT_OVERHEAD

    def __post_init__(self) -> None:
        require_fraction(self.utilization, "utilization", allow_zero=False, allow_one=True)
        require_fraction(self.overhead, "overhead", allow_zero=True, allow_one=False)


@dataclass(frozen=True)
class EstimateRequest:
    """Everything an estimate depends on, validated on construction."""

    model: Model
    hardware: Hardware
    factors: Factors = field(default_factory=Factors)
    recompute: Recompute = "none"
    recompute_factor: float | None = None  # explicit hardware/model FLOPs ratio, overrides mode
    price_per_gpu_hour: float | None = None
    currency: str = "USD"  # of the price, and so of the cost (a label: no conversion)

    def __post_init__(self) -> None:
        if self.recompute not in RECOMPUTE_MODES:
            raise InputError(
                f"unknown recompute mode {self.recompute!r}; use one of "
                + ", ".join(RECOMPUTE_MODES)
            )
        if self.recompute_factor is not None and (
            not math.isfinite(self.recompute_factor) or self.recompute_factor < 1
        ):
            raise InputError(f"recompute factor must be at least 1, got {self.recompute_factor!r}")
        if not _CURRENCY.fullmatch(self.currency):
            raise InputError(f"currency must be a 3-letter code like USD, got {self.currency!r}")
        if self.price_per_gpu_hour is not None and (
            not math.isfinite(self.price_per_gpu_hour) or self.price_per_gpu_hour < 0
        ):
            raise InputError(
                f"price per GPU-hour must be zero or more, got {self.price_per_gpu_hour!r}"
            )


@dataclass(frozen=True)
class Estimate:
    """The answer: FLOPs, times and what follows from them. Seconds are wall-clock seconds."""

    request: EstimateRequest
    peak_flops: float  # dense FLOP/s of one GPU at the requested precision
    model_flops: float
    flops: float  # hardware FLOPs = model FLOPs x recompute factor
    recompute_factor: float
    compute_seconds: float
    wall_seconds: float
    gpu_hours: float
    mfu: float
    hfu: float
    tokens_per_second: float  # whole job, steady state (while computing)
    cost: float | None
    formula_version: str = FORMULA_VERSION


@dataclass(frozen=True)
class Interval:
    """A P10/P50/P90 range of wall seconds."""

    p10: float
    p50: float
    p90: float


@dataclass(frozen=True)
class SensitivityRow:
    variable: str
    value: str
    wall_seconds: float
    change_pct: float  # vs the base case; + means slower
    is_base: bool


@dataclass(frozen=True)
class Plan:
    """The inverse question's answer: the fewest GPUs that meet the deadline."""

    deadline_seconds: float
    gpus: int
    multiple_of: int
    estimate: Estimate
