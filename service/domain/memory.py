"""Training memory per GPU: weights, gradients, optimizer states and activations in bytes,
whether that fits a chip, and the fewest data-parallel GPUs that make it fit. Pure math on
values; the chip's memory comes in from the caller. The model, its sources and its
validation against published figures: docs/memory.md.

Model states follow the ZeRO paper (Rajbhandari et al. 2020, §3.1 and §5): mixed precision
with Adam holds 2 + 2 + 12 = 16 bytes per parameter (16-bit weights and gradients; fp32
master weights, momentum and variance), fp32 training 4 + 4 + 8. ZeRO-1 divides the
optimizer states by the data-parallel degree, ZeRO-2 also the gradients, ZeRO-3 (`fsdp`)
also the weights. Activations follow Korthikanti et al. 2022 ("Reducing Activation
Recomputation in Large Transformer Models", Eq. 1 and Table 2) with no tensor, sequence or
pipeline parallelism (t = p = 1)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from service.domain import bounds, spelling
from service.domain.errors import InputError, require_count, require_fraction, require_positive
from service.domain.hardware import PRECISIONS, GpuSpec, normalize_precision
from service.domain.values import RECOMPUTE_MODES, Recompute

Sharding = Literal["none", "zero1", "zero2", "fsdp"]
SHARDINGS: tuple[Sharding, ...] = ("none", "zero1", "zero2", "fsdp")
Optimizer = Literal["adam", "sgd"]
OPTIMIZERS: tuple[Optimizer, ...] = ("adam", "sgd")
Verdict = Literal["fits", "never", "unknown"]

BYTES_PER_GIB = 2**30
# The catalog's memory_gb is the vendor's "GB" of HBM, a binary unit for these parts: an
# "80GB" A100 has 80 x 2^30 bytes (nvidia-smi shows 81920 MiB). See docs/memory.md.
BYTES_PER_CATALOG_GB = BYTES_PER_GIB
FP32_BYTES = 4
MASK_BYTES = 1  # a dropout mask is one byte per element (Korthikanti et al. §4)
# Precisions whose weights, gradients and activations are 4-byte floats. The others train
# in mixed precision: 16-bit weights, gradients and activations, fp32 master weights in the
# optimizer. FP8/FP4 recipes (Transformer Engine, NVFP4) keep that 16-bit storage and cast
# GEMM inputs on the fly, so they are counted as 16-bit; their small cast caches are left out.
FULL_PRECISIONS = ("fp32", "tf32")
# Parameters of one transformer layer, 12·h² (attention 4h², MLP 8h²; norms and biases left
# out): what FSDP/ZeRO-3 gathers whole while it computes that layer.
LAYER_PARAMS_PER_HIDDEN_SQUARED = 12


@dataclass(frozen=True)
class Headroom:
    """Memory a job needs beyond the tensors it holds: a fixed part for the CUDA context,
    kernels and communication buffers, and a fraction of the modelled bytes for the caching
    allocator's fragmentation and short-lived buffers. Needed = bytes·(1 + fraction) + fixed.

    Defaults (docs/memory.md, "Headroom"): 1.5 GiB fixed, the 1.31 GiB the CUDA context and
    kernels took before any tensor in Hugging Face's measurement ("Model training anatomy":
    1343 MB on a V100) rounded up; 10% for the allocator, the PyTorch caching allocator's
    reserved-over-allocated overhead seen in the same measurements."""

    fixed_bytes: float = 1.5 * BYTES_PER_GIB
    fraction: float = 0.10

    def __post_init__(self) -> None:
        if not math.isfinite(self.fixed_bytes) or self.fixed_bytes < 0:
            raise InputError(f"fixed headroom must be zero or more bytes, got {self.fixed_bytes!r}")
        require_fraction(self.fraction, "headroom fraction", allow_zero=True, allow_one=False)

    def needed_bytes(self, modelled_bytes: float) -> float:
        return modelled_bytes * (1.0 + self.fraction) + self.fixed_bytes


DEFAULT_HEADROOM = Headroom()


@dataclass(frozen=True)
class ActivationShape:
    """The transformer's shape as activations see it: L layers of width h over sequences of
    s tokens in micro-batches of b. `attention_heads` (a) sizes the attention scores that
    eager attention stores (a·s²·b elements); `fused_attention` says they are never stored
    (FlashAttention keeps only O(s) softmax statistics), which drops that term.
    `vocab_size`, when given, adds the output layer: its fp32 logits are 4·s·b·v bytes."""

    layers: int
    hidden_size: int
    seq_len: int
    micro_batch_size: int = 1
    attention_heads: int | None = None
    fused_attention: bool = False
    vocab_size: int | None = None

    def __post_init__(self) -> None:
        for name in ("layers", "hidden_size", "seq_len", "micro_batch_size"):
            require_count(getattr(self, name), name)
        for name in ("attention_heads", "vocab_size"):
            if getattr(self, name) is not None:
                require_count(getattr(self, name), name)

    @property
    def tokens(self) -> int:
        """s·b, the tokens of one micro-batch."""
        return self.seq_len * self.micro_batch_size


@dataclass(frozen=True)
class TrainingConfig:
    """What the memory depends on apart from the GPU count: N parameters trained at
    `precision` with `optimizer`, sharded by `sharding`; `shape` (None: unknown) sizes the
    activations under `recompute`."""

    params: float
    precision: str = "bf16"
    optimizer: Optimizer = "adam"
    sharding: Sharding = "fsdp"
    shape: ActivationShape | None = None
    recompute: Recompute = "none"

    def __post_init__(self) -> None:
        require_positive(self.params, "params")
        key = normalize_precision(self.precision)
        if key not in PRECISIONS:
            raise InputError(spelling.unknown_precision(self.precision, key, PRECISIONS))
        object.__setattr__(self, "precision", key)
        _require_one_of(self.optimizer, OPTIMIZERS, "optimizer")
        _require_one_of(self.sharding, SHARDINGS, "sharding")
        _require_one_of(self.recompute, RECOMPUTE_MODES, "recompute mode")
        shape = self.shape
        if (
            shape is not None
            and self.recompute != "full"
            and not shape.fused_attention
            and shape.attention_heads is None
        ):
            raise InputError(
                "activations with stored attention scores need the attention heads "
                "(or fused attention, which stores none)"
            )


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes per GPU at `gpus` data-parallel GPUs. `gathered_layer_bytes` is FSDP's working
    set: one layer's full weights and gradients, materialised while that layer runs (0
    without FSDP or on one GPU). None means unknown: the model's shape was not given."""

    gpus: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    gathered_layer_bytes: float | None
    activations_bytes: float | None

    @property
    def model_states_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def complete(self) -> bool:
        """False when a term is unknown: `total_bytes` is then a lower bound."""
        return self.gathered_layer_bytes is not None and self.activations_bytes is not None

    @property
    def total_bytes(self) -> float:
        """The sum of the known terms (a lower bound unless `complete`)."""
        return (
            self.model_states_bytes
            + (self.gathered_layer_bytes or 0.0)
            + (self.activations_bytes or 0.0)
        )


