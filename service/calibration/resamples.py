"""Paired bootstrap of two sets of errors on the same targets (service.calibration.gate): in
what share of resamples is the first median the larger? Pure and seeded."""

from __future__ import annotations

import numpy as np

from service.calibration.robust import FloatArray

BOOTSTRAP_RESAMPLES = 400
_BOOTSTRAP_SEED = 20261201
TIE = 1e-9  # relative: medians this close are equal


def worse_share(errors: FloatArray, raw_errors: FloatArray) -> float:
    """Share of BOOTSTRAP_RESAMPLES paired resamples (targets drawn with replacement, each
    keeping its calibrated and raw error) in which calibrated's median error is the larger.
    Seeded: the same evidence always gets the same verdict."""
    return Resamples(errors).worse_share(raw_errors)


class Resamples:
    """BOOTSTRAP_RESAMPLES seeded paired resamples of n targets, held as how often each
    target is drawn (a resample's median is read off those counts in each side's sorted
    order: the same medians as indexing the draws, without sorting every resample), with
    calibrated's medians computed once for every baseline they are compared with."""

    def __init__(self, errors: FloatArray) -> None:
        n = errors.size
        draws = np.random.default_rng(_BOOTSTRAP_SEED).integers(0, n, (BOOTSTRAP_RESAMPLES, n))
        offsets = (np.arange(BOOTSTRAP_RESAMPLES) * n)[:, None]
        self._counts = np.bincount((draws + offsets).ravel(), minlength=BOOTSTRAP_RESAMPLES * n)
        self._counts = self._counts.reshape(BOOTSTRAP_RESAMPLES, n)
        self._medians = self.medians(errors)

    def medians(self, values: FloatArray) -> FloatArray:
        """Each resample's median of `values` (one per target): the mean of its two middle
        order statistics (the same one for odd n)."""
        n = values.size
        order = np.argsort(values, kind="stable")
        reached = np.cumsum(self._counts[:, order], axis=1)
        low = np.argmax(reached >= (n + 1) // 2, axis=1)
        high = np.argmax(reached >= n // 2 + 1, axis=1)
        result: FloatArray = 0.5 * (values[order][low] + values[order][high])
        return result

    def worse_share(self, baseline: FloatArray) -> float:
        worse = self._medians > self.medians(baseline) * (1 + TIE)
        return float(np.mean(worse))
