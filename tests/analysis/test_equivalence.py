"""What a null rules out: the standard error of a pooled share, equivalence tests and the smallest detectable effect."""

import numpy as np
import pytest
from scipy import stats

from mha.analysis.equivalence import gain_bounds, ratio_standard_error
from mha.analysis.statistics import resampled_ratios
from mha.core.resampling import bootstrap_counts


def test_ratio_standard_error_is_the_standard_error_of_the_mean_with_one_pair_per_sentence():
    values = np.random.default_rng(0).normal(size=50)
    got = ratio_standard_error(values, np.ones(50))
    assert got == pytest.approx(stats.sem(values), rel=1e-12)


def test_ratio_standard_error_agrees_with_a_bootstrap_over_sentences():
    rng = np.random.default_rng(1)
    pairs = rng.integers(1, 6, size=400)
    hits = rng.binomial(pairs, rng.uniform(0.2, 0.8, size=400))  # sentences differ: clustered pairs
    draws = resampled_ratios(hits, pairs, bootstrap_counts(400, 4000, seed=2))
    assert ratio_standard_error(hits, pairs) == pytest.approx(draws.std(), rel=0.06)
    with pytest.raises(ValueError, match="units"):
        ratio_standard_error(hits[:5], pairs[:4])


def test_equivalence_test_is_two_one_sided_t_tests_on_large_samples():
    rng = np.random.default_rng(3)
    for shift in (0.0, 0.06, 0.12):
        x = rng.normal(loc=shift, scale=1.0, size=20_000)
        se = stats.sem(x)
        got = gain_bounds(x.mean(), se, 0.05)
        above = stats.ttest_1samp(x, -0.05, alternative="greater").pvalue
        below = stats.ttest_1samp(x, 0.05, alternative="less").pvalue
        assert float(got["tost_p"]) == pytest.approx(max(above, below), rel=1e-2, abs=1e-6)
        assert bool(got["equivalent"]) == (max(above, below) < 0.05)
        assert float(got["test_p"]) == pytest.approx(stats.ttest_1samp(x, 0.0).pvalue, rel=1e-2, abs=1e-6)


def test_detectable_gain_is_found_with_the_stated_power():
    se = 0.02
    detectable = float(gain_bounds(0.0, se, 0.05)["detectable"])
    z = stats.norm.ppf(0.975)
    power = stats.norm.sf(z - detectable / se) + stats.norm.cdf(-z - detectable / se)  # both tails, by hand
    assert power == pytest.approx(0.8, abs=1e-5)
    with pytest.raises(ValueError, match="positive"):
        gain_bounds(0.0, 0.0, 0.05)
