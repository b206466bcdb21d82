"""From one run's logged values to Reckon's observables (tokens, model FLOPs, steady-state
throughput, compute seconds, GPU count, precision, recompute), following its profile.
Pure: the metric history comes in through a reader function, called only for the metrics
a profile reads as `steady`, so the adapter fetches histories only for runs that need them.

Derivations, in order: the GPU count (run config; params; whole-job ÷ per-device rate;
HF's samples/s ÷ (steps/s × per-device batch × accumulation); one device where the
framework logs whole-job rates only with more), then whole-job values (per-device ×
GPUs), then compute time by the profile's `compute_from` order, then what follows from
it. Model FLOPs with no total logged come from FLOP/s ÷ tokens/s (FLOPs per token) × tokens;
the parameter count Reckon's 6·N·D needs is model FLOPs ÷ (6 × tokens), so the estimate's
FLOPs equal the framework's own count (attention included, if it counted it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from service.domain.records import RunObservables
from service.domain.values import Recompute
from service.profiles.hf_config import non_embedding_parameters
from service.profiles.run_config import RunConfig
from service.profiles.run_defaults import NONE, RunDefaults
from service.profiles.spec import Profile, Scope

# Reason codes, stored with skips.
CONTRADICTORY = "contradictory_metrics"
BAD_METRIC = "bad_metric"
NO_THROUGHPUT = "no_throughput"

# Two figures that should agree are taken as contradicting beyond this relative gap.
TOLERANCE = 0.05
HF_RATE_ROUNDING = 0.0005  # half of the last place HF's speed_metrics keeps
_RATES = ("tokens_per_second", "flops_per_second")
_FLAGS = ("recompute", "bf16", "fp16", "tf32")


@dataclass(frozen=True)
class RunRecord:
    """What the run listing returns for one run: params, tags, latest metric values."""

    params: Mapping[str, str]
    tags: Mapping[str, str]
    metrics: Mapping[str, float]
    experiment_id: str = ""
    experiment_name: str = ""  # set when a `[[defaults]]` table names experiments


Point = tuple[int, float]  # (step, value), in logging order
HistoryReader = Callable[[str], Sequence[Point]]


class _Contradiction(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason = reason
        self.detail = detail


def steady(points: Sequence[Point]) -> tuple[float, int] | None:
    """The steady-state value of a windowed rate and the last step logged: the median after
    the first tenth of the points (at least one of three or more), which is warm-up."""
    if not points:
        return None
    skip = len(points) // 10 if len(points) >= 10 else (1 if len(points) >= 3 else 0)
    values = [value for _, value in points[skip:]]
    return statistics.median(values), max(step for step, _ in points)


def derive(
    profile: Profile | None,
    record: RunRecord,
    config: RunConfig,
    history: HistoryReader,
    fallback_gpus: int | None = None,
    defaults: RunDefaults = NONE,
) -> RunObservables:
    """The observables of one run; a run whose values contradict each other gets only its
    profile name and the problem, never a half-read. `defaults` (the profiles file's table
    covering the run) and then `fallback_gpus` (`reckon import --gpus`) are used only when
    neither the run's tags nor its profile say: per-GPU rates need a count to become
    whole-job ones."""
    if config.problem is not None:
        return RunObservables(profile=None if profile is None else profile.name,
                              problem=config.problem)  # fmt: skip
    if profile is None:
        return _configured(None, config, defaults)
    try:
        return _derive(profile, record, config, history, fallback_gpus, defaults)
    except _Contradiction as problem:
        return RunObservables(profile=profile.name, problem=(problem.reason, problem.detail))


def _configured(
    profile: str | None, config: RunConfig, defaults: RunDefaults, **values: object
) -> RunObservables:
    fields: dict[str, object] = {
        "gpu": config.gpu or defaults.gpu,
        "gpus": config.gpus or defaults.gpus,
        "precision": config.precision or defaults.precision,
        "params": config.params,
        "tokens": config.tokens,
        "recompute": config.recompute,
    }
    fields.update({key: value for key, value in values.items() if value is not None})
    return RunObservables(profile=profile, **fields)  # type: ignore[arg-type]


class _Values:
    """The profile's specs read from one run, in base units, first spec per key winning."""

    def __init__(self, profile: Profile, record: RunRecord, history: HistoryReader) -> None:
        self.numbers: dict[tuple[str, Scope], float] = {}
        self.steps: dict[str, int] = {}
        self.flags: dict[str, bool] = {}
        self.names: dict[str, str] = {}
        for spec in profile.specs:
            key = (spec.quantity, spec.scope)
            if spec.source == "param":
                text = record.params.get(spec.name)
                if text is None or key in self.numbers:
                    continue
                if spec.quantity in _FLAGS:
                    flag = _flag(text)
                    if flag is not None:
                        self.flags[spec.quantity] = self.flags.get(spec.quantity, False) or flag
                elif spec.quantity == "precision":
                    self.names.setdefault("precision", text)
                else:
                    self.numbers[key] = _number(spec.name, text) * spec.factor
                continue
            if spec.name not in record.metrics or key in self.numbers:
                continue
            value = record.metrics[spec.name]
            if spec.statistic == "steady":
                found = steady(history(spec.name))
                if found is None:
                    continue
                value, self.steps[spec.quantity] = found
            if not math.isfinite(value) or value < 0 or (value == 0 and "per_second" in key[0]):
                raise _Contradiction(BAD_METRIC, f"{spec.name} = {value!r} cannot be used")
            self.numbers[key] = value * spec.factor

    def get(self, quantity: str, scope: Scope) -> float | None:
        return self.numbers.get((quantity, scope))

    def any_scope(self, quantity: str) -> float | None:
        job = self.get(quantity, "job")
        return job if job is not None else self.get(quantity, "device")


