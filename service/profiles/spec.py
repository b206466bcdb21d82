"""The vocabulary of a logging profile: which quantity a logged metric or param stands for,
in which unit, over which scope (one device or the whole job), and which statistic of its
history Reckon reads. Pure values; the built-in profiles and the mapping file both build
these, and `derive` is the only reader."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Quantity = Literal[
    "tokens",  # tokens processed so far (a running total)
    "tokens_per_second",  # a windowed rate: steady-state when read as `steady`
    "tokens_per_second_average",  # tokens so far / time so far (HF): a cross-check only
    "flops_per_second",  # model FLOP/s
    "model_flops",  # model FLOPs so far (no recomputation counted)
    "compute_seconds",  # time spent training, as the framework times it
    "step_seconds",  # seconds per optimizer step; with `steady`, times the steps logged
    "samples_per_second_average",
    "steps_per_second_average",
    "batch_per_device",
    "grad_accum",
    "optimizer_steps",  # optimizer steps so far, or planned (HF's max_steps; > 0 only)
    "global_batch_tokens",  # tokens per optimizer step, whole job
    "gpus",
    "nodes",
    "gpus_per_node",
    "recompute",  # a boolean: True means full recomputation
    "precision",  # a precision name (bf16, amp_bf16, ...)
    "bf16",  # a boolean flag: True means bf16
    "fp16",
    "tf32",
]
QUANTITIES: tuple[str, ...] = Quantity.__args__  # type: ignore[attr-defined]

Scope = Literal["job", "device"]
Source = Literal["metric", "param"]
# `latest`: the value the run listing returns (highest step); `steady`: the median of the
# metric's history after its first tenth (warm-up, compilation), which needs the history.
Statistic = Literal["latest", "steady"]

# Unit name -> factor to Reckon's base unit (count, seconds, FLOPs, FLOP/s, fraction).
UNITS: dict[str, float] = {
    "1": 1.0,
    "count": 1.0,
    "s": 1.0,
    "ms": 1e-3,
    "min": 60.0,
    "h": 3600.0,
    "1/s": 1.0,
    "flop": 1.0,
    "flop/s": 1.0,
    "gflop/s": 1e9,
    "tflop/s": 1e12,
    "tflop": 1e12,
    "bool": 1.0,
    "name": 1.0,
}


@dataclass(frozen=True)
class Spec:
    """One logged name and what it means."""

    name: str
    quantity: Quantity
    scope: Scope = "job"
    unit: str = "1"
    source: Source = "metric"
    statistic: Statistic = "latest"

    @property
    def factor(self) -> float:
        return UNITS[self.unit]


@dataclass(frozen=True)
class Profile:
    """A framework's (or an in-house trainer's) logging convention.

    `detect`: metric or param names whose presence (any one) selects this profile.
    `compute_from`: the order in which compute time is derived: "throughput" (tokens ÷
    steady whole-job tokens/s), "flops" (model FLOPs ÷ steady whole-job FLOP/s), "steps"
    (steady seconds per step × steps logged), "runtime" (the framework's own train timer).
    `single_device_without_job_rate`: the framework logs whole-job rates only with more
    than one device (Lightning), so their absence means one.
    `no_rate_detail`: what to record when the run logged no rate at all.
    `counts_model_config`: the run logs its model config as params (HF's Trainer), from
    which the parameter count follows for the common decoder families (hf_config.py)."""

    name: str
    specs: tuple[Spec, ...]
    detect: tuple[str, ...]
    compute_from: tuple[str, ...] = ("throughput", "flops", "runtime")
    single_device_without_job_rate: bool = False
    no_rate_detail: str | None = None
    source_file: str = ""
    raw_throughput: bool = False  # Reckon's own: pass the logged value through unjudged
    counts_model_config: bool = False

    def specs_for(self, quantity: str) -> list[Spec]:
        return [spec for spec in self.specs if spec.quantity == quantity]

    @property
    def needs_history(self) -> tuple[str, ...]:
        return tuple(spec.name for spec in self.specs if spec.statistic == "steady")
