"""The one declaration of an estimate's inputs: name, kind, default and help. The CLI's
options, the API's query and body parameters and the request view are all derived from
`ESTIMATE_INPUTS`; `parse_inputs` turns what either entry point collected into one typed
`RawInputs`. Pure: no framework imported here (the CLI's start-up depends on it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from service.domain import bounds
from service.domain.errors import InputError
from service.domain.hardware import PRECISIONS
from service.domain.memory import OPTIMIZERS, SHARDINGS
from service.domain.units import parse_count
from service.domain.values import DEFAULT_OVERHEAD, DEFAULT_UTILIZATION, RECOMPUTE_MODES

Kind = Literal["count", "text", "int", "float"]


@dataclass(frozen=True)
class InputField:
    """One input. `count` takes "7e9" or "7B"; a field without a default is required
    (except `gpus` where the command answers for it, as `plan` does)."""

    name: str
    kind: Kind
    help: str
    default: str | None = None
    required: bool = False
    shown_default: str | None = None  # a default applied later (None here means "not given")
    # What the checks below enforce, as JSON Schema keywords for the API's OpenAPI document
    # (minimum, exclusiveMaximum, enum, pattern): the schema says what the server accepts.
    schema: Mapping[str, object] | None = None

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")


_COUNT: Mapping[str, object] = {"minimum": 1, "maximum": bounds.INT_MAX}

ESTIMATE_INPUTS: tuple[InputField, ...] = (
    InputField("params", "count", "(Active) parameters: 7e9, 7B.", required=True),
    InputField("tokens", "count", "Training tokens: 1e12, 1T.", required=True),
    InputField("gpu", "text", "GPU model, e.g. a100-80gb, h100-sxm.", required=True),
    InputField("gpus", "int", "Number of GPUs.", required=True, schema=_COUNT),
    InputField(
        "precision",
        "text",
        "Numeric precision: " + ", ".join(PRECISIONS) + ".",
        "bf16",
        schema={"enum": list(PRECISIONS)},
    ),
    InputField(
        "recompute",
        "text",
        "Activation recomputation: none, selective or full.",
        "none",
        schema={"enum": list(RECOMPUTE_MODES)},
    ),
    InputField(
        "recompute_factor",
        "float",
        "Explicit hardware/model FLOPs ratio (overrides recompute).",
        schema={"minimum": 1},
    ),
    InputField(
        "utilization",
        "float",
        "Hardware FLOPs utilization u in (0, 1].",
        shown_default=str(DEFAULT_UTILIZATION),
        schema={"exclusiveMinimum": 0, "maximum": 1},
    ),
    InputField(
        "overhead",
        "float",
        "Overhead share of wall time f in [0, 1).",
        shown_default=f"{DEFAULT_OVERHEAD:g}",
        schema={"minimum": 0, "exclusiveMaximum": 1},
    ),
    InputField("layers", "int", "Layers L (adds the attention term).", schema=_COUNT),
    InputField("hidden_size", "int", "Model width d.", schema=_COUNT),
    InputField("seq_len", "int", "Sequence length T.", schema=_COUNT),
    InputField(
        "global_batch_tokens",
        "count",
        "Tokens per optimizer step over all GPUs (global batch x sequence length: 4M, 4194304); "
        "calibrated factors move with the tokens each GPU gets per step.",
    ),
    InputField(
        "price_per_gpu_hour",
        "float",
        "Price of one GPU-hour, to report cost.",
        schema={"minimum": 0},
    ),
    InputField(
        "currency",
        "text",
        "Currency of the price and the cost (ISO 4217 code).",
        "USD",
        schema={"pattern": "^[A-Z]{3}$"},
    ),
)


# What training memory per GPU depends on beyond the estimate's inputs (service/domain/
# memory.py): how the model states are sharded, which optimizer holds states, and the
# micro-batch that sizes the activations (counted only when --layers, --hidden-size and
# --seq-len are given). Options of estimate, plan and sensitivity like the inputs above, but
# not part of an estimate's stored inputs (a saved estimate keeps its time, not its memory).
MEMORY_INPUTS: tuple[InputField, ...] = (
    InputField(
        "sharding",
        "text",
        "How the model states are split over the GPUs: none (plain data parallel), zero1 "
        "(optimizer states), zero2 (and gradients) or fsdp (and weights).",
        "fsdp",
        schema={"enum": list(SHARDINGS)},
    ),
    InputField(
        "optimizer",
        "text",
        "Optimizer whose states each GPU holds: adam (fp32 master weights, momentum and "
        "variance) or sgd (with momentum).",
        "adam",
        schema={"enum": list(OPTIMIZERS)},
    ),
    InputField(
        "micro_batch",
        "int",
        "Sequences per GPU per forward pass (sizes the activations, with the shape).",
        shown_default="1",
        schema=_COUNT,
    ),
)


@dataclass(frozen=True)
class RawInputs:
    """The inputs as given, before the catalog checks them (`estimates.build_request`)."""

    params: float
    tokens: float
    gpu: str
    gpus: int
    precision: str = "bf16"
    recompute: str = "none"
    recompute_factor: float | None = None
    utilization: float | None = None
    overhead: float | None = None
    layers: int | None = None
    hidden_size: int | None = None
    seq_len: int | None = None
    global_batch_tokens: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str = "USD"
    sharding: str = "fsdp"
    optimizer: str = "adam"
    micro_batch: int = 1

    @property
    def factors_given(self) -> bool:
        return self.utilization is not None or self.overhead is not None


def parse_inputs(values: Mapping[str, object], *, gpus: int | None = None) -> RawInputs:
    """Collected values (CLI options or API parameters, by field name) as typed inputs.
    `gpus` stands in for a command that chooses the count itself (`plan`)."""
    parsed: dict[str, object] = {}
    for spec in (*ESTIMATE_INPUTS, *MEMORY_INPUTS):
        raw = values.get(spec.name)
        if spec.name == "gpus" and gpus is not None:
            raw = gpus
        if raw is None:
            if spec.required:
                raise InputError(f"{spec.name} is required")
            if spec.default is not None:
                parsed[spec.name] = spec.default
            continue
        parsed[spec.name] = _convert(spec, raw)
    return RawInputs(**parsed)  # type: ignore[arg-type]


def _convert(spec: InputField, raw: object) -> object:
    if spec.kind == "count":
        return parse_count(str(raw), spec.name)
    if spec.kind == "text":
        return str(raw)
    if isinstance(raw, bool):
        raise InputError(f"{spec.name} must be a number, got {raw!r}")
    if spec.kind == "int":
        if isinstance(raw, int):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise InputError(f"{spec.name} must be a whole number, got {raw!r}") from None
    if isinstance(raw, int | float):
        return float(raw)
    try:
        return float(str(raw).strip())
    except ValueError:
        raise InputError(f"{spec.name} must be a number, got {raw!r}") from None
