"""Checks for the exercises of chapter 3's sections "Coreference, honestly" and "Content and rare words".

Each ``check_*`` runs the learner's function on small seeded inputs (random
attention maps and scores, no model needed), compares with the package's own
implementation (:mod:`mha.analysis.coreference_and_content.coreference`, :mod:`mha.analysis.statistics`,
:mod:`mha.analysis.coreference_and_content.relatedness`, :mod:`mha.analysis.coreference_and_content.rarity`), and says
what differs, with a hint for the mistakes learners make most often.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from mha.analysis.coreference_and_content.coreference import candidate_picks, candidate_weights, count_flips
from mha.analysis.coreference_and_content.rarity import extreme_hit_rates
from mha.analysis.coreference_and_content.relatedness import crossed_contrast
from mha.analysis.statistics import detection_power, familywise_p_values
from mha.core.validation import check_seed

from .checking import (
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    compare_number,
    describe_difference,
    matches,
    random_attention_maps,
    run_check,
    scalar_difference,
)

__all__ = [
    "check_candidate_picks",
    "check_count_flips",
    "check_held_out_best",
    "check_detection_power",
    "check_crossed_contrast",
    "check_rarest_hits",
    "check_familywise_p_values",
]


# --- Coreference, honestly ------------------------------------------------------------------------

def check_candidate_picks(candidate_picks_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(word_maps (layers, heads, n, n), pronoun, candidates) -> (layers, heads)`` index into ``candidates``."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for layers, heads, n, pronoun, candidates in ((1, 2, 6, 4, (1, 3)), (2, 3, 9, 6, (1, 4)),
                                                      (3, 4, 10, 7, (0, 2, 5)), (2, 5, 8, 2, (0, 5))):
            maps = random_attention_maps(rng, (layers, heads, n, n))
            label = f"maps {maps.shape}, pronoun {pronoun}, candidates {candidates}"
            yield label, (maps.copy(), pronoun, candidates), {}, (maps, pronoun, candidates)

    def compare(got, case) -> str | None:
        maps, pronoun, candidates = case
        expected = candidate_picks(candidate_weights(maps, pronoun, candidates))
        problem = describe_difference("the picks", got, expected)
        if problem is None:
            return None
        got_array = array_or_none(got)
        if got_array is not None and got_array.shape == expected.shape:
            if np.array_equal(got_array, np.asarray(candidates)[expected]):
                return problem + " These are word indices: return the position in `candidates` (0 = first candidate)."
            if np.array_equal(got_array, maps[..., list(candidates), pronoun].argmax(-1)):
                return problem + (" You read the candidates' rows at the pronoun's column: the pronoun is the query, "
                                  "so read its ROW (maps[..., pronoun, candidates]).")
            if np.array_equal(got_array, maps[..., pronoun, :].argmax(-1)):
                return problem + " That is the argmax over every word; compare only the candidates' columns."
        return problem

    return run_check(candidate_picks_fn, cases(), compare, "picks the candidate each head attends to most")


def check_count_flips(count_flips_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(picks_first, picks_second, answers_first, answers_second) -> (right, wrong, unchanged)``, each (heads,)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for pairs, heads in ((4, 1), (6, 3), (10, 5), (22, 8)):
            answers_first = rng.integers(0, 2, size=pairs)
            answers_second = 1 - answers_first
            picks_first, picks_second = (rng.integers(0, 2, size=(pairs, heads)) for _ in range(2))
            picks_second[:, 0] = picks_first[:, 0]  # head 0 never flips
            if heads > 1:
                picks_first[:, 1], picks_second[:, 1] = 1 - answers_first, 1 - answers_second  # always wrong
            label = f"{pairs} pairs, {heads} heads (head 0 never flips" + (", head 1 always flips the wrong "
                                                                           "way)" if heads > 1 else ")")
            args = (picks_first, picks_second, answers_first, answers_second)
            yield label, tuple(a.copy() for a in args), {}, args

    def compare(got, args) -> str | None:
        expected = count_flips(*args)
        got = answer_tuple(got, ("right", "wrong", "unchanged"), "three arrays of one count per head")
        picks_first, picks_second, answers_first, answers_second = args
        right_first, right_second = picks_first == answers_first[:, None], picks_second == answers_second[:, None]
        counted = {"right": right_first & right_second, "wrong": ~right_first & ~right_second,
                   "unchanged": right_first != right_second}  # (pairs, heads) each
        either = {"right": right_first | right_second, "wrong": ~right_first | ~right_second}
        for name, value, want in zip(counted, got, (expected.right, expected.wrong, expected.unchanged), strict=True):
            slips = {
                "every change": ((picks_first != picks_second).sum(axis=0) if name == "right" else None,
                                 "You counted every change of pick; a flip is right only when the head is correct "
                                 "in BOTH halves."),
                "either half": (either[name].sum(axis=0) if name in either else None, "You counted a head when it "
                                "is right (or wrong) in EITHER half (|); a right flip is right in BOTH halves (&), a "
                                "wrong flip wrong in both."),
                "share": (counted[name].mean(axis=0), "Those are shares of the pairs; return counts: sum over the "
                          "pairs axis instead of taking the mean."),
                "wrong axis": (counted[name].sum(axis=1), "You summed over the heads axis; sum over the pairs axis "
                               "(axis 0), which leaves one count per head."),
            }
            problem = compare_array(value, want, slips, f"`{name}`", head_axis=0)
            if problem is not None:
                return problem
        return None

    return run_check(count_flips_fn, cases(), compare, "counts right flips, wrong flips and no flips")


def _held_out_reference(scores, selection, held_out) -> tuple[int, float, float]:
    best = int(scores[selection].mean(axis=0).argmax())
    return best, float(scores[selection, best].mean()), float(scores[held_out, best].mean())


def check_held_out_best(held_out_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(scores (items, heads), selection, held_out) -> (best_head, selection_mean, held_out_mean)``."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for items, heads in ((6, 3), (10, 8), (22, 72), (44, 72)):
            scores = rng.normal(size=(items, heads))
            order = rng.permutation(items)
            selection, held_out = np.sort(order[: items // 2]), np.sort(order[items // 2:])
            label = f"scores {scores.shape}, {len(selection)} items to select on, {len(held_out)} held out"
            yield label, (scores.copy(), selection.copy(), held_out.copy()), {}, (scores, selection, held_out)

    def compare(got, args) -> str | None:
        scores, selection, held_out = args
        best, selection_mean, held_out_mean = _held_out_reference(*args)
        got = answer_tuple(got, ("best_head", "selection_mean", "held_out_mean"))
        got_best = answer_number(got[0], "best_head", whole=True)
        if got_best != best:
            if got_best == int(scores.mean(axis=0).argmax()):
                return (f"best_head is {got_best}, the best head on ALL items; pick it on the selection items "
                        f"only (expected {best}).")
            if got_best == int(scores[held_out].mean(axis=0).argmax()):
                return (f"best_head is {got_best}, chosen on the held-out items; choose on `selection` (expected "
                        f"{best}).")
            return f"best_head is {got_best}, expected {best}: the head with the largest mean score over `selection`."
        problem = scalar_difference("selection_mean", got[1], selection_mean)
        if problem:
            return problem
        problem = scalar_difference("held_out_mean", got[2], held_out_mean)
        if problem and matches(got[2], selection_mean):
            return problem + " It equals the selection mean: score the chosen head on the held-out items."
        return problem

    return run_check(held_out_fn, cases(), compare, "selects on one half and scores on the other")


def _binomial_tail(n: int, rate: float, start: int, stop: int) -> float:
    """P(start <= Binomial(n, rate) < stop), for the slips of check_detection_power."""
    from math import comb

    return float(sum(comb(n, k) * rate ** k * (1 - rate) ** (n - k) for k in range(max(start, 0), min(stop, n + 1))))


def check_detection_power(power_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(n_pairs, rate, smallest_count) -> float``: the chance that a head flipping right in each pair with
    probability ``rate`` gets at least ``smallest_count`` right flips of ``n_pairs`` (a binomial tail, section 3.3;
    :func:`mha.analysis.statistics.detection_power`)."""

    rng = np.random.default_rng(check_seed("seed", seed))
    fixed = ((22, 0.3, 7), (22, 0.5, 12), (22, 0.7, 7), (10, 0.35, 1), (6, 0.9, 6), (8, 0.25, 0))
    drawn = [(n, round(float(rng.uniform(0.05, 0.95)), 2), int(rng.integers(0, n + 1)))
             for n in rng.integers(5, 60, size=6).tolist()]

    def cases() -> Iterator:
        for n_pairs, rate, smallest in fixed if seed == 0 else drawn:
            label = f"{n_pairs} pairs, rate {rate}, called from {smallest} right flips"
            yield label, (n_pairs, rate, smallest), {}, (n_pairs, rate, smallest)

    def compare(got, case) -> str | None:
        n_pairs, rate, smallest = case
        want = detection_power(n_pairs, rate, smallest)
        slips = {
            "strict": (_binomial_tail(n_pairs, rate, smallest + 1, n_pairs + 1),
                       "That is P(X > k): a head with exactly the smallest count is found too, so count X >= k."),
            "exact": (_binomial_tail(n_pairs, rate, smallest, smallest + 1),
                      "That is P(X = k) alone: add every count from k up to n_pairs."),
            "lower": (_binomial_tail(n_pairs, rate, 0, smallest + 1),
                      "That is the lower tail P(X <= k): the head is found when it has MANY right flips."),
            "swapped": (_binomial_tail(n_pairs, 1 - rate, smallest, n_pairs + 1),
                        "You used 1 - rate as the chance of a right flip; rate is the chance of a right flip."),
        }
        return compare_number(got, want, {**slips, "percentage": (100 * want, "Give a probability between 0 and 1, "
                                                                              "not a percentage.")}, "the power",
                              atol=1e-9)

    return run_check(power_fn, cases(), compare, "computes the chance that a head of a given rate is found")


