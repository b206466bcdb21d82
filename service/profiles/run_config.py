"""Configuration a run states about itself: the tags or params reckon.gpu, reckon.gpus,
reckon.precision, reckon.params, reckon.tokens (and reckon.recompute), read before any
profile. A tag wins over a param of the same name. Pure."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from service.domain.values import RECOMPUTE_MODES, Recompute

GPU_TAG = "reckon.gpu"
GPUS_TAG = "reckon.gpus"
PRECISION_TAG = "reckon.precision"
PARAMS_TAG = "reckon.params"
TOKENS_TAG = "reckon.tokens"
RECOMPUTE_TAG = "reckon.recompute"
CONFIG_KEYS = (GPU_TAG, GPUS_TAG, PRECISION_TAG, PARAMS_TAG, TOKENS_TAG, RECOMPUTE_TAG)
BAD_CONFIGURATION = "bad_configuration"


@dataclass(frozen=True)
class RunConfig:
    gpu: str | None = None
    gpus: int | None = None
    precision: str | None = None
    params: float | None = None
    tokens: float | None = None
    recompute: Recompute | None = None
    problem: tuple[str, str] | None = None


def run_config(tags: Mapping[str, str], params: Mapping[str, str]) -> RunConfig:
    """The reckon.* configuration of a run; a value that cannot be read is a problem
    (reason bad_configuration), never a guess."""
    values = {key: (tags.get(key) or params.get(key) or "").strip() for key in CONFIG_KEYS}
    try:
        return RunConfig(
            gpu=values[GPU_TAG] or None,
            gpus=_whole(values[GPUS_TAG], GPUS_TAG),
            precision=values[PRECISION_TAG] or None,
            params=_positive(values[PARAMS_TAG], PARAMS_TAG),
            tokens=_positive(values[TOKENS_TAG], TOKENS_TAG),
            recompute=_recompute(values[RECOMPUTE_TAG]),
        )
    except ValueError as error:
        return RunConfig(problem=(BAD_CONFIGURATION, str(error)))


def _positive(text: str, key: str) -> float | None:
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{key} = {text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{key} = {text!r} is not a positive number")
    return value


def _whole(text: str, key: str) -> int | None:
    value = _positive(text, key)
    if value is None:
        return None
    if value != int(value):
        raise ValueError(f"{key} = {text!r} is not a whole number")
    return int(value)


def _recompute(text: str) -> Recompute | None:
    if not text:
        return None
    if text.lower() not in RECOMPUTE_MODES:
        raise ValueError(f"{RECOMPUTE_TAG} = {text!r}; use one of {', '.join(RECOMPUTE_MODES)}")
    return cast(Recompute, text.lower())
