"""Honest statistics for "does any of the 72 heads respond?": paired differences per head (chapter 3).

The sections on coreference and on content and rare words of chapter 3
("Empirical head roles") all ask the same question: we build sentence items
in matched pairs that differ in one controlled way (the word that flips a
pronoun's antecedent, a related versus an unrelated word, a rare versus a
common word), measure every head on both halves, and get one paired
difference per item and head, an array of shape (items, heads). With 72
heads and a few dozen items the best head looks good by chance alone, so this
module gives the tools to say how good is good:

* :func:`paired_t` and :func:`bootstrap_interval`: each head on its own;
* :func:`sign_flip_signs` and :func:`familywise_p_values`: the sign-flip
  permutation test with the max-statistic correction (Westfall and Young's
  max-T). Under the null hypothesis the two halves of an item are
  exchangeable, so each item's difference is as likely to have the opposite
  sign; one random sign per ITEM, shared by all heads, keeps the correlation
  between heads, and comparing each head with the null distribution of the
  MAXIMUM over heads controls the chance that any head is called by luck;
* :func:`head_statistics`: all of the above for every head, as one table (3.4);
* :func:`percentile_of_heads`: whether a chosen set of heads ranks higher than random sets of the same size
  (4.2);
* :func:`held_out_best`: pick the best head on half of the items and score
  it on the other half, many times over random halves;
* :func:`resampled_means`, :func:`resampled_ratios` and :func:`percentile_interval` turn any per-sentence score
  into its resampled values and interval (3.2, 4.3), given resamples of whole sentences as counts from
  :func:`mha.core.resampling.bootstrap_counts` (where every bootstrap of the book draws its resamples);
* :func:`bootstrap_ratio_interval`: a bootstrap interval for a pooled share
  (hits over pairs, summed over sentences), resampling whole sentences
  (3.2, where a sentence holds several gold pairs);
* :func:`smallest_detectable_count` and :func:`detection_power`: what an
  absence of evidence is worth, as the chance that a head with a given true
  rate would have been found by the test we ran (3.3).

"heads" can be any trailing axes: (items, layers, heads) works too, every
cell being one head.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mha.core.resampling import bootstrap_counts, bootstrap_indices
from mha.core.validation import (
    InputError,
    as_real_array,
    check_items,
    check_seed,
    check_size,
    check_whole_number,
    is_real_number,
)

__all__ = ["mean_by_unit", "paired_t", "bootstrap_interval", "resampled_means", "resampled_ratios",
           "percentile_interval", "bootstrap_ratio_interval", "sign_flip_signs",
           "familywise_p_values", "head_statistics", "PercentileTest", "percentile_of_heads", "HeldOutResult",
           "held_out_best", "smallest_detectable_count", "detection_power"]


def _as_differences(differences) -> np.ndarray:
    differences = as_real_array("differences", differences, meaning="(items, heads...)")
    if differences.ndim < 1 or differences.shape[0] < 2:
        raise ValueError(
            f"differences has shape {differences.shape}; give (items, heads...) with at least 2 items, "
            "one paired difference (condition A - condition B) per item and head."
        )
    if not np.isfinite(differences).all():
        raise ValueError("differences contain NaN or infinity; every item needs a finite score for every head.")
    return differences


def mean_by_unit(values, units) -> tuple[list, np.ndarray]:
    """Average the rows of ``values`` (items, heads...) that share a unit label: -> (labels, (units, heads...)).

    Items built from the same words are not independent observations (the
    same word pair in three frames, say); averaging them into one row per
    unit before testing keeps the tests honest. Labels keep their order of
    first appearance. Chapter 3, "Content and rare words".
    """
    values = as_real_array("values", values)
    units = list(check_items("units", units, "one unit label per item"))
    if values.ndim == 0 or len(units) != values.shape[0]:
        raise ValueError(f"{len(units)} unit labels for {values.shape[0]} items; give one label per item.")
    labels = list(dict.fromkeys(units))
    index = {label: i for i, label in enumerate(labels)}
    rows = np.array([index[u] for u in units])
    means = np.stack([values[rows == i].mean(axis=0) for i in range(len(labels))])
    return labels, means


def paired_t(differences) -> np.ndarray:
    """The one-sample t statistic of paired differences, per head (chapter 3, empirical head roles).

    ``differences`` (items, heads...) -> (heads...): mean / (standard
    deviation / sqrt(items)), with ddof = 1. A head whose differences are all
    equal gets t = 0 when they are all 0 (it never responds) and +-inf
    otherwise.
    """
    differences = _as_differences(differences)
    n = differences.shape[0]
    mean = differences.mean(axis=0)
    standard_error = differences.std(axis=0, ddof=1) / np.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / standard_error
    t = np.where(standard_error > 1e-12, t, np.where(np.abs(mean) > 1e-12, np.copysign(np.inf, mean), 0.0))
    return t


def bootstrap_interval(differences, *, n_resamples: int = 2000, level: float = 0.95,
                       seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the mean paired difference, per head (chapter 3).

    Items are resampled with replacement (the same resample for every head),
    ``n_resamples`` times from ``np.random.default_rng(seed)``. Returns
    ``(low, high)``, each of shape (heads...). This is an interval for one
    head looked at on its own; it does not correct for having looked at 72.
    """
    differences = _as_differences(differences)
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    n_resamples = check_whole_number("n_resamples", n_resamples, minimum=1)
    n = differences.shape[0]
    check_size("the bootstrap's resampled means (n_resamples, items, heads)",
               (n_resamples, n, math.prod(differences.shape[1:])))
    resampled_items = bootstrap_indices(n, n_resamples, seed)  # (resamples, items)
    flat = differences.reshape(n, -1)  # (items, heads)
    means = flat[resampled_items].mean(axis=1)  # (resamples, heads)
    low, high = percentile_interval(means, level)  # each (heads,)
    return low.reshape(differences.shape[1:]), high.reshape(differences.shape[1:])


