"""Properties of the estimator's math that must hold for every valid input, not only the
worked examples: scaling in GPU count, orderings of the times and utilizations, and the
inverse plan being the minimum."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service.domain import flops
from service.domain.values import EstimateRequest, Factors, Hardware, Model, Recompute

# Deterministic and bounded, so the suite is reproducible and fast.
PROPERTY_SETTINGS = settings(max_examples=100, derandomize=True, database=None, deadline=None)

# One ulp of slack where two routes to the same number round differently.
FLOAT_SLACK = 1e-12

peaks = st.sampled_from([15.7e12, 312e12, 989e12, 2250e12])


@st.composite
def requests(draw: st.DrawFn) -> EstimateRequest:
    with_shape = draw(st.booleans())
    shape = (
        (
            draw(st.integers(1, 128)),
            draw(st.integers(64, 16384)),
            draw(st.integers(128, 32768)),
        )
        if with_shape
        else (None, None, None)
    )
    modes: list[Recompute] = ["none", "full", "selective"] if with_shape else ["none", "full"]
    return EstimateRequest(
        model=Model(
            draw(st.floats(1e6, 1e12)),
            draw(st.floats(1e6, 1e13)),
            *shape,
        ),
        hardware=Hardware("test-gpu", draw(st.integers(1, 4096)), "bf16"),
        factors=Factors(draw(st.floats(0.05, 1.0)), draw(st.floats(0.0, 0.9))),
        recompute=draw(st.sampled_from(modes)),
    )


def with_gpus(request: EstimateRequest, gpus: int) -> EstimateRequest:
    return dataclasses.replace(request, hardware=dataclasses.replace(request.hardware, gpus=gpus))


def wall(request: EstimateRequest, peak: float, gpus: int) -> float:
    return flops.estimate(with_gpus(request, gpus), peak).wall_seconds


@PROPERTY_SETTINGS
@given(request=requests(), peak=peaks)
def test_doubling_gpus_halves_compute_time(request: EstimateRequest, peak: float) -> None:
    gpus = request.hardware.gpus

    base = flops.estimate(request, peak)
    doubled = flops.estimate(with_gpus(request, 2 * gpus), peak)

    assert doubled.compute_seconds == pytest.approx(base.compute_seconds / 2, rel=FLOAT_SLACK)


@PROPERTY_SETTINGS
@given(request=requests(), peak=peaks)
def test_wall_time_is_never_shorter_than_compute_time(
    request: EstimateRequest, peak: float
) -> None:
    result = flops.estimate(request, peak)

    assert result.wall_seconds >= result.compute_seconds


@PROPERTY_SETTINGS
@given(request=requests(), peak=peaks)
def test_mfu_never_exceeds_hfu(request: EstimateRequest, peak: float) -> None:
    result = flops.estimate(request, peak)

    assert result.recompute_factor >= 1
    assert result.mfu <= result.hfu * (1 + FLOAT_SLACK)
    assert result.mfu == pytest.approx(result.hfu / result.recompute_factor, rel=FLOAT_SLACK)


@PROPERTY_SETTINGS
@given(request=requests(), peak=peaks, speedup=st.floats(0.5, 1e5))
def test_planned_gpu_count_is_the_smallest_that_meets_the_deadline(
    request: EstimateRequest, peak: float, speedup: float
) -> None:
    # A deadline `speedup` times shorter than one GPU's wall time keeps counts realistic.
    deadline = wall(request, peak, 1) / speedup

    answer = flops.plan_gpus(request, peak, deadline)

    assert wall(request, peak, answer.gpus) <= deadline
    assert answer.gpus == 1 or wall(request, peak, answer.gpus - 1) > deadline


@PROPERTY_SETTINGS
@given(
    request=requests(),
    peak=peaks,
    speedup=st.floats(0.5, 1e5),
    multiple_of=st.sampled_from([1, 2, 4, 8, 16, 72]),
)
def test_planned_gpu_count_is_the_smallest_multiple_at_or_above_the_minimum(
    request: EstimateRequest, peak: float, speedup: float, multiple_of: int
) -> None:
    deadline = wall(request, peak, 1) / speedup
    minimum = flops.plan_gpus(request, peak, deadline).gpus

    answer = flops.plan_gpus(request, peak, deadline, multiple_of=multiple_of)

    assert answer.gpus % multiple_of == 0
    assert answer.gpus >= minimum
    assert answer.gpus - multiple_of < minimum
