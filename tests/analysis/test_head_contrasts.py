"""Paired statistics per head: t, bootstrap, sign-flip max-T p-values, held-out selection."""

import itertools

import numpy as np
import pytest

from mha.analysis.statistics import (
    bootstrap_interval,
    familywise_p_values,
    held_out_best,
    mean_by_unit,
    paired_t,
    sign_flip_signs,
)


def test_paired_t_matches_the_formula_and_handles_constant_heads():
    d = np.array([[1.0, 0.0, 2.0], [3.0, 0.0, 2.0], [2.0, 0.0, 2.0]])  # (items, heads)
    t = paired_t(d)
    assert t[0] == pytest.approx(2.0 / (1.0 / np.sqrt(3)))
    assert t[1] == 0.0 and t[2] == np.inf  # never responds / responds identically every time


def test_paired_t_keeps_trailing_axes():
    assert paired_t(np.random.default_rng(0).normal(size=(5, 6, 12))).shape == (6, 12)


def test_bootstrap_interval_brackets_the_mean_and_is_seeded():
    d = np.random.default_rng(1).normal(loc=1.0, size=(30, 4))
    low, high = bootstrap_interval(d, seed=3)
    assert low.shape == high.shape == (4,)
    assert np.all(low < d.mean(0)) and np.all(d.mean(0) < high)
    assert np.array_equal(low, bootstrap_interval(d, seed=3)[0])


def test_exact_sign_flip_test_on_a_tiny_example():
    # all 2^3 relabellings: the observed one is the most extreme for head 0, which responds every time
    d = np.array([[1.0, 0.5], [1.0, -0.5], [1.0, 0.1]])
    signs = np.array(list(itertools.product([-1.0, 1.0], repeat=3)))
    p, null_max = familywise_p_values(d, signs, statistic="mean")
    # null_max >= 1 only for the all-plus and all-minus relabellings
    assert null_max.shape == (8,)
    assert p[0] == pytest.approx((1 + 2) / 9)
    assert p[1] == pytest.approx(1.0)  # head 1's |mean| (0.033) is beaten by every relabelling's maximum


def test_familywise_p_values_are_never_smaller_than_per_head_ones():
    rng = np.random.default_rng(0)
    d = rng.normal(size=(12, 20))
    signs = sign_flip_signs(12, 400, seed=1)
    p, _ = familywise_p_values(d, signs)
    for head in range(20):
        p_alone, _ = familywise_p_values(d[:, [head]], signs)
        assert p[head] >= p_alone[0] - 1e-12


def test_a_real_effect_survives_and_noise_does_not():
    rng = np.random.default_rng(2)
    d = rng.normal(size=(30, 72))
    d[:, 5] += 1.5
    p, _ = familywise_p_values(d, sign_flip_signs(30, 2000, seed=0))
    assert p[5] < 0.01 and (np.delete(p, 5) > 0.05).mean() > 0.9


def test_held_out_best_finds_a_planted_head_and_deflates_noise():
    rng = np.random.default_rng(3)
    noise = rng.normal(size=(20, 50))
    result = held_out_best(noise, n_splits=200, seed=0)
    assert result.selection_score.mean() > 0.5 > abs(result.held_out_score.mean())  # the winner's curse
    planted = noise.copy()
    planted[:, 7] += 3.0
    result = held_out_best(planted, n_splits=50, seed=0)
    assert np.all(result.chosen == 7) and result.held_out_score.mean() > 2.0


def test_mean_by_unit_averages_rows_with_the_same_label_in_first_seen_order():
    labels, means = mean_by_unit(np.array([[1.0], [3.0], [10.0], [5.0]]), ["b", "a", "b", "a"])
    assert labels == ["b", "a"] and means[:, 0].tolist() == [5.5, 4.0]


def test_bad_input_is_explained():
    with pytest.raises(ValueError, match="at least 2 items"):
        paired_t(np.ones((1, 3)))
    with pytest.raises(ValueError, match="one sign per item"):
        familywise_p_values(np.ones((4, 2)), np.ones((10, 3)))
    with pytest.raises(ValueError, match="one label per item"):
        mean_by_unit(np.ones((3, 2)), ["a"])


