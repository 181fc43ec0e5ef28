"""The Kaplan-Meier curve and its restricted mean (mha.core.survival), against scipy and hand calculations."""

import numpy as np
import pytest
from scipy import stats

from mha.core.survival import KaplanMeier, kaplan_meier, restricted_mean_survival_time

# The 6-MP arm of Freireich et al.'s leukaemia trial (weeks in remission), the textbook example of the estimator:
# 9 relapses and 12 censored remissions.
RELAPSED = [6, 6, 6, 7, 10, 13, 16, 22, 23]
CENSORED = [6, 9, 10, 11, 17, 19, 20, 25, 32, 32, 34, 35]


def six_mp():
    return np.array(RELAPSED + CENSORED, dtype=float), np.array([True] * len(RELAPSED) + [False] * len(CENSORED))


def test_the_curve_of_the_textbook_example_by_hand():
    curve = kaplan_meier(*six_mp())
    # at each relapse time: n at risk, d relapses, and S = product of (1 - d/n), worked by hand
    assert curve.times.tolist() == [6, 7, 10, 13, 16, 22, 23]
    assert curve.at_risk.tolist() == [21, 17, 15, 12, 11, 7, 6]
    assert curve.events.tolist() == [3, 1, 1, 1, 1, 1, 1]
    np.testing.assert_allclose(curve.survival, [18 / 21, 18 / 21 * 16 / 17, 18 / 21 * 16 / 17 * 14 / 15,
                                                0.6902, 0.6275, 0.5378, 0.4482], atol=5e-5)
    assert curve.n_items == 21 and curve.last_time == 35 and curve.last_censored


@pytest.mark.parametrize("seed", range(6))
def test_the_curve_agrees_with_scipys_ecdf_on_censored_data_with_ties(seed):
    rng = np.random.default_rng(seed)
    times = rng.integers(1, 12, size=15).astype(float)  # few distinct values: many ties, events with censorings
    observed = rng.random(15) < 0.6
    observed[0] = True
    curve = kaplan_meier(times, observed)
    oracle = stats.ecdf(stats.CensoredData(uncensored=times[observed], right=times[~observed])).sf
    grid = np.arange(0.0, 14.0, 0.5)
    np.testing.assert_allclose(curve.at(grid), oracle.evaluate(grid), atol=1e-12)


def test_without_censoring_the_curve_is_one_minus_the_empirical_distribution_and_the_mean_is_the_mean():
    times = np.array([300.0, 150.0, 450.0, 150.0, 800.0])
    curve = kaplan_meier(times, np.ones(5, dtype=bool))
    grid = np.array([0.0, 149.0, 150.0, 299.0, 300.0, 799.0, 800.0, 1000.0])
    np.testing.assert_allclose(curve.at(grid), [(times > t).mean() for t in grid])
    for horizon in (100.0, 400.0, 800.0, 5000.0):
        assert restricted_mean_survival_time(curve, horizon) == pytest.approx(np.minimum(times, horizon).mean())


@pytest.mark.parametrize("horizon", [5, 20, 35])
def test_the_restricted_mean_is_the_area_under_scipys_curve(horizon):
    times, observed = six_mp()
    oracle = stats.ecdf(stats.CensoredData(uncensored=times[observed], right=times[~observed])).sf
    # integer times: the curve is constant on every [t, t + 1), so the area is a sum of unit-wide strips
    area = oracle.evaluate(np.arange(horizon)).sum()
    assert restricted_mean_survival_time(kaplan_meier(times, observed), horizon) == pytest.approx(area)


def test_beyond_a_last_censored_item_the_curve_is_held_flat():
    curve = kaplan_meier([100.0, 200.0, 300.0], [True, False, False])  # S = 2/3 after 100, unknown after 300
    assert curve.at([99.0, 100.0, 5000.0]).tolist() == pytest.approx([1.0, 2 / 3, 2 / 3])
    assert restricted_mean_survival_time(curve, 1000.0) == pytest.approx(100.0 + 2 / 3 * 900.0)


@pytest.mark.parametrize("times, observed, words", [
    ([1.0, 2.0], [True], "one flag per item"),
    ([1.0, float("inf")], [True, False], "not inf"),
    ([-1.0, 2.0], [True, True], ">= 0"),
    ([], [], "non-empty"),
    ([1.0, 2.0], [2, 0], "True"),
])
def test_bad_input_is_refused_with_a_message(times, observed, words):
    with pytest.raises(ValueError, match=words):
        kaplan_meier(times, observed)


def test_the_restricted_mean_needs_a_curve_and_a_positive_horizon():
    with pytest.raises(TypeError, match="KaplanMeier"):
        restricted_mean_survival_time([1.0, 2.0], 10.0)
    curve = kaplan_meier([1.0], [True])
    assert isinstance(curve, KaplanMeier)
    with pytest.raises(ValueError, match="horizon"):
        restricted_mean_survival_time(curve, 0.0)
