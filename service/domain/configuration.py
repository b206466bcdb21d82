"""Planned against observed configuration, pure (docs/contract.md §3 step 5).

What `reckon launch` copied from the estimate is the plan (tags `reckon.planned.*`); what the
run states about itself (the run-context plugin's `reckon.gpus` from WORLD_SIZE, its logged
values read through its profile, a profiles-file default) is observed. The implied factors
are computed at the observed GPU count, tokens and precision, because that is the job that
ran; the prediction's error stays against the plan, because it was a prediction for the
planned job. Where they disagree (GPU count or precision at all, tokens by more than
TOKEN_TOLERANCE) the reconciliation says `config_differs`; where the run states nothing
for a value the plan has, the plan's is used and it says `config_from_plan`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.domain.hardware import normalize_precision
from service.domain.records import ObservedRun, Planned

CONFIG_DIFFERS = "config_differs"
CONFIG_FROM_PLAN = "config_from_plan"
TOKEN_TOLERANCE = 0.02  # token counts within 2% agree (logging granularity, a last step)

# (GPU, precision) -> dense peak FLOP/s per GPU, None when the catalog has no such peak.
PeakLookup = Callable[[str, str], float | None]


@dataclass(frozen=True)
class Configuration:
    """The configuration the factors are implied at, and how it compares with the plan."""

    gpus: int
    tokens: float | None
    precision: str
    flops: float | None  # the plan's FLOPs scaled to the observed tokens
    peak_flops: float | None  # per GPU, at `precision`
    check: str | None
    observed_gpus: int | None
    observed_tokens: float | None
    observed_precision: str | None
    observed_global_batch_tokens: float | None = None  # the first run's that states it


def observed(
    plan: Planned, runs: Sequence[ObservedRun], peaks: PeakLookup | None = None
) -> Configuration:
    """`runs`: the estimate's usable runs, the one the compute time comes from first. GPU
    count and precision are the first run's that states them; tokens are the most any run
    counted (a resumed job's counter carries on from its checkpoint). A precision other
    than the plan's needs `peaks` to give its peak; without it there is no peak to imply a
    utilization against (flops and peak None)."""
    gpus = next((run.gpus for run in runs if run.gpus is not None), None)
    precision = next((_name(run.precision) for run in runs if run.precision), None)
    counted = [run.tokens for run in runs if run.tokens is not None and run.tokens > 0]
    tokens = max(counted) if counted else None
    differs = (
        (gpus is not None and gpus != plan.gpus)
        or (precision is not None and precision != _name(plan.precision))
        or (
            tokens is not None
            and plan.tokens is not None
            and abs(tokens / plan.tokens - 1.0) > TOKEN_TOLERANCE
        )
    )
    # A retrospective estimate's configuration is the run's own (and the import's flags):
    # nothing of it was planned, so nothing stands in for what the run did not say.
    from_plan = plan.kind != "retrospective" and (
        gpus is None or precision is None or (tokens is None and plan.tokens is not None)
    )
    used_precision = precision or plan.precision
    peak = plan.peak_flops
    if precision is not None and precision != _name(plan.precision):
        peak = None if peaks is None or plan.peak_flops is None else peaks(plan.gpu, precision)
    used_tokens = tokens if tokens is not None else plan.tokens
    flops = plan.flops
    if flops is not None and plan.tokens and used_tokens is not None and used_tokens != plan.tokens:
        flops = flops * (used_tokens / plan.tokens)  # 6·N·D: the same model, D as trained
    return Configuration(
        gpus=gpus if gpus is not None else plan.gpus,
        tokens=used_tokens,
        precision=used_precision,
        flops=flops if peak is not None else None,
        peak_flops=peak,
        check=CONFIG_DIFFERS if differs else (CONFIG_FROM_PLAN if from_plan else None),
        observed_gpus=gpus,
        observed_tokens=tokens,
        observed_precision=precision,
        observed_global_batch_tokens=next(
            (run.global_batch_tokens for run in runs if run.global_batch_tokens), None
        ),
    )


def _name(precision: str | None) -> str:
    return normalize_precision(precision) if precision else ""