def test_head_statistics_is_each_test_per_head_in_one_table():
    from scipy.stats import ttest_1samp

    from mha.analysis.statistics import head_statistics

    d = np.random.default_rng(4).normal(loc=0.2, size=(12, 2, 3))  # (units, layers, heads)
    names = ["L0H0", "L0H1", "L0H2", "L1H0", "L1H1", "L1H2"]
    table = head_statistics(d, names, n_permutations=200, seed=1)
    flat = d.reshape(12, 6)
    assert list(table["head"]) == names
    assert np.allclose(table["mean difference"], flat.mean(axis=0))
    assert np.allclose(table["t"], ttest_1samp(flat, 0.0).statistic)
    # family-wise p by hand: each relabelling's largest |t| over heads, against each head's own |t|
    signs = np.random.default_rng(1).choice(np.array([-1.0, 1.0]), size=(200, 12))
    null_max = np.array([np.abs(ttest_1samp(s[:, None] * flat, 0.0).statistic).max() for s in signs])
    observed = np.abs(ttest_1samp(flat, 0.0).statistic)
    assert np.allclose(table["family-wise p"], [(1 + (null_max >= t - 1e-12).sum()) / 201 for t in observed])
    # the percentile interval of 2,000 resampled means, by hand
    picks = np.random.default_rng(1).integers(0, 12, size=(2000, 12))
    means = flat[picks].mean(axis=1)
    assert np.allclose(table["95% low"], np.quantile(means, 0.025, axis=0))
    assert np.allclose(table["95% high"], np.quantile(means, 0.975, axis=0))
    with pytest.raises(ValueError, match="one name per head"):
        head_statistics(d, names[:5])


def test_percentile_of_heads_ranks_the_chosen_heads_against_random_sets():
    from scipy.stats import rankdata

    from mha.analysis.statistics import percentile_of_heads

    rng = np.random.default_rng(5)
    values = rng.normal(size=20)
    values[3] = values[7]                                      # a tie: broken in flat order
    chosen = np.zeros(20, dtype=bool)
    chosen[[0, 3, 7, 11]] = True
    draws = np.array([rng.permutation(20)[:4] for _ in range(300)])
    result = percentile_of_heads(values, chosen, draws)
    percentile = (rankdata(values, method="ordinal") - 0.5) / 20 * 100   # ordinal rank 1..20, half a step in
    observed = percentile[chosen].mean()
    null = np.array([percentile[d].mean() for d in draws])
    extreme = sum(abs(m - 50) >= abs(observed - 50) for m in null)
    assert result.chosen == pytest.approx(observed)
    assert result.others == pytest.approx(percentile[~chosen].mean())
    assert result.p_value == pytest.approx((1 + extreme) / 301)
    with pytest.raises(ValueError, match="one row per draw"):
        percentile_of_heads(values, chosen, draws[:, :3])


def test_percentile_test_states_its_power_as_the_normal_theory_of_a_mean_of_a_sample_predicts():
    from mha.analysis.statistics import percentile_of_heads

    n_heads, size = 72, 12
    rng = np.random.default_rng(6)
    chosen = np.zeros(n_heads, dtype=bool)
    chosen[:size] = True
    draws = np.array([rng.permutation(n_heads)[:size] for _ in range(20_000)])
    result = percentile_of_heads(np.arange(n_heads), chosen, draws)
    percentiles = (np.arange(n_heads) + 0.5) / n_heads * 100
    # the mean of 12 of 72 values drawn without replacement: its standard error, by hand
    se = percentiles.std() / np.sqrt(size) * np.sqrt((n_heads - size) / (n_heads - 1))
    assert result.critical == pytest.approx(1.96 * se, rel=0.05)
    assert result.detectable == pytest.approx((1.96 + 0.8416) * se, rel=0.05)
    null = percentiles[draws].mean(axis=1)
    assert ((np.abs(null - 50) > result.critical).sum() + 1) / (len(null) + 1) <= 0.05  # beyond it: called at 5%
