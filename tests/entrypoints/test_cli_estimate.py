"""The estimator's command line through its real entry point, `service.entrypoints.cli.main(argv)`:
what a planner types, what they read back, and the one-line errors with exit code 2."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from service.entrypoints.cli.main import cli, main

SECONDS_PER_DAY = 86400.0

MODEL_ARGS = ["--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb"]
FACTOR_ARGS = ["--precision", "bf16", "--recompute", "full", "--utilization", "0.4"]
ESTIMATE = ["estimate", *MODEL_ARGS, "--gpus", "8", *FACTOR_ARGS]
PLAN = ["plan", *MODEL_ARGS, *FACTOR_ARGS, "--deadline", "3.5d"]
SENSITIVITY = ["sensitivity", *MODEL_ARGS, "--gpus", "8", *FACTOR_ARGS]

ESTIMATE_JSON_KEYS = {
    "flops",
    "compute_seconds",
    "wall_seconds",
    "gpu_hours",
    "utilization",
    "overhead",
    "peak_flops",
    "wall_human",
}


@pytest.fixture(autouse=True)
def builtin_hardware_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the developer's shell says, these tests see the built-in catalog."""
    monkeypatch.delenv("RECKON_HARDWARE_FILE", raising=False)


def reckon(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def reckon_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    code, out, err = reckon(capsys, [*argv, "--json"])
    assert (code, err) == (0, "")
    return json.loads(out)  # fails unless stdout is exactly one JSON document


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    """`argv` with `option` set to `value`, replacing any value it already had."""
    if option in argv:
        at = argv.index(option)
        return [*argv[: at + 1], value, *argv[at + 2 :]]
    return [*argv, option, value]


def assert_one_line_usage_error(code: int, out: str, err: str) -> None:
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("reckon: error:")
    assert "Traceback" not in err


# --- estimate --------------------------------------------------------------------------------


def test_estimate_json_has_the_contract_keys(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, ESTIMATE)

    assert document.keys() >= ESTIMATE_JSON_KEYS


def test_estimate_json_gives_the_corrected_seed_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = reckon_json(capsys, ESTIMATE)

    assert document["flops"] == pytest.approx(5.6e22, rel=1e-9)
    assert document["peak_flops"] == pytest.approx(312e12, rel=1e-12)
    assert document["utilization"] == 0.4
    assert document["overhead"] == 0.0
    assert document["compute_seconds"] == pytest.approx(5.6e22 / (8 * 312e12 * 0.4), rel=1e-12)
    assert document["wall_seconds"] / SECONDS_PER_DAY == pytest.approx(649.2, abs=0.05)
    assert document["gpu_hours"] == pytest.approx(8 * document["wall_seconds"] / 3600, rel=1e-12)
    assert document["wall_human"].startswith("649 days")


def test_estimate_overhead_stretches_wall_time(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, [*ESTIMATE, "--overhead", "0.15"])

    assert document["overhead"] == 0.15
    assert document["wall_seconds"] == pytest.approx(document["compute_seconds"] / 0.85, rel=1e-12)


def test_estimate_prints_649_days_for_the_seed_example(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = reckon(capsys, ESTIMATE)

    assert (code, err) == (0, "")
    assert "649 days" in out


def test_estimate_on_h100_sxm_bf16_uses_the_dense_989_tflops(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = with_option(with_option(ESTIMATE, "--gpu", "h100-sxm"), "--precision", "bf16")

    document = reckon_json(capsys, argv)

    assert document["peak_flops"] == pytest.approx(989e12, rel=1e-12)


def test_estimate_accepts_gpu_aliases_and_reports_the_canonical_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = reckon_json(capsys, with_option(ESTIMATE, "--gpu", "NVIDIA A100-SXM4-80GB"))

    assert document["gpu"] == "a100-80gb"


def test_estimate_reads_counts_with_suffixes(capsys: pytest.CaptureFixture[str]) -> None:
    argv = with_option(with_option(ESTIMATE, "--params", "7B"), "--tokens", "1T")

    document = reckon_json(capsys, argv)

    assert document["flops"] == pytest.approx(5.6e22, rel=1e-9)


def test_estimate_with_a_price_reports_cost(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, [*ESTIMATE, "--price-per-gpu-hour", "2"])

    assert document["cost"] == pytest.approx(2 * document["gpu_hours"], rel=1e-12)


def test_fp8_on_a100_exits_2_with_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, with_option(ESTIMATE, "--precision", "fp8"))

    assert_one_line_usage_error(code, out, err)
    assert "fp8" in err


@pytest.mark.parametrize(
    ("command", "option", "value"),
    [
        (ESTIMATE, "--params", "-1"),
        (ESTIMATE, "--params", "abc"),
        (ESTIMATE, "--tokens", "0"),
        (ESTIMATE, "--gpus", "0"),
        (ESTIMATE, "--gpus", "abc"),
        (ESTIMATE, "--utilization", "0"),
        (ESTIMATE, "--utilization", "1.5"),
        (ESTIMATE, "--utilization", "nan"),
        (ESTIMATE, "--overhead", "1"),
        (ESTIMATE, "--overhead", "-0.1"),
        (ESTIMATE, "--gpu", "nosuchgpu"),
        (ESTIMATE, "--recompute", "sometimes"),
        (ESTIMATE, "--recompute", "selective"),  # no --layers/--hidden-size/--seq-len
        (ESTIMATE, "--recompute-factor", "0.5"),
        (PLAN, "--deadline", "30"),
        (PLAN, "--deadline", "0h"),
        (PLAN, "--multiple-of", "0"),
        (SENSITIVITY, "--vary", "colour=blue"),
        (SENSITIVITY, "--vary", "tokens"),
    ],
    ids=lambda part: part[0] if isinstance(part, list) else part,
)
def test_bad_input_exits_2_with_one_error_line_and_no_output(
    capsys: pytest.CaptureFixture[str], command: list[str], option: str, value: str
) -> None:
    code, out, err = reckon(capsys, with_option(command, option, value))

    assert_one_line_usage_error(code, out, err)


def test_unknown_gpu_error_lists_the_known_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, with_option(ESTIMATE, "--gpu", "nosuchgpu"))

    assert_one_line_usage_error(code, out, err)
    assert "h100-sxm" in err
    assert "a100-80gb" in err


def test_missing_required_option_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, ["estimate", *MODEL_ARGS])

    assert_one_line_usage_error(code, out, err)
    assert "--gpus" in err


