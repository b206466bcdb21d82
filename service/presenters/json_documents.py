"""The JSON documents of the planning and registry views (json_views.py) and the operators'
(health, MLflow links, liveness) as TypedDicts: the views are checked against them by mypy
and the API publishes them as its response schemas. Each forbids keys it does not declare, so
a view that grows a key fails the API's response validation instead of the key being dropped:
declare it here too. Keys keep the order the views emit them in (the API emits the declared
order); the inputs keep the order of `service.domain.inputs.ESTIMATE_INPUTS`. Only the API
imports this at run time; the views import it for type checking. The loop's documents:
json_loop_documents.py."""

from __future__ import annotations

from typing import Literal, NotRequired

from pydantic import with_config
from typing_extensions import TypedDict

from service.presenters.json_loop_documents import FORBID, Reconciliation
from service.presenters.json_memory_documents import MemoryPerGpu


@with_config(FORBID)
class EstimateInputs(TypedDict):
    """The validated inputs of an estimate, in the order of ESTIMATE_INPUTS."""

    params: float
    tokens: float
    gpu: str
    gpus: int
    precision: str
    recompute: str
    recompute_factor: float | None
    utilization: float
    overhead: float
    layers: int | None
    hidden_size: int | None
    seq_len: int | None
    global_batch_tokens: float | None
    price_per_gpu_hour: float | None
    currency: str


@with_config(FORBID)
class Estimate(TypedDict):
    """An estimate: its inputs (those of ESTIMATE_INPUTS), FLOPs, times, throughput, cost."""

    params: float
    tokens: float
    gpu: str
    gpus: int
    precision: str
    recompute: str
    recompute_factor: float
    utilization: float
    overhead: float
    layers: int | None
    hidden_size: int | None
    seq_len: int | None
    global_batch_tokens: float | None
    price_per_gpu_hour: float | None
    currency: str
    flops: float
    model_flops: float
    peak_flops: float
    compute_seconds: float
    wall_seconds: float
    wall_human: str
    gpu_hours: float
    mfu: float
    hfu: float
    tokens_per_second: float
    tokens_per_second_per_gpu: float
    cost: float | None
    formula_version: str


@with_config(FORBID)
class EstimateAnswer(Estimate):
    """An estimate with given (or default) factors, and which they were."""

    factor_source: str


@with_config(FORBID)
class GivenAnswer(EstimateAnswer):
    """`reckon estimate` and GET /v1/estimate with given factors: the estimate and its memory."""

    memory: MemoryPerGpu


@with_config(FORBID)
class CalibratedEstimate(Estimate):
    """An estimate with fitted factors: P50 as wall_seconds, P10/P90, the factors' source."""

    wall_seconds_p10: float
    wall_seconds_p90: float
    wall_human_p10: str
    wall_human_p90: str
    factor_set: int | None
    factor_source: str
    factor_segment: str
    factor_n: int
    combined_only: bool
    fallback: bool
    fallback_to: str | None
    extrapolated: list[str]


@with_config(FORBID)
class CalibratedAnswer(CalibratedEstimate):
    """`reckon estimate` and GET /v1/estimate with fitted factors: the estimate and its memory."""

    memory: MemoryPerGpu


@with_config(FORBID)
class EstimateIdentity(TypedDict):
    """What identifies a stored estimate (the keys every stored one starts with)."""

    id: str
    kind: str
    created_at: str
    label: str | None
    predicted_seconds: float
    factor_set: int | None
    factor_source: str
    mlflow_tag: str
    deadline: str | None  # aware UTC, ISO 8601: at risk when the run's P90 finish is after


@with_config(FORBID)
class RunIds(TypedDict):
    """The runs linked to a stored estimate: shown in its detail, not in a list."""

    run_ids: NotRequired[list[str]]


@with_config(FORBID)
class SavedRange(TypedDict):
    """A stored P10/P50/P90: P50 is the stored estimate's `wall_seconds`."""

    wall_seconds_p10: NotRequired[float]
    wall_seconds: NotRequired[float]
    wall_seconds_p90: NotRequired[float]
    wall_human: NotRequired[str]


@with_config(FORBID)
class SavedEstimate(EstimateIdentity, RunIds, Estimate):
    """A stored computed (or retrospective) estimate: identity, estimate keys, P10/P90 if any."""

    wall_seconds_p10: NotRequired[float]
    wall_seconds_p90: NotRequired[float]


