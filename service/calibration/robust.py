"""Grouped, weighted robust statistics for the refit: per-group weighted median, weighted MAD
and a weighted Huber M-estimate of location, vectorised so a million rows cost one sort and
a few passes rather than a Python loop over groups. Pure numpy; no I/O. The method, its
choices and their measurements: docs/calibration.md, "Robust statistics"."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.intp]
CodeArray = npt.NDArray[np.integer[Any]]  # group codes, in any integer type
BoolArray = npt.NDArray[np.bool_]
_ComplexArray = npt.NDArray[np.complex128]

MAD_TO_SIGMA = 1.4826  # 1/Φ⁻¹(3/4): the MAD of a normal sample times this estimates its σ
_TINY = 1e-12  # a Huber cutoff of 0 (MAD 0: most weight on one value) must not divide by 0
_MAX_STEPS = 100  # Newton steps land on the exact root in a few; bisection bounds the rest
_TOLERANCE = 1e-12  # log space, far below anything that matters
_ULPS = 8 * np.finfo(np.float64).eps  # rounding slack of a distance window, relative
_SORT_UP_TO = 4_000  # rows: up to this, the MAD sorts the distances instead of searching


@dataclass(frozen=True, eq=False)
class GroupStats:
    """Per group: Huber location, robust scale (1.4826 × weighted MAD about the weighted
    median), the sum of weights and the number of rows."""

    location: FloatArray
    scale: FloatArray
    weight: FloatArray
    count: IntArray


def group_stats(
    values: FloatArray,
    weights: FloatArray,
    groups: CodeArray,
    n_groups: int,
    huber_c: float,
    *,
    sorted_by_value: bool = False,
) -> GroupStats:
    """Weighted Huber location per group with cutoff `huber_c` × the group's robust scale,
    started from the weighted median. `sorted_by_value`: the rows are already in ascending
    value order (saves the value sort when several groupings share one column)."""
    ordered = _Ordered.build(values, weights, groups, n_groups, sorted_by_value)
    median = ordered.weighted_median()
    scale = MAD_TO_SIGMA * ordered.distance_median(median)
    location = ordered.huber_location(median, huber_c * scale)
    return GroupStats(
        location=location,
        scale=scale,
        weight=ordered.total,
        count=ordered.count,
    )


def weighted_median(
    values: FloatArray, weights: FloatArray, groups: CodeArray, n_groups: int
) -> FloatArray:
    """Lower weighted median per group: the smallest value whose cumulative weight within its
    group reaches half the group's weight."""
    return _Ordered.build(values, weights, groups, n_groups, False).weighted_median()