# --- plan ------------------------------------------------------------------------------------


def test_plan_for_3_5_days_says_1484_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, PLAN)

    assert (code, err) == (0, "")
    assert "1,484" in out


def test_plan_in_whole_nodes_says_1488_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, [*PLAN, "--whole-nodes"])

    assert (code, err) == (0, "")
    assert "1,488" in out


def test_plan_json_gives_gpus_and_the_resulting_estimate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = reckon_json(capsys, PLAN)

    assert document["gpus"] == 1484
    assert document["estimate"]["gpus"] == 1484
    assert document["estimate"]["wall_seconds"] <= 3.5 * SECONDS_PER_DAY


def test_plan_json_in_whole_nodes_gives_1488_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, [*PLAN, "--whole-nodes"])

    assert document["gpus"] == 1488
    assert document["multiple_of"] == 8


def test_plan_accepts_an_iso_8601_deadline(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, with_option(PLAN, "--deadline", "P3DT12H"))

    assert document["gpus"] == 1484


# --- sensitivity -----------------------------------------------------------------------------


def test_sensitivity_json_has_the_default_rows(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, SENSITIVITY)

    variables = {row["variable"] for row in document["rows"]}
    assert {"utilization", "recompute", "gpus", "precision"} <= variables
    assert document["base"]["wall_seconds"] / SECONDS_PER_DAY == pytest.approx(649.2, abs=0.05)