def sign_flip_signs(n_items: int, n_permutations: int = 5000, seed: int = 0) -> np.ndarray:
    """Random signs (permutations, items), +1 or -1, one row per relabelling of the items (chapter 3).

    Row ``r`` says, for every item, whether permutation ``r`` swaps its two
    halves (-1) or keeps them (+1). Drawn from ``np.random.default_rng(seed)``.
    """
    n_items = check_whole_number("n_items", n_items, minimum=1)
    n_permutations = check_whole_number("n_permutations", n_permutations, minimum=1)
    check_size("the table of signs (n_permutations, n_items)", (n_permutations, n_items))
    rng = np.random.default_rng(check_seed("seed", seed))
    return rng.choice(np.array([-1.0, 1.0]), size=(n_permutations, n_items))


def familywise_p_values(differences, signs, *, statistic: str = "t") -> tuple[np.ndarray, np.ndarray]:
    """Sign-flip permutation p-values per head, corrected for looking at all heads (max-T) (chapter 3).

    ``differences`` (items, heads...) are paired differences; ``signs``
    (permutations, items) are +-1 relabellings (see :func:`sign_flip_signs`).
    For each relabelling the differences are multiplied by the signs (the same
    sign for every head of an item), the statistic (``"t"``: :func:`paired_t`;
    ``"mean"``: the mean difference) is computed for every head, and the
    largest ABSOLUTE value over heads is kept: ``null_max`` (permutations,).
    Head ``h``'s two-sided, family-wise p-value is
    ``(1 + #{null_max >= |stat_h|}) / (1 + permutations)``. Returns
    ``(p_values (heads...), null_max (permutations,))``.
    """
    differences = _as_differences(differences)
    signs = as_real_array("signs", signs)
    n = differences.shape[0]
    if signs.ndim != 2 or signs.shape[1] != n:
        raise ValueError(f"signs has shape {signs.shape}; it should be (permutations, {n}): one sign per item.")
    if statistic not in ("t", "mean"):
        raise ValueError(f"statistic must be 't' or 'mean', got {statistic!r}.")
    flat = differences.reshape(n, -1)  # (items, heads)
    flipped = signs[:, :, None] * flat[None]  # (permutations, items, heads)
    mean = flipped.mean(axis=1)  # (permutations, heads)
    if statistic == "t":
        standard_error = flipped.std(axis=1, ddof=1) / np.sqrt(n)
        with np.errstate(divide="ignore", invalid="ignore"):
            null = np.where(standard_error > 1e-12, mean / standard_error,
                            np.where(np.abs(mean) > 1e-12, np.inf, 0.0))
        observed = paired_t(differences).reshape(-1)
    else:
        null, observed = mean, flat.mean(axis=0)
    null_max = np.abs(null).max(axis=1)  # (permutations,)
    exceed = (null_max[:, None] >= np.abs(observed)[None, :] - 1e-12).sum(axis=0)  # (heads,)
    p_values = (1 + exceed) / (1 + len(null_max))
    return p_values.reshape(differences.shape[1:]), null_max


