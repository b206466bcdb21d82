"""Logging profiles read as specifications: what each framework's logged values mean to
Reckon, on the captured real runs (tests/data/trainer_runs) and on small hand-made ones."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from service.domain.errors import InputError
from service.profiles.derive import Point, RunRecord, steady
from service.profiles.mapping_file import load_mapping_file
from service.profiles.profile_set import ProfileSet, load_profile_set

DATA = Path(__file__).parents[1] / "data" / "trainer_runs"


def captured(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((DATA / f"{name}.json").read_text())
    return document


def replay(name: str, profiles: ProfileSet | None = None) -> Any:
    run = captured(name)
    history = {
        key: [(point["step"], point["value"]) for point in points]
        for key, points in run["metric_history"].items()
    }
    record = RunRecord(run["params"], run["tags"], run["latest_metrics"])
    return (profiles or ProfileSet.builtin()).observe(record, lambda key: history[key])


def observe(
    metrics: Mapping[str, float],
    params: Mapping[str, str] | None = None,
    tags: Mapping[str, str] | None = None,
    history: Mapping[str, Sequence[Point]] | None = None,
    profiles: ProfileSet | None = None,
) -> Any:
    asked: list[str] = []

    def read(key: str) -> Sequence[Point]:
        asked.append(key)
        return (history or {}).get(key, [(1, metrics[key])])

    record = RunRecord(dict(params or {}), dict(tags or {}), dict(metrics))
    result = (profiles or ProfileSet.builtin()).observe(record, read)
    return result, asked


def test_hf_total_flos_gives_the_non_embedding_parameter_count_of_the_captured_run() -> None:
    notes = captured("hf_1")["capture_notes"]["trainer_side"]

    derived = replay("hf_1")

    assert derived.profile == "hf-trainer"
    assert derived.tokens == notes["state_num_input_tokens_seen"]
    assert derived.model_flops == notes["state_total_flos"]
    assert derived.params == pytest.approx(notes["n_params_no_embeddings"], rel=1e-9)
    assert derived.gpus == 1  # samples/s / (steps/s x batch 8 x accumulation 2)
    assert derived.compute_seconds == notes["train_output"]["metrics"]["train_runtime"]
    assert (derived.recompute, derived.precision) == ("none", "fp32")


def test_hf_gradient_checkpointing_means_full_recompute_on_the_same_model_flops() -> None:
    plain, checkpointed = replay("hf_1"), replay("hf_2")

    assert checkpointed.recompute == "full"
    assert checkpointed.model_flops == plain.model_flops  # total_flos never counts it


def test_lightning_model_flops_are_flops_per_batch_times_batches() -> None:
    notes = captured("lightning_2")["capture_notes"]["trainer_side"]

    derived = replay("lightning_2")

    assert derived.profile == "lightning"
    assert derived.gpus == 1  # no whole-job rate logged: one device
    assert derived.tokens == 30 * 8 * 128
    assert derived.model_flops == pytest.approx(notes["flops_per_batch_fwd_bwd"] * 30, rel=1e-9)
    assert derived.compute_seconds is not None
    assert derived.compute_seconds < notes["logged_metrics"]["train/time"]  # warm-up left out


def test_lightning_accumulation_counts_micro_batches_not_steps() -> None:
    notes = captured("lightning_4")["capture_notes"]["trainer_side"]

    derived = replay("lightning_4")

    assert derived.tokens == notes["batches_seen"] * 8 * 128
    assert derived.model_flops == pytest.approx(
        notes["flops_per_batch_fwd_bwd"] * notes["batches_seen"], rel=1e-9
    )


def test_a_short_lightning_run_without_any_rate_records_a_reason_not_a_zero() -> None:
    derived, _ = observe({"train/time": 0.8, "train/samples": 240.0, "train/batches": 30.0})

    assert derived.profile == "lightning"
    assert derived.throughput is None and derived.compute_seconds is None
    assert derived.problem is not None and derived.problem[0] == "no_throughput"
    assert "window_size" in derived.problem[1]


def test_steady_state_is_the_median_after_warm_up() -> None:
    points = [(step, 10.0 if step < 3 else 100.0) for step in range(30)]

    assert steady(points) == (100.0, 29)


def test_composer_gpu_count_is_whole_job_over_per_device_rate() -> None:
    derived, asked = observe(
        {
            "throughput/tokens_per_sec": 80_000.0,
            "throughput/device/tokens_per_sec": 10_000.0,
            "time/token": 8e8,
        },
        params={"precision": "amp_bf16"},
    )

    assert (derived.profile, derived.gpus, derived.precision) == ("composer", 8, "bf16")
    assert derived.compute_seconds == pytest.approx(1e4)
    assert set(asked) == {"throughput/tokens_per_sec", "throughput/device/tokens_per_sec"}


def test_composer_gpu_counts_that_disagree_are_a_contradiction_not_a_half_read() -> None:
    derived, _ = observe(
        {"throughput/tokens_per_sec": 80_000.0, "throughput/device/tokens_per_sec": 10_000.0},
        params={"num_nodes": "2", "num_gpus_per_node": "8"},
    )

    assert derived.problem is not None and derived.problem[0] == "contradictory_metrics"
    assert derived.throughput is None and derived.tokens is None
    assert "16" in derived.problem[1] and "8" in derived.problem[1]


def test_hf_average_rate_that_contradicts_the_token_count_is_skipped() -> None:
    derived, _ = observe(
        {"train_runtime": 100.0, "num_input_tokens_seen": 1e6, "train_tokens_per_second": 5e3}
    )

    assert derived.problem is not None and derived.problem[0] == "contradictory_metrics"


def test_hf_rates_that_give_a_fractional_gpu_count_are_a_contradiction() -> None:
    derived, _ = observe(
        {"train_runtime": 10.0, "train_samples_per_second": 137.0, "train_steps_per_second": 10.0},
        params={"per_device_train_batch_size": "8", "gradient_accumulation_steps": "1"},
    )

    assert derived.problem is not None and derived.problem[0] == "contradictory_metrics"


def test_nan_in_a_framework_rate_is_a_bad_metric() -> None:
    derived, _ = observe({"tps": float("nan")})

    assert derived.problem is not None and derived.problem[0] == "bad_metric"


def test_reckon_tags_come_before_what_the_profile_derives() -> None:
    derived, _ = observe(
        {"throughput/tokens_per_sec": 80_000.0, "throughput/device/tokens_per_sec": 10_000.0},
        params={"reckon.gpus": "4", "precision": "amp_bf16"},
        tags={"reckon.gpu": "NVIDIA H100 80GB HBM3", "reckon.precision": "fp8"},
    )

    assert (derived.gpus, derived.gpu, derived.precision) == (4, "NVIDIA H100 80GB HBM3", "fp8")


def test_a_reckon_tag_that_is_not_a_number_is_a_recorded_reason() -> None:
    derived, _ = observe({"tokens_per_second": 1.0}, tags={"reckon.gpus": "eight"})

    assert derived.problem == ("bad_configuration", "reckon.gpus = 'eight' is not a number")


def test_reckon_profile_passes_its_metric_through_as_logged() -> None:
    derived, asked = observe({"tokens_per_second": float("nan")})

    assert derived.profile == "reckon" and derived.problem is None and asked == []
    assert derived.throughput != derived.throughput  # NaN: the pass judges it


def test_a_custom_throughput_metric_takes_precedence_over_framework_profiles() -> None:
    profiles = ProfileSet.builtin("throughput/tokens_per_sec")

    derived, _ = observe({"throughput/tokens_per_sec": 5e4, "time/token": 1e9}, profiles=profiles)

    assert (derived.profile, derived.throughput) == ("throughput-metric", 5e4)


MAPPING = """
[[profile]]
name = "acme"
detect = ["acme/tok_s"]