@dataclass(frozen=True)
class GpuCount:
    """The fewest GPUs whose per-GPU memory fits: `verdict` "fits" (then `gpus` and the
    `memory` at that count), "never" (no count fits: nothing shrinks enough, e.g. no
    sharding) or "unknown" (the chip's memory is not in the catalog)."""

    verdict: Verdict
    gpus: int | None = None
    memory: TrainingMemory | None = None


def chip_memory_bytes(spec: GpuSpec) -> float | None:
    """The chip's memory in bytes, or None when the catalog entry has none (a user's
    hardware file may leave it out): unknown, never 0."""
    if spec.memory_gb is None:
        return None
    return spec.memory_gb * BYTES_PER_CATALOG_GB


def bytes_per_param(config: TrainingConfig) -> tuple[int, int, int]:
    """(weights, gradients, optimizer states) bytes per parameter, unsharded: 2, 2, 12 for
    mixed-precision Adam; 4, 4, 8 for fp32 Adam; SGD with momentum keeps one 4-byte state
    (plus the 4-byte master copy in mixed precision)."""
    full = config.precision in FULL_PRECISIONS
    weight = FP32_BYTES if full else 2
    master = 0 if full else FP32_BYTES
    states = 2 if config.optimizer == "adam" else 1
    return weight, weight, master + states * FP32_BYTES


