"""The ranges of the runs a factor entry was fitted on (GPU counts, parameters, tokens), and
what of a planned job lies outside them: an estimate says when it extrapolates. Pure numpy;
service.calibration.scaling attaches the ranges to the entries it fits."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from service.calibration.model import SegmentFactors
from service.calibration.observations import ObservationArrays
from service.calibration.robust import IntArray
from service.domain.units import format_count


def rows_of(
    key: str, data: ObservationArrays, gpu_of: Mapping[str, int], precision_of: Mapping[str, int]
) -> IntArray | None:
    """The rows an entry was fitted on (None: none, e.g. the prior)."""
    parts = key.split("/")
    if key == "*":
        return np.arange(len(data), dtype=np.intp)
    if parts[0] == "*" and len(parts) == 2:
        code = precision_of.get(parts[1])
        return None if code is None else np.flatnonzero(data.precision == code)
    gpu = gpu_of.get(parts[0])
    if gpu is None:
        return None
    if len(parts) == 1:
        return np.flatnonzero(data.gpu == gpu)
    precision = precision_of.get(parts[1])
    if precision is None:
        return None
    return np.flatnonzero((data.gpu == gpu) & (data.precision == precision))


def covariate_range(
    data: ObservationArrays, name: str, rows: IntArray | None
) -> tuple[float | None, float | None]:
    """The smallest and largest known value of one covariate over the rows."""
    if rows is None:
        return None, None
    values = getattr(data, name)[rows]
    known = values[np.isfinite(values)]
    return (float(known.min()), float(known.max())) if known.size else (None, None)


def extrapolation(
    entry: SegmentFactors, gpus: float | None, params: float | None, tokens: float | None
) -> tuple[str, ...]:
    """What of a job lies outside the runs its factors were fitted on, as sentences:
    "1,024 GPUs, history 8–256"."""
    said: list[str] = []
    for name, value, low, high, shown in (
        ("GPUs", gpus, entry.gpus_min, entry.gpus_max, _count),
        ("parameters", params, entry.params_min, entry.params_max, format_count),
        ("tokens", tokens, entry.tokens_min, entry.tokens_max, format_count),
    ):
        if value is None or low is None or high is None:
            continue
        if value < low * (1 - 1e-9) or value > high * (1 + 1e-9):
            said.append(f"{shown(value)} {name}, history {shown(low)}–{shown(high)}")
    return tuple(said)


def _count(value: float) -> str:
    return f"{value:,.0f}"
