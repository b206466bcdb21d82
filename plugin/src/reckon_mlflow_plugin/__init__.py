"""MLflow run-context provider for Reckon: when RECKON_ESTIMATE_ID is set, a run created in
this process carries reckon.estimate_id, and the configuration tags this process can see:
reckon.gpus from WORLD_SIZE, reckon.gpu from NVML (the device name, e.g. "NVIDIA H100
80GB HBM3", which Reckon's catalog resolves) and reckon.precision from RECKON_PRECISION
(what the job says it trains in: frameworks such as Composer and Lightning log no
precision by default). These are observed values, not the plan's. It must never break a
training job: any failure to read a value leaves that tag out."""

from __future__ import annotations

import os

from mlflow.tracking.context.abstract_context import RunContextProvider

ESTIMATE_ENV = "RECKON_ESTIMATE_ID"
ESTIMATE_TAG = "reckon.estimate_id"
GPU_TAG = "reckon.gpu"
GPUS_TAG = "reckon.gpus"
PRECISION_ENV = "RECKON_PRECISION"
PRECISION_TAG = "reckon.precision"
# The precision names Reckon's catalog knows (a wrong one would only be refused later).
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


class ReckonRunContext(RunContextProvider):
    def in_context(self) -> bool:
        return bool(os.environ.get(ESTIMATE_ENV, "").strip())

    def tags(self) -> dict[str, str]:
        tags = {ESTIMATE_TAG: os.environ[ESTIMATE_ENV].strip()}
        world = world_size(os.environ.get("WORLD_SIZE"))
        if world is not None:
            tags[GPUS_TAG] = str(world)
        name = gpu_name()
        if name is not None:
            tags[GPU_TAG] = name
        precision = os.environ.get(PRECISION_ENV, "").strip().lower()
        if precision in PRECISIONS:
            tags[PRECISION_TAG] = precision
        return tags


def world_size(text: str | None) -> int | None:
    """WORLD_SIZE as torchrun and most launchers set it (one process per GPU)."""
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value >= 1 else None


def gpu_name() -> str | None:
    """Device 0's name from NVML, or None without nvidia-ml-py or a visible GPU."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
        try:
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no device: a training job must not fail over a tag
        return None
    text = name.decode() if isinstance(name, bytes) else str(name)
    return text.strip() or None
