"""MLflow run-context provider for Reckon: when RECKON_ESTIMATE_ID is set, a run created in
this process carries reckon.estimate_id, and the configuration tags this process can see:
reckon.gpus from WORLD_SIZE, reckon.gpu from NVML (the device name, e.g. "NVIDIA H100
80GB HBM3", which Reckon's catalog resolves) and reckon.precision from RECKON_PRECISION
(what the job says it trains in: frameworks such as Composer and Lightning log no
precision by default). These are observed values, not the plan's.

It must never break a training job, whatever the environment holds:

- an estimate id that is not what Reckon makes (16 lowercase hex digits; an unexpanded
  `${ESTIMATE_ID}`, a 9,000-character value) is left out, with one warning on stderr, and
  no other tag is written (they would belong to no estimate);
- every value written is bounded (a GPU count Reckon's columns hold, a device name of at
  most 250 characters), so MLflow has nothing to refuse;
- any exception inside the provider leaves its tags out; none reaches `mlflow.start_run()`.

Works with the MLflow client 2.22 and later (mlflow-skinny>=2.22,<4)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Mapping

from mlflow.tracking.context.abstract_context import RunContextProvider

ESTIMATE_ENV = "RECKON_ESTIMATE_ID"
ESTIMATE_TAG = "reckon.estimate_id"
GPU_TAG = "reckon.gpu"
GPUS_TAG = "reckon.gpus"
PRECISION_ENV = "RECKON_PRECISION"
PRECISION_TAG = "reckon.precision"
# The precision names Reckon's catalog knows (a wrong one would only be refused later).
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")
ESTIMATE_ID = re.compile(r"[0-9a-f]{16}")  # what `reckon estimate --save` prints
MAX_GPUS = 2_147_483_647  # what Reckon's integer columns hold
MAX_NAME_CHARS = 250

_warned: set[str] = set()


class ReckonRunContext(RunContextProvider):
    def in_context(self) -> bool:
        try:
            return bool(os.environ.get(ESTIMATE_ENV, "").strip())
        except Exception:  # a training job must not fail over a tag
            return False

    def tags(self) -> dict[str, str]:
        try:
            return run_tags(os.environ)
        except Exception as error:  # a training job must not fail over a tag
            warn(f"reckon: run-context plugin wrote no tags ({type(error).__name__})")
            return {}


def run_tags(environ: Mapping[str, str]) -> dict[str, str]:
    """The tags for a run created under `environ`; {} without a usable estimate id."""
    estimate_id = environ.get(ESTIMATE_ENV, "").strip()
    if ESTIMATE_ID.fullmatch(estimate_id) is None:
        shown = estimate_id[:40] + ("..." if len(estimate_id) > 40 else "")
        warn(
            f"reckon: {ESTIMATE_ENV}={shown!r} is not an estimate id (16 lowercase hex "
            "digits, as `reckon estimate --save` prints); this run is not linked"
        )
        return {}
    tags = {ESTIMATE_TAG: estimate_id}
    world = world_size(environ.get("WORLD_SIZE"))
    if world is not None:
        tags[GPUS_TAG] = str(world)
    name = gpu_name()
    if name is not None:
        tags[GPU_TAG] = name
    precision = environ.get(PRECISION_ENV, "").strip().lower()
    if precision in PRECISIONS:
        tags[PRECISION_TAG] = precision
    return tags


def warn(message: str) -> None:
    """One line on stderr, once per process for the same message."""
    if message in _warned:
        return
    _warned.add(message)
    with contextlib.suppress(Exception):  # a closed stderr is no reason to fail a job
        print(message, file=sys.stderr)


def world_size(text: str | None) -> int | None:
    """WORLD_SIZE as torchrun and most launchers set it (one process per GPU)."""
    value = (text or "").strip()
    if not value.isascii() or not value.isdigit() or len(value) > 10:
        return None
    count = int(value)
    return count if 1 <= count <= MAX_GPUS else None


def gpu_name() -> str | None:
    """Device 0's name from NVML, or None without nvidia-ml-py or a visible GPU."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except Exception:  # not installed, or broken: no tag
        return None
    try:
        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        finally:
            pynvml.nvmlShutdown()
        text = name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # no driver, no device: a training job must not fail
        return None
    text = " ".join(text.split())
    return text[:MAX_NAME_CHARS] or None
