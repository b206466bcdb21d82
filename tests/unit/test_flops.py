"""Specification of the estimator's math (docs/contract.md §2): model and hardware FLOPs, recompute
factors, compute and wall time, the inverse plan and the sensitivity table."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest

from service.domain import flops, requests
from service.domain.errors import InputError
from service.domain.hardware import build_catalog
from service.domain.values import (
    EstimateRequest,
    Factors,
    Hardware,
    Model,
    Recompute,
    SensitivityRow,
)
from tests.builders import a_request

A100_BF16_PEAK = 312e12
SECONDS_PER_DAY = 86400.0

# GPT-2 small (124M): nanoGPT's reference model for estimate_mfu.
GPT2_PARAMS = 124e6
GPT2_LAYERS = 12
GPT2_HEADS = 12
GPT2_WIDTH = 768
GPT2_SEQ_LEN = 1024


def make_request(
    *,
    params: float = 7e9,
    tokens: float = 1e12,
    gpu: str = "a100-80gb",
    gpus: int = 8,
    precision: str = "bf16",
    recompute: Recompute = "full",
    utilization: float = 0.4,
    overhead: float = 0.0,
    layers: int | None = None,
    hidden_size: int | None = None,
    seq_len: int | None = None,
    recompute_factor: float | None = None,
    price_per_gpu_hour: float | None = None,
) -> EstimateRequest:
    """The seed's worked example unless told otherwise."""
    return EstimateRequest(
        model=Model(params, tokens, layers, hidden_size, seq_len),
        hardware=Hardware(gpu, gpus, precision),
        factors=Factors(utilization, overhead),
        recompute=recompute,
        recompute_factor=recompute_factor,
        price_per_gpu_hour=price_per_gpu_hour,
    )


def gpt2_request(*, recompute: Recompute = "none", tokens: float = 9e9) -> EstimateRequest:
    return make_request(
        params=GPT2_PARAMS,
        tokens=tokens,
        recompute=recompute,
        layers=GPT2_LAYERS,
        hidden_size=GPT2_WIDTH,
        seq_len=GPT2_SEQ_LEN,
    )


# --- model FLOPs -----------------------------------------------------------------------------


def test_model_flops_are_six_n_d_without_the_model_shape() -> None:
    model = Model(params=7e9, tokens=1e12)

    result = flops.model_flops(model)

    assert result == pytest.approx(6 * 7e9 * 1e12, rel=1e-12)


def test_attention_term_needs_all_of_layers_width_and_seq_len() -> None:
    model = Model(params=7e9, tokens=1e12, layers=32, hidden_size=4096)

    result = flops.model_flops(model)

    assert result == pytest.approx(6 * 7e9 * 1e12, rel=1e-12)


def test_attention_term_matches_nanogpt_estimate_mfu_on_gpt2() -> None:
    # nanoGPT model.estimate_mfu (PaLM Appendix B), computed independently:
    # flops_per_token = 6N + 12·L·H·Q·T with H heads of size Q, H·Q = d.
    head_size = GPT2_WIDTH // GPT2_HEADS
    nanogpt_per_token = 6 * GPT2_PARAMS + 12 * GPT2_LAYERS * GPT2_HEADS * head_size * GPT2_SEQ_LEN
    tokens = 9e9
    model = Model(GPT2_PARAMS, tokens, GPT2_LAYERS, GPT2_WIDTH, GPT2_SEQ_LEN)

    result = flops.model_flops(model)

    assert result == pytest.approx(nanogpt_per_token * tokens, rel=1e-12)
    # The attention term is material at this size, so dropping it would be caught.
    assert result > 1.1 * 6 * GPT2_PARAMS * tokens


# --- recomputation ---------------------------------------------------------------------------


def test_no_recompute_makes_hardware_flops_equal_model_flops() -> None:
    request = make_request(recompute="none")

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.recompute_factor == 1.0
    assert result.flops == result.model_flops


def test_full_recompute_factor_is_exactly_four_thirds() -> None:
    request = make_request(recompute="full")

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.recompute_factor == 4 / 3


def test_full_recompute_adds_one_forward_pass() -> None:
    request = make_request(recompute="full", params=7e9, tokens=1e12)
    forward_pass = 2 * 7e9 * 1e12

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.flops == pytest.approx(result.model_flops + forward_pass, rel=1e-12)


