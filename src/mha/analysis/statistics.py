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
* :func:`held_out_best`: pick the best head on half of the items and score
  it on the other half, many times over random halves.

"heads" can be any trailing axes: (items, layers, heads) works too, every
cell being one head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["mean_by_unit", "paired_t", "bootstrap_interval", "sign_flip_signs", "familywise_p_values", "HeldOutResult",
           "held_out_best"]


def _as_differences(differences) -> np.ndarray:
    differences = np.asarray(differences, dtype=float)
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
    values = np.asarray(values, dtype=float)
    units = list(units)
    if len(units) != values.shape[0]:
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
    n = differences.shape[0]
    rng = np.random.default_rng(seed)
    resampled_items = rng.integers(0, n, size=(n_resamples, n))  # (resamples, items)
    flat = differences.reshape(n, -1)  # (items, heads)
    means = flat[resampled_items].mean(axis=1)  # (resamples, heads)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail], axis=0)  # each (heads,)
    return low.reshape(differences.shape[1:]), high.reshape(differences.shape[1:])


def sign_flip_signs(n_items: int, n_permutations: int = 5000, seed: int = 0) -> np.ndarray:
    """Random signs (permutations, items), +1 or -1, one row per relabelling of the items (chapter 3).

    Row ``r`` says, for every item, whether permutation ``r`` swaps its two
    halves (-1) or keeps them (+1). Drawn from ``np.random.default_rng(seed)``.
    """
    if n_items < 1 or n_permutations < 1:
        raise ValueError(f"need n_items >= 1 and n_permutations >= 1, got {n_items} and {n_permutations}.")
    rng = np.random.default_rng(seed)
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
    signs = np.asarray(signs, dtype=float)
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
    flat = scores.reshape(n, -1)  # (items, heads)
    rng = np.random.default_rng(seed)
    chosen, selection, held_out = [], [], []
    for _ in range(n_splits):
        order = rng.permutation(n)
        select, test = order[: n // 2], order[n // 2:]
        best = int(flat[select].mean(axis=0).argmax())
        chosen.append(best)
        selection.append(flat[select, best].mean())
        held_out.append(flat[test, best].mean())
    return HeldOutResult(np.array(chosen), np.array(selection), np.array(held_out))