def head_statistics(differences, head_names, *, n_permutations: int = 5000, seed: int = 0) -> pd.DataFrame:
    """A table of every head's mean difference, 95% interval, t and family-wise p (chapter 3, "Content and rare words").

    ``differences`` (units, layers, heads) are paired differences, one row per unit. The table has one row per head,
    in flat order ``layer * n_heads + head``, named by ``head_names`` (one name per head). The interval is
    :func:`bootstrap_interval` with ``seed``; the p-value is :func:`familywise_p_values` (max-T) over ``n_permutations``
    relabellings from :func:`sign_flip_signs` with the same ``seed``.
    """
    differences = np.asarray(differences)  # the means in the input's own precision
    n_cells = int(np.prod(_as_differences(differences).shape[1:]))
    if len(head_names) != n_cells:
        raise ValueError(f"head_names has {len(head_names)} names for {n_cells} heads: give one name per head, in "
                         "flat order (mha.book.head_labels(n_layers, n_heads)).")
    low, high = bootstrap_interval(differences, seed=seed)
    p_values, _ = familywise_p_values(differences, sign_flip_signs(len(differences), n_permutations, seed=seed))
    return pd.DataFrame({"head": list(head_names),
                         "mean difference": differences.mean(axis=0).ravel(), "95% low": low.ravel(),
                         "95% high": high.ravel(), "t": paired_t(differences).ravel(),
                         "family-wise p": p_values.ravel()})


@dataclass(frozen=True)
class PercentileTest:
    """What :func:`percentile_of_heads` found: mean percentiles (0 = least), the two-sided p, and its power (4.2).

    ``critical``: the smallest distance of the mean percentile from 50 that the test calls at 5%; ``detectable``: the
    shift from 50 that it finds with probability 80%, if a true shift moves the null distribution by that much.
    """

    chosen: float
    others: float
    p_value: float
    critical: float
    detectable: float