def test_selective_recompute_counts_the_attention_core_once_more() -> None:
    request = gpt2_request(recompute="selective", tokens=9e9)
    extra = 4 * GPT2_LAYERS * GPT2_WIDTH * GPT2_SEQ_LEN * 9e9

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.recompute_factor == pytest.approx(1 + extra / result.model_flops, rel=1e-12)
    assert result.flops == pytest.approx(result.model_flops + extra, rel=1e-12)


def test_selective_recompute_without_model_shape_is_an_input_error() -> None:
    request = make_request(recompute="selective")

    with pytest.raises(InputError, match="selective"):
        flops.estimate(request, A100_BF16_PEAK)


def test_selective_recompute_without_shape_accepts_an_explicit_factor() -> None:
    request = make_request(recompute="selective", recompute_factor=1.05)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.recompute_factor == 1.05
    assert result.flops == pytest.approx(result.model_flops * 1.05, rel=1e-12)


def test_explicit_recompute_factor_overrides_the_mode() -> None:
    request = make_request(recompute="full", recompute_factor=1.2)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.recompute_factor == 1.2


@pytest.mark.parametrize("mode", ["none", "full", "selective"])
def test_hardware_flops_are_model_flops_times_recompute_factor(mode: Recompute) -> None:
    request = gpt2_request(recompute=mode)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.flops == pytest.approx(result.model_flops * result.recompute_factor, rel=1e-12)


# --- times and what follows from them --------------------------------------------------------


def test_compute_seconds_divide_hardware_flops_by_gpus_peak_and_utilization() -> None:
    request = make_request(gpus=16, utilization=0.35)

    result = flops.estimate(request, A100_BF16_PEAK)

    expected = result.flops / (16 * A100_BF16_PEAK * 0.35)
    assert result.compute_seconds == pytest.approx(expected, rel=1e-12)


def test_wall_seconds_add_the_overhead_share_of_wall_time() -> None:
    request = make_request(overhead=0.15)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.wall_seconds == pytest.approx(result.compute_seconds / 0.85, rel=1e-12)


def test_wall_seconds_equal_compute_seconds_without_overhead() -> None:
    request = make_request(overhead=0.0)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.wall_seconds == result.compute_seconds


def test_mfu_is_utilization_over_recompute_factor_and_hfu_is_utilization() -> None:
    request = make_request(recompute="full", utilization=0.4)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.mfu == pytest.approx(0.4 / (4 / 3), rel=1e-12)
    assert result.hfu == 0.4


def test_gpu_hours_count_every_gpu_for_the_whole_wall_time() -> None:
    request = make_request(gpus=8, overhead=0.15)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.gpu_hours == pytest.approx(8 * result.wall_seconds / 3600, rel=1e-12)


def test_cost_is_gpu_hours_times_price() -> None:
    request = make_request(price_per_gpu_hour=2.5)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.cost == pytest.approx(result.gpu_hours * 2.5, rel=1e-12)


def test_cost_is_absent_without_a_price() -> None:
    request = make_request(price_per_gpu_hour=None)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.cost is None


def test_tokens_per_second_are_tokens_over_compute_seconds() -> None:
    request = make_request(tokens=1e12, overhead=0.2)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.tokens_per_second == pytest.approx(1e12 / result.compute_seconds, rel=1e-12)


@pytest.mark.parametrize("peak", [0.0, -312e12, math.nan, math.inf])
def test_estimate_refuses_a_peak_that_is_not_positive_and_finite(peak: float) -> None:
    request = make_request()

    with pytest.raises(InputError, match="peak"):
        flops.estimate(request, peak)


# --- the seed's worked example, corrected ----------------------------------------------------


def test_seed_example_needs_5_6e22_hardware_flops() -> None:
    request = make_request()  # 7e9 params, 1e12 tokens, full recompute

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.flops == pytest.approx(5.6e22, rel=1e-9)


def test_seed_example_takes_649_days_not_3_5() -> None:
    request = make_request()  # 8 x A100 bf16, u = 0.4, no overhead

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.wall_seconds == pytest.approx(5.6e22 / (8 * 312e12 * 0.4), rel=1e-12)
    assert result.wall_seconds == pytest.approx(5.609e7, rel=1e-3)
    assert result.wall_seconds / SECONDS_PER_DAY == pytest.approx(649.2, abs=0.05)


