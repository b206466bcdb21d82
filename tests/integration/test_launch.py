"""`reckon launch` around real child Python processes that use MLflow's own fluent API, and
the run-context plugin (plugin/) in a child that only calls mlflow.start_run()/end_run().
Real MLflow server, real databases, the ordinary reconcile pass afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient
from sqlalchemy import Engine

from demo.mlflow_server import MlflowServer, free_port
from service.adapters.db import locks
from service.adapters.db.unit_of_work import SqlUnitOfWork
from service.adapters.mlflow.launch import MlflowLaunchRuns
from service.adapters.mlflow.source import MlflowRunSource
from service.bootstrap import SystemClock
from service.domain.errors import InputError, NotFoundError, UnavailableError
from service.domain.records import ESTIMATE_TAG
from service.usecases import registry
from service.usecases.launch import LaunchOptions, exit_status, launch
from service.usecases.launch import experiment_name as launch_experiment
from service.usecases.nightly.passes import PassOptions, run_pass
from service.usecases.results.loop import PassOutcome
from tests.builders import an_estimate

pytestmark = pytest.mark.mlflow

# The estimate's tokens and the child's whole-job tokens/s: 1.6 s of compute, at a physically
# plausible utilization for the seed model on 8 A100s (about 0.11), and a share of the
# launches' wall time that stays inside Reckon's plausible overhead (at most 0.95) even on
# a busy machine (0.4 s of compute fell outside it when two processes took 10 s).
TOKENS = 8e3
TOKENS_PER_SECOND = 5.0e3

# A training script as a user writes it: fluent MLflow, nothing about Reckon. It logs a
# throughput and exits with the code it is given (1: a crash mid-training).
TRAINING_SCRIPT = """
import sys, time, mlflow
mlflow.start_run()
mlflow.log_metric("tokens_per_second", float(sys.argv[2]))
time.sleep(0.3)
sys.exit(int(sys.argv[1]))
"""

# A framework that ignores MLFLOW_RUN_ID and starts its own run (as Lightning does); the
# plugin tags it from RECKON_ESTIMATE_ID. Writes a marker once its run exists.
OWN_RUN_SCRIPT = """
import os, sys, time, mlflow
os.environ.pop("MLFLOW_RUN_ID", None)
mlflow.set_experiment(experiment_id=os.environ["MLFLOW_EXPERIMENT_ID"])
with mlflow.start_run() as run:
    mlflow.log_metric("loss", 1.0)
    open(sys.argv[1], "w").write(run.info.run_id)
    time.sleep(float(sys.argv[2]))
