"""Functions of mha.analysis.statistics that take a count from the caller (n_items) do work that does not grow with
it in a Python loop: the smallest detectable count is found by bisection, detection power from binomial
distributions over the right counts, bounded by LIMITS["items"]. Oracles: brute-force enumeration of every
outcome for small counts, a loop over every count, and scipy's binomial tail."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hostile import Case, run_cases

from mha.analysis.statistics import detection_power, smallest_detectable_count


def every_outcome_power(n_items: int, rate: float, wrong_rate: float, smallest_count: int) -> float:
    """The chance that |right - wrong| >= smallest_count, summed over all 3**n_items outcomes of the pairs."""
    chance = {1: rate, -1: wrong_rate, 0: 1 - rate - wrong_rate}
    return sum(math.prod(chance[flip] for flip in outcome)
               for outcome in itertools.product((1, -1, 0), repeat=n_items) if abs(sum(outcome)) >= smallest_count)


@pytest.mark.parametrize("n_items, rate, wrong_rate, smallest_count",
                         [(6, 0.7, 0.0, 4), (6, 0.5, 0.2, 3), (5, 0.3, 0.3, 1), (7, 1.0, 0.0, 7), (4, 0.0, 1.0, 2),
                          (6, 0.4, 0.6, 0), (3, 0.2, 0.1, 5), (8, 0.25, 0.5, 2)])
def test_detection_power_is_the_chance_summed_over_every_outcome(n_items, rate, wrong_rate, smallest_count):
    expected = every_outcome_power(n_items, rate, wrong_rate, smallest_count)
    assert detection_power(n_items, rate, smallest_count, wrong_rate=wrong_rate) == pytest.approx(expected, abs=1e-12)


def test_smallest_detectable_count_is_the_first_count_a_loop_over_every_count_finds():
    null_max = np.random.default_rng(0).random(999)
    for n_items in (1, 2, 5, 22, 100, 1000):
        looped = next((k for k in range(1, n_items + 1)
                       if (1 + (null_max >= k / n_items - 1e-12).sum()) / (1 + null_max.size) <= 0.05), None)
        assert smallest_detectable_count(null_max, n_items) == looped
    assert smallest_detectable_count([1.0] * 50, 10) is None  # even every pair right is not called


@pytest.mark.slow
def test_a_huge_count_is_answered_without_a_loop_over_it_or_refused():
    """In a child with a CPU-time limit (tests/hostile.py): a loop over 10**30 counts or 10**10 outcome pairs would be
    killed there. The answers are checked against closed forms: with null_max = 0.5, 0.25 and 0.125 (alpha 0.5), the
    smallest count called is the first k with k / n > 0.25 (two exceedances allowed of three); with no wrong flips,
    detection power is scipy's binomial tail."""
    setup = """
        from scipy.stats import binom
        from mha.analysis.statistics import detection_power, smallest_detectable_count
        def expect(got, wanted):
            assert abs(got - wanted) <= 1e-9 * max(1, abs(wanted)), (got, wanted)
    """
    n = 10**30
    cases = [
        Case("smallest count of 10**30", f"expect(smallest_detectable_count([0.5, 0.25, 0.125], {n}, alpha=0.5), "
                                         f"{n // 4 + 1})", None, ""),
        Case("power of 10**5 pairs", "expect(detection_power(10**5, 0.004, 420), binom.sf(419, 10**5, 0.004))",
             None, ""),
        Case("power of 10**7 pairs", "detection_power(10**7, 0.5, 3)", "SizeLimitError",
             "10,000,001 items, more than the limit of 1,000,000 (mha.core.validation.LIMITS['items']"),
    ]
    assert run_cases(setup, cases) == []