@dataclass(frozen=True, eq=False)
class _Ordered:
    """Rows sorted by (group, value), with what the binary searches need."""

    values: FloatArray  # in (group, value) order
    keys: _ComplexArray  # group + i·value: numpy orders complex numbers lexicographically
    running: FloatArray  # running[i]: weight of the ordered rows before i (n + 1 entries)
    weights: FloatArray  # in (group, value) order
    start: IntArray  # each group's first row in the order
    end: IntArray  # one past its last
    count: IntArray
    total: FloatArray  # each group's weight (summed in the caller's row order)
    present: BoolArray

    @classmethod
    def build(
        cls,
        values: FloatArray,
        weights: FloatArray,
        groups: CodeArray,
        n_groups: int,
        sorted_by_value: bool,
    ) -> _Ordered:
        order = _group_order(values, groups, n_groups, sorted_by_value)
        ordered = values if order is None else values[order]
        ordered_weights = weights if order is None else weights[order]
        running = np.zeros(values.size + 1)
        np.cumsum(ordered_weights, out=running[1:])
        count = np.bincount(groups, minlength=n_groups).astype(np.intp)
        end = np.cumsum(count)
        keys = np.empty(values.size, np.complex128)
        keys.real = np.repeat(np.arange(n_groups, dtype=np.float64), count)
        keys.imag = ordered
        return cls(
            values=ordered,
            keys=keys,
            running=running,
            weights=ordered_weights,
            start=end - count,
            end=end,
            count=count,
            total=np.bincount(groups, weights, n_groups).astype(np.float64, copy=False),
            present=count > 0,
        )

    def weighted_median(self) -> FloatArray:
        """One binary search of the running weight for every group's half-way mark."""
        result = np.zeros(self.count.size)
        if self.values.size == 0:
            return result
        half = self.running[self.start] + 0.5 * self.total
        found = np.searchsorted(self.running[1:], half, side="left")
        present = self.present
        # Rounding in the running sum may land one row outside the group: keep it inside.
        index = np.clip(found[present], self.start[present], self.end[present] - 1)
        result[present] = self.values[index]
        return result

    def _weight_within(self, groups: FloatArray, low: FloatArray, high: FloatArray) -> FloatArray:
        """Per group: the weight of its rows with low ≤ value ≤ high."""
        first = np.searchsorted(self.keys, _keys(groups, low), side="left")
        after = np.searchsorted(self.keys, _keys(groups, high), side="right")
        result: FloatArray = self.running[after] - self.running[first]
        return result

    def distance_median(self, center: FloatArray) -> FloatArray:
        """Lower weighted median of |value − center| per group: the smallest distance d of a
        row whose window [center − d, center + d] holds half the group's weight. The rows
        above the center, walked upward, have increasing distances, and so do the rows below
        it walked downward: one binary search along each side finds its first row whose
        window holds enough (all groups and both sides at once), and the nearer one wins."""
        if self.values.size <= _SORT_UP_TO:  # a sort is cheaper than the search's steps
            groups_in_order = np.repeat(np.arange(self.count.size), self.count)
            distance = np.abs(self.values - center[groups_in_order])
            return _Ordered.build(
                distance, self.weights, groups_in_order, self.count.size, False
            ).weighted_median()
        result = np.zeros(self.count.size)
        groups = np.flatnonzero(self.present)
        middle = center[groups]
        codes = groups.astype(np.float64)
        start, end = self.start[groups], self.end[groups]
        split = np.searchsorted(self.keys, _keys(codes, middle), side="left")  # first ≥ center
        # Side 0 walks up from `split`, side 1 down from `split − 1`; step t of a side is
        # the row base + direction·t, and its distance grows with t.
        base = np.concatenate([split, split - 1])
        direction = np.repeat(np.array([1, -1]), groups.size)
        length = np.concatenate([end - split, split - start])
        sign = direction.astype(np.float64)
        both_middle = np.concatenate([middle, middle])
        both_codes = np.concatenate([codes, codes])
        half = np.tile(0.5 * (self.running[end] - self.running[start]), 2)
        last = self.values.size - 1

        def distance_at(step: IntArray) -> FloatArray:
            row = np.clip(base + direction * step, 0, last)
            result: FloatArray = sign * (self.values[row] - both_middle)
            return result

        # A row's distance is rounded, and so is center ± distance: the window is widened by
        # a few ulps so that it always holds the row that defined it and every row at the
        # same distance (rows closer than that to its edge are ties, as good as equal).
        slack = _ULPS * (np.abs(both_middle) + np.abs(self.values[np.clip(base, 0, last)]))

        low, high = np.zeros_like(length), length.copy()  # the answer is in [low, high]
        while True:
            open_ = low < high
            if not open_.any():
                break
            mid = low + (high - low) // 2
            reach = distance_at(mid)
            reach = reach + slack + _ULPS * reach
            enough = (
                self._weight_within(both_codes, both_middle - reach, both_middle + reach) >= half
            )
            high = np.where(open_ & enough, mid, high)
            low = np.where(open_ & ~enough, mid + 1, low)
        found = np.where(low < length, distance_at(low), np.inf)  # length: no row on that side
        result[groups] = np.minimum(found[: groups.size], found[groups.size :])
        return result

    def huber_location(self, initial: FloatArray, cutoff: FloatArray) -> FloatArray:
        """The root μ of Σ w·ψ(value − μ) with ψ(r) = clip(r, −c, c) per group: rows within c
        of μ pull with their distance, rows beyond with ±c (a far outlier pulls with a bounded
        force). The same fixed point iteratively reweighted least squares converges to, but
        solved exactly: for a given μ the rows split into below / within / above, and the
        equation is linear in μ given that split, so a Newton step from the right split lands
        on the root; steps that would leave the bracket [values with f > 0, f < 0] bisect."""
        location = initial.copy()
        groups = np.flatnonzero(self.present)
        if groups.size == 0:
            return location
        codes = groups.astype(np.float64)
        first, last = self.start[groups], self.end[groups]
        c = np.maximum(cutoff[groups], _TINY)
        # Work relative to the initial value (the median), so the running sums of
        # weight × value stay small and cancel little.
        origin = initial[groups]
        centered = self.values - np.repeat(initial, self.count)
        moment = np.zeros(self.values.size + 1)
        np.cumsum(self.weights * centered, out=moment[1:])
        running = self.running
        low = self.values[first] - origin
        high = self.values[last - 1] - origin
        mu = np.zeros(groups.size)
        for _ in range(_MAX_STEPS):
            below = np.searchsorted(self.keys, _keys(codes, origin + (mu - c)), side="left")
            above = np.searchsorted(self.keys, _keys(codes, origin + (mu + c)), side="right")
            inside = running[above] - running[below]
            pull = c * ((running[last] - running[above]) - (running[below] - running[first]))
            moment_inside = moment[above] - moment[below]
            f = moment_inside - mu * inside + pull
            low = np.where(f > 0, mu, low)
            high = np.where(f < 0, mu, high)
            newton = np.divide(moment_inside + pull, inside, out=mu.copy(), where=inside > 0)
            usable = (inside > 0) & (newton >= low) & (newton <= high)
            step = np.where(usable, newton, 0.5 * (low + high))
            step = np.where(f == 0, mu, step)
            moved = float(np.max(np.abs(step - mu)))
            mu = step
            if moved <= _TOLERANCE:
                break
        location[groups] = origin + mu
        return location


def _keys(groups: FloatArray, values: FloatArray) -> _ComplexArray:
    keys = np.empty(groups.size, np.complex128)
    keys.real = groups
    keys.imag = values
    return keys


def _group_order(
    values: FloatArray, groups: CodeArray, n_groups: int, sorted_by_value: bool
) -> IntArray | None:
    """Row order sorted by (group, value), None when the rows already are: a value sort,
    then a stable sort by group code (a radix sort when the codes fit 16 bits), several
    times faster than np.lexsort."""
    if sorted_by_value:
        return None if n_groups <= 1 else code_order(groups, n_groups)
    by_value = np.argsort(values)
    if n_groups <= 1:
        return by_value
    return by_value[code_order(groups[by_value], n_groups)]


def code_order(codes: CodeArray, n_codes: int) -> IntArray:
    """A stable sort's order of codes in [0, n_codes): as the smallest integer type that
    holds them, which numpy sorts by radix when it fits 16 bits."""
    small = codes.astype(np.min_scalar_type(max(n_codes - 1, 0)), copy=False)
    result: IntArray = np.argsort(small, kind="stable")
    return result


def weighted_median_of(values: FloatArray, weights: FloatArray) -> float:
    """The weighted median of one group of values."""
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, 0.5 * cumulative[-1])])
