"""The refit's input: one reconciled, computed estimate reduced to what the fit needs, as
objects (`Observation`) or as columns for big histories (`ObservationArrays`). Pure value
types; validation only."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import numpy as np

from service.calibration.robust import FloatArray, IntArray


@dataclass(frozen=True)
class Observation:
    """One reconciled, computed estimate, reduced to what the refit needs."""

    gpu: str
    precision: str
    recompute: str | None
    ended_at: datetime  # aware UTC
    started_at: datetime
    effective_utilization: float  # u·(1−f); always present
    utilization: float | None  # only when the run logged throughput
    overhead: float | None  # only with throughput
    # The job's scale, where known (covariates of the factor model): GPU count, active
    # parameters, tokens trained.
    gpus: float | None = None
    params: float | None = None
    tokens: float | None = None
    # FAILED/KILLED segments among the runs reconciled (None: not counted).
    failures: float | None = None
    # Tokens per optimizer step over all GPUs (global batch × sequence length), where known.
    batch_tokens: float | None = None

    def __post_init__(self) -> None:
        if self.ended_at.tzinfo is None or self.started_at.tzinfo is None:
            raise ValueError("observation times must be timezone-aware")
        if (self.utilization is None) != (self.overhead is None):
            raise ValueError(_TOGETHER)
        if not (math.isfinite(self.effective_utilization) and self.effective_utilization > 0):
            raise ValueError(_BAD_EFFECTIVE)
        u, f = self.utilization, self.overhead
        if u is not None and f is not None and not (0 < u < math.inf and -math.inf < f < 1):
            raise ValueError(_BAD_SPLIT)
        if self.ended_at < self.started_at:
            raise ValueError(_ENDS_FIRST)


# ObservationArrays' per-row float columns (besides the three name codes).
FLOAT_COLUMNS = (
    "started_at", "ended_at", "effective_utilization", "utilization", "overhead",
    "gpus", "params", "tokens", "failures", "batch_tokens",
)  # fmt: skip


@dataclass(frozen=True, eq=False)
class ObservationArrays:
    """Observations as columns, for big histories: integer codes into the name tuples, times
    in seconds since the Unix epoch (UTC), NaN utilization/overhead where no throughput, NaN
    GPU count, parameters, tokens, failures and global batch tokens where unknown."""

    gpu_names: tuple[str, ...]
    precision_names: tuple[str, ...]
    recompute_names: tuple[str | None, ...]
    gpu: IntArray
    precision: IntArray
    recompute: IntArray
    started_at: FloatArray
    ended_at: FloatArray
    effective_utilization: FloatArray
    utilization: FloatArray
    overhead: FloatArray
    gpus: FloatArray
    params: FloatArray
    tokens: FloatArray
    failures: FloatArray
    batch_tokens: FloatArray

    def __post_init__(self) -> None:
        columns = (
            *(self.gpu, self.precision, self.recompute),
            *(self.started_at, self.ended_at),
            *(self.effective_utilization, self.utilization, self.overhead),
            *(self.gpus, self.params, self.tokens, self.failures, self.batch_tokens),
        )
        if any(column.ndim != 1 or column.size != len(self) for column in columns):
            raise ValueError("observation columns must be 1-D and of equal length")
        named = (
            (self.gpu, self.gpu_names),
            (self.precision, self.precision_names),
            (self.recompute, self.recompute_names),
        )
        for codes, names in named:
            if len(set(names)) != len(names):
                raise ValueError(f"duplicate names in {names!r}")
            if codes.size and (codes.min() < 0 or codes.max() >= len(names)):
                raise ValueError("a code points outside its name list")
        if np.any(self.ended_at < self.started_at):
            raise ValueError(_ENDS_FIRST)
        _check_columns(self.effective_utilization, self.utilization, self.overhead)

    def __len__(self) -> int:
        return int(self.gpu.size)

    @classmethod
    def from_observations(cls, observations: Sequence[Observation]) -> ObservationArrays:
        gpus: dict[str, int] = {}
        precisions: dict[str, int] = {}
        recomputes: dict[str | None, int] = {}

        def codes(values: dict[str, int] | dict[str | None, int], attr: str) -> IntArray:
            found = [values.setdefault(getattr(o, attr), len(values)) for o in observations]
            return np.array(found, dtype=np.intp)

        def floats(values: list[float | None]) -> FloatArray:
            return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            gpu=codes(gpus, "gpu"),
            precision=codes(precisions, "precision"),
            recompute=codes(recomputes, "recompute"),
            gpu_names=tuple(gpus),
            precision_names=tuple(precisions),
            recompute_names=tuple(recomputes),
            started_at=floats([o.started_at.timestamp() for o in observations]),
            ended_at=floats([o.ended_at.timestamp() for o in observations]),
            effective_utilization=floats([o.effective_utilization for o in observations]),
            utilization=floats([o.utilization for o in observations]),
            overhead=floats([o.overhead for o in observations]),
            gpus=floats([o.gpus for o in observations]),
            params=floats([o.params for o in observations]),
            tokens=floats([o.tokens for o in observations]),
            failures=floats([o.failures for o in observations]),
            batch_tokens=floats([o.batch_tokens for o in observations]),
        )

    def take(self, rows: IntArray) -> ObservationArrays:
        """The observations at `rows`, same name lists."""
        return ObservationArrays(
            gpu_names=self.gpu_names,
            precision_names=self.precision_names,
            recompute_names=self.recompute_names,
            gpu=self.gpu[rows],
            precision=self.precision[rows],
            recompute=self.recompute[rows],
            **{name: getattr(self, name)[rows] for name in FLOAT_COLUMNS},
        )

    def combination(self) -> IntArray:
        """One code per (gpu, precision, recompute) triple; `names_of` reads it back."""
        seg = self.gpu * len(self.precision_names) + self.precision
        return seg * len(self.recompute_names) + self.recompute

    def names_of(self, combination: int) -> tuple[str, str, str | None]:
        seg, recompute = divmod(combination, len(self.recompute_names))
        gpu, precision = divmod(seg, len(self.precision_names))
        return self.gpu_names[gpu], self.precision_names[precision], self.recompute_names[recompute]


def concatenate(first: ObservationArrays, second: ObservationArrays) -> ObservationArrays:
    """`first`'s rows then `second`'s, on the union of their name lists (first's names keep
    their codes; second's are mapped onto them)."""

    def merged(
        a_names: tuple[str | None, ...], b_names: tuple[str | None, ...], b_codes: IntArray
    ) -> tuple[tuple[str | None, ...], IntArray]:
        names = (*a_names, *(name for name in b_names if name not in a_names))
        position = {name: code for code, name in enumerate(names)}
        lookup = np.array([position[name] for name in b_names], dtype=np.intp)
        return names, lookup[b_codes] if b_codes.size else b_codes

    gpu_names, gpu = merged(first.gpu_names, second.gpu_names, second.gpu)
    precision_names, precision = merged(
        first.precision_names, second.precision_names, second.precision
    )
    recompute_names, recompute = merged(
        first.recompute_names, second.recompute_names, second.recompute
    )

    return ObservationArrays(
        gpu_names=cast(tuple[str, ...], gpu_names),
        precision_names=cast(tuple[str, ...], precision_names),
        recompute_names=recompute_names,
        gpu=np.concatenate([first.gpu, gpu]),
        precision=np.concatenate([first.precision, precision]),
        recompute=np.concatenate([first.recompute, recompute]),
        **{
            name: np.concatenate([getattr(first, name), getattr(second, name)])
            for name in FLOAT_COLUMNS
        },
    )


_TOGETHER = "utilization and overhead come together (both need throughput)"
_BAD_EFFECTIVE = "effective utilization must be positive and finite"
_BAD_SPLIT = "utilization must be positive and overhead below 1, both finite"
_ENDS_FIRST = "an observation ends before it starts"


def _check_columns(effective: FloatArray, utilization: FloatArray, overhead: FloatArray) -> None:
    if not np.all(np.isfinite(effective) & (effective > 0)):
        raise ValueError(_BAD_EFFECTIVE)
    has_u = ~np.isnan(utilization)
    if np.any(has_u != ~np.isnan(overhead)):
        raise ValueError(_TOGETHER)
    u, f = utilization[has_u], overhead[has_u]
    if not np.all(np.isfinite(u) & (u > 0) & np.isfinite(f) & (f < 1)):
        raise ValueError(_BAD_SPLIT)


def as_arrays(observations: Sequence[Observation] | ObservationArrays) -> ObservationArrays:
    if isinstance(observations, ObservationArrays):
        return observations
    return ObservationArrays.from_observations(observations)
