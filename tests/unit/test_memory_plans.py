"""Training memory as a bound on plans (service/domain/memory_plans.py and the calibrated
plan's `min_gpus`): a plan answers the larger of the count the deadline needs and the fewest
GPUs whose memory fits, says which bound it, keeps whole nodes whole, refuses a job no count
can hold, and plans a chip without a memory size by time alone. Pure: no database."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from service.calibration import fit
from service.calibration.calibrated_plans import calibrated_plan, calibrated_wall
from service.calibration.model import lookup
from service.domain import memory_plans, requests
from service.domain.errors import InputError
from service.domain.hardware import BUILTIN_GPUS, Catalog, GpuSpec, build_catalog
from service.domain.inputs import RawInputs, parse_inputs
from service.domain.memory import GpuCount
from service.domain.memory_plans import MemorySettings, bind, plan_that_fits
from service.domain.values import EstimateRequest, Factors, Hardware, Model
from tests.unit.test_app import a_world
from tests.unit.test_scaling import PRIOR, sized_runs

DAY = 86400.0
CATALOG = build_catalog()
# The done line: 70B parameters on 1e11 tokens on H100 SXM (80 GB).
LLAMA_70B: dict[str, Any] = {"params": 70e9, "tokens": 1e11, "gpu": "h100-sxm", "gpus": 1}
SHAPE: dict[str, Any] = {"layers": 80, "hidden_size": 8192, "seq_len": 4096}


def a_request(catalog: Catalog = CATALOG, **overrides: Any) -> EstimateRequest:
    return requests.build_request(catalog, RawInputs(**{**LLAMA_70B, **overrides}))


def test_a_short_deadline_is_bound_by_time() -> None:
    planned = plan_that_fits(CATALOG, a_request(), MemorySettings(), 7 * DAY)

    assert planned.bound == "time" and planned.plan.gpus == planned.time_gpus == 176
    assert planned.memory.fits is True and planned.memory.fewest.gpus == 15
    assert planned.memory.memory.gpus == 176


def test_a_long_deadline_is_bound_by_memory_at_the_fewest_gpus_that_fit() -> None:
    """70e9 x 16 bytes of mixed-precision Adam state, sharded: 15 x 80 GB (docs/memory.md)."""
    planned = plan_that_fits(CATALOG, a_request(), MemorySettings(), 365 * DAY)
    one_fewer = memory_plans.check(CATALOG, a_request(gpus=14), MemorySettings())

    assert planned.bound == "memory" and planned.plan.gpus == 15 and planned.time_gpus == 4
    assert planned.plan.estimate.request.hardware.gpus == 15
    assert planned.plan.estimate.wall_seconds < 365 * DAY
    assert planned.memory.fits is True and planned.memory.memory.gpus == 15
    assert one_fewer.fits is False and one_fewer.needed_bytes > one_fewer.chip_bytes  # type: ignore[operator]


def test_whole_nodes_stay_whole_after_the_memory_bound() -> None:
    planned = plan_that_fits(CATALOG, a_request(), MemorySettings(), 365 * DAY, multiple_of=8)

    assert (planned.bound, planned.plan.gpus, planned.time_gpus) == ("memory", 16, 8)
    assert planned.plan.multiple_of == 8 and planned.memory.fewest.gpus == 16


def test_the_shape_counts_activations_and_recompute_shrinks_them() -> None:
    """With the Llama-70B shape and full recompute: 17 GPUs (docs/memory.md's example);
    storing every activation (91 GB a GPU) fits no count."""
    full = plan_that_fits(
        CATALOG, a_request(**SHAPE, recompute="full"), MemorySettings(), 365 * DAY
    )

    assert (full.bound, full.plan.gpus) == ("memory", 17)
    assert full.memory.memory.activations_bytes is not None and full.memory.memory.complete
    with pytest.raises(InputError, match=r"--recompute full"):
        plan_that_fits(CATALOG, a_request(**SHAPE), MemorySettings(), 365 * DAY)


def test_a_model_no_count_can_hold_is_refused_saying_why() -> None:
    with pytest.raises(InputError) as refused:
        plan_that_fits(CATALOG, a_request(), MemorySettings(sharding="none"), 365 * DAY)

    message = str(refused.value)
    assert "no count of h100-sxm fits 7e+10 params" in message and "--sharding fsdp" in message
    assert "\n" not in message


def test_sharding_and_the_optimizer_move_the_memory_bound() -> None:
    def fewest(**settings: Any) -> int | None:
        return memory_plans.fewest_that_fit(CATALOG, a_request(), MemorySettings(**settings)).gpus

    assert fewest() == 15
    assert fewest(optimizer="sgd") == 11  # 12 bytes a parameter instead of 16
    with pytest.raises(InputError, match=r"144\.9 GiB per GPU stays"):  # 16-bit weights, whole
        fewest(sharding="zero2")
    small = requests.build_request(CATALOG, RawInputs(7e9, 1e12, "h100-sxm", 1))

    def small_fewest(sharding: Any) -> int | None:
        return memory_plans.fewest_that_fit(CATALOG, small, MemorySettings(sharding)).gpus

    assert [small_fewest(s) for s in ("zero1", "zero2", "fsdp")] == [2, 2, 2]
    with pytest.raises(InputError, match=r"116\.2 GiB per GPU stays"):  # 7e9 x 16 bytes, whole
        small_fewest("none")


def test_a_chip_without_a_memory_size_is_planned_by_time_alone() -> None:
    bare = GpuSpec("my-chip", {"bf16": 500e12}, "a test chip")
    catalog = Catalog([*BUILTIN_GPUS, bare])

    planned = plan_that_fits(
        catalog, a_request(catalog, gpu="my-chip"), MemorySettings(), 365 * DAY
    )

    assert planned.bound == "time" and planned.plan.gpus == planned.time_gpus == 7
    assert planned.memory.fits is None and planned.memory.chip_bytes is None
    assert planned.memory.fewest.verdict == "unknown"


def test_a_parameter_count_whose_bytes_overflow_is_an_input_error() -> None:
    huge = requests.build_request(CATALOG, RawInputs(1e307, 1e3, "h100-sxm", 8))

    with pytest.raises(InputError, match="too large to hold in memory"):
        memory_plans.check(CATALOG, huge, MemorySettings())


def test_bind_takes_the_larger_count_and_names_it() -> None:
    assert bind(176, GpuCount("fits", 15)) == (176, "time")
    assert bind(4, GpuCount("fits", 15)) == (15, "memory")
    assert bind(15, GpuCount("fits", 15)) == (15, "time")  # a tie: the deadline needs it too
    assert bind(4, GpuCount("unknown")) == (4, "time")
    with pytest.raises(InputError):
        bind(4, GpuCount("never"))


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"sharding": "zero3"}, "unknown sharding 'zero3'; use one of none, zero1, zero2, fsdp"),
        ({"optimizer": "lion"}, "unknown optimizer 'lion'; use one of adam, sgd"),
        ({"micro_batch": 0}, "micro_batch must be a whole number"),
        ({"micro_batch": "two"}, "micro_batch must be a whole number"),
    ],
)
def test_bad_memory_settings_are_one_line_input_errors(values: dict[str, Any], said: str) -> None:
    with pytest.raises(InputError, match=said):
        memory_plans.settings_of(parse_inputs({**LLAMA_70B, **values}))


def test_settings_are_read_case_blind_and_default_to_fsdp_adam_one_sequence() -> None:
    assert memory_plans.settings_of(parse_inputs(LLAMA_70B)) == MemorySettings("fsdp", "adam", 1)
    typed = parse_inputs({**LLAMA_70B, "sharding": " ZeRO1 ", "optimizer": "SGD"})
    assert memory_plans.settings_of(typed) == MemorySettings("zero1", "sgd", 1)


def test_each_sensitivity_row_says_whether_it_fits() -> None:
    request = a_request(gpus=8)
    variations = {"gpus": ["8", "16"], "params": ["7e9"], "gpu": ["b200", "h200"]}

    fits = memory_plans.fits_per_row(CATALOG, request, MemorySettings(), variations)

    # 70e9 x 16 bytes over 8 GPUs is 140 GB a GPU: a b200 (180 GB) holds it, an h200 (141) not.
    assert fits == [False, True, True, True, False]


# --- the calibrated plan ------------------------------------------------------------------


def test_a_calibrated_plan_through_the_use_case_takes_the_memory_bound() -> None:
    app = a_world().app
    inputs = parse_inputs({**LLAMA_70B, "tokens": 1e10, "recompute": "full"}, gpus=1)

    planned = app.planning.plan(inputs, 365 * DAY, 8, calibrated=True, confidence=0.9)
    timed = app.planning.plan(inputs, 2 * DAY, 8, calibrated=True, confidence=0.9)

    assert planned.bound == "memory" and planned.plan.gpus == 16 and planned.memory is not None
    assert planned.calibrated is not None and planned.calibrated.bound == "memory"
    assert planned.time_gpus is not None and planned.time_gpus < 16
    assert planned.calibrated.wall.wall_seconds_at_confidence <= 365 * DAY
    assert timed.bound == "time" and timed.plan.gpus > 16 and timed.plan.gpus % 8 == 0


def test_a_calibrated_plan_refuses_when_the_count_memory_needs_misses_the_deadline() -> None:
    """Past the count where more GPUs stop helping, wall time rises: the fewest that fit may
    then miss a deadline a smaller count meets."""
    entry = lookup(fit.fit(sized_runs(failures_per_gpu_hour=5e-5), PRIOR), "mi300x", "bf16", None)
    steep = {"mi300x/bf16": dataclasses.replace(entry, gpus_slope=-0.45, gpus_slope_se=0.0)}
    request = EstimateRequest(Model(7e9, 1e11), Hardware("mi300x", 8, "bf16"), Factors())
    peak = 1307e12
    deadline = calibrated_wall(
        dataclasses.replace(request, hardware=Hardware("mi300x", 512, "bf16")), peak, steep
    ).wall_seconds_at_confidence

    timed = calibrated_plan(request, peak, steep, deadline, multiple_of=8)
    bound = calibrated_plan(request, peak, steep, deadline, multiple_of=8, min_gpus=timed.gpus + 8)

    assert timed.bound == "time" and timed.time_gpus == timed.gpus
    assert bound.bound == "memory" and bound.gpus == timed.gpus + 8
    assert bound.time_gpus == timed.gpus
    with pytest.raises(InputError, match="both fits in memory and meets the deadline"):
        calibrated_plan(request, peak, steep, deadline, multiple_of=8, min_gpus=2**24)
