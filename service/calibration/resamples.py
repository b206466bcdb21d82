"""Paired bootstrap of two sets of errors on the same targets (service.calibration.gate): in
what share of resamples is the first median the larger? A subset of a bigger target set (a
key's targets among the backtest's) is read off that set's resamples, and only resamples
that drew some of the subset count. Pure and seeded."""

from __future__ import annotations

import functools

import numpy as np

from service.calibration.robust import CodeArray, FloatArray, IntArray

BOOTSTRAP_RESAMPLES = 400
_BOOTSTRAP_SEED = 20261201
TIE = 1e-9  # relative: medians this close are equal
_BLOCK = 64  # targets summed per block when a resample's median is searched for
_SUM_ALL_UP_TO = 10 * _BLOCK  # targets: up to this, one running sum is cheaper than blocks


def worse_share(errors: FloatArray, raw_errors: FloatArray) -> float:
    """Share of BOOTSTRAP_RESAMPLES paired resamples (targets drawn with replacement, each
    keeping its calibrated and raw error) in which calibrated's median error is the larger.
    Seeded: the same evidence always gets the same verdict."""
    return Resamples(errors).worse_share(raw_errors)


def prepare(n: int) -> None:
    """Make the draws for n targets now (they are made once per n and process: a caller
    that knows n before it compares, such as a pass's refit, takes them off its path)."""
    _counts(n)


@functools.lru_cache(maxsize=16)
def _counts(n: int) -> CodeArray:
    """How often each of n targets is drawn in each resample (seeded: the same for every
    n-target comparison, so made once per n; read only). A count never exceeds n: int16
    where that holds n (a fifth of int64's memory to gather and sum)."""
    draws = np.random.default_rng(_BOOTSTRAP_SEED).integers(0, n, (BOOTSTRAP_RESAMPLES, n))
    draws += (np.arange(BOOTSTRAP_RESAMPLES) * n)[:, None]
    counts = np.bincount(draws.ravel(), minlength=BOOTSTRAP_RESAMPLES * n)
    narrow = n <= np.iinfo(np.int16).max
    result: CodeArray = counts.astype(np.int16 if narrow else np.int64)
    result = result.reshape(BOOTSTRAP_RESAMPLES, n)
    result.flags.writeable = False
    return result


class Resamples:
    """BOOTSTRAP_RESAMPLES seeded paired resamples of n targets, held as how often each
    target is drawn (a resample's median is read off those counts in each side's sorted
    order: the same medians as indexing the draws, without sorting every resample), with
    calibrated's medians computed once for every baseline they are compared with.

    `among` reads a subset of a bigger target set (a key's targets among the backtest's)
    off that set's resamples: how many of the subset a resample draws then varies, as it
    would when the whole set is drawn again, and one set of draws serves every subset (a
    resample that draws none of the subset is left out of its share)."""

    def __init__(self, errors: FloatArray, among: tuple[IntArray, int] | None = None) -> None:
        if among is None:
            self._counts = _counts(errors.size)
            drawn = np.full(BOOTSTRAP_RESAMPLES, errors.size)
        else:
            rows, size = among
            self._counts = _counts(size)[:, rows]
            drawn = self._counts.sum(axis=1, dtype=np.int64)
        # A resample's median: the mean of its two middle order statistics (one for odd n).
        self._marks = ((drawn + 1) // 2, drawn // 2 + 1)
        self._used = drawn > 0
        self._medians = self.medians(errors)

    def medians(self, values: FloatArray) -> FloatArray:
        """Each resample's median of `values` (one per target); for a resample that drew
        none of them (only with `among`) a meaningless value, which `worse_share` skips."""
        order = np.argsort(values, kind="stable")
        in_order = self._counts[:, order]
        ranked = values[order]
        low, high = _reached(in_order, self._marks)
        result: FloatArray = 0.5 * (ranked[low] + ranked[high])
        return result

    def worse_share(self, baseline: FloatArray) -> float:
        worse = self._medians > self.medians(baseline) * (1 + TIE)
        used = worse[self._used]
        return float(np.mean(used)) if used.size else 0.0


def _reached(counts: CodeArray, marks: tuple[IntArray, IntArray]) -> tuple[IntArray, ...]:
    """Per resample (row), for each of `marks`: the first column at which the running count
    reaches the mark (a mark above the row's total, as for a resample that drew nothing,
    gives some column). Blocks of _BLOCK columns are summed first, so only the block that
    holds the answer is summed column by column (the same answer as a running sum over
    every column)."""
    resamples, n = counts.shape
    if n <= _SUM_ALL_UP_TO:
        running = np.cumsum(counts, axis=1, dtype=np.int32)
        return tuple(np.argmax(running >= mark[:, None], axis=1) for mark in marks)
    rows = np.arange(resamples)
    n_blocks = n // _BLOCK
    blocks = counts[:, : n_blocks * _BLOCK].reshape(resamples, n_blocks, _BLOCK)
    # before[:, b]: the count of the blocks ahead of block b (n_blocks + 1 entries).
    before = np.zeros((resamples, n_blocks + 1), np.int32)
    np.cumsum(blocks.sum(axis=2, dtype=np.int32), axis=1, out=before[:, 1:])
    width = np.arange(_BLOCK)  # a full block, or the fewer columns left after the last
    found = []
    for mark in marks:
        # Blocks whose end falls short of the mark (n_blocks: the answer is in the rest).
        block = np.count_nonzero(before[:, 1:] < mark[:, None], axis=1)
        start = block * _BLOCK
        columns = np.minimum(start[:, None] + width, n - 1)
        running = before[rows, block][:, None] + np.cumsum(
            counts[rows[:, None], columns], axis=1, dtype=np.int32
        )
        # Only a resample that drew nothing never reaches its mark: any column serves it.
        found.append(np.minimum(start + np.argmax(running >= mark[:, None], axis=1), n - 1))
    return tuple(found)
