"""The gate's paired bootstrap (service.calibration.resamples): each resample's median is the
median of the targets it drew, for a whole target set and for a key's targets read off the
set's draws; a resample that drew none of a key's targets does not vote."""

from __future__ import annotations

import numpy as np
import pytest

from service.calibration import resamples
from service.calibration.resamples import BOOTSTRAP_RESAMPLES, TIE, Resamples, worse_share


def drawn_medians(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """By brute force: each resample's drawn values, repeated as drawn, and their median."""
    return np.array([np.median(np.repeat(values, row)) if row.sum() else np.nan for row in counts])


@pytest.mark.parametrize("n", [1, 2, 7, 128, 640, 641, 704, 2000])
def test_each_resample_median_is_the_median_of_what_it_drew(n: int) -> None:
    values = np.random.default_rng(n).lognormal(size=n)
    got = Resamples(values).medians(values)
    assert got.shape == (BOOTSTRAP_RESAMPLES,)
    np.testing.assert_array_equal(got, drawn_medians(values, resamples._counts(n)))


@pytest.mark.parametrize(("size", "n"), [(50, 5), (2000, 40), (2000, 1200)])
def test_a_keys_resamples_are_the_whole_sets_draws_restricted_to_its_targets(
    size: int, n: int
) -> None:
    rng = np.random.default_rng(size + n)
    rows = np.sort(rng.choice(size, n, replace=False))
    values = rng.lognormal(size=n)
    counts = resamples._counts(size)[:, rows]
    drew = counts.sum(axis=1) > 0
    got = Resamples(values, among=(rows, size)).medians(values)
    np.testing.assert_array_equal(got[drew], drawn_medians(values, counts)[drew])
    assert len(set(counts.sum(axis=1).tolist())) > 1  # how many it holds varies


def test_worse_share_is_all_or_nothing_when_one_side_is_worse_on_every_target() -> None:
    better = np.linspace(0.01, 0.2, 60)
    assert worse_share(better * 2, better) == 1.0
    assert worse_share(better, better * 2) == 0.0
    assert worse_share(better, better) == 0.0  # a tie is not worse


def test_a_resample_without_the_keys_targets_does_not_vote() -> None:
    # Two targets of 50: about 4 in 25 of the set's resamples draw neither. Calibrated is
    # worse on one and better on the other; the share is over the resamples that drew one.
    size, rows = 50, np.array([7, 30])
    calibrated, raw = np.array([0.3, 0.01]), np.array([0.1, 0.02])
    counts = resamples._counts(size)[:, rows]
    drew = counts.sum(axis=1) > 0
    worse = drawn_medians(calibrated, counts) > drawn_medians(raw, counts) * (1 + TIE)
    expected = float(np.mean(worse[drew]))
    assert expected != float(np.mean(worse & drew))  # a vote from every resample differs
    assert Resamples(calibrated, among=(rows, size)).worse_share(raw) == expected