def _derive(
    profile: Profile,
    record: RunRecord,
    config: RunConfig,
    history: HistoryReader,
    fallback_gpus: int | None,
    defaults: RunDefaults,
) -> RunObservables:
    if profile.raw_throughput:  # judged by the reconcile use case, as logged (NaN included)
        return _configured(
            profile.name, config, defaults, throughput=record.metrics.get(profile.specs[0].name)
        )
    values = _Values(profile, record, history)
    gpus = config.gpus if config.gpus is not None else _gpu_count(values, profile)
    if gpus is None:
        gpus = defaults.gpus or fallback_gpus

    def job(quantity: str) -> float | None:
        whole = values.get(quantity, "job")
        if whole is not None:
            return whole
        device = values.get(quantity, "device")
        return None if device is None or gpus is None else device * gpus

    tokens = config.tokens if config.tokens is not None else job("tokens")
    tps, fps = job("tokens_per_second"), job("flops_per_second")
    model_flops = job("model_flops")
    per_token = _flops_per_token(values)
    if model_flops is None and per_token is not None and tokens is not None:
        model_flops = per_token * tokens
    runtime = values.any_scope("compute_seconds")
    compute = _compute_seconds(profile, values, tokens, tps, model_flops, fps, runtime)
    if tokens is None and tps is not None and compute is not None:
        tokens = tps * compute  # per-step profiles log rates, not totals
    if model_flops is None and fps is not None and compute is not None:
        model_flops = fps * compute
    if tokens is None and model_flops is not None and config.params is not None:
        tokens = model_flops / (6.0 * config.params)
    counted = None
    if tokens is None and model_flops is not None and profile.counts_model_config:
        # HF's total_flos is 6 × N (without embeddings) × tokens: its config gives N
        counted = non_embedding_parameters(record.params)
        if counted:
            tokens = model_flops / (6.0 * counted)
    _check_average(values, tokens, runtime)
    params = config.params or counted
    if params is None and model_flops is not None and tokens:
        params = model_flops / (6.0 * tokens)
    throughput = tps if tps is not None else (tokens / compute if tokens and compute else None)
    batch_tokens = values.any_scope("global_batch_tokens")
    if batch_tokens is None and tokens:
        steps = _optimizer_steps(values)
        batch_tokens = tokens / steps if steps else None
    if batch_tokens is not None and not (math.isfinite(batch_tokens) and batch_tokens > 0):
        batch_tokens = None
    problem = None
    if compute is None and profile.no_rate_detail is not None:
        problem = (NO_THROUGHPUT, profile.no_rate_detail)
    return RunObservables(
        profile=profile.name,
        tokens=tokens,
        model_flops=model_flops,
        throughput=throughput,
        compute_seconds=compute,
        gpus=gpus,
        gpu=config.gpu or defaults.gpu,
        precision=config.precision or _precision(values, profile) or defaults.precision,
        params=params,
        recompute=config.recompute or _recompute(values, profile),
        problem=problem,
        global_batch_tokens=batch_tokens,
    )


def _compute_seconds(
    profile: Profile,
    values: _Values,
    tokens: float | None,
    tps: float | None,
    model_flops: float | None,
    fps: float | None,
    runtime: float | None,
) -> float | None:
    for method in profile.compute_from:
        if method == "throughput" and tokens and tps:
            return tokens / tps
        if method == "flops" and model_flops and fps:
            return model_flops / fps
        if method == "steps":
            step_seconds = values.any_scope("step_seconds")
            steps = values.steps.get("step_seconds")
            if step_seconds and steps:
                return step_seconds * steps
        if method == "runtime" and runtime:
            return runtime
    return None


