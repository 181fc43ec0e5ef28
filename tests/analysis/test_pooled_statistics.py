"""mha.analysis.statistics: bootstrap intervals of pooled shares over sentences (3.2) and the power of a test
that found nothing (3.3)."""

import numpy as np
import pytest
from scipy import stats

from mha.analysis.statistics import bootstrap_ratio_interval, detection_power, smallest_detectable_count


def test_a_pooled_share_resamples_whole_sentences():
    rng = np.random.default_rng(0)
    pairs = rng.integers(1, 6, size=300)  # gold pairs per sentence
    hits = rng.binomial(pairs, 0.7)  # a head right 70% of the time
    low, high = bootstrap_ratio_interval(hits, pairs, seed=0)
    share = hits.sum() / pairs.sum()
    assert low < share < high and high - low < 0.08
    assert 0.6 < low and high < 0.8
    # the same resample for every column: a column that equals another has the same interval
    low2, high2 = bootstrap_ratio_interval(np.stack([hits, hits], axis=1), pairs, seed=0)
    assert low2[0] == low2[1] == pytest.approx(low) and high2[0] == high2[1] == pytest.approx(high)
    # a gain (difference of counts) whose two terms agree everywhere has the interval [0, 0]
    low3, high3 = bootstrap_ratio_interval(hits - hits, pairs)
    assert low3 == high3 == 0


def test_bootstrap_ratio_interval_rejects_bad_input():
    with pytest.raises(ValueError, match="at least 2 units"):
        bootstrap_ratio_interval([1], [1])
    with pytest.raises(ValueError, match="denominators has shape"):
        bootstrap_ratio_interval([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="sum to 0"):
        bootstrap_ratio_interval([0, 0], [0, 0])
    with pytest.raises(ValueError, match="level"):
        bootstrap_ratio_interval([1, 1], [1, 1], level=95)


def test_smallest_detectable_count_reads_the_null_maximum():
    null_max = np.concatenate([np.full(90, 0.2), np.full(10, 0.5)])  # 10% of relabellings reach 0.5
    # k / 10 > 0.5 is exceeded by no relabelling: p = 1 / 101; k / 10 in (0.2, 0.5] by 10: p = 11 / 101 > 0.05
    assert smallest_detectable_count(null_max, 10, alpha=0.05) == 6
    assert smallest_detectable_count(null_max, 10, alpha=0.2) == 3
    assert smallest_detectable_count(np.ones(100), 10) is None
    with pytest.raises(ValueError, match="alpha"):
        smallest_detectable_count(null_max, 10, alpha=5)


def test_detection_power_is_a_binomial_tail():
    for n_items, rate, smallest in ((22, 0.7, 12), (22, 0.3, 1), (5, 0.5, 5), (40, 0.9, 33), (10, 0.2, 0)):
        assert detection_power(n_items, rate, smallest) == pytest.approx(stats.binom.sf(smallest - 1, n_items, rate))
    # and by simulation: heads that flip each of 22 pairs the right way with probability 0.7
    right_flips = (np.random.default_rng(0).random((40_000, 22)) < 0.7).sum(axis=1)
    found = np.mean(right_flips >= 12)
    assert detection_power(22, 0.7, 12) == pytest.approx(found, abs=4 * np.sqrt(found * (1 - found) / 40_000))
    assert detection_power(10, 1.0, 10) == 1.0 and detection_power(10, 0.0, 1) == 0.0
    assert detection_power(10, 0.9, None) == 0.0
    assert detection_power(22, 0.5, 12) < detection_power(22, 0.7, 12) < detection_power(22, 0.9, 12)
    for rate in (-0.1, 1.5, "0.5"):
        with pytest.raises(ValueError, match="rate"):
            detection_power(22, rate, 12)


def test_detection_power_with_wrong_flips_is_a_multinomial_tail():
    """A head that also flips some pairs the wrong way: found when |right - wrong| reaches the count; scipy's
    multinomial and a simulation as the oracles."""
    n_items, smallest = 22, 12
    for rate, wrong_rate in ((0.7, 0.1), (0.7, 0.2), (0.5, 0.3), (0.2, 0.7)):
        expected = sum(stats.multinomial.pmf([right, wrong, n_items - right - wrong], n_items,
                                             [rate, wrong_rate, 1 - rate - wrong_rate])
                       for right in range(n_items + 1) for wrong in range(n_items + 1 - right)
                       if abs(right - wrong) >= smallest)
        assert detection_power(n_items, rate, smallest, wrong_rate=wrong_rate) == pytest.approx(expected, rel=1e-9)
    draws = np.random.default_rng(1).random((40_000, n_items))
    net = (draws < 0.7).sum(axis=1) - ((draws >= 0.7) & (draws < 0.8)).sum(axis=1)  # 70% right, 10% wrong
    found = np.mean(np.abs(net) >= smallest)
    assert detection_power(n_items, 0.7, smallest, wrong_rate=0.1) == pytest.approx(
        found, abs=4 * np.sqrt(found * (1 - found) / 40_000))
    # wrong flips cost power, and none at all is the binomial tail
    assert detection_power(22, 0.7, 12, wrong_rate=0.2) < detection_power(22, 0.7, 12, wrong_rate=0.1) \
        < detection_power(22, 0.7, 12)
    assert detection_power(22, 0.7, 12, wrong_rate=0.0) == pytest.approx(stats.binom.sf(11, 22, 0.7))
    with pytest.raises(ValueError, match="add up to at most 1"):
        detection_power(22, 0.7, 12, wrong_rate=0.4)
    with pytest.raises(ValueError, match="wrong_rate"):
        detection_power(22, 0.7, 12, wrong_rate=-0.1)
