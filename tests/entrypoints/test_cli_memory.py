"""Training memory per GPU on the command line (issue 23 item 2): `plan` never answers a count
whose memory does not fit and says what bound it, `estimate` warns when a configuration does
not fit, `sensitivity` has a fits column, and the memory settings are options of all three.
Through the real entry point, `main(argv)`, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.entrypoints.test_cli_estimate import assert_one_line_usage_error, reckon, reckon_json

DONE = ["plan", "--params", "70e9", "--tokens", "1e11", "--gpu", "h100-sxm"]
SHAPE = ["--layers", "80", "--hidden-size", "8192", "--seq-len", "4096"]
SEED = ["--params", "7e9", "--tokens", "1e12", "--gpu", "a100-80gb"]


@pytest.fixture(autouse=True)
def builtin_hardware_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RECKON_HARDWARE_FILE", raising=False)


def test_the_done_line_a_week_is_bound_by_time(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, [*DONE, "--deadline", "7d"])
    document = reckon_json(capsys, [*DONE, "--deadline", "7d"])

    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "176 x h100-sxm to finish within 7 days",
        "time: the deadline needs 176 x h100-sxm (memory: at least 15 with fsdp)",
    ]
    assert document["bound"] == "time" and document["gpus"] == document["time_bound_gpus"] == 176
    assert document["memory"]["fits"] is True and document["memory"]["min_gpus_that_fit"] == 15


def test_the_done_line_a_year_is_bound_by_memory(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, [*DONE, "--deadline", "365d"])
    document = reckon_json(capsys, [*DONE, "--deadline", "365d"])

    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [
        "15 x h100-sxm to finish within 365 days",
        "memory: at least 15 x h100-sxm with fsdp (the deadline alone needs 4)",
    ]
    assert "memory: at least 15" in out and "memory per GPU" in out
    assert document["bound"] == "memory" and document["gpus"] == 15
    assert document["time_bound_gpus"] == 4 and document["estimate"]["gpus"] == 15
    memory = document["memory"]
    assert memory["gpus"] == 15 and memory["fits"] is True
    assert memory["needed_bytes"] <= memory["chip_bytes"] == 80 * 2**30
    assert memory["needed_gib"] == pytest.approx(memory["needed_bytes"] / 2**30)
    assert (memory["sharding"], memory["optimizer"]) == ("fsdp", "adam")
    assert memory["activations_counted"] is False and "activations not counted" in memory["note"]


def test_whole_nodes_stay_whole_when_memory_binds(capsys: pytest.CaptureFixture[str]) -> None:
    document = reckon_json(capsys, [*DONE, "--deadline", "365d", "--whole-nodes"])

    assert (document["bound"], document["gpus"], document["multiple_of"]) == ("memory", 16, 8)


def test_the_shape_and_recompute_size_the_activations(capsys: pytest.CaptureFixture[str]) -> None:
    full = reckon_json(capsys, [*DONE, "--deadline", "365d", *SHAPE, "--recompute", "full"])
    bigger = reckon_json(
        capsys, [*DONE, "--deadline", "365d", *SHAPE, "--recompute", "full", "--micro-batch", "4"]
    )

    assert full["gpus"] == 17 and full["memory"]["activations_counted"] is True
    assert full["memory"]["activations_bytes"] > 0 and full["memory"]["note"] is None
    assert bigger["gpus"] > 17 and bigger["memory"]["micro_batch"] == 4


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--sharding", "none"], "no count of h100-sxm fits 7e+10 params in memory"),
        ([*SHAPE], "recompute activations (--recompute full)"),
    ],
)
def test_a_plan_no_count_can_hold_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    code, out, err = reckon(capsys, [*DONE, "--deadline", "365d", *extra])

    assert_one_line_usage_error(code, out, err)
    assert said in err


def test_an_estimate_that_does_not_fit_warns_and_says_so_in_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["estimate", *DONE[1:], "--gpus", "2", "--sharding", "none"]
    code, out, err = reckon(capsys, argv)
    json_code, document, json_err = reckon(capsys, [*argv, "--json"])

    assert code == 0 and "DOES NOT FIT" in out
    assert err.startswith("reckon: warning: does not fit in memory:") and err.count("\n") == 1
    assert "no count fits with sharding none" in err
    memory = json.loads(document)["memory"]
    assert json_code == 0 and json_err == err
    assert memory["fits"] is False and memory["needed_bytes"] > memory["chip_bytes"]
    assert memory["min_gpus_that_fit"] is None and memory["min_gpus_verdict"] == "never"


def test_an_estimate_that_fits_says_so_quietly(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = reckon(capsys, ["estimate", *SEED, "--gpus", "8"])
    document = reckon_json(capsys, ["estimate", *SEED, "--gpus", "8"])

    assert (code, err) == (0, "") and "fits (fsdp, adam; 2 or more GPUs fit)" in out
    assert document["memory"]["fits"] is True and document["memory"]["gpus"] == 8


def test_sensitivity_has_a_fits_column(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["sensitivity", *SEED, "--gpus", "8", "--layers", "32", "--hidden-size", "4096"]
    argv += ["--seq-len", "4096", "--micro-batch", "8", "--recompute", "full"]
    code, out, _ = reckon(capsys, argv)
    document = reckon_json(capsys, argv)

    assert code == 0 and out.splitlines()[1].split()[-1] == "fits"
    fits = {(row["variable"], row["value"]): row["fits"] for row in document["rows"]}
    assert fits[("recompute", "full")] is True and fits[("recompute", "none")] is False
    none_row = next(line for line in out.splitlines() if line.startswith("recompute    none"))
    assert none_row.split()[-1] == "no"


@pytest.mark.parametrize(
    ("option", "value", "said"),
    [
        ("--sharding", "zero3", "unknown sharding 'zero3'; use one of none, zero1, zero2, fsdp"),
        ("--optimizer", "lion", "unknown optimizer 'lion'; use one of adam, sgd"),
        ("--micro-batch", "0", "micro_batch must be a whole number"),
    ],
)
def test_bad_memory_settings_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], option: str, value: str, said: str
) -> None:
    for argv in (
        ["estimate", *SEED, "--gpus", "8"],
        ["plan", *SEED, "--deadline", "30d"],
        ["sensitivity", *SEED, "--gpus", "8"],
    ):
        code, out, err = reckon(capsys, [*argv, option, value])
        assert_one_line_usage_error(code, out, err)
        assert said in err, argv


def test_a_chip_without_memory_is_planned_by_time_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hardware = tmp_path / "gpus.toml"
    hardware.write_text(
        '[gpu.my-chip]\nsource = "test"\npeak_tflops = { bf16 = 500 }\n', encoding="utf-8"
    )
    monkeypatch.setenv("RECKON_HARDWARE_FILE", str(hardware))
    argv = [*DONE[:-1], "my-chip", "--deadline", "365d"]

    code, out, _ = reckon(capsys, argv)
    document = reckon_json(capsys, argv)

    assert code == 0 and "memory not checked: my-chip has no memory_gb" in out.splitlines()[1]
    assert document["bound"] == "time" and document["gpus"] == 7
    assert document["memory"]["fits"] is None and document["memory"]["chip_bytes"] is None
    assert "planned by time alone" in document["memory"]["note"]


def test_the_memory_options_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("estimate", "plan", "sensitivity"):
        code, out, _ = reckon(capsys, [command, "--help"])
        assert code == 0 and all(
            option in out for option in ("--sharding", "--optimizer", "--micro-batch")
        )
