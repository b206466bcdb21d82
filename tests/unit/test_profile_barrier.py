"""The fault barrier per run: whatever a run logged, reading it through any profile (and
the configuration tags, and a mapping file's defaults) gives observables or a recorded
problem, never an exception. Every profile's metrics and params are fed the values that
broke passes in the field: NaN, ±inf, subnormals, 1e308, negatives, zero and strings."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain import comparison
from service.domain.records import ObservedRun, Planned, RunObservables, SavedEstimate
from service.profiles.builtin import FRAMEWORKS, reckon_profile
from service.profiles.derive import RunRecord
from service.profiles.profile_set import ProfileSet
from tests.builders import an_estimate

PROFILES = (*FRAMEWORKS, reckon_profile())
NUMBERS = st.sampled_from(
    [math.nan, math.inf, -math.inf, 5e-324, 1e-320, 1e-10, 1e308, -1.0, 0.0, 1.0, 10.0,
     100.0, 1e9, 1e20, 2.0**63]
)  # fmt: skip
TEXTS = st.one_of(
    NUMBERS.map(repr),
    st.sampled_from(["", "abc", "1e400", "-0", "nan", "inf", "true", "None", "{}", "1" * 500]),
)
SEED = an_estimate(gpus=64)
PLAN = Planned.of(SavedEstimate(
    id="0123456789abcdef", kind="computed", created_at=datetime(2025, 12, 1, tzinfo=UTC),
    gpu="h100-sxm", gpus=64, precision="bf16", predicted_wall_seconds=SEED.wall_seconds,
    estimate=SEED,
))  # fmt: skip
CONFIG_TAGS = ("reckon.gpus", "reckon.gpu", "reckon.params", "reckon.tokens",
               "reckon.precision", "reckon.recompute")  # fmt: skip


def names(profile_index: int) -> tuple[list[str], list[str]]:
    profile = PROFILES[profile_index]
    metrics = [spec.name for spec in profile.specs if spec.source != "param"]
    params = [spec.name for spec in profile.specs if spec.source == "param"]
    return metrics + list(profile.detect), params


@st.composite
def runs(draw: st.DrawFn) -> RunRecord:
    index = draw(st.integers(0, len(PROFILES) - 1))
    metric_names, param_names = names(index)
    metrics = {name: draw(NUMBERS) for name in metric_names if draw(st.booleans())}
    params = {name: draw(TEXTS) for name in param_names if draw(st.booleans())}
    tags = {name: draw(TEXTS) for name in CONFIG_TAGS if draw(st.integers(0, 3)) == 0}
    return RunRecord(params=params, tags=tags, metrics=metrics, experiment_id="1")


def observed(observables: RunObservables) -> ObservedRun:
    """The run as the adapter builds it from what the profile read."""
    return ObservedRun(
        run_id="r" * 32, experiment_id="1", status="FINISHED",
        started_at=datetime(2026, 1, 1, tzinfo=UTC), ended_at=datetime(2026, 1, 2, tzinfo=UTC),
        estimate_id="0123456789abcdef",
        throughput=None if observables.throughput is None else float(observables.throughput),
        profile=observables.profile, compute_seconds=observables.compute_seconds,
        observables=observables, gpus=observables.gpus, tokens=observables.tokens,
        precision=observables.precision,
    )  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(runs(), st.lists(NUMBERS, min_size=0, max_size=12))
def test_no_logged_value_makes_reading_a_run_raise(record: RunRecord, series: list[float]) -> None:
    history = [(step, value) for step, value in enumerate(series)]

    observables = ProfileSet.builtin().observe(record, lambda _key: history, fallback_gpus=8)
    admitted, _problems = comparison.admit(observed(observables))
    judged, _skip = comparison.judge(PLAN, [admitted]) if admitted is not None else (None, None)

    if observables.problem is not None:
        assert observables.problem[0] and observables.problem[1]
    if admitted is not None and admitted.observables is not None:
        for value in (admitted.compute_seconds, admitted.tokens):
            assert value is None or math.isfinite(value)
    if judged is not None:
        assert math.isfinite(judged.error_pct)


def test_the_three_field_repros_are_unreadable_runs_naming_the_error() -> None:
    hf = {"total_flos": 1e20, "train_runtime": 1000.0, "train_samples_per_second": 100.0,
          "train_steps_per_second": 10.0}  # fmt: skip
    cases = [
        RunRecord(params={"per_device_train_batch_size": "1e-320",
                          "gradient_accumulation_steps": "1e-10"}, tags={}, metrics=hf),
        RunRecord(params={"per_device_train_batch_size": "1e-10"}, tags={},
                  metrics={**hf, "train_samples_per_second": 1e308}),
        RunRecord(params={"num_nodes": "10", "num_gpus_per_node": "1e308"}, tags={},
                  metrics={"time/token": 1e9}),
    ]  # fmt: skip
    for record in cases:
        observables = ProfileSet.builtin().observe(record, lambda _key: [], fallback_gpus=None)
        admitted, problems = comparison.admit(observed(observables))
        reasons = {p.reason for p in problems} | {(observables.problem or ("",))[0]}
        assert admitted is None or admitted.gpus is None or admitted.gpus < 2**31
        assert reasons - {""}, record  # a recorded reason, not a silent read