# --- Content and rare words -----------------------------------------------------------------------

def check_crossed_contrast(contrast_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(weights (items, 4, heads)) -> (items, heads)``: mean of the two related minus the two unrelated."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for items, heads in ((1, 1), (3, 2), (5, 12), (8, 72)):
            weights = rng.uniform(size=(items, 4, heads))
            yield f"weights {weights.shape}", (weights.copy(),), {}, weights

    def compare(got, weights) -> str | None:
        expected = crossed_contrast(weights)
        problem = describe_difference("the contrast", got, expected)
        if problem is None:
            return None
        if matches(got, -expected):
            return problem + " The sign is reversed: related (sentences 0 and 1) minus unrelated (2 and 3)."
        if matches(got, weights[:, 0] - weights[:, 2]):
            return problem + (" You used one sentence of each kind; average BOTH related and BOTH unrelated "
                              "sentences, or single words' effects do not cancel.")
        if matches(got, weights[:, [0, 2]].mean(1) - weights[:, [1, 3]].mean(1)):
            return problem + " The order is related (a1 b1), related (a2 b2), unrelated (a1 b2), unrelated (a2 b1)."
        return problem

    return run_check(contrast_fn, cases(), compare, "computes the crossed related - unrelated contrast")


def check_rarest_hits(hits_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(attention (heads, n, n), rarity (n,) with NaN at special tokens) -> (heads,)`` rows hitting the rarest."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        # by hand: [CLS], five words, [SEP]; word 3 is the rarest, word 2 the commonest
        rarity = np.array([np.nan, 3.0, 1.0, 5.0, 2.0, 4.0, np.nan])
        rows = np.full((7, 7), 0.05)
        rows[1, [0, 3]] = 0.4, 0.3  # [CLS] gets the most, the rarest word the most among words
        rows[2, 3] = rows[3, 2] = rows[4, 2] = rows[5, 2] = 0.6
        attention = (rows / rows.sum(axis=-1, keepdims=True))[None]  # (1 head, 7, 7)
        yield ("a hand-made map: 7 tokens, [CLS] draws row 1's largest weight", (attention.copy(), rarity.copy()),
               {}, (attention, rarity))
        for heads, n in ((3, 7), (6, 10), (12, 14)):
            attention = random_attention_maps(rng, (heads, n, n))
            attention[..., 0] += 1.5  # a [CLS]-like column that draws most rows' largest weight
            attention /= attention.sum(axis=-1, keepdims=True)
            rarity = rng.permutation(n).astype(float)
            rarity[0] = rarity[-1] = np.nan  # [CLS] and [SEP] have no rarity
            yield (f"attention {attention.shape}, rarity with NaN at [CLS] and [SEP]",
                   (attention.copy(), rarity.copy()),
                   {}, (attention, rarity))

    def compare(got, args) -> str | None:
        attention, rarity = args
        expected = extreme_hit_rates(attention, rarity, which="rarest").hits
        problem = describe_difference("the hit counts", got, expected, head_axis=0)
        if problem is None:
            return None
        finite = np.isfinite(rarity)
        rarest = np.flatnonzero(finite & (rarity == np.nanmax(rarity)))
        over_all_keys = np.isin(attention[:, finite, :].argmax(-1), rarest).sum(-1)
        if matches(got, over_all_keys):
            return problem + (" You took the argmax over all keys, [CLS] and [SEP] included; compare only the keys "
                              "that have a rarity.")
        if matches(got, extreme_hit_rates(attention, rarity, which="commonest").hits):
            return problem + " These are hits on the most COMMON token: larger rarity = rarer."
        scored = np.flatnonzero(finite)
        among_scored = attention[:, scored][:, :, scored].argmax(-1)  # (heads, scored rows): an index into `scored`
        return compare_array(got, expected, {
            "not mapped back": (np.isin(among_scored, rarest).sum(-1), "The argmax over the scored keys is an index "
                                "among them, not a token position: map it back with scored[argmax]."),
            "every row": (np.isin(scored[attention[:, :, scored].argmax(-1)], rarest).sum(-1), "You counted every "
                          "row, [CLS] and [SEP] included; only the rows of tokens with a rarity take part."),
        }, "the hit counts", head_axis=0)

    return run_check(hits_fn, cases(), compare, "counts rows whose most-attended token is the rarest")


def check_familywise_p_values(p_values_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(differences (items, heads), signs (permutations, items)) -> (heads,)`` max-statistic p-values (mean)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for items, heads, permutations in ((5, 2, 20), (8, 6, 200), (12, 12, 500), (20, 72, 1000)):
            differences = rng.normal(size=(items, heads))
            differences[:, 0] += 1.0  # head 0 responds
            signs = rng.choice(np.array([-1.0, 1.0]), size=(permutations, items))
            label = f"differences {differences.shape}, signs {signs.shape}"
            yield label, (differences.copy(), signs.copy()), {}, (differences, signs)

    def compare(got, args) -> str | None:
        differences, signs = args
        expected, _ = familywise_p_values(differences, signs, statistic="mean")
        problem = describe_difference("the p-values", got, expected, head_axis=0)
        if problem is None:
            return None
        null = (signs @ differences) / len(differences)  # (permutations, heads)
        observed = differences.mean(axis=0)
        per_head = (1 + (np.abs(null) >= np.abs(observed) - 1e-12).sum(0)) / (1 + len(signs))
        if matches(got, per_head):
            return problem + (" These are per-head p-values, each head against its own null; compare every head "
                              "with the null distribution of the MAXIMUM |mean| over all heads.")
        null_max = np.abs(null).max(axis=1)
        without_plus_one = (null_max[:, None] >= np.abs(observed) - 1e-12).sum(0) / len(signs)
        if matches(got, without_plus_one):
            return problem + " Count the observed labelling too: (1 + exceedances) / (1 + permutations)."
        one_sided = (1 + (null.max(axis=1)[:, None] >= observed - 1e-12).sum(0)) / (1 + len(signs))
        if matches(got, one_sided):
            return problem + " Use absolute values: the test is two-sided."
        return problem

    return run_check(p_values_fn, cases(), compare, "computes family-wise sign-flip p-values")
