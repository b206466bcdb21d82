"""`reckon launch --estimate ID [--experiment NAME] -- CMD ...`: run a training command
inside an MLflow run linked to an estimate, without touching the training code.

Creates the run (tag reckon.estimate_id plus the estimate's configuration as the plan:
reckon.planned.gpu, .gpus, .precision, .params, .tokens, .recompute; never as the
reckon.gpus etc. a run states about itself, which decide its factors), starts CMD
with MLFLOW_RUN_ID, MLFLOW_EXPERIMENT_ID, MLFLOW_EXPERIMENT_NAME, MLFLOW_TAGS (JSON, read by
Hugging Face's MLflowCallback), MLFLOW_TRACKING_URI and RECKON_ESTIMATE_ID set, forwards
SIGINT/SIGTERM to it, and ends the run FINISHED (exit 0), KILLED (a signal) or FAILED (any
other exit), returning CMD's exit code. A framework that ignores MLFLOW_RUN_ID (Lightning)
creates a run of its own, which the run-context plugin tags from RECKON_ESTIMATE_ID; the
pre-created run is then deleted when nothing was logged into it, rather than left RUNNING
and empty.

`--precision` is what the job itself trains in, when the launcher knows it and the
framework does not log it (Composer, Lightning): it is tagged reckon.precision (observed)
and passed on as RECKON_PRECISION, which the plugin tags on a run the job creates."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

from service.domain.errors import InputError, NotFoundError
from service.domain.hardware import PRECISIONS, normalize_precision
from service.domain.records import ESTIMATE_TAG, SavedEstimate
from service.domain.redaction import QUIET_MLFLOW
from service.ports import LaunchRuns, UnitOfWork
from service.usecases.results.loop import LaunchOutcome

ESTIMATE_ENV = "RECKON_ESTIMATE_ID"
PRECISION_ENV = "RECKON_PRECISION"
PRECISION_TAG = "reckon.precision"
PLANNED = "reckon.planned."  # the plan's tags; the reckon.* a run states are observed
DEFAULT_EXPERIMENT = "Default"
_FORWARDED = (signal.SIGINT, signal.SIGTERM)


@dataclass(frozen=True)
class LaunchOptions:
    estimate_id: str
    command: tuple[str, ...]
    experiment: str | None = None
    precision: str | None = None  # what the job trains in, as the launcher knows it


def configuration_tags(saved: SavedEstimate, precision: str | None = None) -> dict[str, str]:
    """The tags a launched run carries: the link, the configuration it was planned for, and
    the precision the launcher says the job trains in (observed)."""
    planned = {"gpu": saved.gpu, "gpus": str(saved.gpus), "precision": saved.precision}
    if saved.estimate is not None:
        request = saved.estimate.request
        planned["params"] = repr(request.model.params)
        planned["tokens"] = repr(request.model.tokens)
        planned["recompute"] = request.recompute
    tags = {ESTIMATE_TAG: saved.id, **{PLANNED + key: value for key, value in planned.items()}}
    if precision is not None:
        tags[PRECISION_TAG] = precision
    return tags


def launch_precision(text: str | None) -> str | None:
    """--precision, checked before anything starts: one of the precisions Reckon knows."""
    if text is None:
        return None
    name = normalize_precision(text)
    if name not in PRECISIONS:
        raise InputError(f"--precision {text!r}: use one of {', '.join(PRECISIONS)}")
    return name


def experiment_name(
    options: LaunchOptions, environ: Mapping[str, str], configured: Sequence[str]
) -> str:
    """--experiment, else MLFLOW_EXPERIMENT_NAME, else the first of RECKON_EXPERIMENTS."""
    return (
        options.experiment
        or environ.get("MLFLOW_EXPERIMENT_NAME")
        or (configured[0] if configured else DEFAULT_EXPERIMENT)
    )


def exit_status(return_code: int, signalled: bool) -> tuple[str, int]:
    """MLflow status and shell exit code for a child's return code (negative: a signal)."""
    if return_code < 0:
        return "KILLED", 128 - return_code
    if return_code == 0:
        return ("KILLED" if signalled else "FINISHED"), 0
    return ("KILLED" if signalled else "FAILED"), return_code


def launch(
    uow: UnitOfWork,
    runs: LaunchRuns,
    options: LaunchOptions,
    *,
    environ: Mapping[str, str] | None = None,
    configured_experiments: Sequence[str] = (),
) -> LaunchOutcome:
    """Run CMD linked to the estimate and return how it ended (see the module docstring)."""
    if not options.command:
        raise InputError("nothing to launch: give the command after --")
    precision = launch_precision(options.precision)
    with uow:
        saved = uow.estimates.get(options.estimate_id)
    if saved is None:
        raise NotFoundError(f"no estimate with id {options.estimate_id!r}")
    base = dict(os.environ if environ is None else environ)
    name = experiment_name(options, base, configured_experiments)
    experiment_id = runs.experiment_id(name)
    tags = configuration_tags(saved, precision)
    started_ms = int(time.time() * 1000)
    run_id = runs.create(experiment_id, tags, started_ms)
    child_env = {
        **base,
        "MLFLOW_TRACKING_URI": runs.tracking_uri,
        "MLFLOW_RUN_ID": run_id,
        "MLFLOW_EXPERIMENT_ID": experiment_id,
        "MLFLOW_EXPERIMENT_NAME": name,  # HF refuses a run from another experiment
        "MLFLOW_TAGS": json.dumps(tags),
        ESTIMATE_ENV: saved.id,
        **({PRECISION_ENV: precision} if precision is not None else {}),
        **QUIET_MLFLOW,  # the child's own MLflow client must not print the URL either
    }
    try:
        return_code, signalled = _supervise(options.command, child_env)
    except OSError as error:
        runs.end(run_id, "FAILED")
        raise InputError(f"cannot run {options.command[0]!r}: {error.strerror}") from None
    status, code = exit_status(return_code, signalled)
    others = runs.others_for(experiment_id, saved.id, run_id, started_ms)
    for other, other_status in others:
        if other_status == "RUNNING":  # the command died before ending its own run
            runs.end(other, status)
    deleted = bool(others) and runs.is_empty(run_id)
    if deleted:
        runs.delete(run_id)
    else:
        runs.end(run_id, status)
    return LaunchOutcome(
        exit_code=code,
        status=status,
        run_id=run_id,
        experiment_id=experiment_id,
        experiment_name=name,
        child_run_ids=tuple(other for other, _ in others),
        deleted_pre_created=deleted,
    )


def _supervise(command: Sequence[str], env: Mapping[str, str]) -> tuple[int, bool]:
    """Run the command to its end, passing SIGINT/SIGTERM on to it (the child decides how
    to stop; launch only waits). Returns its return code and whether a signal was passed."""
    child = subprocess.Popen(list(command), env=dict(env))
    forwarded: list[int] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        forwarded.append(signum)
        if child.poll() is None:
            child.send_signal(signum)

    previous: dict[signal.Signals, Any] = {}
    try:
        for sig in _FORWARDED:
            previous[sig] = signal.signal(sig, forward)
    except ValueError:  # not the main thread: nothing to forward from
        previous.clear()
    try:
        while True:
            try:
                return child.wait(), bool(forwarded)
            except KeyboardInterrupt:  # a handler we did not install; keep waiting
                continue
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