def percentile_of_heads(values, chosen, random_sets) -> PercentileTest:
    """Mean percentile of a set of heads against random sets of its size (chapter 4, "Redundancy and pruning").

    ``values`` (heads,) ranks every head (ties in flat order); head ``i`` sits at percentile ``(rank + 0.5) / heads *
    100``. ``chosen`` (heads,) is a boolean mask, ``random_sets`` (draws, size) holds head indices, one random set of
    ``chosen.sum()`` heads per row. The p-value is two-sided around 50, the mean of any set under the null:
    ``(1 + #{|null - 50| >= |observed - 50|}) / (1 + draws)``. Its power, read off the same null: a set whose mean
    sits more than ``critical`` from 50 is called, and a shift of ``detectable`` is called in 80% of samples.
    """
    values, chosen, random_sets = np.asarray(values).ravel(), np.asarray(chosen, dtype=bool), np.asarray(random_sets)
    if chosen.shape != values.shape or random_sets.ndim != 2 or random_sets.shape[1] != chosen.sum():
        raise ValueError(f"values {values.shape} and chosen {chosen.shape} need one entry per head, and random_sets "
                         f"{random_sets.shape} one row per draw of {int(chosen.sum())} head indices.")
    percentile = (np.argsort(np.argsort(values, kind="stable"), kind="stable") + 0.5) / len(values) * 100
    observed = percentile[chosen].mean()
    null = percentile[random_sets].mean(axis=1)  # (draws,)
    distance = np.sort(np.abs(null - 50))[::-1]  # (draws,), largest first
    p_value = (1 + (distance >= abs(observed - 50)).sum()) / (1 + len(null))
    allowed = int(np.floor(0.05 * (1 + len(null)) - 1))  # null distances that may reach a called one
    critical = float(distance[min(max(allowed, 0), len(distance) - 1)])
    low, high = 0.0, 100.0  # the power of a shift grows with it: bisect for 80%
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (low, middle) if (np.abs(middle + null - 50) > critical).mean() >= 0.8 else (middle, high)
    detectable = high
    return PercentileTest(chosen=observed, others=percentile[~chosen].mean(), p_value=p_value, critical=critical,
                          detectable=detectable)


@dataclass(frozen=True)
class HeldOutResult:
    """What :func:`held_out_best` found over its random splits (chapter 3).

    ``chosen`` (splits,) is the flat index of the head picked on the
    selection half, ``selection_score`` its mean there and ``held_out_score``
    its mean on the other half, both (splits,).
    """

    chosen: np.ndarray
    selection_score: np.ndarray
    held_out_score: np.ndarray


