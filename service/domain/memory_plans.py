"""Training memory as a bound on estimates, plans and the sensitivity table: the memory per
GPU of a request at its GPU count against its chip's, and the plan that answers the larger of
the count the deadline needs and the fewest GPUs whose memory fits. Pure: the catalog comes
in from the caller. The memory model itself: service/domain/memory.py and docs/memory.md."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Literal

from service.domain import bounds, flops
from service.domain.errors import InputError, require_count
from service.domain.hardware import Catalog
from service.domain.inputs import RawInputs
from service.domain.memory import (
    BYTES_PER_GIB,
    DEFAULT_HEADROOM,
    OPTIMIZERS,
    SHARDINGS,
    ActivationShape,
    GpuCount,
    Headroom,
    Optimizer,
    Sharding,
    TrainingConfig,
    TrainingMemory,
    chip_memory_bytes,
    fits,
    min_gpus_that_fit,
    training_memory,
)
from service.domain.values import EstimateRequest, Plan

Bound = Literal["time", "memory"]
MOST_BYTES_PER_PARAM = 16  # weights, gradients and optimizer states, unsharded (memory.py)


@dataclass(frozen=True)
class MemorySettings:
    """What the memory depends on beyond the estimate's request: the sharding of the model
    states, the optimizer and the micro-batch (sequences per GPU per forward pass)."""

    sharding: Sharding = "fsdp"
    optimizer: Optimizer = "adam"
    micro_batch: int = 1

    def __post_init__(self) -> None:
        for value, allowed, name in (
            (self.sharding, SHARDINGS, "sharding"),
            (self.optimizer, OPTIMIZERS, "optimizer"),
        ):
            if value not in allowed:
                raise InputError(f"unknown {name} {value!r}; use one of " + ", ".join(allowed))
        require_count(self.micro_batch, "micro_batch")


@dataclass(frozen=True)
class MemoryCheck:
    """Training memory per GPU at `memory.gpus` GPUs of `gpu` against the chip's memory
    (`chip_bytes`, None: unknown). `needed_bytes` adds the headroom; `fits` is None when the
    chip's memory is unknown. `fewest` is the smallest count (a multiple of the plan's
    `multiple_of`) that fits, or why there is none. Without the model's shape the activations
    are not counted (`memory.complete` is False) and `needed_bytes` is a lower bound."""

    gpu: str
    settings: MemorySettings
    config: TrainingConfig
    memory: TrainingMemory
    chip_bytes: float | None
    needed_bytes: float
    fits: bool | None
    fewest: GpuCount
    headroom: Headroom = DEFAULT_HEADROOM


@dataclass(frozen=True)
class BoundPlan:
    """A plan that meets the deadline and fits in memory: `bound` says which decided the
    count, `time_gpus` is what the deadline alone needs, `memory` the check at `plan.gpus`."""

    plan: Plan
    bound: Bound
    time_gpus: int
    memory: MemoryCheck


def settings_of(raw: RawInputs) -> MemorySettings:
    """The memory settings a user typed (case and spaces aside), validated."""
    return MemorySettings(
        sharding=raw.sharding.strip().lower(),  # type: ignore[arg-type]  # checked on construction
        optimizer=raw.optimizer.strip().lower(),  # type: ignore[arg-type]
        micro_batch=raw.micro_batch,
    )


def training_config(request: EstimateRequest, settings: MemorySettings) -> TrainingConfig:
    """The memory model's configuration for `request`. Activations are counted only with the
    model's shape; attention is taken as fused (FlashAttention, PyTorch SDPA: no s x s scores
    stored), the default of current trainers, and the output layer's logits are left out."""
    model = request.model
    if not math.isfinite(model.params * 2 * MOST_BYTES_PER_PARAM):  # no inf - inf = NaN below
        raise InputError(f"params {model.params:g} is too large to hold in memory")
    shape = None
    if model.layers is not None and model.hidden_size is not None and model.seq_len is not None:
        shape = ActivationShape(
            model.layers,
            model.hidden_size,
            model.seq_len,
            settings.micro_batch,
            fused_attention=True,
        )
    return TrainingConfig(
        model.params,
        precision=request.hardware.precision,
        optimizer=settings.optimizer,
        sharding=settings.sharding,
        shape=shape,
        recompute=request.recompute,
    )


def check(
    catalog: Catalog, request: EstimateRequest, settings: MemorySettings, multiple_of: int = 1
) -> MemoryCheck:
    """Memory per GPU of `request` at its own GPU count, on its own chip."""
    spec = catalog.resolve(request.hardware.gpu)
    chip = chip_memory_bytes(spec)
    chip = None if chip is None else float(chip)  # a catalog's whole GB are an int of bytes
    config = training_config(request, settings)
    memory = training_memory(config, request.hardware.gpus)
    return MemoryCheck(
        gpu=spec.name,
        settings=settings,
        config=config,
        memory=memory,
        chip_bytes=chip,
        needed_bytes=DEFAULT_HEADROOM.needed_bytes(memory.total_bytes),
        fits=fits(memory, chip),
        fewest=min_gpus_that_fit(config, chip, multiple_of=multiple_of),
    )