@with_config(FORBID)
class ExternalEstimate(EstimateIdentity):
    """A stored planner's own prediction (kind external): identity, configuration, wall time."""

    run_ids: NotRequired[list[str]]
    gpu: str
    gpus: int
    precision: str
    wall_seconds: float
    wall_human: str
    wall_seconds_p10: NotRequired[float]
    wall_seconds_p90: NotRequired[float]


@with_config(FORBID)
class EstimateList(TypedDict):
    """Stored estimates, newest first."""

    estimates: list[SavedEstimate | ExternalEstimate]


@with_config(FORBID)
class SavedAnswer(EstimateAnswer):
    """An estimate just stored: the answer's keys and its identity."""

    id: str
    kind: str
    created_at: str
    label: str | None
    predicted_seconds: float
    factor_set: int | None
    mlflow_tag: str
    deadline: str | None
    run_ids: list[str]


@with_config(FORBID)
class CalibratedSavedAnswer(CalibratedEstimate):
    """A calibrated estimate just stored: the answer's keys and its identity."""

    id: str
    kind: str
    created_at: str
    label: str | None
    predicted_seconds: float
    mlflow_tag: str
    deadline: str | None
    run_ids: list[str]


@with_config(FORBID)
class LinkedEstimate(SavedEstimate):
    """A stored estimate with the run just linked; `created`: the link is new."""

    created: bool


@with_config(FORBID)
class LinkedExternalEstimate(ExternalEstimate):
    """A stored external estimate with the run just linked; `created`: the link is new."""

    created: bool


@with_config(FORBID)
class Unlinked(TypedDict):
    """An unlink: tag removed or not, the reconciliation from the remaining runs (or null)."""

    estimate_id: str
    run_id: str
    tag_removed: bool
    reconciliation: Reconciliation | None


@with_config(FORBID)
class Plan(TypedDict):
    """The fewest GPUs (a multiple of `multiple_of`) that meet the deadline and fit in memory."""

    gpus: int
    deadline_seconds: float
    deadline_human: str
    multiple_of: int
    estimate: Estimate
    bound: Literal["time", "memory"]
    time_bound_gpus: int | None
    memory: MemoryPerGpu


@with_config(FORBID)
class CalibratedPlan(Plan):
    """A plan with fitted factors, met at quantile `confidence`, with P10/P50/P90 at its count."""

    confidence: float
    wall_seconds_at_confidence: float
    wall_seconds_p10: float
    wall_seconds: float
    wall_seconds_p90: float
    factor_set: int | None
    factor_source: str
    factor_segment: str
    fallback: bool
    fallback_to: str | None
    extrapolated: list[str]


@with_config(FORBID)
class SensitivityRow(TypedDict):
    """Wall time with one input changed; change_pct against the base case; fits in memory."""

    variable: str
    value: str
    wall_seconds: float
    wall_human: str
    change_pct: float
    is_base: bool
    fits: bool | None


@with_config(FORBID)
class Sensitivity(TypedDict):
    """The base estimate and the wall time as the inputs vary."""

    base: Estimate
    rows: list[SensitivityRow]


@with_config(FORBID)
class CalibratedSensitivityRow(TypedDict):
    """Wall time (P50, P10/P90) with one input changed, and the segment whose factors it used."""

    variable: str
    value: str
    wall_seconds: float
    wall_seconds_p10: float
    wall_seconds_p90: float
    change_pct: float
    is_base: bool
    factor_segment: str
    fallback: bool
    wall_human: str
    fits: bool | None


@with_config(FORBID)
class CalibratedSensitivity(TypedDict):
    """The base estimate and the calibrated wall time as the inputs vary."""

    base: Estimate
    factor_set: int | None
    rows: list[CalibratedSensitivityRow]


@with_config(FORBID)
class Gpu(TypedDict):
    """A GPU of the catalog: names, memory and dense peak FLOP/s per precision."""

    name: str
    aliases: list[str]
    vendor: str
    memory_gb: int | float | None
    peak_flops: dict[str, float]
    source: str


@with_config(FORBID)
class Hardware(TypedDict):
    """The GPU catalog."""

    gpus: list[Gpu]


@with_config(FORBID)
class Health(TypedDict):
    """Readiness: the database must answer ("ok" or why not); MLflow is reported."""

    status: Literal["ok", "failing"]
    database: str
    mlflow: str
    mlflow_checked_seconds_ago: float | None


@with_config(FORBID)
class MlflowLinks(TypedDict):
    """The MLflow UI address, and the run link template (`{run_id}`); null without one."""

    ui_url: str | None
    run_url: str | None


@with_config(FORBID)
class Liveness(TypedDict):
    """The process answers."""

    status: Literal["ok"]
