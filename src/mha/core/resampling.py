"""Bootstrap resamples: which items each resample draws, the one place the book draws them (chapters 3 and 4).

Every bootstrap interval in the book, whether of a mean paired difference, a pooled share over sentences, a count
of heads or a median over training seeds, resamples its items (sentences, pairs, seeds) with replacement from
:func:`bootstrap_indices`, so the same ``seed`` gives the same resamples everywhere, and the same numbers on every
machine: the draws are ``np.random.default_rng(seed).integers(0, n_items, size=(n_resamples, n_items))``.
:func:`bootstrap_counts` gives the same resamples as how often each item was drawn, which turns any weighted sum
over items into its resampled sums in one product. The intervals themselves are in :mod:`mha.analysis.statistics`
(and :func:`mha.lab.head_count_study.median_interval` for the lab's seeds).
"""

from __future__ import annotations

import numpy as np

from mha.core.validation import check_seed, check_size, check_whole_number

__all__ = ["bootstrap_indices", "bootstrap_counts"]


def bootstrap_indices(n_items: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """The items each bootstrap resample draws: (n_resamples, n_items) indices in ``0 .. n_items - 1`` (3.1-3.7, 4.3).

    Row ``r`` is resample ``r``: ``n_items`` draws with replacement, each item equally likely, from
    ``np.random.default_rng(seed)``. ``values[bootstrap_indices(len(values), ...)]`` is then (n_resamples, n_items,
    ...): every resample of ``values`` at once.
    """
    n_items = check_whole_number("n_items", n_items, minimum=1, meaning="the items to resample")
    n_resamples = check_whole_number("n_resamples", n_resamples, minimum=1)
    check_size("the bootstrap resamples (n_resamples, n_items)", (n_resamples, n_items))
    rng = np.random.default_rng(check_seed("seed", seed))
    return rng.integers(0, n_items, size=(n_resamples, n_items))  # (resamples, items)


def bootstrap_counts(n_items: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """How often each item is drawn in each resample of :func:`bootstrap_indices`: (n_resamples, n_items) floats.

    Each row sums to ``n_items``. The same ``seed`` gives the same resamples as :func:`bootstrap_indices`, so an
    interval computed from either agrees. Weighting by these counts turns any sum over items into its resampled
    sums at once: ``counts @ values`` (sections 3.2 and 4.3).
    """
    draws = bootstrap_indices(n_items, n_resamples, seed)  # (resamples, items)
    counts = np.zeros(draws.shape)
    np.add.at(counts, (np.arange(draws.shape[0])[:, None], draws), 1.0)  # counts[r, i] += 1 for each draw of i
    return counts
