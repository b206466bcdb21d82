"""The JSON documents of the loop (json_views.py's history and running, json_loop.py's passes,
factors, refits, jobs and accuracy) as TypedDicts: mypy checks the views against them, the API
publishes them as its response schemas. Each forbids keys it does not declare (a view that
grows a key fails the API's response validation: declare it here too). Keys keep the order
the views emit them in. Only the API imports this at run time; the views, for type checks."""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, TypeAdapter, WithJsonSchema, with_config
from typing_extensions import TypedDict

from service.presenters.json_money_documents import CostTotal, RunCost

# `with_config` sets `__pydantic_config__` (a TypedDict body's assignment would be a key).
FORBID = ConfigDict(extra="forbid")


@with_config(FORBID)
class RunConfiguration(TypedDict):
    """GPUs, tokens, precision, tokens per step: planned or as the run said (null: unsaid)."""

    gpus: int | None
    tokens: float | None
    precision: str | None
    global_batch_tokens: float | None


@with_config(FORBID)
class ConfigurationCheck(TypedDict):
    """Planned against observed configuration; check: config_differs, config_from_plan or null."""

    check: str | None
    planned: RunConfiguration
    observed: RunConfiguration
    note: str | None


@with_config(FORBID)
class Reconciliation(TypedDict):
    """Predicted against observed for one estimate; error_pct > 0: predicted too long."""

    estimate_id: str
    label: str | None
    run_ids: list[str]
    gpu: str
    precision: str
    started_at: str
    ended_at: str
    predicted_seconds: float
    observed_seconds: float
    observed_compute_seconds: float | None
    ratio: float
    error_pct: float
    abs_error_pct: float
    implied_utilization: float | None
    implied_overhead: float | None
    implied_effective_utilization: float | None
    factors_kind: str
    failed_segments: int
    kind: str
    profile: str | None
    note: str | None
    configuration: ConfigurationCheck
    cost: RunCost
    line: str


@with_config(FORBID)
class History(TypedDict):
    """Reconciliations, as the history lists them."""

    history: list[Reconciliation]


@with_config(FORBID)
class HistoryPage(History):
    """One page of the history: its rows, how many match in all, the paging and order."""

    total: int
    offset: int
    limit: int | None
    sort: str
    search: str | None


@with_config(FORBID)
class Running(TypedDict):
    """A linked run still RUNNING, projected from its throughput so far."""

    run_id: str
    estimate_id: str
    started_at: str
    elapsed_seconds: float
    predicted_seconds: float
    projected_seconds: float | None
    projected_finish: str | None
    slip_pct: float | None
    line: str
    # the forecast (service.domain.forecast), null without a projection: finish times
    # (ISO 8601 UTC), the estimate's deadline, at risk (P90 after it), P90 less deadline
    eta: str | None
    eta_p10: str | None
    eta_p90: str | None
    deadline: str | None
    at_risk: bool
    slip_seconds: float | None


@with_config(FORBID)
class RunningList(TypedDict):
    """Linked runs still RUNNING, projected."""

    running: list[Running]


@with_config(FORBID)
class Scores(TypedDict):
    """Absolute % errors (median, mean), bias (% and mean log ratio), P10-P90 coverage."""

    n: int
    median_ape: float | None
    mape: float | None
    bias: float | None
    bias_log: float | None
    coverage: float | None


@with_config(FORBID)
class ScorePair(TypedDict):
    """Raw and calibrated scores of the same predictions, and the hand baseline's."""

    raw: Scores
    calibrated: Scores
    calibrated_worse: bool
    by_hand: Scores | None


@with_config(FORBID)
class AccuracyGroup(TypedDict):
    """One group's scores; `fallback` null when the grouping is not by GPU or segment."""

    group: str
    raw: Scores
    calibrated: Scores
    calibrated_worse: bool
    by_hand: Scores | None
    fallback: bool | None
    fallback_to: str | None
    note: str | None
    cost: list[CostTotal]


@with_config(FORBID)
class AccuracyConfiguration(TypedDict):
    """How many forecasts ran another configuration than planned, or stated none."""

    config_differs: int
    config_from_plan: int
    note: str | None


@with_config(FORBID)
class Accuracy(TypedDict):
    """Prediction accuracy overall and per group; imported runs scored apart."""

    by: str | None
    since: str | None
    overall: ScorePair
    groups: list[AccuracyGroup]
    retrospective: ScorePair
    configuration: AccuracyConfiguration
    factor_set: int | None  # the active set, whose fit read `fitted_on` runs
    fitted_on: int | None  # the n of `reckon factors`, not the n scored here
    counts_note: str | None  # which n is which, as the text says it
    cost: list[CostTotal]  # of every forecast scored, per currency


@with_config(FORBID)
class SegmentFields(TypedDict):
    """The fields of service.calibration.model.SegmentFactors, in their order."""

    segment: str
    level: str
    utilization: float
    utilization_p10: float
    utilization_p90: float
    overhead: float
    overhead_p10: float
    overhead_p90: float
    log_sigma: float
    n: int
    n_throughput: int
    combined_only: bool
    log_sigma_low: float
    log_sigma_high: float
    fallback: bool
    by_hand: bool
    gpus_slope: float
    gpus_slope_se: float
    log_gpus_reference: float
    params_slope: float
    params_slope_se: float
    log_params_reference: float
    params_curvature: float
    params_curvature_se: float
    log_params_low: float
    log_params_high: float
    failure_rate: float
    failure_cost_hours: float
    failure_cost_se: float
    batch_slope: float
    batch_slope_se: float
    log_batch_reference: float
    gpus_curvature: float
    gpus_curvature_se: float
    log_gpus_low: float
    log_gpus_high: float
    gpus_min: float | None
    gpus_max: float | None
    params_min: float | None
    params_max: float | None
    tokens_min: float | None
    tokens_max: float | None