def fewest_that_fit(
    catalog: Catalog, request: EstimateRequest, settings: MemorySettings, multiple_of: int = 1
) -> GpuCount:
    """The fewest GPUs (a multiple of `multiple_of`) whose memory fits; an InputError that
    says why when no count does; verdict "unknown" when the chip's memory is unknown."""
    spec = catalog.resolve(request.hardware.gpu)
    chip = chip_memory_bytes(spec)
    config = training_config(request, settings)
    fewest = min_gpus_that_fit(config, chip, multiple_of=multiple_of)
    if fewest.verdict == "never":
        assert chip is not None  # an unknown chip is "unknown", never "never"
        raise InputError(_never_fits(config, spec.name, chip))
    return fewest


def plan_that_fits(
    catalog: Catalog,
    request: EstimateRequest,
    settings: MemorySettings,
    deadline_seconds: float,
    multiple_of: int = 1,
) -> BoundPlan:
    """The fewest GPUs (a multiple of `multiple_of`) that meet the deadline and whose memory
    fits the chip: the larger of the two counts. Wall time only falls as GPUs are added here,
    so the memory-bound count meets the deadline too."""
    fewest = fewest_that_fit(catalog, request, settings, multiple_of)
    peak = catalog.peak_flops(request.hardware.gpu, request.hardware.precision)
    timed = flops.plan_gpus(request, peak, deadline_seconds, multiple_of)
    gpus, bound = bind(timed.gpus, fewest)
    plan = timed
    if bound == "memory":
        estimate = flops.estimate(with_gpus(request, gpus), peak)
        plan = Plan(deadline_seconds, gpus, multiple_of, estimate)
    memory = check(catalog, with_gpus(request, gpus), settings, multiple_of)
    return BoundPlan(plan, bound, timed.gpus, memory)


def bind(time_gpus: int, fewest: GpuCount) -> tuple[int, Bound]:
    """The count a plan answers and what bound it: the memory's fewest when more than the
    deadline needs, else the deadline's (also when the chip's memory is unknown)."""
    if fewest.verdict == "never":
        raise InputError("no GPU count fits this job in memory")
    if fewest.gpus is not None and fewest.gpus > time_gpus:
        return fewest.gpus, "memory"
    return time_gpus, "time"


def fits_per_row(
    catalog: Catalog,
    request: EstimateRequest,
    settings: MemorySettings,
    variations: dict[str, list[str]],
) -> list[bool | None]:
    """Whether each row of the sensitivity table (`flops.sensitivity`'s order) fits in
    memory: True, False, or None where its chip's memory is unknown."""
    answers: list[bool | None] = []
    for variable, values in variations.items():
        for value in values:
            varied = flops.vary(request, variable, value)
            spec = catalog.resolve(varied.hardware.gpu)
            memory = training_memory(training_config(varied, settings), varied.hardware.gpus)
            answers.append(fits(memory, chip_memory_bytes(spec)))
    return answers


def with_gpus(request: EstimateRequest, gpus: int) -> EstimateRequest:
    return dataclasses.replace(request, hardware=dataclasses.replace(request.hardware, gpus=gpus))


def gib(value_bytes: float) -> float:
    return value_bytes / BYTES_PER_GIB


def _never_fits(config: TrainingConfig, gpu: str, chip_bytes: float) -> str:
    """Why no count fits: what stays on each GPU however many there are, and what to try."""
    stays = DEFAULT_HEADROOM.needed_bytes(training_memory(config, bounds.INT_MAX).total_bytes)
    if config.sharding != "fsdp":
        hint = "shard more of the model states: --sharding fsdp"
    elif config.shape is None:
        hint = "it needs a chip with more memory"
    elif config.recompute != "full":
        hint = "recompute activations (--recompute full) or use a smaller --micro-batch"
    else:
        hint = "use a smaller --micro-batch or a chip with more memory"
    return (
        f"no count of {gpu} fits {config.params:.3g} params in memory with sharding "
        f"{config.sharding}: at least {gib_text(stays)} per GPU stays however many GPUs "
        f"share it ({gib(chip_bytes):,.4g} GiB per {gpu}); {hint}"
    )


def gib_text(value_bytes: float) -> str:
    """Bytes as GiB for a reader: 78.0 GiB, 1,148.9 GiB; 2.05e+291 GiB past a million."""
    shown = gib(value_bytes)
    return f"{shown:,.1f} GiB" if shown < 1e6 else f"{shown:.3g} GiB"