def test_sensitivity_vary_adds_rows_for_the_named_input(
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = reckon_json(capsys, [*SENSITIVITY, "--vary", "tokens=5e11,2e12"])

    tokens = {
        row["value"]: row["change_pct"] for row in document["rows"] if row["variable"] == "tokens"
    }
    assert tokens == {"5e11": pytest.approx(-50.0), "2e12": pytest.approx(100.0)}


def test_sensitivity_table_marks_the_base_case(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, SENSITIVITY)

    assert (code, err) == (0, "")
    assert "(base)" in out
    assert "649 days" in out


# --- hardware --------------------------------------------------------------------------------


def test_hardware_json_lists_the_gpus_with_sources(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, ["hardware"])

    by_name = {gpu["name"]: gpu for gpu in document["gpus"]}
    assert {"a100-80gb", "h100-sxm", "mi300x"} <= by_name.keys()
    assert by_name["h100-sxm"]["peak_flops"]["bf16"] == pytest.approx(989e12)
    assert all(gpu["source"] for gpu in document["gpus"])


def test_user_hardware_file_adds_a_gpu_to_estimates_and_the_catalog(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "hardware.toml"
    path.write_text(
        '[gpu.my-chip]\nsource = "vendor datasheet, dense"\npeak_tflops = { bf16 = 500 }\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("RECKON_HARDWARE_FILE", str(path))

    estimate = reckon_json(capsys, with_option(ESTIMATE, "--gpu", "my-chip"))
    catalog = reckon_json(capsys, ["hardware"])

    assert estimate["peak_flops"] == pytest.approx(500e12)
    assert "my-chip" in {gpu["name"] for gpu in catalog["gpus"]}


def test_malformed_user_hardware_file_exits_2_naming_the_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "hardware.toml"
    path.write_text("[gpu.my-chip]\npeak_tflops = { bf16 = 500 }\n", encoding="utf-8")
    monkeypatch.setenv("RECKON_HARDWARE_FILE", str(path))

    code, out, err = reckon(capsys, ESTIMATE)

    assert_one_line_usage_error(code, out, err)
    assert str(path) in err


# --- every command -------------------------------------------------------------------------


@pytest.mark.parametrize("command", sorted(cli.commands))
def test_every_command_has_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    code, out, _ = reckon(capsys, [command, "--help"])

    assert code == 0
    assert f"Usage: reckon {command}" in out


def test_top_level_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = reckon(capsys, ["--help"])

    assert code == 0
    assert all(command in out for command in cli.commands)


def test_overflowing_inputs_exit_2_without_a_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = with_option(with_option(ESTIMATE, "--params", "1e200"), "--tokens", "1e200")

    code, out, err = reckon(capsys, [*argv, "--json"])

    assert_one_line_usage_error(code, out, err)


# --- the installed console script ----------------------------------------------------------


def test_installed_reckon_script_prints_one_json_document() -> None:
    script = Path(sys.executable).with_name("reckon")
    environment = {k: v for k, v in os.environ.items() if k != "RECKON_HARDWARE_FILE"}

    completed = subprocess.run(
        [str(script), *ESTIMATE, "--json"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    document = json.loads(completed.stdout)
    assert document.keys() >= ESTIMATE_JSON_KEYS
    assert math.isclose(document["flops"], 5.6e22, rel_tol=1e-9)
    assert document["wall_human"].startswith("649 days")


def test_bare_reckon_prints_help_and_succeeds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert "estimate" in out and "Usage" in out and err == ""


def test_cost_is_printed_with_its_currency(capsys: pytest.CaptureFixture[str]) -> None:
    priced = [*ESTIMATE, "--price-per-gpu-hour", "2.5"]

    code, out, _ = reckon(capsys, priced)
    _, euro, _ = reckon(capsys, [*priced, "--currency", "eur", "--json"])
    bad, _, err = reckon(capsys, [*priced, "--currency", "euros"])

    assert code == 0 and "USD" in next(line for line in out.splitlines() if "cost" in line)
    assert json.loads(euro)["currency"] == "EUR" and json.loads(euro)["cost"] > 0
    assert bad == 2 and "3-letter code" in err


def test_a_calibrated_plan_at_p90_meets_the_deadline_and_one_gpu_fewer_does_not(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no database yet: the published prior's factors and spread
    monkeypatch.delenv("RECKON_DATABASE_URL", raising=False)
    model = [*MODEL_ARGS, "--recompute", "full"]
    deadline = 30 * 86400

    plan = reckon_json(capsys, ["plan", *model, "--deadline", "30d", "--calibrated",
                                "--confidence", "0.9", "--json"])  # fmt: skip
    gpus = plan["gpus"]
    fewer = reckon_json(capsys, ["estimate", *model, "--gpus", str(gpus - 1), "--calibrated",
                                 "--json"])  # fmt: skip
    median = reckon_json(capsys, ["plan", *model, "--deadline", "30d", "--calibrated", "--json"])
    nodes = reckon_json(capsys, ["plan", *model, "--deadline", "30d", "--confidence", "0.9",
                                 "--whole-nodes", "--json"])  # fmt: skip

    assert plan["confidence"] == 0.9 and plan["wall_seconds_p90"] <= deadline
    assert plan["wall_seconds_p10"] < plan["wall_seconds"] < plan["wall_seconds_p90"]
    assert fewer["wall_seconds_p90"] > deadline
    assert median["confidence"] == 0.5 and median["gpus"] < gpus
    assert nodes["gpus"] % 8 == 0 and nodes["gpus"] - 8 < gpus <= nodes["gpus"]
    assert list(tmp_path.iterdir()) == []


def test_calibrated_sensitivity_gives_a_range_per_row(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RECKON_DATABASE_URL", raising=False)

    table = reckon_json(
        capsys, ["sensitivity", *MODEL_ARGS, "--gpus", "8", "--calibrated", "--json"]
    )
    code, human, _ = reckon(capsys, ["sensitivity", *MODEL_ARGS, "--gpus", "8", "--calibrated"])

    assert table["rows"] and all(
        row["wall_seconds_p10"] < row["wall_seconds"] < row["wall_seconds_p90"]
        for row in table["rows"]
    )
    assert code == 0 and "P10" in human and "P90" in human


@pytest.mark.parametrize(
    ("changed", "said"),
    [
        (["--params", "7"], "params 7 is under 1,000"),  # the B forgotten: was "0 seconds"
        (["--tokens", "300"], "tokens 300 is under 1,000"),
        (["--gpu", "a100-80"], "did you mean a100-80gb?"),
        (["--gpu", "h100sxm"], "did you mean h100-sxm?"),
        (["--precision", "bf61"], "unknown precision 'bf61'; did you mean bf16"),
    ],
    ids=["params", "tokens", "gpu-prefix", "gpu-dash", "precision"],
)
def test_implausible_or_misspelled_planner_input_is_refused_with_a_hint(
    changed: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    option = changed[0]
    if option in MODEL_ARGS:
        at = MODEL_ARGS.index(option)
        model = [*MODEL_ARGS[:at], *changed, *MODEL_ARGS[at + 2 :]]
    else:
        model = [*MODEL_ARGS, *changed]

    for extra in (["estimate", "--gpus", "8"], ["plan", "--deadline", "30d"]):
        command = extra[0]
        code, out, err = reckon(capsys, [command, *model, *extra[1:]])
        assert code == 2 and out == "" and said in err, (command, err)
        assert err.count("\n") == 1