@with_config(FORBID)
class Segment(SegmentFields):
    """The fitted factors of one segment key at one pooling level."""

    effective: float
    fallback_to: str | None
    gpus_slope_words: str | None  # the GPU slope as `reckon factors` says it; null: none
    # In a factor set (not the prior's): fewer runs than a range narrower than its parent's needs.
    thin: NotRequired[bool]


@with_config(ConfigDict(extra="allow"))
class Provenance(TypedDict):
    """What a refit was made from and how its gate decided (open: older sets' keys are kept)."""

    reconciliations: NotRequired[int]
    first_estimate: NotRequired[str]
    last_estimate: NotRequired[str]
    first_ended_at: NotRequired[str]
    last_ended_at: NotRequired[str]
    prior_sources: NotRequired[list[str]]
    backtest_targets: NotRequired[int]
    backtest_raw_median_ape: NotRequired[float | None]
    backtest_median_ape: NotRequired[float | None]
    backtest_coverage: NotRequired[float | None]
    fallback_segments: NotRequired[list[str]]
    gate: NotRequired[str]
    replaces: NotRequired[int | None]


# The stored record as it is (in its stored key order, keys of older versions kept), with
# Provenance as its schema; to the type checker, the domain's open mapping.
StoredProvenance = Annotated[
    dict[str, Any], WithJsonSchema(TypeAdapter(Provenance).json_schema(mode="serialization"))
]


@with_config(FORBID)
class FactorSet(TypedDict):
    """A numbered refit result: its parameters, provenance, backtest scores and segments."""

    version: int
    created_at: str
    activated_at: str | None
    active: bool
    method: str
    parameters: dict[str, float]
    provenance: StoredProvenance
    reconciliation_count: int
    backtest_score: float | None
    baseline_score: float | None
    forced: bool
    segments: list[Segment]


@with_config(FORBID)
class Factors(TypedDict):
    """A factor set (FactorSet's keys), or none yet (version null): the prior in its place."""

    # None yet: `message`, and the published prior's sources and segments (what calibrated
    # estimates use until the first refit); a set: every key of FactorSet.
    version: int | None
    created_at: NotRequired[str]
    activated_at: NotRequired[str | None]
    active: bool
    message: NotRequired[str]
    prior_sources: NotRequired[list[str]]
    method: NotRequired[str]
    parameters: NotRequired[dict[str, float]]
    provenance: NotRequired[StoredProvenance]
    reconciliation_count: NotRequired[int]
    backtest_score: NotRequired[float | None]
    baseline_score: NotRequired[float | None]
    forced: NotRequired[bool]
    segments: list[Segment]


@with_config(FORBID)
class FactorHistory(TypedDict):
    """Every factor set, oldest first."""

    versions: list[FactorSet]


@with_config(FORBID)
class Backtest(TypedDict):
    """A time-ordered backtest: median absolute % error, P10-P90 coverage, targets."""

    n: int
    median_ape: float | None
    coverage: float | None


@with_config(FORBID)
class Refit(TypedDict):
    """A refit: the new set's version (or null), activated or not, the backtests that decided."""

    factor_set: int | None
    activated: bool
    backtest: Backtest | None
    baseline: Backtest | None
    message: str


@with_config(FORBID)
class Skip(TypedDict):
    """A run a pass could not use; `reason` is a stable code."""

    run_id: str
    reason: str
    detail: str
    estimate_id: str | None


@with_config(FORBID)
class PassOutcome(TypedDict):
    """One reconcile pass: what it saw, reconciled, skipped and refit, and the write-back."""

    status: Literal["succeeded", "failed", "locked"]
    pass_id: int | None
    window_after: str | None
    window_cutoff: str | None
    runs_seen: int
    reconciled: int
    reconciled_estimates: list[str]
    skipped: list[Skip]
    factor_set: int | None
    tags_written: int
    tags_pending: int
    tags_blocked: int
    backfilled_experiments: list[str]
    blocked_reason: str | None
    missed_before_window: int
    missed_hint: str | None
    holder: str | None
    message: str


@with_config(FORBID)
class PassRecord(TypedDict):
    """A reconcile pass as stored: status running, succeeded or failed."""

    pass_id: int
    trigger: str
    status: str
    started_at: str | None
    ended_at: str | None
    window_after: str | None
    window_cutoff: str | None
    runs_seen: int
    reconciled: int
    skipped: int
    factor_set: int | None
    error: str | None


@with_config(FORBID)
class TagsOwed(TypedDict):
    """The write-back outbox: tags owed, how many MLflow refused for want of permission."""

    pending: int
    blocked: int
    blocked_reason: str | None


@with_config(FORBID)
class Jobs(TypedDict):
    """The schedule, recent passes (newest first) and the write-back outbox."""

    schedule: str
    timezone: str
    passes: list[PassRecord]
    tags: TagsOwed