def _optimizer_steps(values: _Values) -> float | None:
    """The optimizer steps the run took, for tokens per step: HF's average steps/s × its
    train_runtime where the rate's rounding allows (as for the GPU count), else a logged
    step count (Composer's time/batch; HF's max_steps when set), else the last step a
    per-step profile logged (NeMo, torchtitan: within one logging interval)."""
    rate, runtime = (
        values.any_scope("steps_per_second_average"),
        values.any_scope("compute_seconds"),
    )
    if rate and runtime and HF_RATE_ROUNDING / rate <= TOLERANCE / 2:
        ran = rate * runtime
        return float(round(ran)) if math.isfinite(ran) and ran >= 1 else None
    counted = values.any_scope("optimizer_steps")
    if counted is not None and counted >= 1:
        return counted
    logged = values.steps.get("step_seconds")
    return float(logged) if logged else None


def _flops_per_token(values: _Values) -> float | None:
    for scope in ("job", "device"):
        flops = values.get("flops_per_second", scope)
        tokens = values.get("tokens_per_second", scope)
        if flops and tokens:
            return flops / tokens
    return None


def _gpu_count(values: _Values, profile: Profile) -> int | None:
    """The first GPU count the run gives; a second one that differs is a contradiction."""
    found: list[tuple[int, str]] = []
    explicit = values.any_scope("gpus")
    nodes, per_node = values.any_scope("nodes"), values.any_scope("gpus_per_node")
    if explicit is not None:
        found.append((_whole(explicit, "the logged GPU count"), "the logged GPU count"))
    elif per_node is not None:
        total = per_node * (nodes if nodes is not None else 1.0)
        found.append((_whole(total, "nodes x GPUs per node"), "nodes x GPUs per node"))
    for rate in _RATES:
        whole, device = values.get(rate, "job"), values.get(rate, "device")
        if whole and device:
            found.append((_whole(whole / device, f"whole-job / per-device {rate}"), rate))
    samples = values.any_scope("samples_per_second_average")
    steps = values.any_scope("steps_per_second_average")
    batch, accumulation = values.any_scope("batch_per_device"), values.any_scope("grad_accum")
    # HF rounds both rates to 3 decimals: a slow job's steps/s (0.004) is too coarse to
    # give a count, which is then unknown (tag reckon.gpus or pass --gpus), not contradictory.
    if samples and steps and batch and HF_RATE_ROUNDING / steps <= TOLERANCE / 2:
        ratio = samples / (steps * batch * (accumulation or 1.0))
        found.append((_whole(ratio, "samples/s / (steps/s x batch x accumulation)"), "HF rates"))
    device_rate = any(values.get(rate, "device") for rate in _RATES)
    if not found and profile.single_device_without_job_rate and device_rate:
        found.append((1, "no whole-job rate logged"))
    if not found:
        return None
    first, source = found[0]
    for other, other_source in found[1:]:
        if other != first:
            raise _Contradiction(
                CONTRADICTORY, f"GPU count {first} from {source} but {other} from {other_source}"
            )
    return first


def _whole(value: float, what: str) -> int:
    nearest = round(value)
    if nearest < 1 or abs(value - nearest) > TOLERANCE * max(nearest, 1):
        raise _Contradiction(CONTRADICTORY, f"{what} gives {value:.3g} GPUs, not a whole number")
    return int(nearest)


def _check_average(values: _Values, tokens: float | None, runtime: float | None) -> None:
    """HF's train_tokens_per_second is tokens so far ÷ train_runtime: it must agree."""
    average = values.any_scope("tokens_per_second_average")
    if average and tokens and runtime:
        implied = average * runtime
        if abs(implied / tokens - 1.0) > TOLERANCE:
            raise _Contradiction(
                CONTRADICTORY,
                f"{implied:.4g} tokens from the average rate x runtime but {tokens:.4g} counted",
            )


def _precision(values: _Values, profile: Profile) -> str | None:
    name = values.names.get("precision")
    if name is not None:
        return _precision_name(name)
    if values.flags.get("bf16"):
        return "bf16"
    if values.flags.get("fp16"):
        return "fp16"
    if values.flags.get("tf32"):
        return "tf32"
    if any(spec.quantity == "bf16" for spec in profile.specs) and "bf16" in values.flags:
        return "fp32"  # every half-precision flag logged and off: HF trains in fp32
    return None


def _precision_name(text: str) -> str | None:
    """Composer's amp_bf16, Lightning's bf16-mixed / 16-mixed, plain names."""
    name = text.strip().lower().removeprefix("amp_").removesuffix("-mixed").removesuffix("-true")
    return {"16": "fp16", "32": "fp32", "64": "fp64", "float16": "fp16", "bfloat16": "bf16",
            "float32": "fp32", "none": ""}.get(name, name) or None  # fmt: skip


def _recompute(values: _Values, profile: Profile) -> Recompute | None:
    if "recompute" not in values.flags:
        return None
    return "full" if values.flags["recompute"] else "none"


def _flag(text: str) -> bool | None:
    lowered = text.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no", "none", ""):
        return False
    return None


def _number(name: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Contradiction(BAD_METRIC, f"param {name} = {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise _Contradiction(BAD_METRIC, f"param {name} = {text!r} cannot be used")
    return value