def activation_element_bytes(precision: str) -> int:
    """Bytes of a stored activation element: 4 in fp32/tf32 training, else 2 (16-bit)."""
    return FP32_BYTES if normalize_precision(precision) in FULL_PRECISIONS else 2


def activation_bytes_per_layer(
    shape: ActivationShape, precision: str, recompute: Recompute
) -> float:
    """Activation bytes one transformer layer keeps for the backward pass, Korthikanti et
    al. 2022 Table 2 with t = 1, generalised to e bytes per element (masks stay 1 byte):

    - none: s·b·h·(16e + 2) + a·s²·b·(2e + 1), i.e. sbh(34 + 5as/h) at e = 2 (Eq. 1);
      with fused attention the a·s²·b term is 0;
    - selective (the attention core recomputed): s·b·h·(16e + 2), i.e. 34·sbh at e = 2;
    - full (only the layer's input kept): e·s·b·h, i.e. 2·sbh at e = 2.
    """
    e = activation_element_bytes(precision)
    sbh = float(shape.tokens) * shape.hidden_size
    if recompute == "full":
        return e * sbh
    linear_part = sbh * (16 * e + 2 * MASK_BYTES)
    if recompute == "selective" or shape.fused_attention:
        return linear_part
    assert shape.attention_heads is not None  # TrainingConfig / callers check
    scores = float(shape.attention_heads) * shape.seq_len * shape.tokens
    return linear_part + scores * (2 * e + MASK_BYTES)


def activation_bytes(shape: ActivationShape, precision: str, recompute: Recompute) -> float:
    """All activations of one micro-batch at their peak, the start of the backward pass:
    L layers' stored activations, plus the one layer the backward pass re-materialises
    when recomputing (its attention core under selective, all of it under full), plus the
    output layer when `vocab_size` is known (Korthikanti et al. §4.3: the embedding dropout
    mask s·b·h, the final norm's and the projection's inputs 2e·s·b·h, fp32 logits 4·s·b·v)."""
    stored = shape.layers * activation_bytes_per_layer(shape, precision, recompute)
    if recompute != "none":
        everything = activation_bytes_per_layer(shape, precision, "none")
        stored += everything - activation_bytes_per_layer(shape, precision, recompute)
    if shape.vocab_size is not None:
        e = activation_element_bytes(precision)
        sbh = float(shape.tokens) * shape.hidden_size
        stored += sbh * (MASK_BYTES + 2 * e) + FP32_BYTES * float(shape.tokens) * shape.vocab_size
    return stored


def training_memory(config: TrainingConfig, gpus: int) -> TrainingMemory:
    """Bytes per GPU when `config` trains data-parallel over `gpus` GPUs."""
    require_count(gpus, "gpus")
    weight, gradient, optimizer = (config.params * b for b in bytes_per_param(config))
    sharded = _sharded_terms(config.sharding)
    return TrainingMemory(
        gpus=gpus,
        weights_bytes=weight / gpus if "weights" in sharded else weight,
        gradients_bytes=gradient / gpus if "gradients" in sharded else gradient,
        optimizer_bytes=optimizer / gpus if "optimizer" in sharded else optimizer,
        gathered_layer_bytes=_gathered_layer_bytes(config, gpus),
        activations_bytes=(
            None
            if config.shape is None
            else activation_bytes(config.shape, config.precision, config.recompute)
        ),
    )


def fits(
    memory: TrainingMemory,
    chip_memory_bytes: float | None,
    headroom: Headroom = DEFAULT_HEADROOM,
) -> bool | None:
    """Whether `memory` plus the headroom fits in `chip_memory_bytes`; None when the chip's
    memory is unknown. With an incomplete `memory` (shape unknown) True only says the known
    terms fit; False is final either way."""
    if chip_memory_bytes is None:
        return None
    return headroom.needed_bytes(memory.total_bytes) <= chip_memory_bytes


