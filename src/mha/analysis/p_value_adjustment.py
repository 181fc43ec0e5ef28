"""Adjusting a list of p-values for having run many tests: Bonferroni and Holm (the background page "A statistics
toolkit for reading heads").

Test 72 heads at the 5% level and, when no head responds at all, about 3.6 of them pass by luck. The family-wise
error rate is the chance that *any* test of the family passes by luck; these adjustments keep it at or below the
level, for any dependence between the tests {Westfall and Young 1993}:

- :func:`bonferroni_adjusted`: each p-value times the number of tests (capped at 1);
- :func:`holm_adjusted`: Holm's step-down version, never larger than Bonferroni's and so never less powerful.

Chapter 3 mostly uses the permutation version instead (:func:`mha.analysis.statistics.familywise_p_values`),
which knows how correlated the heads are and so loses less power; these two need only the p-values.
A hypothesis is rejected at level ``alpha`` when its adjusted p-value is at most ``alpha``.
"""

from __future__ import annotations

import numpy as np

from mha.core.validation import as_real_array

__all__ = ["bonferroni_adjusted", "holm_adjusted"]


def _as_p_values(p_values) -> np.ndarray:
    p_values = as_real_array("p_values", p_values)
    if p_values.ndim != 1 or p_values.size == 0:
        raise ValueError(f"p_values has shape {p_values.shape}; give a flat list of at least one p-value, "
                         "one per test (flatten a (layers, heads) table with .ravel() first).")
    if not np.all((p_values >= 0) & (p_values <= 1)):
        raise ValueError("p-values must lie between 0 and 1 (no NaN); check where they were computed.")
    return p_values


def bonferroni_adjusted(p_values) -> np.ndarray:
    """Bonferroni-adjusted p-values: ``min(1, m * p)`` for each of the ``m`` tests, shape (m,) -> (m,).

    Valid whatever the dependence between the tests, and the bluntest of the corrections.
    """
    p_values = _as_p_values(p_values)
    return np.minimum(1.0, len(p_values) * p_values)


def holm_adjusted(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values, in the order given: shape (m,) -> (m,).

    Sort the p-values from smallest to largest, p_(1) <= ... <= p_(m). The k-th smallest is multiplied by
    ``m - k + 1`` (the smallest by m, as in Bonferroni, the largest by 1), the results are made non-decreasing
    along that order (each is at least the one before it: a larger p-value is never rejected when a smaller one is
    not), and capped at 1. Controls the family-wise error rate like Bonferroni, and rejects at least as much.
    """
    p_values = _as_p_values(p_values)
    m = len(p_values)
    order = np.argsort(p_values, kind="stable")  # smallest first
    stepped = (m - np.arange(m)) * p_values[order]  # (m,): m * p_(1), (m - 1) * p_(2), ..., 1 * p_(m)
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(stepped))  # non-decreasing, at most 1
    adjusted = np.empty(m)
    adjusted[order] = adjusted_sorted  # back to the order given
    return adjusted