"""


def save_estimate(engine: Engine) -> str:
    saved = registry.save(SqlUnitOfWork(engine), an_estimate(tokens=TOKENS), now=datetime.now(UTC))
    return saved.id


def reconcile(engine: Engine, server: MlflowServer, experiment_id: str) -> PassOutcome:
    source = MlflowRunSource(server.uri, [experiment_id], "tokens_per_second", retries=0)
    return run_pass(
        SqlUnitOfWork(engine), source, locks.pass_lock(engine), SystemClock(),
        PassOptions(write_back=False, full=True),
    )  # fmt: skip


def script(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def experiment_name(client: MlflowClient, experiment_id: str) -> str:
    return str(client.get_experiment(experiment_id).name)


def test_a_failed_then_a_finished_launch_reconcile_with_the_failure_as_overhead(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    estimate_id = save_estimate(engine)
    train = script(tmp_path, "train.py", TRAINING_SCRIPT)
    name = experiment_name(mlflow_client, experiment_id)

    outcomes = [
        launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(mlflow_server.uri),
            LaunchOptions(
                estimate_id,
                (sys.executable, train, str(code), str(TOKENS_PER_SECOND)),
                experiment=name,
            ),
        )
        for code in (1, 0)
    ]

    assert [(item.exit_code, item.status) for item in outcomes] == [(1, "FAILED"), (0, "FINISHED")]
    runs = [mlflow_client.get_run(item.run_id) for item in outcomes]
    assert [run.info.status for run in runs] == ["FAILED", "FINISHED"]
    assert all(run.data.tags[ESTIMATE_TAG] == estimate_id for run in runs)
    # the estimate's configuration is the plan, never what the run states about itself
    assert runs[0].data.tags["reckon.planned.gpu"] == "a100-80gb"
    assert runs[0].data.tags["reckon.planned.gpus"] == "8"
    assert not {"reckon.gpu", "reckon.gpus", "reckon.tokens"} & set(runs[0].data.tags)
    assert runs[0].data.metrics["tokens_per_second"] == TOKENS_PER_SECOND  # logged into it

    result = reconcile(engine, mlflow_server, experiment_id)

    [item] = result.reconciled
    assert item.estimate_id == estimate_id and item.failed_segments == 1
    assert item.run_ids == tuple(run.info.run_id for run in runs)
    first_start, last_end = runs[0].info.start_time, runs[1].info.end_time
    assert item.observed_seconds == pytest.approx((last_end - first_start) / 1000, abs=1e-3)
    compute = TOKENS / TOKENS_PER_SECOND
    assert item.observed_compute_seconds == pytest.approx(compute)
    second_alone = (runs[1].info.end_time - runs[1].info.start_time) / 1000
    assert item.implied_overhead == pytest.approx(1 - compute / item.observed_seconds)
    assert item.implied_overhead > 1 - compute / second_alone  # the failed segment counts


def test_launch_deletes_its_empty_run_when_the_command_logged_into_its_own(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    estimate_id = save_estimate(engine)
    marker = tmp_path / "run_id"
    own = script(tmp_path, "own.py", OWN_RUN_SCRIPT)

    outcome = launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(mlflow_server.uri),
        LaunchOptions(estimate_id, (sys.executable, own, str(marker), "0.1"),
                      experiment=experiment_name(mlflow_client, experiment_id)),
    )  # fmt: skip

    child_run = marker.read_text()
    assert outcome.child_run_ids == (child_run,) and outcome.deleted_pre_created
    assert mlflow_client.get_run(outcome.run_id).info.lifecycle_stage == "deleted"
    assert mlflow_client.get_run(child_run).data.tags[ESTIMATE_TAG] == estimate_id


def test_sigterm_to_launch_is_forwarded_and_the_run_ends_killed(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    estimate_id = save_estimate(engine)
    marker = tmp_path / "run_id"
    own = script(tmp_path, "own.py", OWN_RUN_SCRIPT)

    def stop_when_training() -> None:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # as a scheduler would stop the job

    stopper = threading.Thread(target=stop_when_training)
    stopper.start()
    outcome = launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(mlflow_server.uri),
        LaunchOptions(estimate_id, (sys.executable, own, str(marker), "60"),
                      experiment=experiment_name(mlflow_client, experiment_id)),
    )  # fmt: skip
    stopper.join()

    assert (outcome.status, outcome.exit_code) == ("KILLED", 128 + signal.SIGTERM)
    assert mlflow_client.get_run(marker.read_text()).info.status == "KILLED"


PRECISION_SCRIPT = """
import os, mlflow
mlflow.start_run()
mlflow.log_param("seen_precision", os.environ.get("RECKON_PRECISION", ""))
"""


def test_launch_precision_is_tagged_as_observed_and_passed_to_the_job(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    estimate_id = save_estimate(engine)
    job = script(tmp_path, "job.py", PRECISION_SCRIPT)
    options = LaunchOptions(
        estimate_id, (sys.executable, job),
        experiment=experiment_name(mlflow_client, experiment_id), precision="BF16",
    )  # fmt: skip

    outcome = launch(SqlUnitOfWork(engine), MlflowLaunchRuns(mlflow_server.uri), options)

    run = mlflow_client.get_run(outcome.run_id)
    assert run.data.tags["reckon.precision"] == "bf16"  # observed: what the job trains in
    assert run.data.tags["reckon.planned.precision"] == "bf16"
    assert run.data.params["seen_precision"] == "bf16"  # the plugin tags a job's own run
    before = len(mlflow_client.search_runs([experiment_id]))
    with pytest.raises(InputError, match="--precision 'fp9': use one of"):
        launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(mlflow_server.uri),
            LaunchOptions(estimate_id, (sys.executable, job), precision="fp9"),
        )
    assert len(mlflow_client.search_runs([experiment_id])) == before  # nothing created


def test_launch_refuses_an_unknown_estimate_and_an_empty_command(
    engine: Engine, mlflow_server: MlflowServer
) -> None:
    with pytest.raises(NotFoundError, match="no estimate with id 'nosuch'"):
        launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(mlflow_server.uri),
            LaunchOptions("nosuch", ("true",)),
        )
    with pytest.raises(InputError, match="give the command after --"):
        launch(
            SqlUnitOfWork(engine), MlflowLaunchRuns(mlflow_server.uri), LaunchOptions("nosuch", ())
        )


def test_plugin_tags_a_run_the_script_starts_itself_and_the_pass_reconciles_it(
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
) -> None:
    installed = {item.name for item in entry_points(group="mlflow.run_context_provider")}
    assert "reckon" in installed, "the run-context plugin is not installed: pip install ./plugin"
    estimate_id = save_estimate(engine)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "MLFLOW_EXPERIMENT_ID": experiment_id,
        "RECKON_ESTIMATE_ID": estimate_id,
        "WORLD_SIZE": "8",
        "RECKON_PRECISION": "BF16",
    }
    env.pop("MLFLOW_RUN_ID", None)
    code = "import mlflow; run = mlflow.start_run(); print(run.info.run_id); mlflow.end_run()"

    child = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )

    run = mlflow_client.get_run(child.stdout.strip().splitlines()[-1])
    assert run.data.tags[ESTIMATE_TAG] == estimate_id
    assert run.data.tags["reckon.gpus"] == "8"
    assert run.data.tags["reckon.precision"] == "bf16"  # what the job said it trains in
    result = reconcile(engine, mlflow_server, experiment_id)
    assert [item.estimate_id for item in result.reconciled] == [estimate_id]
    assert result.reconciled[0].run_ids == (run.info.run_id,)


def test_the_plugin_leaves_out_a_precision_it_does_not_know(
    mlflow_server: MlflowServer, mlflow_client: MlflowClient, experiment_id: str
) -> None:
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "MLFLOW_EXPERIMENT_ID": experiment_id,
        "RECKON_ESTIMATE_ID": "0123456789abcdef",
        "RECKON_PRECISION": "${PRECISION}",
    }
    env.pop("MLFLOW_RUN_ID", None)
    code = "import mlflow; run = mlflow.start_run(); print(run.info.run_id); mlflow.end_run()"

    child = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )

    run = mlflow_client.get_run(child.stdout.strip().splitlines()[-1])
    assert "reckon.precision" not in run.data.tags


@pytest.mark.parametrize(
    ("return_code", "signalled", "expected"),
    [
        (0, False, ("FINISHED", 0)),
        (1, False, ("FAILED", 1)),
        (-signal.SIGKILL, False, ("KILLED", 128 + signal.SIGKILL)),
        (130, True, ("KILLED", 130)),  # the child caught the forwarded SIGINT and exited
        (0, True, ("KILLED", 0)),
    ],
)
def test_exit_status_maps_the_childs_end_to_a_run_status_and_a_shell_code(
    return_code: int, signalled: bool, expected: tuple[str, int]
) -> None:
    assert exit_status(return_code, signalled) == expected


def test_experiment_is_the_flag_then_mlflows_variable_then_reckons_first() -> None:
    env = {"MLFLOW_EXPERIMENT_NAME": "from-env"}
    options = LaunchOptions("e1", ("true",))

    assert launch_experiment(LaunchOptions("e1", ("true",), "flag"), env, ["a"]) == "flag"
    assert launch_experiment(options, env, ["a"]) == "from-env"
    assert launch_experiment(options, {}, ["a", "b"]) == "a"
    assert launch_experiment(options, {}, []) == "Default"


def test_launch_against_an_unreachable_mlflow_is_one_line_and_runs_nothing(
    engine: Engine, mlflow_server: MlflowServer, tmp_path: Path
) -> None:
    estimate_id = save_estimate(engine)
    marker = tmp_path / "ran"
    command = (sys.executable, "-c", f"open({str(marker)!r}, 'w')")

    with pytest.raises(UnavailableError, match=r"MLflow at http://127\.0\.0\.1:") as raised:
        launch(
            SqlUnitOfWork(engine),
            MlflowLaunchRuns(f"http://user:secret@127.0.0.1:{free_port()}"),
            LaunchOptions(estimate_id, command),
        )

    assert "secret" not in str(raised.value) and "\n" not in str(raised.value)
    assert not marker.exists()


def test_reckon_launch_on_the_command_line_exits_with_the_commands_code_and_links_both_runs(
    cli_env: str,
    engine: Engine,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
    experiment_id: str,
    tmp_path: Path,
) -> None:
    estimate_id = save_estimate(engine)
    train = script(tmp_path, "train.py", TRAINING_SCRIPT)
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": mlflow_server.uri,
        "RECKON_EXPERIMENTS": experiment_name(mlflow_client, experiment_id),
        "RECKON_WRITE_BACK_TAGS": "false",
    }
    reckon = str(Path(sys.executable).with_name("reckon"))

    codes = [
        subprocess.run(
            [reckon, "launch", "--estimate", estimate_id, "--",
             sys.executable, train, str(code), str(TOKENS_PER_SECOND)],
            env=env, capture_output=True, text=True, timeout=120, check=False,
        ).returncode
        for code in (1, 0)
    ]  # fmt: skip
    passed = subprocess.run(
        [reckon, "reconcile", "--full", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert codes == [1, 0]
    runs = mlflow_client.search_runs([experiment_id], order_by=["attributes.start_time ASC"])
    assert [run.info.status for run in runs] == ["FAILED", "FINISHED"]
    assert {run.data.tags[ESTIMATE_TAG] for run in runs} == {estimate_id}
    assert passed.returncode == 0, passed.stderr
    assert json.loads(passed.stdout)["reconciled_estimates"] == [estimate_id]
    with SqlUnitOfWork(engine) as uow:
        (item,) = uow.reconciliations.for_estimates([estimate_id]).values()
    assert item.failed_segments == 1 and item.implied_overhead is not None