def min_gpus_that_fit(
    config: TrainingConfig,
    chip_memory_bytes: float | None,
    *,
    multiple_of: int = 1,
    headroom: Headroom = DEFAULT_HEADROOM,
) -> GpuCount:
    """The smallest multiple of `multiple_of` GPUs at which `config` fits the chip.

    Per-GPU memory is A + B/n: B the sharded states, A the rest (replicated states,
    FSDP's gathered layer, activations). It fits when (A + B/n)·(1 + fraction) + fixed <=
    chip, so n >= B / R with R = (chip - fixed)/(1 + fraction) - A; R <= 0 means no count
    fits ("never"), as does B = 0 (no sharding) with a chip too small for one copy."""
    require_count(multiple_of, "multiple_of")
    if chip_memory_bytes is None:
        return GpuCount("unknown")
    if multiple_of == 1:
        one = training_memory(config, 1)
        if fits(one, chip_memory_bytes, headroom):
            return GpuCount("fits", 1, one)
    at_two = training_memory(config, 2)
    sharded_bytes = 2 * _sharded_bytes(config.sharding, at_two)
    rest_bytes = at_two.total_bytes - sharded_bytes / 2
    room_bytes = (chip_memory_bytes - headroom.fixed_bytes) / (1 + headroom.fraction) - rest_bytes
    if room_bytes <= 0 or (sharded_bytes == 0 and multiple_of == 1):
        return GpuCount("never")
    guess = 1 if sharded_bytes == 0 else max(2, math.ceil(sharded_bytes / room_bytes))
    gpus = math.ceil(guess / multiple_of) * multiple_of
    # Rounding can put the closed form a step off: settle it by checking the neighbours.
    while gpus <= bounds.INT_MAX and not fits(
        training_memory(config, gpus), chip_memory_bytes, headroom
    ):
        gpus += multiple_of
    if gpus > bounds.INT_MAX:
        return GpuCount("never")
    while gpus - multiple_of >= 2 and fits(
        training_memory(config, gpus - multiple_of), chip_memory_bytes, headroom
    ):
        gpus -= multiple_of
    return GpuCount("fits", gpus, training_memory(config, gpus))


_SHARDED_TERMS: dict[str, frozenset[str]] = {  # built once: GET /v1/estimate is a hot route
    "none": frozenset(),
    "zero1": frozenset({"optimizer"}),
    "zero2": frozenset({"optimizer", "gradients"}),
    "fsdp": frozenset({"optimizer", "gradients", "weights"}),
}


def _sharded_terms(sharding: Sharding) -> frozenset[str]:
    return _SHARDED_TERMS[sharding]


def _sharded_bytes(sharding: Sharding, memory: TrainingMemory) -> float:
    """The per-GPU bytes of `memory` that the data-parallel degree divides."""
    terms = _sharded_terms(sharding)
    return (
        (memory.weights_bytes if "weights" in terms else 0.0)
        + (memory.gradients_bytes if "gradients" in terms else 0.0)
        + (memory.optimizer_bytes if "optimizer" in terms else 0.0)
    )


def _gathered_layer_bytes(config: TrainingConfig, gpus: int) -> float | None:
    """FSDP/ZeRO-3 materialises one layer's full weights while computing it and its full
    gradients before the reduce-scatter: (weight + gradient bytes) x 12·h², as DeepSpeed's
    estimate_zero3_model_states_mem_needs counts `4 * largest_layer_params` in 16-bit.
    0 without FSDP or on one GPU (nothing to gather); None when h is unknown."""
    if config.sharding != "fsdp" or gpus == 1:
        return 0.0
    if config.shape is None:
        return None
    weight, gradient, _ = bytes_per_param(config)
    layer_params = LAYER_PARAMS_PER_HIDDEN_SQUARED * float(config.shape.hidden_size) ** 2
    return (weight + gradient) * layer_params


def _require_one_of(value: str, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise InputError(f"unknown {name} {value!r}; use one of " + ", ".join(allowed))
