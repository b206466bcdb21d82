"""Refit, factor sets, calibrated estimates and accuracy on real databases."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import Engine

from service.app import Reckon
from service.bootstrap import build
from service.config import Settings
from service.domain.inputs import parse_inputs
from service.entrypoints.cli.main import main
from service.presenters.json_loop import factor_history_view, factors_view
from tests.builders import SEED_ARGS, SEED_INPUTS
from tests.integration.history import START, Truth, simulate

A100 = Truth("a100-80gb", "bf16", 0.30, 0.10)
H100 = Truth("h100-sxm", "bf16", 0.45, 0.20)
NOW = START + timedelta(days=210)


class FixedClock:
    def now(self) -> datetime:
        return NOW


def app_for(database_url: str) -> Reckon:
    return build(Settings(database_url=database_url), clock=FixedClock())


def test_refit_recovers_the_true_factors_and_activates_the_first_set(
    engine: Engine, database_url: str
) -> None:
    simulate(engine, [A100, H100], 30)
    app = app_for(database_url)

    outcome = app.loop.refit()
    document = factors_view(app.factor_sets.show())
    app.close()

    assert outcome.activated and outcome.factor_set is not None
    assert document["version"] == 1 and document["active"] is True
    segments = {item["segment"]: item for item in document["segments"]}
    for truth in (A100, H100):
        fitted = segments[f"{truth.gpu}/{truth.precision}"]
        assert fitted["level"] == "segment" and fitted["n"] == 30
        assert fitted["utilization"] == pytest.approx(truth.utilization, rel=0.05)
        assert fitted["overhead"] == pytest.approx(truth.overhead, abs=0.03)
        assert fitted["utilization_p10"] < fitted["utilization"] < fitted["utilization_p90"]
    assert document["provenance"]["reconciliations"] == 60
    assert "Llama 3.1 405B" in document["provenance"]["prior_sources"]


def test_a_refit_with_nothing_new_makes_no_new_set(engine: Engine, database_url: str) -> None:
    simulate(engine, [A100], 10)
    app = app_for(database_url)
    first = app.loop.refit()
    second = app.loop.refit()
    forced = app.loop.refit(force=True)
    history = factor_history_view(app.factor_sets.history())
    app.close()

    assert first.factor_set is not None and second.factor_set is None
    assert "is current" in second.message
    assert forced.factor_set is not None and forced.factor_set.version == 2
    assert [item["version"] for item in history["versions"]] == [1, 2]


def test_calibrated_estimate_uses_the_active_set_and_records_it(
    engine: Engine, database_url: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    simulate(engine, [A100], 30)
    app = app_for(database_url)
    app.loop.refit()
    app.close()
    monkeypatch.setenv("RECKON_DATABASE_URL", database_url)
    args = [a for a in SEED_ARGS if a not in ("--utilization", "0.4")]

    assert main(["estimate", *args, "--calibrated", "--save", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert main(["estimates", "show", answer["id"], "--json"]) == 0
    stored = json.loads(capsys.readouterr().out)
    assert main(["estimate", *args, "--calibrated"]) == 0
    human = capsys.readouterr().out

    assert answer["factor_set"] == 1 and answer["factor_source"] == "segment"
    # The simulated recompute modes do not differ, so they share the segment's entry.
    assert answer["factor_segment"] == "a100-80gb/bf16"
    assert answer["wall_seconds_p10"] < answer["wall_seconds"] < answer["wall_seconds_p90"]
    assert answer["utilization"] == pytest.approx(A100.utilization, rel=0.05)
    assert stored["factor_set"] == 1 and stored["factor_source"] == "segment"
    assert stored["wall_seconds_p10"] == answer["wall_seconds_p10"]
    assert "P10 / P50 / P90" in human and "factor set 1, segment level" in human


def test_without_any_factor_set_calibration_uses_the_wide_prior(
    database_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RECKON_DATABASE_URL", database_url)
    args = [a for a in SEED_ARGS if a not in ("--utilization", "0.4")]
    assert main(["estimate", *args, "--calibrated", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["factor_set"] is None and answer["factor_source"] == "prior"
    assert answer["wall_seconds_p90"] / answer["wall_seconds_p10"] > 3  # deliberately wide
    assert main(["estimate", *SEED_ARGS, "--calibrated"]) == 2  # u given and calibrated
    assert main(["estimate", *args, "--factor-set", "7"]) == 3


def test_a_gpu_without_its_own_runs_borrows_its_precisions_level_across_gpus(
    engine: Engine, database_url: str
) -> None:
    simulate(engine, [A100, H100], 10)
    app = app_for(database_url)
    app.loop.refit()
    inputs = parse_inputs({**SEED_INPUTS, "gpu": "mi300x", "utilization": None})
    same_precision = app.planning.estimate(inputs, calibrated=True).calibrated
    new_precision = app.planning.estimate(
        parse_inputs({**SEED_INPUTS, "gpu": "mi300x", "precision": "fp8", "utilization": None}),
        calibrated=True,
    ).calibrated
    app.close()
    assert same_precision is not None and new_precision is not None
    assert same_precision.factors.level == "precision"
    assert same_precision.factors.segment == f"*/{A100.precision}"
    assert new_precision.factors.level == "all" and new_precision.factors.segment == "*"
    assert same_precision.factor_set == 1


def test_accuracy_shows_calibration_beating_the_raw_u_0_4_plans(
    engine: Engine, database_url: str, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    simulate(engine, [A100, H100], 30)
    monkeypatch.setenv("RECKON_DATABASE_URL", database_url)

    assert main(["accuracy", "--by", "gpu_type", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert main(["accuracy", "--by", "month"]) == 0
    table = capsys.readouterr().out

    overall = document["overall"]
    assert overall["raw"]["n"] == 60
    assert overall["calibrated"]["n"] == 60
    assert overall["calibrated"]["median_ape"] < overall["raw"]["median_ape"] / 2
    groups = {group["group"]: group for group in document["groups"]}
    # a100 ran at u = 0.30 with 10% overhead against plans at u = 0.4, f = 0: too short.
    assert groups["a100-80gb"]["raw"]["bias"] == pytest.approx(100 * (0.3 * 0.9 / 0.4 - 1), abs=4)
    assert groups["a100-80gb"]["raw"]["coverage"] is None  # raw plans had no range
    assert 0.5 <= groups["a100-80gb"]["calibrated"]["coverage"] <= 1.0
    # Side by side, each with its n; a group is flagged only where calibration loses.
    assert groups["a100-80gb"]["calibrated"]["n"] == groups["a100-80gb"]["raw"]["n"] == 30
    assert groups["a100-80gb"]["calibrated_worse"] is False
    assert groups["a100-80gb"]["fallback"] is False
    assert "2026-01" in table and "calibrated" in table
    assert main(["accuracy", "--by", "nonsense"]) == 2


RAW_EXACT = [
    Truth(gpu, "bf16", 0.40, 0.0)
    for gpu in ("mi300x", "a100-40gb", "a100-80gb", "h100-pcie", "h100-sxm", "h200", "b200", "l40s")
]


def test_a_refit_that_backtests_worse_than_raw_activates_no_calibrated_segment(
    engine: Engine, database_url: str
) -> None:
    # Eight GPUs, two runs each, all running at what the raw default plans (u 0.4, f 0):
    # nothing calibration can learn beats raw, and no segment has enough runs to be judged.
    simulate(engine, RAW_EXACT, 2)
    app = app_for(database_url)

    outcome = app.loop.refit()
    document = factors_view(app.factor_sets.show())
    h200 = parse_inputs({**SEED_INPUTS, "gpu": "h200", "utilization": None})
    answer = app.planning.estimate(h200, calibrated=True).calibrated
    raw = app.planning.estimate(h200).estimate
    accuracy = app.queries.accuracy(by="gpu_type")
    app.close()

    assert outcome.factor_set is not None
    provenance = document["provenance"]
    assert provenance["backtest_median_ape"] > provenance["backtest_raw_median_ape"]
    live = [item for item in document["segments"] if item["segment"] != "prior"]
    assert live and all(item["fallback"] for item in live)
    assert all(group.fallback for group in accuracy.groups)
    assert accuracy.overall.calibrated_worse is True
    # The planner gets raw (the request's own factors) and is told so.
    assert answer is not None and answer.factors.fallback
    assert answer.estimate.wall_seconds == pytest.approx(raw.wall_seconds)


def test_a_set_that_beats_raw_is_activated_without_fallbacks(
    engine: Engine, database_url: str
) -> None:
    simulate(engine, [A100, H100], 30)  # both far from the raw u = 0.4, f = 0
    app = app_for(database_url)
    outcome = app.loop.refit()
    app.close()

    assert outcome.activated and outcome.factor_set is not None
    assert not any(item.fallback for item in outcome.factor_set.segments.values())
    provenance = outcome.factor_set.provenance
    calibrated, raw = provenance["backtest_median_ape"], provenance["backtest_raw_median_ape"]
    assert isinstance(calibrated, float) and isinstance(raw, float) and calibrated < raw
