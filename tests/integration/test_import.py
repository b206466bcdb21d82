"""`reckon import` against a real MLflow server and real databases: one experiment per
logging profile, runs logged exactly as each framework logs them (see framework_runs.py for
the source file each follows), none linked to an estimate and none logging
tokens_per_second (except Reckon's own), generated from a known utilization and overhead;
the import must recover both within 1%. Then the captured real runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer
from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.calibration import priors
from service.domain.errors import InputError
from service.domain.hardware import Catalog, build_catalog
from service.domain.records import OVERHEAD_CLAMPED, Reconciliation, SavedEstimate
from service.entrypoints.cli.main import main
from service.profiles.profile_set import ProfileSet, load_profile_set
from service.usecases.importing import ImportOptions, import_runs
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import ImportOutcome
from tests.integration import framework_runs as frameworks
from tests.integration.conftest import CAPTURE_FP32
from tests.integration.framework_runs import Truth

pytestmark = pytest.mark.mlflow

DATA = Path(__file__).parents[1] / "data" / "trainer_runs"
H100_FP32 = 67e12  # h100-sxm dense fp32, service/domain/hardware.py


def started(days_ago: float) -> datetime:
    return datetime.now(UTC).replace(microsecond=0) - timedelta(days=days_ago)


def run_import(
    engine: Engine,
    server: MlflowServer,
    experiment_id: str,
    catalog: Catalog | None = None,
    profiles: ProfileSet | None = None,
    **flags: Any,
) -> ImportOutcome:
    source = MlflowRunSource(
        server.uri, [experiment_id], "tokens_per_second", retries=0, profiles=profiles
    )
    uow = SqlUnitOfWork(engine)
    options = ImportOptions(experiments=(experiment_id,), **flags)

    def reconcile():  # type: ignore[no-untyped-def]
        return run_pass(
            SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(),
            PassOptions(trigger="import", write_back=False),
        )  # fmt: skip

    return import_runs(
        uow,
        source,
        catalog or build_catalog(),
        priors.default_prior(),
        options,
        now=datetime.now(UTC),
        reconcile=reconcile,
    )


def stored(
    engine: Engine, outcome: ImportOutcome
) -> dict[str, tuple[SavedEstimate, Reconciliation]]:
    """run id -> (retrospective estimate, its reconciliation)."""
    with SqlUnitOfWork(engine) as uow:
        saved = uow.estimates.get_many(list(outcome.estimate_ids))
        results = uow.reconciliations.for_estimates(list(outcome.estimate_ids))
    by_estimate = {item.estimate_id: item for item in outcome.imported}
    return {
        by_estimate[estimate_id].run_id: (saved[estimate_id], results[estimate_id])
        for estimate_id in outcome.estimate_ids
    }


Builder = Callable[[MlflowClient, str, Truth, datetime], str]

PROFILES: list[tuple[str, Builder, Truth, dict[str, object]]] = [
    ("hf-trainer", frameworks.hf_trainer_run, Truth(), {"gpu": "h100-sxm"}),
    (
        "hf-trainer",
        lambda c, e, t, s: frameworks.hf_trainer_run(c, e, t, s, gradient_checkpointing=True),
        Truth(recompute=4 / 3, utilization=0.5, overhead=0.3),
        {"gpu": "h100-sxm"},
    ),
    ("composer", frameworks.composer_run, Truth(gpus=16, utilization=0.38), {"gpu": "h100-sxm"}),
    (
        "lightning",
        frameworks.lightning_run,
        Truth(gpus=4, overhead=0.1),
        {"gpu": "h100-sxm", "precision": "bf16"},
    ),
    ("nemo", frameworks.nemo_run, Truth(gpus=32, utilization=0.47), {"gpu": "h100-sxm"}),
    (
        "torchtitan",
        frameworks.torchtitan_run,
        Truth(gpus=8, utilization=0.35, overhead=0.25),
        {"gpu": "h100-sxm", "gpus": 8, "precision": "bf16"},
    ),
    ("reckon", frameworks.reckon_run, Truth(overhead=0.05), {"gpu": "h100-sxm"}),
]


@pytest.mark.parametrize(
    ("profile", "builder", "truth", "flags"),
    PROFILES,
    ids=[f"{name}-{index}" for index, (name, *_rest) in enumerate(PROFILES)],
)
def test_import_recovers_utilization_and_overhead_within_one_percent(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    profile: str,
    builder: Builder,
    truth: Truth,
    flags: dict[str, object],
) -> None:
    start = started(days_ago=3)
    run_id = builder(mlflow_client, experiment_id, truth, start)

    outcome = run_import(engine, mlflow_server, experiment_id, None, None, **flags)

    assert (outcome.runs_seen, len(outcome.imported), outcome.skipped) == (1, 1, ())
    assert outcome.reconciled == 1
    saved, result = stored(engine, outcome)[run_id]
    assert (saved.kind, saved.factor_source, saved.created_at) == ("retrospective", "prior", start)
    assert (saved.gpu, saved.gpus, saved.precision) == ("h100-sxm", truth.gpus, "bf16")
    assert (result.profile, result.kind, result.factors_kind) == (
        profile,
        "retrospective",
        "separate",
    )
    assert result.implied_utilization == pytest.approx(truth.utilization, rel=0.01)
    assert result.implied_overhead == pytest.approx(truth.overhead, rel=0.01)


def test_importing_twice_imports_nothing_new_and_reads_no_history(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frameworks.composer_run(mlflow_client, experiment_id, Truth(), started(2))
    frameworks.hf_trainer_run(mlflow_client, experiment_id, Truth(), started(1))
    first = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm")
    reads: list[str] = []
    original = MlflowRunSource._history

    def counted(self: MlflowRunSource, run_id: str, *rest: object) -> object:
        reads.append(run_id)
        return original(self, run_id, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(MlflowRunSource, "_history", counted)

    second = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm")

    assert len(first.imported) == 2 and first.reconciled == 2
    assert second.runs_seen == 2 and second.imported == ()
    assert {skip.reason for skip in second.skipped} == {"linked"}
    assert reads == []  # linked runs are not read again


def test_dry_run_stores_nothing_and_says_what_it_would_import(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = frameworks.nemo_run(mlflow_client, experiment_id, Truth(), started(1))

    dry = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm", dry_run=True)
    real = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm")

    assert [(item.run_id, item.estimate_id) for item in dry.imported] == [(run_id, None)]
    assert dry.dry_run and dry.estimate_ids == ()
    assert [item.run_id for item in real.imported] == [run_id]  # the dry run left no link


def test_incomplete_configuration_is_a_skip_with_the_flag_to_pass(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    titan = frameworks.torchtitan_run(mlflow_client, experiment_id, Truth(), started(2))
    hf = frameworks.hf_trainer_run(mlflow_client, experiment_id, Truth(), started(1))

    outcome = run_import(engine, mlflow_server, experiment_id)

    reasons = {skip.run_id: (skip.reason, skip.detail) for skip in outcome.skipped}
    assert reasons[hf] == ("no_gpu", "no GPU type: tag reckon.gpu or pass --gpu")
    assert reasons[titan][0] == "no_gpu"
    again = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm")
    assert {skip.run_id: skip.reason for skip in again.skipped} == {titan: "no_gpu_count"}


def test_nvml_gpu_name_in_a_tag_resolves_through_the_catalog(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = frameworks.hf_trainer_run(mlflow_client, experiment_id, Truth(), started(1))
    mlflow_client.set_tag(run_id, "reckon.gpu", "NVIDIA H100 80GB HBM3")

    outcome = run_import(engine, mlflow_server, experiment_id)

    assert [(item.run_id, item.gpu) for item in outcome.imported] == [(run_id, "h100-sxm")]


# --- the captured real runs -----------------------------------------------------------------


def test_captured_hf_runs_imply_the_utilization_their_trainer_reported(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    runs = {
        name: frameworks.replay_captured(mlflow_client, experiment_id, DATA / f"{name}.json")
        for name in ("hf_1", "hf_2")
    }

    outcome = run_import(engine, mlflow_server, experiment_id, capture_catalog, gpu="capture-cpu")

    results = stored(engine, outcome)
    for name, recompute in (("hf_1", 1.0), ("hf_2", 4 / 3)):
        run_id, notes = runs[name]
        side = notes["trainer_side"]
        runtime = side["train_output"]["metrics"]["train_runtime"]
        flops = 6 * side["n_params_no_embeddings"] * side["state_num_input_tokens_seen"]
        saved, result = results[run_id]
        assert saved.precision == "fp32" and saved.gpus == notes["devices"]
        assert result.implied_utilization == pytest.approx(
            flops * recompute / (CAPTURE_FP32 * runtime), rel=1e-6
        )
        # HF's timer starts before the MLflow run exists: train_runtime exceeds the run.
        assert runtime > result.observed_seconds
        assert (result.implied_overhead, result.note) == (0.0, OVERHEAD_CLAMPED)


def test_captured_lightning_runs_imply_the_flops_rate_their_trainer_measured(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    runs = {
        name: frameworks.replay_captured(mlflow_client, experiment_id, DATA / f"{name}.json")
        for name in ("lightning_2", "lightning_4")
    }

    outcome = run_import(
        engine, mlflow_server, experiment_id, capture_catalog, gpu="capture-cpu", precision="fp32"
    )

    results = stored(engine, outcome)
    for run_id, notes in runs.values():
        side = notes["trainer_side"]
        saved, result = results[run_id]
        assert result.implied_utilization is not None and result.implied_overhead is not None
        achieved = result.implied_utilization * CAPTURE_FP32  # FLOP/s while computing
        # The trainer's own last window, and its whole-run average, bracket the steady rate.
        last_window = side["logged_metrics"]["train/device/flops_per_sec"]
        flops = side["flops_per_batch_fwd_bwd"] * side["batches_seen"]
        average = flops / side["logged_metrics"]["train/time"]
        assert saved.estimate is not None
        assert saved.estimate.flops == pytest.approx(flops, rel=1e-9)
        assert achieved == pytest.approx(last_window, rel=0.15)
        assert achieved > average
        wall = side["wall_fit_call_s"][1] - side["wall_fit_call_s"][0]
        assert result.observed_seconds <= wall
        assert result.implied_overhead == pytest.approx(
            1 - flops / achieved / result.observed_seconds, rel=1e-6
        )
        assert 0 < result.implied_overhead < 1


def test_an_unknown_gpu_is_a_skip_and_an_unknown_flag_a_one_line_error(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    run_id = frameworks.hf_trainer_run(mlflow_client, experiment_id, Truth(), started(1))
    mlflow_client.set_tag(run_id, "reckon.gpu", "TPU v4")  # not in the catalog

    outcome = run_import(engine, mlflow_server, experiment_id)

    [skip] = outcome.skipped
    assert (skip.run_id, skip.reason) == (run_id, "unknown_gpu")
    assert "TPU v4" in skip.detail and "\n" not in skip.detail
    with pytest.raises(InputError, match="unknown GPU 'h900'"):
        run_import(engine, mlflow_server, experiment_id, gpu="h900")


def test_reckon_import_on_the_command_line_imports_once_and_reports_json(
    cli_env: str,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_server.uri)
    monkeypatch.setenv("RECKON_EXPERIMENTS", experiment_id)
    monkeypatch.setenv("RECKON_WRITE_BACK_TAGS", "false")
    composer = frameworks.composer_run(mlflow_client, experiment_id, Truth(gpus=16), started(4))
    frameworks.lightning_run(mlflow_client, experiment_id, Truth(gpus=4), started(3))

    first = main(["import", "--gpu", "h100-sxm", "--json"])
    report = json.loads(capsys.readouterr().out)
    again = main(["import", "--gpu", "h100-sxm", "--json"])
    repeat = json.loads(capsys.readouterr().out)
    assert main(["history", "--json"]) == 0
    history = json.loads(capsys.readouterr().out)["history"]

    assert first == 0 and report["runs_seen"] == 2 and report["reconciled"] == 1
    assert [item["run_id"] for item in report["imported"]] == [composer]
    assert [skip["reason"] for skip in report["skipped"]] == ["no_precision"]  # Lightning
    assert again == 0 and repeat["imported"] == []
    assert [row["kind"] for row in history] == ["retrospective"]
    assert history[0]["profile"] == "composer"


def test_a_run_that_logged_nothing_is_said_to_have_logged_nothing(
    engine: Engine, mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    # Lightning's default log_every_n_steps=50 over 40 steps: three hyperparameters, no metric.
    run_id, _notes = frameworks.replay_captured(
        mlflow_client, experiment_id, DATA / "lightning_default_log_1.json"
    )

    bare = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm")
    given = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm", gpus=2)

    for outcome in (bare, given):
        assert outcome.imported == ()
        (skip,) = outcome.skipped
        assert (skip.run_id, skip.reason) == (run_id, "no_metrics")
        assert "logged nothing Reckon reads" in skip.detail


def test_a_default_hf_run_without_a_token_count_is_imported_from_total_flos(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
) -> None:
    # transformers' default: include_num_input_tokens_seen off, so no token count is logged.
    runs = {
        name: frameworks.replay_captured(mlflow_client, experiment_id, DATA / f"{name}.json")
        for name in ("hf_default_1", "hf_ddp_1")
    }

    outcome = run_import(engine, mlflow_server, experiment_id, capture_catalog, gpu="capture-cpu")

    assert outcome.skipped == ()
    results = stored(engine, outcome)
    for name, gpus in (("hf_default_1", 1), ("hf_ddp_1", 2)):
        run_id, _notes = runs[name]
        logged = json.loads((DATA / f"{name}.json").read_text())["latest_metrics"]
        saved, result = results[run_id]
        assert saved.gpus == gpus and saved.estimate is not None
        mfu = logged["total_flos"] / (gpus * CAPTURE_FP32 * logged["train_runtime"])
        recompute = saved.estimate.request.recompute_factor or 1.0
        assert result.implied_utilization == pytest.approx(mfu * recompute, rel=0.01)
        assert saved.estimate.flops == pytest.approx(logged["total_flos"], rel=1e-9)


def test_a_composer_run_gets_its_precision_from_the_profiles_file_by_experiment_name(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    capture_catalog: Catalog,
    tmp_path: Path,
) -> None:
    # Composer logs no precision unless auto_log_hparams=True (off by default).
    run_id, _notes = frameworks.replay_captured(
        mlflow_client, experiment_id, DATA / "composer_1.json"
    )
    name = mlflow_client.get_experiment(experiment_id).name
    path = tmp_path / "profiles.toml"
    path.write_text(f'[[defaults]]\nexperiment = "{name}"\nprecision = "fp32"\n')

    without = run_import(engine, mlflow_server, experiment_id, capture_catalog, gpu="capture-cpu")
    with_file = run_import(
        engine, mlflow_server, experiment_id, capture_catalog, load_profile_set(path),
        gpu="capture-cpu",
    )  # fmt: skip

    assert [(skip.run_id, skip.reason) for skip in without.skipped] == [(run_id, "no_precision")]
    assert [(item.run_id, item.precision) for item in with_file.imported] == [(run_id, "fp32")]


@pytest.mark.parametrize("size", ["1e200", "5e-324"])
def test_one_run_the_estimator_refuses_is_skipped_alone_and_named(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    size: str,
) -> None:
    ordinary = frameworks.hf_trainer_run(mlflow_client, experiment_id, Truth(), started(2))
    start = started(1)
    tags = {"reckon.gpu": "h100-sxm", "reckon.gpus": "8", "reckon.precision": "bf16",
            "reckon.params": size, "reckon.tokens": size}  # fmt: skip
    odd = mlflow_client.create_run(
        experiment_id, start_time=int(start.timestamp() * 1000), tags=tags
    ).info.run_id
    mlflow_client.set_terminated(
        odd, "FINISHED", end_time=int(start.timestamp() * 1000) + 3_600_000
    )

    for dry_run in (True, False):
        outcome = run_import(engine, mlflow_server, experiment_id, gpu="h100-sxm", dry_run=dry_run)
        assert [item.run_id for item in outcome.imported] == [ordinary]
        (skip,) = outcome.skipped
        assert (skip.run_id, skip.reason) == (odd, "bad_configuration")
        assert odd in skip.detail
