"""The ranges of the runs a factor entry was fitted on (GPU counts, parameters, tokens), and
what of a planned job lies outside them: an estimate says when it extrapolates. Pure numpy;
service.calibration.scaling attaches the ranges to the entries it fits."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from service.calibration.model import SegmentFactors
from service.calibration.observations import ObservationArrays
from service.calibration.robust import BoolArray, FloatArray, IntArray
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


COVARIATES = ("gpus", "params", "tokens")
Ranges = tuple[tuple[float | None, float | None], ...]  # (low, high) per covariate


def covariate_ranges(data: ObservationArrays, keys: Iterable[str]) -> dict[str, Ranges]:
    """Per key, the smallest and largest known value of each of `COVARIATES` over the rows
    `rows_of` gives it: every gpu/precision segment's once (one grouped reduction per
    covariate), each broader key's from the segments it covers."""
    n_precisions = len(data.precision_names)
    n_segments = len(data.gpu_names) * n_precisions
    segment = data.gpu.astype(np.intp) * n_precisions + data.precision
    lows = np.full((len(COVARIATES), n_segments), np.inf)
    highs = np.full((len(COVARIATES), n_segments), -np.inf)
    for i, name in enumerate(COVARIATES):
        values = getattr(data, name)
        known = np.isfinite(values)
        np.minimum.at(lows[i], segment[known], values[known])
        np.maximum.at(highs[i], segment[known], values[known])
    by_gpu = np.arange(n_segments) // max(n_precisions, 1)
    by_precision = np.arange(n_segments) % max(n_precisions, 1)
    gpu_of = {name: i for i, name in enumerate(data.gpu_names)}
    precision_of = {name: i for i, name in enumerate(data.precision_names)}
    result: dict[str, Ranges] = {}
    for key in keys:
        covered = _segments_of(key, gpu_of, precision_of, by_gpu, by_precision)
        result[key] = tuple(
            _span(lows[i][covered], highs[i][covered]) for i in range(len(COVARIATES))
        )
    return result


def _segments_of(
    key: str,
    gpu_of: Mapping[str, int],
    precision_of: Mapping[str, int],
    by_gpu: IntArray,
    by_precision: IntArray,
) -> BoolArray:
    """Which gpu/precision segments a key's rows (`rows_of`) lie in."""
    parts = key.split("/")
    covered: BoolArray = np.ones(by_gpu.size, dtype=bool)
    if parts[0] != "*":
        covered &= by_gpu == gpu_of.get(parts[0], -1)
    if len(parts) > 1:
        covered &= by_precision == precision_of.get(parts[1], -1)
    return covered


def _span(lows: FloatArray, highs: FloatArray) -> tuple[float | None, float | None]:
    low, high = float(lows.min(initial=np.inf)), float(highs.max(initial=-np.inf))
    return (low, high) if math.isfinite(low) else (None, None)


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
