"""The run-context plugin as a training image gets it: installed into an image that already
has the MLflow 2.22.5 client (it must keep that client, not replace it), and in this
checkout's environment (the 3.x client). A training job that starts a run with whatever
RECKON_ESTIMATE_ID holds never fails over it: a usable id tags the run, anything else is
left out with one warning on stderr. A real `mlflow server` takes the runs."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from collections.abc import Mapping
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from demo.mlflow_server import MlflowServer, unique_name

pytestmark = pytest.mark.mlflow

ROOT = Path(__file__).resolve().parents[2]
OLD_CLIENT = "2.22.5"
INSTALL_SECONDS = 600
TRAINER = """
import mlflow
with mlflow.start_run() as run:
    mlflow.log_metric("loss", 1.0)
print(run.info.run_id)
"""
UNUSABLE_IDS = {
    "9,000 characters": "a" * 9000,
    "unexpanded": "${ESTIMATE_ID}",
    "300 hex digits": "0123456789abcdef" * 19,
    "upper case": "0123456789ABCDEF",
}
GOOD_ID = "0123456789abcdef"


@pytest.fixture(scope="module")
def old_client(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with mlflow-skinny 2.22.5, then `pip install ./plugin` into it."""
    where = tmp_path_factory.mktemp("old-client") / "venv"
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    for target in (f"mlflow-skinny=={OLD_CLIENT}", str(ROOT / "plugin")):
        done = subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", target],
            capture_output=True, text=True, timeout=INSTALL_SECONDS, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    return python


def train(
    python: Path | str, server: MlflowServer, experiment: str, **env: str
) -> tuple[int, str, str]:
    environment: Mapping[str, str] = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("RECKON_", "MLFLOW_RUN"))},
        "MLFLOW_TRACKING_URI": server.uri,
        "MLFLOW_EXPERIMENT_NAME": experiment,
        **env,
    }
    done = subprocess.run(
        [str(python), "-c", TRAINER], env=dict(environment),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    return (
        done.returncode,
        done.stdout.strip().splitlines()[-1] if done.stdout.strip() else "",
        done.stderr,
    )


def test_installing_the_plugin_keeps_the_images_mlflow_2_client(old_client: Path) -> None:
    version = subprocess.run(
        [str(old_client), "-c", "import mlflow; print(mlflow.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip

    assert version == OLD_CLIENT


@pytest.mark.parametrize("client", ["mlflow 2.22.5", "this checkout's mlflow"])
def test_a_usable_id_tags_the_run_with_either_client(
    client: str, old_client: Path, mlflow_server: MlflowServer, mlflow_client: MlflowClient
) -> None:
    python = old_client if client == "mlflow 2.22.5" else sys.executable
    experiment = unique_name()

    code, run_id, err = train(
        python, mlflow_server, experiment,
        RECKON_ESTIMATE_ID=GOOD_ID, WORLD_SIZE="4", RECKON_PRECISION="bf16",
    )  # fmt: skip

    assert code == 0, err
    tags = mlflow_client.get_run(run_id).data.tags
    assert (tags["reckon.estimate_id"], tags["reckon.gpus"], tags["reckon.precision"]) == (
        GOOD_ID, "4", "bf16",
    )  # fmt: skip


@pytest.mark.parametrize("client", ["mlflow 2.22.5", "this checkout's mlflow"])
@pytest.mark.parametrize("value", list(UNUSABLE_IDS))
def test_an_unusable_id_never_fails_the_job_and_is_left_out_with_one_warning(
    value: str,
    client: str,
    old_client: Path,
    mlflow_server: MlflowServer,
    mlflow_client: MlflowClient,
) -> None:
    python = old_client if client == "mlflow 2.22.5" else sys.executable

    code, run_id, err = train(
        python, mlflow_server, unique_name(),
        RECKON_ESTIMATE_ID=UNUSABLE_IDS[value], WORLD_SIZE="9" * 400,
    )  # fmt: skip

    assert code == 0, err
    tags = mlflow_client.get_run(run_id).data.tags
    assert not [key for key in tags if key.startswith("reckon.")]
    warnings = [line for line in err.splitlines() if "is not an estimate id" in line]
    assert len(warnings) == 1 and len(warnings[0]) < 300