def test_seed_example_would_need_1484_gpus_for_3_5_days() -> None:
    request = make_request()

    answer = flops.plan_gpus(request, A100_BF16_PEAK, 3.5 * SECONDS_PER_DAY)

    assert answer.gpus == 1484


def test_seed_example_needs_1488_gpus_in_whole_8_gpu_nodes() -> None:
    request = make_request()

    answer = flops.plan_gpus(request, A100_BF16_PEAK, 3.5 * SECONDS_PER_DAY, multiple_of=8)

    assert answer.gpus == 1488
    assert answer.multiple_of == 8


# --- inverse plan ----------------------------------------------------------------------------


def _wall(request: EstimateRequest, gpus: int) -> float:
    hardware = dataclasses.replace(request.hardware, gpus=gpus)
    varied = dataclasses.replace(request, hardware=hardware)
    return flops.estimate(varied, A100_BF16_PEAK).wall_seconds


def test_plan_is_the_smallest_gpu_count_that_meets_the_deadline() -> None:
    request = make_request(overhead=0.15)
    deadline = 30 * SECONDS_PER_DAY

    answer = flops.plan_gpus(request, A100_BF16_PEAK, deadline)

    assert _wall(request, answer.gpus) <= deadline
    assert _wall(request, answer.gpus - 1) > deadline


def test_plan_estimate_runs_on_the_planned_gpu_count() -> None:
    request = make_request(overhead=0.15)

    answer = flops.plan_gpus(request, A100_BF16_PEAK, 30 * SECONDS_PER_DAY)

    assert answer.estimate.request.hardware.gpus == answer.gpus
    assert answer.estimate.wall_seconds <= answer.deadline_seconds


def test_plan_accepts_a_deadline_equal_to_the_wall_time() -> None:
    request = make_request()
    deadline = _wall(request, 64)

    answer = flops.plan_gpus(request, A100_BF16_PEAK, deadline)

    assert answer.gpus == 64


def test_plan_uses_one_gpu_when_one_is_enough() -> None:
    request = make_request(params=1e6, tokens=1e6)

    answer = flops.plan_gpus(request, A100_BF16_PEAK, SECONDS_PER_DAY)

    assert answer.gpus == 1


def test_plan_rounds_up_to_the_requested_multiple() -> None:
    request = make_request(params=1e6, tokens=1e6)

    answer = flops.plan_gpus(request, A100_BF16_PEAK, SECONDS_PER_DAY, multiple_of=8)

    assert answer.gpus == 8


@pytest.mark.parametrize("deadline", [0.0, -3600.0, math.nan, math.inf])
def test_plan_refuses_a_deadline_that_is_not_positive_and_finite(deadline: float) -> None:
    request = make_request()

    with pytest.raises(InputError, match="deadline"):
        flops.plan_gpus(request, A100_BF16_PEAK, deadline)


@pytest.mark.parametrize("multiple_of", [0, -8])
def test_plan_refuses_a_gpu_multiple_below_one(multiple_of: int) -> None:
    request = make_request()

    with pytest.raises(InputError, match="multiple"):
        flops.plan_gpus(request, A100_BF16_PEAK, SECONDS_PER_DAY, multiple_of=multiple_of)


# --- sensitivity -----------------------------------------------------------------------------


def _rows(
    request: EstimateRequest, extra: dict[str, list[str]] | None = None
) -> list[SensitivityRow]:
    _, rows = requests.sensitivity(build_catalog(), request, extra or {})
    return rows


def test_default_table_varies_utilization_recompute_gpus_and_precision() -> None:
    request = make_request()

    rows = _rows(request)

    assert {row.variable for row in rows} == {"utilization", "recompute", "gpus", "precision"}


def test_default_table_covers_every_precision_the_chip_has() -> None:
    request = make_request(gpu="a100-80gb")

    rows = _rows(request)

    assert {row.value for row in rows if row.variable == "precision"} == {
        "fp32",
        "tf32",
        "bf16",
        "fp16",
    }