[profile.metrics]
"acme/tok_s" = { quantity = "tokens_per_second", scope = "device", statistic = "steady" }
"acme/tokens" = { quantity = "tokens" }

[profile.params]
"world" = { quantity = "gpus" }
"""


def test_mapping_file_profiles_detect_first_and_convert_scopes(tmp_path: Path) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(MAPPING)
    profiles = load_profile_set(path)

    derived, _ = observe(
        {"acme/tok_s": 1_000.0, "acme/tokens": 8e6, "tps": 3.0},
        params={"world": "4"},
        history={"acme/tok_s": [(step, 1_000.0) for step in range(20)]},
        profiles=profiles,
    )

    assert (derived.profile, derived.gpus, derived.throughput) == ("acme", 4, 4_000.0)
    assert derived.compute_seconds == pytest.approx(2_000.0)


@pytest.mark.parametrize(
    ("extra", "value"),
    [('"acme/step" = { quantity = "optimizer_steps" }', 2_000.0),
     ('"acme/batch" = { quantity = "global_batch_tokens" }', 1_234.0)],
)  # fmt: skip
def test_a_mapping_file_gives_tokens_per_step_by_steps_or_directly(
    tmp_path: Path, extra: str, value: float
) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(MAPPING.replace("[profile.params]", f"{extra}\n\n[profile.params]"))

    derived, _ = observe(
        {"acme/tok_s": 1_000.0, "acme/tokens": 8e6, "acme/step": 4_000.0, "acme/batch": 1_234.0},
        params={"world": "4"},
        history={"acme/tok_s": [(step, 1_000.0) for step in range(20)]},
        profiles=load_profile_set(path),
    )

    assert derived.global_batch_tokens == pytest.approx(value)  # 8e6 tokens / 4,000 steps


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[profile]]\nname='x'\n[profile.metrics]\nm={quantity='speed'}", "quantity 'speed'"),
        ("[[profile]]\nname='x'\n[profile.metrics]\nm={quantity='tokens', unit='km'}", "unit"),
        ("[[profile]]\nname='x'", "maps no metric"),
        ("profile = 3", "[[profile]]"),
        ("[[profile", "not valid TOML"),
        ("[[defaults]]\ngpus = 8", "name the runs it covers"),
        ("[[defaults]]\nrun_name = 'x'", "gives none of"),
        ("[[defaults]]\nrun_name = 'x'\ngpus = 0", "gpus must be"),
        ("[[defaults]]\nrun_name = 'x'\ngpus = 8\nnodes = 2", "unknown keys nodes"),
        ("defaults = 3", "[[defaults]] tables"),
    ],
)
def test_mapping_file_mistakes_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "profiles.toml"
    path.write_text(text)

    with pytest.raises(InputError, match="profiles file") as raised:
        load_mapping_file(path)

    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_nemo_current_flops_keys_give_the_gpu_count_and_compute_from_step_time() -> None:
    steps = [(step, 2.0) for step in range(10, 1010, 10)]
    derived, _ = observe(
        {"train_step_timing in s": 2.0, "TFLOPS_per_GPU": 400.0, "TFLOPS": 12_800.0},
        params={"trainer/precision": "bf16-mixed"},
        history={
            "train_step_timing in s": steps,
            "TFLOPS_per_GPU": [(step, 400.0) for step, _ in steps],
            "TFLOPS": [(step, 12_800.0) for step, _ in steps],
        },
    )

    assert (derived.profile, derived.gpus, derived.precision) == ("nemo", 32, "bf16")
    assert derived.compute_seconds == pytest.approx(2.0 * 1000)
    assert derived.model_flops == pytest.approx(12_800e12 * 2000)


def test_hf_rates_too_coarse_for_a_gpu_count_leave_it_unknown_not_contradictory() -> None:
    # 40,000 s for 160 steps of 64 samples on 8 GPUs: HF logs steps/s as 0.004.
    derived, _ = observe(
        {"train_runtime": 40_000.0, "train_samples_per_second": 0.256,
         "train_steps_per_second": 0.004, "total_flos": 1e20},
        params={"per_device_train_batch_size": "4", "gradient_accumulation_steps": "2"},
    )  # fmt: skip

    assert derived.problem is None and derived.gpus is None
    assert derived.compute_seconds == 40_000.0


# --- what runs do not log: [[defaults]] in the profiles file --------------------------------

DEFAULTS = """
[[defaults]]
experiment = "pretraining"
precision = "bf16"

