"""Calibration that follows the job's scale, as a planner meets it: runs at 8 to 256 GPUs
whose utilization falls with GPU count are refitted through the real database; the set
stores the slope and the fitted range, a calibrated estimate moves with the GPU count, and
a plan beyond the history says so in the CLI, its JSON and the API (issue 20)."""

from __future__ import annotations

import json
import math

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main
from tests.integration.history import Truth, simulate

A100 = Truth("a100-80gb", "bf16", 0.40, 0.10)
SLOPE = -0.12  # utilization falls 8% per doubling of GPUs
MODEL = ["--params", "7e9", "--tokens", "3e10", "--gpu", "a100-80gb", "--precision", "bf16",
         "--recompute", "full"]  # fmt: skip


def reckon(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.fixture
def scaled(cli_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]) -> str:
    simulate(engine, [A100], 60, gpu_counts=(8, 16, 32, 64, 128, 256), gpu_slope=SLOPE)
    assert reckon(capsys, "refit", "--force")[0] == 0
    return cli_env


def test_the_refit_learns_the_slope_and_estimates_follow_the_gpu_count(
    scaled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, listed = reckon(capsys, "factors", "--json")
    [segment] = [
        row for row in json.loads(listed)["segments"] if row["segment"] == "a100-80gb/bf16"
    ]
    assert segment["gpus_slope"] == pytest.approx(SLOPE, abs=0.03)
    assert (segment["gpus_min"], segment["gpus_max"]) == (8, 256)
    per_doubling = 100 * (2 ** segment["gpus_slope"] - 1)  # the dashboard's caption says it
    assert segment["gpus_slope_words"].startswith(
        f"{per_doubling:+.1f}% utilization per doubling of GPUs (90% range "
    )

    answers = {}
    for gpus in (16, 256):
        code, out = reckon(
            capsys, "estimate", *MODEL, "--gpus", str(gpus), "--calibrated", "--json"
        )
        assert code == 0
        answers[gpus] = json.loads(out)
    ratio = answers[256]["utilization"] / answers[16]["utilization"]
    assert ratio == pytest.approx(16**SLOPE, rel=0.08)
    assert answers[256]["extrapolated"] == []


def test_a_plan_beyond_the_history_says_so_everywhere(
    scaled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = reckon(capsys, "estimate", *MODEL, "--gpus", "1024", "--calibrated")
    _, out = reckon(capsys, "estimate", *MODEL, "--gpus", "1024", "--calibrated", "--json")
    _, plan = reckon(capsys, "plan", *MODEL, "--deadline", "4h", "--calibrated", "--json")

    assert code == 0 and "extrapolated     1,024 GPUs, history 8–256" in text
    assert json.loads(out)["extrapolated"] == ["1,024 GPUs, history 8–256"]
    planned = json.loads(plan)
    assert planned["gpus"] > 256 and planned["extrapolated"][0].endswith("GPUs, history 8–256")
    with TestClient(create_app(build(Settings()))) as api:
        query: dict[str, str | int | bool] = {
            "params": "7e9", "tokens": "3e10", "gpu": "a100-80gb", "precision": "bf16",
            "recompute": "full", "gpus": 1024, "calibrated": True,
        }  # fmt: skip
        answer = api.get("/v1/estimate", params=query).json()
    assert answer["extrapolated"] == ["1,024 GPUs, history 8–256"]


def test_reckon_factors_prints_the_slope_per_doubling_with_its_range(
    scaled: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = reckon(capsys, "factors")
    [line] = [line for line in out.splitlines() if line.startswith("scale: ")]
    per_doubling = 100 * (2**SLOPE - 1)  # -8.0%
    shown = float(line.split("%")[0].removeprefix("scale: "))
    assert code == 0 and shown == pytest.approx(per_doubling, abs=2.0)
    assert "per doubling of GPUs (90% range" in line and "fitted over 8-256" in line


def test_a_planned_global_batch_moves_a_calibrated_estimate_by_its_tokens_per_gpu(
    cli_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Runs whose utilization rises 12% per doubling of the tokens each GPU gets per step,
    # at every GPU count: the refit keeps a batch slope, and an estimate that states its
    # global batch (--global-batch-tokens) is moved by it; one that does not is not.
    simulate(
        engine, [A100], 72, gpu_counts=(8, 64, 512), batch_per_gpu=(1024, 4096, 16384),
        batch_slope=0.16,
    )  # fmt: skip
    assert reckon(capsys, "refit", "--force")[0] == 0
    _, listed = reckon(capsys, "factors", "--json")
    [segment] = [r for r in json.loads(listed)["segments"] if r["segment"] == "a100-80gb/bf16"]
    assert segment["batch_slope"] == pytest.approx(0.16, abs=0.04)

    utilization = {}
    for batch in ("64K", "1M", None):
        extra = [] if batch is None else ["--global-batch-tokens", batch]
        code, out = reckon(
            capsys, "estimate", *MODEL, "--gpus", "64", *extra, "--calibrated", "--json"
        )
        assert code == 0
        answer = json.loads(out)
        assert answer["global_batch_tokens"] == (None if batch is None else
                                                 {"64K": 64e3, "1M": 1e6}[batch])  # fmt: skip
        utilization[batch] = answer["utilization"]
    assert utilization["1M"] / utilization["64K"] == pytest.approx(16**0.16, rel=0.1)
    _, text = reckon(capsys, "factors")
    assert "per doubling of tokens per GPU per step" in text


def communication_bound(gpus: float) -> float:
    """Flat while a job is small, falling ever faster as communication grows."""
    return 1.0 / (1.0 + math.pow(gpus / 512, 0.8))


def test_utilization_that_bends_with_gpu_count_is_said_and_followed_beyond_the_history(
    cli_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate(
        engine, [A100], 96, gpu_counts=(8, 16, 32, 64, 128, 256),
        gpus_factor=communication_bound,
    )  # fmt: skip
    assert reckon(capsys, "refit", "--force")[0] == 0
    _, listed = reckon(capsys, "factors", "--json")
    [segment] = [r for r in json.loads(listed)["segments"] if r["segment"] == "a100-80gb/bf16"]
    assert segment["gpus_curvature"] < 0.0
    assert [round(math.exp(segment[k])) for k in ("log_gpus_low", "log_gpus_high")] == [8, 256]
    _, text = reckon(capsys, "factors")
    [line] = [line for line in text.splitlines() if "per doubling of GPUs" in line]
    assert "GPUs, bending: " in line and "at 8 GPUs, " in line and "at 256 GPUs" in line

    utilization = {}
    for gpus in (8, 256, 2048):
        code, out = reckon(
            capsys, "estimate", *MODEL, "--gpus", str(gpus), "--calibrated", "--json"
        )
        assert code == 0
        utilization[gpus] = json.loads(out)["utilization"]
    truth = {gpus: communication_bound(gpus) for gpus in utilization}
    assert utilization[8] / utilization[256] == pytest.approx(truth[8] / truth[256], rel=0.1)
    # Beyond 256 along the tangent there: steeper than the slope at the history's middle.
    middle = 8 ** segment["gpus_slope"]  # 256 → 2,048 at the slope at the reference
    assert utilization[2048] / utilization[256] < middle