def test_each_default_variable_has_one_base_row_with_no_change() -> None:
    request = make_request(gpus=8, utilization=0.4, recompute="full", precision="bf16")

    rows = _rows(request)

    base_rows = [row for row in rows if row.is_base]
    assert sorted((row.variable, row.value) for row in base_rows) == [
        ("gpus", "8"),
        ("precision", "bf16"),
        ("recompute", "full"),
        ("utilization", "0.4"),
    ]
    assert all(row.change_pct == pytest.approx(0.0, abs=1e-9) for row in base_rows)


def test_doubling_gpus_row_is_fifty_percent_faster() -> None:
    request = make_request(gpus=8)

    rows = _rows(request)

    doubled = next(row for row in rows if row.variable == "gpus" and row.value == "16")
    assert doubled.change_pct == pytest.approx(-50.0, rel=1e-9)
    assert not doubled.is_base


def test_turning_full_recompute_off_saves_a_quarter() -> None:
    request = make_request(recompute="full")

    rows = _rows(request)

    off = next(row for row in rows if row.variable == "recompute" and row.value == "none")
    assert off.change_pct == pytest.approx(-25.0, rel=1e-9)


def test_named_default_variable_replaces_its_default_values() -> None:
    request = make_request()

    rows = _rows(request, {"utilization": ["0.2"]})

    utilization = [row for row in rows if row.variable == "utilization"]
    assert [row.value for row in utilization] == ["0.2"]
    assert utilization[0].change_pct == pytest.approx(100.0, rel=1e-9)


def test_named_new_variable_extends_the_table() -> None:
    request = make_request(tokens=1e12)

    rows = _rows(request, {"tokens": ["5e11", "2e12"]})

    tokens = {row.value: row.change_pct for row in rows if row.variable == "tokens"}
    assert tokens == {
        "5e11": pytest.approx(-50.0, rel=1e-9),
        "2e12": pytest.approx(100.0, rel=1e-9),
    }
    assert {"utilization", "recompute", "gpus", "precision"} <= {row.variable for row in rows}


def test_unknown_sensitivity_variable_is_an_input_error() -> None:
    request = make_request()

    with pytest.raises(InputError, match="cannot vary"):
        _rows(request, {"colour": ["blue"]})


def test_non_numeric_sensitivity_value_is_an_input_error() -> None:
    request = make_request()

    with pytest.raises(InputError, match="tokens"):
        _rows(request, {"tokens": ["lots"]})


# --- request validation (what every entry point relies on) -----------------------------------


@pytest.mark.parametrize(
    ("overrides", "name"),
    [
        ({"params": -1.0}, "params"),
        ({"params": math.nan}, "params"),
        ({"tokens": 0.0}, "tokens"),
        ({"gpus": 0}, "gpus"),
        ({"utilization": 0.0}, "utilization"),
        ({"utilization": 1.5}, "utilization"),
        ({"utilization": math.nan}, "utilization"),
        ({"overhead": 1.0}, "overhead"),
        ({"overhead": -0.1}, "overhead"),
        ({"recompute": "sometimes"}, "recompute"),
        ({"recompute_factor": 0.5}, "recompute factor"),
        ({"price_per_gpu_hour": -1.0}, "price"),
    ],
)
def test_invalid_request_is_an_input_error_naming_the_input(
    overrides: dict[str, Any], name: str
) -> None:
    with pytest.raises(InputError, match=name):
        make_request(**overrides)


def test_utilization_of_one_and_overhead_of_zero_are_allowed() -> None:
    request = make_request(utilization=1.0, overhead=0.0)

    result = flops.estimate(request, A100_BF16_PEAK)

    assert result.hfu == 1.0


def test_sensitivity_keeps_an_exact_base_row_for_an_unrounded_utilization() -> None:
    request = a_request(utilization=0.41234)
    rows = flops.sensitivity(
        request, build_catalog().peak_flops, {"utilization": ["0.41234", "0.3"]}
    )
    base_rows = [row for row in rows if row.is_base]
    assert len(base_rows) == 1 and base_rows[0].change_pct == 0.0
    defaults = flops.default_variations(request, ["bf16"])
    assert "0.41234" in defaults["utilization"]


def test_vary_reads_counts_like_the_input_options() -> None:
    varied = flops.vary(a_request(), "tokens", "5T")
    assert varied.model.tokens == 5e12