def held_out_best(scores, *, n_splits: int = 1000, seed: int = 0) -> HeldOutResult:
    """Pick the best head on a random half of the items, score it on the other half, many times (chapter 3).

    ``scores`` (items, heads...) is one score per item and head, larger =
    better (a per-pair accuracy, a paired difference). Each split draws a
    random half of the items (``items // 2`` of them) from
    ``np.random.default_rng(seed)``, picks the head with the largest mean
    there (ties: the first head), and records that head's mean on the
    remaining items. The selection score is inflated by the choice; the
    held-out score is not. Heads are numbered flat (``layer * heads + head``
    for (items, layers, heads)).
    """
    scores = _as_differences(scores)
    n = scores.shape[0]
    n_splits = check_whole_number("n_splits", n_splits, minimum=1)
    check_size("the held-out splits (n_splits, items)", (n_splits, n))
    flat = scores.reshape(n, -1)  # (items, heads)
    rng = np.random.default_rng(check_seed("seed", seed))
    chosen, selection, held_out = [], [], []
    for _ in range(n_splits):
        order = rng.permutation(n)
        select, test = order[: n // 2], order[n // 2:]
        best = int(flat[select].mean(axis=0).argmax())
        chosen.append(best)
        selection.append(flat[select, best].mean())
        held_out.append(flat[test, best].mean())
    return HeldOutResult(np.array(chosen), np.array(selection), np.array(held_out))


def bootstrap_ratio_interval(numerators, denominators, *, n_resamples: int = 2000, level: float = 0.95,
                             seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of a pooled share, resampling units such as sentences (section 3.2).

    ``numerators`` (units, ...) and ``denominators`` (units,) or the same shape are per-unit counts: for a head
    and a relation, the gold pairs it gets right in each sentence and the gold pairs in each sentence. The
    statistic is the pooled share ``numerators.sum(0) / denominators.sum(0)``, the accuracy over all pairs; a
    difference of counts (head hits minus baseline hits) gives the interval of a gain. Units are resampled with
    replacement, the same resample for every trailing cell, ``n_resamples`` times from
    ``np.random.default_rng(seed)``: pairs of one sentence are not independent, so sentences are the unit. Returns
    ``(low, high)``, each of the trailing shape; a resample without any pair is dropped.
    """
    numerators = as_real_array("numerators", numerators)
    denominators = as_real_array("denominators", denominators)
    if numerators.ndim < 1 or numerators.shape[0] < 2:
        raise ValueError(f"numerators has shape {numerators.shape}; give (units, ...) with at least 2 units, one count "
                         "per unit (sentence).")
    if denominators.shape != numerators.shape[:denominators.ndim] or denominators.ndim < 1:
        raise ValueError(f"denominators has shape {denominators.shape}; it should be ({numerators.shape[0]},) or "
                         f"{numerators.shape}: one count per unit.")
    if (denominators < 0).any() or not np.isfinite(numerators).all() or not np.isfinite(denominators).all():
        raise ValueError("counts must be finite and denominators non-negative.")
    if denominators.sum(axis=0).min() <= 0:
        raise ValueError("the denominators sum to 0: there is nothing to take a share of.")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    shares = resampled_ratios(numerators, denominators, bootstrap_counts(numerators.shape[0], n_resamples, seed))
    return percentile_interval(shares, level)  # a resample without any pair is nan (0 / 0) and left out


def _check_items(values, counts, name: str) -> np.ndarray:
    values = as_real_array("values", values)
    counts = as_real_array("counts", counts)
    if counts.ndim != 2 or values.ndim < 1 or values.shape[0] != counts.shape[1]:
        raise ValueError(f"{name} has {values.shape[0] if values.ndim else 0} items along its first axis but counts "
                         f"is {counts.shape}; give counts (resamples, items) from bootstrap_counts(items, ...).")
    return values


def resampled_means(values, counts) -> np.ndarray:
    """The mean over items of ``values`` (items, ...) in every resample of ``counts`` (resamples, items) (3.2, 4.3)."""
    values = _check_items(values, counts, "values")
    counts = as_real_array("counts", counts)
    flat = values.reshape(values.shape[0], -1)  # (items, cells)
    return (counts @ flat / counts.sum(axis=1, keepdims=True)).reshape((counts.shape[0],) + values.shape[1:])


def resampled_ratios(numerators, denominators, counts) -> np.ndarray:
    """sum(numerators) / sum(denominators) over the items of every resample: (resamples, ...) (sections 3.2 and 4.3).

    The pooled ratio (an accuracy over all gold pairs, say) rather than the mean of per-item ratios, which would
    give a sentence with one pair as much weight as a sentence with twenty. ``denominators`` has the shape of
    ``numerators`` or of its leading axes.
    """
    numerators = _check_items(numerators, counts, "numerators")
    denominators = _check_items(denominators, counts, "denominators")
    counts = as_real_array("counts", counts)
    top = np.tensordot(counts, numerators, axes=(1, 0))  # (resamples, ...)
    bottom = np.tensordot(counts, denominators, axes=(1, 0))
    bottom = bottom.reshape(bottom.shape + (1,) * (top.ndim - bottom.ndim))
    with np.errstate(invalid="ignore", divide="ignore"):
        return top / bottom


def percentile_interval(resampled, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval over the first axis of ``resampled`` (resamples, ...): ``(low, high)`` (3.2, 4.3)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    tail = (1 - level) / 2
    resampled = as_real_array("resampled", resampled, meaning="(resamples, ...)")
    if resampled.ndim == 0 or len(resampled) == 0:
        raise InputError(f"resampled has shape {resampled.shape}; give (resamples, ...) with at least one resample.")
    low, high = np.nanquantile(resampled, [tail, 1 - tail], axis=0)
    return low, high


def smallest_detectable_count(null_max, n_items: int, *, alpha: float = 0.05) -> int | None:
    """The fewest right flips (out of ``n_items``, no wrong one) that :func:`familywise_p_values` would call (3.3).

    ``null_max`` (permutations,) is the null distribution of the largest |mean score| over heads that
    :func:`familywise_p_values` returns for the flip score (+1, 0, -1 per pair). A head with ``k`` right flips and
    no wrong one has mean score ``k / n_items`` and family-wise p-value
    ``(1 + #{null_max >= k / n_items}) / (1 + permutations)``; this is the smallest ``k`` whose p-value is at most
    ``alpha``, or None when even ``n_items`` right flips would not be called.
    """
    null_max = as_real_array("null_max", null_max).ravel()
    n_items = check_whole_number("n_items", n_items, minimum=1)
    if null_max.size == 0 or not np.isfinite(null_max).all():
        raise ValueError("null_max must be a non-empty array of finite values, as familywise_p_values returns it.")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be between 0 and 1 (e.g. 0.05), got {alpha!r}.")

    def called(k: int) -> bool:  # the p-value of k right flips is at most alpha; it only falls as k grows
        return (1 + (null_max >= k / n_items - 1e-12).sum()) / (1 + null_max.size) <= alpha

    if not called(n_items):
        return None
    not_called, smallest = 0, n_items  # a bisection: log2(n_items) p-values, however large n_items is
    while smallest - not_called > 1:
        middle = (not_called + smallest) // 2
        not_called, smallest = (not_called, middle) if called(middle) else (middle, smallest)
    return smallest


def detection_power(n_items: int, rate: float, smallest_count: int | None, *, wrong_rate: float = 0.0) -> float:
    """The chance that a head with true rate ``rate`` gets at least ``smallest_count`` of ``n_items`` (3.3).

    A head that flips the right way in each pair with probability ``rate`` and the wrong way with probability
    ``wrong_rate`` (independently from pair to pair) has right and wrong counts ``R`` and ``W`` drawn from one
    multinomial; its flip score is ``(R - W) / n_items``, so it is found when ``|R - W|`` reaches the smallest count
    the test calls (:func:`smallest_detectable_count`). With ``wrong_rate`` 0 this is a binomial tail. It turns "no
    head was found" into a statement of power: "with 22 pairs, a head that flips in 70% of them would have been
    found with probability ...". ``smallest_count`` None (nothing can be called) gives 0. ``n_items`` is at most
    ``LIMITS["items"]`` (:data:`mha.core.validation.LIMITS`): the chance of each right count is an array.
    """
    n_items = check_whole_number("n_items", n_items, minimum=1)
    for name, value in (("rate", rate), ("wrong_rate", wrong_rate)):
        if not is_real_number(value) or not 0 <= value <= 1:
            raise ValueError(f"{name} must be a probability between 0 and 1, got {value!r}.")
    if rate + wrong_rate > 1 + 1e-12:
        raise ValueError(f"rate + wrong_rate is {rate + wrong_rate:g}: a pair flips one way, the other or not at all, "
                         "so the two chances add up to at most 1.")
    if smallest_count is None:
        return 0.0
    smallest_count = check_whole_number("smallest_count", smallest_count, minimum=0)
    if smallest_count == 0:
        return 1.0
    from scipy.stats import binom  # imported here: scipy.stats takes a while to import

    check_size("the chances of each right count 0..n_items (n_items + 1,)", (n_items + 1,), limit="items")
    right = np.arange(n_items + 1)  # (n_items + 1,): R; given R, W ~ Binomial(n_items - R, wrong_rate / (1 - rate))
    wrong_given_right = min(1.0, wrong_rate / (1.0 - rate)) if rate < 1 else 0.0
    others = n_items - right
    found = (binom.cdf(right - smallest_count, others, wrong_given_right)  # R - W >= smallest_count
             + binom.sf(right + smallest_count - 1, others, wrong_given_right))  # W - R >= smallest_count
    return float(np.clip(binom.pmf(right, n_items, rate) @ found, 0.0, 1.0))
