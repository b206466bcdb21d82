"""Paired bootstrap of two sets of errors on the same targets (service.calibration.gate): in
what share of resamples is the first median the larger? Pure and seeded."""

from __future__ import annotations

import functools

import numpy as np

from service.calibration.robust import CodeArray, FloatArray

BOOTSTRAP_RESAMPLES = 400
_BOOTSTRAP_SEED = 20261201
TIE = 1e-9  # relative: medians this close are equal


def worse_share(errors: FloatArray, raw_errors: FloatArray) -> float:
    """Share of BOOTSTRAP_RESAMPLES paired resamples (targets drawn with replacement, each
    keeping its calibrated and raw error) in which calibrated's median error is the larger.
    Seeded: the same evidence always gets the same verdict."""
    return Resamples(errors).worse_share(raw_errors)


@functools.lru_cache(maxsize=16)
def _counts(n: int) -> CodeArray:
    """How often each of n targets is drawn in each resample (seeded: the same for every
    n-target comparison, so made once per n; read only). A count and a running count never
    exceed n: the narrowest integer that holds n (the running sums over every resample are
    most of the gate's cost at 2,000 targets)."""
    draws = np.random.default_rng(_BOOTSTRAP_SEED).integers(0, n, (BOOTSTRAP_RESAMPLES, n))
    offsets = (np.arange(BOOTSTRAP_RESAMPLES) * n)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=BOOTSTRAP_RESAMPLES * n)
    narrow = n <= np.iinfo(np.int16).max
    result: CodeArray = counts.astype(np.int16 if narrow else np.int64)
    result = result.reshape(BOOTSTRAP_RESAMPLES, n)
    result.flags.writeable = False
    return result


class Resamples:
    """BOOTSTRAP_RESAMPLES seeded paired resamples of n targets, held as how often each
    target is drawn (a resample's median is read off those counts in each side's sorted
    order: the same medians as indexing the draws, without sorting every resample), with
    calibrated's medians computed once for every baseline they are compared with."""

    def __init__(self, errors: FloatArray) -> None:
        self._counts = _counts(errors.size)
        self._dtype = self._counts.dtype
        self._medians = self.medians(errors)

    def medians(self, values: FloatArray) -> FloatArray:
        """Each resample's median of `values` (one per target): the mean of its two middle
        order statistics (the same one for odd n)."""
        n = values.size
        order = np.argsort(values, kind="stable")
        reached = np.cumsum(self._counts[:, order], axis=1, dtype=self._dtype)
        low = np.argmax(reached >= (n + 1) // 2, axis=1)
        high = np.argmax(reached >= n // 2 + 1, axis=1)
        result: FloatArray = 0.5 * (values[order][low] + values[order][high])
        return result

    def worse_share(self, baseline: FloatArray) -> float:
        worse = self._medians > self.medians(baseline) * (1 + TIE)
        return float(np.mean(worse))
