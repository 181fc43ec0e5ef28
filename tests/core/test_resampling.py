"""mha.core.resampling draws every bootstrap resample of the book; the intervals built on it agree with
``scipy.stats.bootstrap`` (percentile method, the same number of resamples) within Monte-Carlo error."""

import numpy as np
import pytest
from scipy import stats

from mha.analysis.head_roles.role_table import heads_above_thresholds
from mha.analysis.popular_story import unit_bootstrap
from mha.analysis.statistics import bootstrap_interval, bootstrap_ratio_interval, percentile_interval, resampled_means
from mha.core.resampling import bootstrap_counts, bootstrap_indices
from mha.core.validation import InputError
from mha.lab.head_count_study import median_interval

RESAMPLES = 20_000  # Monte-Carlo error of a 95% bound: under 1% of the interval's width


def scipy_interval(data, statistic, *, paired=False, level=0.95):
    """The percentile bootstrap interval of scipy, from its own random stream."""
    result = stats.bootstrap(data, statistic, n_resamples=RESAMPLES, method="percentile", confidence_level=level,
                             paired=paired, vectorized=True, axis=0, rng=np.random.default_rng(2024))
    return result.confidence_interval.low, result.confidence_interval.high


def assert_close_to_scipy(ours, theirs, width_share=0.05):
    (low, high), (scipy_low, scipy_high) = ours, theirs
    width = np.asarray(scipy_high) - np.asarray(scipy_low)
    assert np.all(width > 0)
    np.testing.assert_array_less(np.abs(np.asarray(low) - scipy_low), width_share * width)
    np.testing.assert_array_less(np.abs(np.asarray(high) - scipy_high), width_share * width)


def test_indices_are_uniform_draws_with_replacement_from_the_seed():
    draws = bootstrap_indices(7, 3000, seed=5)
    assert draws.shape == (3000, 7) and draws.dtype.kind == "i" and draws.min() == 0 and draws.max() == 6
    assert np.array_equal(draws, bootstrap_indices(7, 3000, seed=5))
    assert not np.array_equal(draws, bootstrap_indices(7, 3000, seed=6))
    # each item equally likely: a chi-square test of the 21,000 draws
    assert stats.chisquare(np.bincount(draws.ravel(), minlength=7)).pvalue > 1e-3
    # rows are independent with replacement: a row repeats some item with probability 1 - 7! / 7**7
    repeats = np.mean([len(set(row)) < 7 for row in draws])
    assert repeats == pytest.approx(1 - 5040 / 7**7, abs=0.02)


def test_counts_are_how_often_each_index_is_drawn():
    draws, counts = bootstrap_indices(9, 50, seed=3), bootstrap_counts(9, 50, seed=3)
    assert np.array_equal(counts, np.stack([np.bincount(row, minlength=9) for row in draws]))
    assert np.all(counts.sum(axis=1) == 9)


@pytest.mark.parametrize("call, message", [
    (lambda: bootstrap_indices(0, 10), "n_items must be a whole number of at least 1"),
    (lambda: bootstrap_indices(5, 2.0), r"n_resamples must be a whole number.*int\(2.0\)"),
    (lambda: bootstrap_counts(5, 10, seed=-1), "seed must be"),
    (lambda: bootstrap_indices(10**5, 10**5), "more than the limit"),
])
def test_bad_sizes_and_seeds_are_refused(call, message):
    with pytest.raises(InputError, match=message):
        call()


def test_the_mean_difference_interval_agrees_with_scipy():
    differences = np.random.default_rng(0).normal([0.1, 0.0, -0.3], [1.0, 0.2, 0.5], size=(60, 3))
    ours = bootstrap_interval(differences, n_resamples=RESAMPLES, seed=1)
    assert_close_to_scipy(ours, scipy_interval((differences,), lambda x, axis: x.mean(axis=axis)))


def test_the_pooled_share_interval_agrees_with_scipy():
    rng = np.random.default_rng(1)
    pairs = rng.integers(1, 6, size=80)  # gold pairs per sentence
    hits = rng.binomial(pairs, 0.7)
    ours = bootstrap_ratio_interval(hits, pairs, n_resamples=RESAMPLES, seed=2)
    theirs = scipy_interval((hits, pairs), lambda h, p, axis: h.sum(axis=axis) / p.sum(axis=axis), paired=True)
    assert_close_to_scipy(ours, theirs)


def test_a_statistic_of_resampled_units_agrees_with_scipy():
    scores = np.random.default_rng(2).exponential(size=(40, 2))  # (sentences, heads)
    ours = unit_bootstrap(lambda weights: weights @ scores / weights.sum(), 40, n_resamples=RESAMPLES, seed=3)
    assert_close_to_scipy(ours, scipy_interval((scores,), lambda x, axis: x.mean(axis=axis)))


@pytest.mark.slow
def test_a_count_of_heads_agrees_with_scipy_to_one_head():
    per_sentence = np.random.default_rng(3).normal(np.linspace(0.2, 0.6, 30), 0.5, size=(50, 30))
    table = heads_above_thresholds(per_sentence, [0.3, 0.45], n_resamples=RESAMPLES, seed=4)
    for threshold, row in zip((0.3, 0.45), table.itertuples(), strict=True):
        # scipy resamples the sentences' indices; the statistic counts the heads whose mean reaches the threshold
        low, high = scipy_interval((np.arange(50),), lambda rows, axis, threshold=threshold: (
            per_sentence[rows].mean(axis=-2) >= threshold).sum(-1).astype(float))
        # the package rounds a bound outwards to a whole count; scipy interpolates between counts
        assert np.floor(low) - 1 <= row.low <= np.ceil(low) and np.floor(high) <= row.high <= np.ceil(high) + 1
        assert row.low <= row.heads <= row.high


def test_a_median_over_seeds_agrees_with_scipy_to_one_order_statistic():
    values = np.random.default_rng(4).normal(size=41)
    median, low, high = median_interval(values, n_resamples=RESAMPLES, seed=5)
    scipy_low, scipy_high = scipy_interval((values,), lambda x, axis: np.median(x, axis=axis))
    order = np.sort(values)
    assert median == np.median(values)  # 41 values: the middle one
    for ours, theirs in ((low, scipy_low), (high, scipy_high)):
        rank = np.searchsorted(order, ours)  # the package's bounds are observed values
        assert order[rank] == ours and order[max(rank - 1, 0)] <= theirs <= order[min(rank + 1, 40)]


def test_the_same_seed_gives_the_same_resamples_to_every_interval():
    differences = np.random.default_rng(5).normal(size=(25, 4))
    low, high = bootstrap_interval(differences, n_resamples=500, seed=9)
    again = percentile_interval(resampled_means(differences, bootstrap_counts(25, 500, seed=9)))
    np.testing.assert_allclose(low, again[0], rtol=1e-12)
    np.testing.assert_allclose(high, again[1], rtol=1e-12)