[[defaults]]
run_name = "big-*"
gpus = 64

[[defaults]]
run_name = "small-*"
gpus = 8
gpu = "h100-sxm"
"""
COARSE_HF = {  # 40,000 s for 160 steps: HF's rounded rates give no GPU count
    "train_runtime": 40_000.0, "train_samples_per_second": 0.256,
    "train_steps_per_second": 0.004, "total_flos": 1e20,
}  # fmt: skip
HF_PARAMS = {"per_device_train_batch_size": "4", "gradient_accumulation_steps": "2"}


def defaults_profiles(tmp_path: Path, text: str = DEFAULTS) -> ProfileSet:
    path = tmp_path / "profiles.toml"
    path.write_text(text)
    return load_profile_set(path)


def test_composer_runs_get_the_precision_their_experiment_is_known_to_use(
    tmp_path: Path,
) -> None:
    profiles = defaults_profiles(tmp_path)
    run = captured("composer_1")
    record = RunRecord(run["params"], run["tags"], run["latest_metrics"], "7", "pretraining")
    elsewhere = RunRecord(run["params"], run["tags"], run["latest_metrics"], "8", "ablations")

    known = profiles.observe(record, lambda key: [])
    unknown = profiles.observe(elsewhere, lambda key: [])

    assert (known.profile, known.precision) == ("composer", "bf16")
    assert unknown.precision is None  # never a guess: no table covers it


def test_a_run_name_pattern_gives_each_coarse_hf_run_its_own_gpu_count(tmp_path: Path) -> None:
    profiles = defaults_profiles(tmp_path)

    big, _ = observe(COARSE_HF, HF_PARAMS, {"mlflow.runName": "big-7b"}, profiles=profiles)
    small, _ = observe(COARSE_HF, HF_PARAMS, {"mlflow.runName": "small-1b"}, profiles=profiles)
    other, _ = observe(COARSE_HF, HF_PARAMS, {"mlflow.runName": "probe"}, profiles=profiles)

    assert (big.gpus, small.gpus, small.gpu, other.gpus) == (64, 8, "h100-sxm", None)


def test_what_a_run_says_itself_wins_over_a_default(tmp_path: Path) -> None:
    profiles = defaults_profiles(
        tmp_path, '[[defaults]]\nrun_name = "*"\ngpus = 64\nprecision = "fp8"'
    )

    tagged, _ = observe(
        COARSE_HF, {**HF_PARAMS, "bf16": "True"}, {"reckon.gpus": "16"}, profiles=profiles
    )

    assert (tagged.gpus, tagged.precision) == (16, "bf16")


@pytest.mark.parametrize(
    ("name", "tokens_per_step"),
    [
        ("hf_1", 8 * 2 * 128),  # per-device batch x accumulation x sequence, one device
        ("hf_ddp_1", 8 * 2 * 128 * 2),  # two ranks
        ("composer_1", 512),  # the capture's own tokens_per_step_job
        ("composer_2", 1024),
        ("composer_ddp_1", 2048),
    ],
)
def test_captured_runs_give_their_tokens_per_optimizer_step(
    name: str, tokens_per_step: int
) -> None:
    notes = captured(name)["capture_notes"]

    derived = replay(name)

    assert notes.get("tokens_per_step_job", tokens_per_step) == tokens_per_step
    assert derived.global_batch_tokens == pytest.approx(tokens_per_step)


def test_lightning_counts_micro_batches_so_it_gives_no_tokens_per_step() -> None:
    # train/batches are micro-batches on this rank: with accumulation they are not steps.
    assert replay("lightning_4").global_batch_tokens is None


def test_hf_steps_come_from_its_rates_and_its_step_budget_only_when_the_rates_are_coarse() -> None:
    metrics = {"train_runtime": 40_000.0, "train_samples_per_second": 0.256,
               "train_steps_per_second": 0.004, "total_flos": 6 * 1e9 * 2.56e8,
               "num_input_tokens_seen": 2.56e8}  # fmt: skip
    coarse, _ = observe(metrics, params={"max_steps": "160"})
    unknown, _ = observe(metrics, params={"max_steps": "-1"})
    precise, _ = observe({**metrics, "train_steps_per_second": 2.0}, params={"max_steps": "160"})

    assert coarse.global_batch_tokens == pytest.approx(2.56e8 / 160)
    assert unknown.global_batch_tokens is None  # 0.004 steps/s x 40,000 s is 160 +- 2
    assert precise.global_batch_tokens == pytest.approx(2.56e8 / 80_000)  # what it ran


def test_nemo_tokens_per_step_are_tokens_over_the_last_logged_step() -> None:
    steps = [(step, 2.0) for step in range(10, 1010, 10)]
    derived, _ = observe(
        {"train_step_timing in s": 2.0, "tokens_per_sec_per_gpu": 4096.0},
        params={"trainer/devices": "8", "trainer/num_nodes": "2"},
        history={
            "train_step_timing in s": steps,
            "tokens_per_sec_per_gpu": [(step, 4096.0) for step, _ in steps],
        },
    )

    # 16 GPUs x 4,096 tokens/s x 2 s per step
    assert derived.global_batch_tokens == pytest.approx(16 * 4096 * 2.0)
