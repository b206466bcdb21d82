"""The JSON documents of training memory per GPU (service/presenters/memory.py's views), as
TypedDicts like json_documents.py's, which they are part of: an estimate's and a plan's
`memory`. Each forbids keys it does not declare. Only the API imports this at run time."""

from __future__ import annotations

from typing import Literal

from pydantic import with_config
from typing_extensions import TypedDict

from service.presenters.json_loop_documents import FORBID


@with_config(FORBID)
class MemoryPerGpu(TypedDict):
    """Training memory per GPU at `gpus` GPUs against the chip's (fits null: chip unknown)."""

    gpus: int
    fits: bool | None
    needed_bytes: float
    needed_gib: float
    chip_bytes: float | None
    chip_gib: float | None
    sharding: Literal["none", "zero1", "zero2", "fsdp"]
    optimizer: Literal["adam", "sgd"]
    micro_batch: int
    activations_counted: bool
    weights_bytes: float
    gradients_bytes: float
    optimizer_states_bytes: float
    gathered_layer_bytes: float | None
    activations_bytes: float | None
    headroom_fixed_bytes: float
    headroom_fraction: float
    min_gpus_that_fit: int | None
    min_gpus_verdict: Literal["fits", "never", "unknown"]
    note: str | None
