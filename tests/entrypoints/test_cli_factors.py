"""Factor sets as an operator meets them through the real entry points: list every set,
activate an earlier one (a rollback) and a later one again, over the CLI and the API; and
the shared vocabulary (`--by gpu`, `--factor-set`, `--since 30d`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from service.bootstrap import build
from service.config import Settings
from service.entrypoints.api.app import create_app
from service.entrypoints.cli.main import main
from tests.integration.history import Truth, simulate

A100 = Truth("a100-80gb", "bf16", 0.30, 0.10)


def reckon(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def two_sets(cli_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]) -> Iterator[str]:
    simulate(engine, [A100], 12)
    assert reckon(capsys, "refit")[0] == 0
    assert reckon(capsys, "refit", "--force")[0] == 0
    yield cli_env


def test_factors_list_shows_every_set_and_which_is_active(
    two_sets: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = reckon(capsys, "factors", "list", "--json")
    versions = json.loads(out)["versions"]
    _, human, _ = reckon(capsys, "factors", "list")

    assert code == 0 and [v["version"] for v in versions] == [1, 2]
    assert [v["active"] for v in versions] == [False, True]
    assert all(v["reconciliation_count"] == 12 for v in versions)
    header, first, second = human.splitlines()
    assert "backtest" in header and first.split()[0] == "1" and second.split()[0] == "2"
    assert "active" in second and "active" not in first


def test_activating_an_earlier_set_rolls_back_and_activating_the_later_undoes_it(
    two_sets: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = reckon(capsys, "factors", "activate", "1", "--json")
    assert code == 0 and json.loads(out)["version"] == 1 and json.loads(out)["active"] is True
    _, out, _ = reckon(capsys, "factors", "--json")
    assert json.loads(out)["version"] == 1  # calibrated estimates now use set 1

    assert reckon(capsys, "factors", "activate", "2")[0] == 0
    _, out, _ = reckon(capsys, "factors", "--factor-set", "1", "--json")
    assert json.loads(out)["version"] == 1 and json.loads(out)["active"] is False
    code, _, err = reckon(capsys, "factors", "activate", "9")
    assert code == 3 and "no factor set with version 9" in err


def test_a_refit_with_nothing_new_leaves_a_hand_activated_set_active(
    two_sets: str, capsys: pytest.CaptureFixture[str]
) -> None:
    reckon(capsys, "factors", "activate", "1")

    reckon(capsys, "refit")
    _, out, _ = reckon(capsys, "factors", "--json")

    assert json.loads(out)["version"] == 1


def test_factor_sets_are_activated_over_http_with_the_token(two_sets: str) -> None:
    settings = Settings(database_url=two_sets, api_token="t0ken")
    with TestClient(create_app(build(settings))) as api:
        refused = api.post("/v1/factors/1/activate")
        done = api.post("/v1/factors/1/activate", headers={"Authorization": "Bearer t0ken"})
        missing = api.post("/v1/factors/7/activate", headers={"Authorization": "Bearer t0ken"})
        active = api.get("/v1/factors").json()

    assert refused.status_code == 401 and done.status_code == 200
    assert missing.status_code == 404 and active["version"] == 1


def test_the_shared_vocabulary_is_accepted(
    two_sets: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, by_gpu, _ = reckon(capsys, "accuracy", "--by", "gpu", "--json")
    _, by_type, _ = reckon(capsys, "accuracy", "--by", "gpu_type", "--json")
    code, recent, _ = reckon(capsys, "history", "--since", "3650d", "--json")
    help_text = reckon(capsys, "accuracy", "--help")[1]

    assert json.loads(by_gpu)["groups"] == json.loads(by_type)["groups"]
    assert code == 0 and len(json.loads(recent)["history"]) == 12
    assert "alias" in help_text


def test_metrics_export_raw_and_calibrated_error_and_coverage_of_the_active_set(
    cli_env: str, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    simulate(engine, [A100, Truth("h100-sxm", "bf16", 0.45, 0.2)], 30)
    assert reckon(capsys, "refit")[0] == 0
    _, out, _ = reckon(capsys, "factors", "--json")
    provenance = json.loads(out)["provenance"]

    with TestClient(create_app(build(Settings(database_url=cli_env)))) as api:
        text = api.get("/metrics").text

    raw, calibrated = provenance["backtest_raw_median_ape"], provenance["backtest_median_ape"]
    assert f'reckon_backtest_median_abs_error_pct{{prediction="raw"}} {raw}' in text
    assert f'reckon_backtest_median_abs_error_pct{{prediction="calibrated"}} {calibrated}' in text
    assert f"reckon_backtest_coverage_ratio {provenance['backtest_coverage']}" in text
    assert f"reckon_backtest_targets {float(provenance['backtest_targets'])}" in text


def test_accuracy_says_which_n_is_which_and_names_the_n_of_factors(
    two_sets: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _, scored, _ = reckon(capsys, "accuracy")
    _, factors, _ = reckon(capsys, "factors")

    note = next(line for line in scored.splitlines() if line.startswith("n: "))
    assert "raw scores every reconciled forecast (12)" in note
    assert "Factor set 2 was fitted on 12 runs" in note and "`reckon factors`" in note
    assert factors.startswith("factor set 2 (active), fitted on 12 reconciled runs")
    document = json.loads(reckon(capsys, "accuracy", "--json")[1])
    assert (document["factor_set"], document["fitted_on"]) == (2, 12)
    assert document["counts_note"] == note
