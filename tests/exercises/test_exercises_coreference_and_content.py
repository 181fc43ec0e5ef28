"""Every check of chapter 3's coreference and content sections passes the solution and fails, with a useful
message, on the mistakes learners really make."""

import numpy as np
import pytest
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha.exercises.coreference_and_content import (
    check_candidate_picks,
    check_count_flips,
    check_crossed_contrast,
    check_detection_power,
    check_familywise_p_values,
    check_held_out_best,
    check_rarest_hits,
)


def not_attempted(*args, **kwargs):
    raise NotImplementedError


# --- candidate picks ------------------------------------------------------------------------------

def candidate_picks_solution(word_maps, pronoun, candidates):
    return word_maps[..., pronoun, list(candidates)].argmax(axis=-1)


def candidate_picks_word_index(word_maps, pronoun, candidates):
    return np.asarray(candidates)[word_maps[..., pronoun, list(candidates)].argmax(axis=-1)]


def candidate_picks_transposed(word_maps, pronoun, candidates):
    return word_maps[..., list(candidates), pronoun].argmax(axis=-1)


def test_candidate_picks():
    assert check_candidate_picks(candidate_picks_solution)
    result = check_candidate_picks(candidate_picks_word_index)
    assert not result and "word indices" in result.message
    result = check_candidate_picks(candidate_picks_transposed)
    assert not result and "ROW" in result.message
    result = check_candidate_picks(not_attempted)
    assert not result and "Not attempted" in result.message


# --- flips ----------------------------------------------------------------------------------------

def count_flips_solution(picks_first, picks_second, answers_first, answers_second):
    right_first = picks_first == answers_first[:, None]
    right_second = picks_second == answers_second[:, None]
    return ((right_first & right_second).sum(0), (~right_first & ~right_second).sum(0),
            (right_first != right_second).sum(0))


def count_flips_any_change(picks_first, picks_second, answers_first, answers_second):
    changed = (picks_first != picks_second).sum(0)
    return changed, np.zeros_like(changed), (picks_first == picks_second).sum(0)


def count_flips_returns_accuracy(picks_first, picks_second, answers_first, answers_second):
    return (picks_first == answers_first[:, None]).mean(0)


def test_count_flips():
    assert check_count_flips(count_flips_solution)
    result = check_count_flips(count_flips_any_change)
    assert not result and "BOTH halves" in result.message
    result = check_count_flips(count_flips_returns_accuracy)
    assert not result and "three arrays" in result.message


# --- held-out selection ---------------------------------------------------------------------------

def held_out_solution(scores, selection, held_out):
    best = int(scores[selection].mean(axis=0).argmax())
    return best, scores[selection, best].mean(), scores[held_out, best].mean()


def held_out_chosen_on_all(scores, selection, held_out):
    best = int(scores.mean(axis=0).argmax())
    return best, scores[selection, best].mean(), scores[held_out, best].mean()


def held_out_scored_on_selection(scores, selection, held_out):
    best = int(scores[selection].mean(axis=0).argmax())
    return best, scores[selection, best].mean(), scores[selection, best].mean()


def test_held_out_best():
    assert check_held_out_best(held_out_solution)
    result = check_held_out_best(held_out_chosen_on_all)
    assert not result and "ALL items" in result.message
    result = check_held_out_best(held_out_scored_on_selection)
    assert not result and "held-out items" in result.message


# --- crossed contrast -----------------------------------------------------------------------------

def crossed_solution(weights):
    return weights[:, :2].mean(axis=1) - weights[:, 2:].mean(axis=1)


def crossed_one_sentence_each(weights):
    return weights[:, 0] - weights[:, 2]


def crossed_reversed(weights):
    return weights[:, 2:].mean(axis=1) - weights[:, :2].mean(axis=1)


def test_crossed_contrast():
    assert check_crossed_contrast(crossed_solution)
    result = check_crossed_contrast(crossed_one_sentence_each)
    assert not result and "BOTH related" in result.message
    result = check_crossed_contrast(crossed_reversed)
    assert not result and "sign is reversed" in result.message


# --- rarest hits ----------------------------------------------------------------------------------

def rarest_hits_solution(attention, rarity):
    scored = np.flatnonzero(np.isfinite(rarity))
    rarest = scored[rarity[scored] == rarity[scored].max()]
    top = scored[attention[:, scored][:, :, scored].argmax(axis=-1)]
    return np.isin(top, rarest).sum(axis=-1)


def rarest_hits_all_keys(attention, rarity):
    scored = np.flatnonzero(np.isfinite(rarity))
    rarest = scored[rarity[scored] == rarity[scored].max()]
    return np.isin(attention[:, scored].argmax(axis=-1), rarest).sum(axis=-1)


def commonest_hits(attention, rarity):
    scored = np.flatnonzero(np.isfinite(rarity))
    commonest = scored[rarity[scored] == rarity[scored].min()]
    top = scored[attention[:, scored][:, :, scored].argmax(axis=-1)]
    return np.isin(top, commonest).sum(axis=-1)


def test_rarest_hits():
    assert check_rarest_hits(rarest_hits_solution)
    result = check_rarest_hits(rarest_hits_all_keys)
    assert not result and "argmax over all keys" in result.message
    result = check_rarest_hits(commonest_hits)
    assert not result and "COMMON" in result.message


# --- family-wise p-values -------------------------------------------------------------------------

def familywise_solution(differences, signs):
    observed = np.abs(differences.mean(axis=0))
    null_max = np.abs(signs @ differences / len(differences)).max(axis=1)
    return (1 + (null_max[:, None] >= observed).sum(axis=0)) / (1 + len(signs))


def familywise_per_head(differences, signs):
    observed = np.abs(differences.mean(axis=0))
    null = np.abs(signs @ differences / len(differences))
    return (1 + (null >= observed).sum(axis=0)) / (1 + len(signs))


def familywise_without_plus_one(differences, signs):
    observed = np.abs(differences.mean(axis=0))
    null_max = np.abs(signs @ differences / len(differences)).max(axis=1)
    return (null_max[:, None] >= observed).sum(axis=0) / len(signs)


def test_familywise_p_values():
    assert check_familywise_p_values(familywise_solution)
    result = check_familywise_p_values(familywise_per_head)
    assert not result and "MAXIMUM" in result.message
    result = check_familywise_p_values(familywise_without_plus_one)
    assert not result and "1 + exceedances" in result.message


# --- detection power ------------------------------------------------------------------------------

def detection_power_solution(n_pairs, rate, smallest_count):
    from math import comb

    return sum(comb(n_pairs, k) * rate ** k * (1 - rate) ** (n_pairs - k) for k in range(smallest_count, n_pairs + 1))


def detection_power_strict(n_pairs, rate, smallest_count):
    return detection_power_solution(n_pairs, rate, smallest_count + 1)


def detection_power_lower_tail(n_pairs, rate, smallest_count):
    return 1 - detection_power_solution(n_pairs, rate, smallest_count + 1)


def test_detection_power():
    assert check_detection_power(detection_power_solution)
    assert check_detection_power(lambda n, rate, k: float(np.round(detection_power_solution(n, rate, k), 12)))
    result = check_detection_power(detection_power_strict)
    assert not result and "X >= k" in result.message
    result = check_detection_power(detection_power_lower_tail)
    assert not result and "lower tail" in result.message
    result = check_detection_power(lambda n, rate, k: 100 * detection_power_solution(n, rate, k))
    assert not result and "percentage" in result.message
    assert not check_detection_power(not_attempted)


@pytest.mark.parametrize("check", [check_candidate_picks, check_count_flips, check_held_out_best,
                                   check_crossed_contrast, check_rarest_hits, check_familywise_p_values,
                                   check_detection_power])
def test_checks_reject_something_that_is_not_a_function(check):
    result = check(42)
    assert not result and "Expected a function" in result.message


# --- named slips, on the public case and hidden seeds ------------------------------------------------

def count_flips_with(combine=None, count=lambda halves: halves.sum(0)):
    """The learner's count of flips, with each half's hits combined by ``combine`` (default: the key's rules) and
    counted by ``count``."""
    def my_count_flips(picks_first, picks_second, answers_first, answers_second):
        first, second = picks_first == answers_first[:, None], picks_second == answers_second[:, None]
        if combine is not None:
            return count(combine(first, second)), count(combine(~first, ~second)), count(first != second)
        return count(first & second), count(~first & ~second), count(first != second)
    return my_count_flips


def rarest_hits_with(rows_scored=True, mapped_back=True):
    def my_rarest_hits(attention, rarity):
        scored = np.flatnonzero(np.isfinite(rarity))
        rarest = scored[rarity[scored] == rarity[scored].max()]
        top = (attention[:, scored] if rows_scored else attention)[:, :, scored].argmax(axis=-1)
        return np.isin(scored[top] if mapped_back else top, rarest).sum(axis=-1)
    return my_rarest_hits


@pytest.mark.parametrize("check, wrong, words, seeds", [
    (check_count_flips, count_flips_with(np.logical_or), ["`right`", "EITHER half"], (0, 1, 4)),
    (check_count_flips, count_flips_with(count=lambda halves: halves.mean(0)), ["shares of the pairs"], (0, 1, 4)),
    (check_count_flips, count_flips_with(count=lambda halves: halves.sum(1)), ["summed over the heads axis"],
     (0, 1, 4)),
    (check_rarest_hits, rarest_hits_with(mapped_back=False), ["map it back with scored[argmax]"], (0, 1, 4)),
    (check_rarest_hits, rarest_hits_with(rows_scored=False), ["You counted every row"], (0, 1)),
], ids=["either half", "shares", "wrong axis", "not mapped back", "every row"])
def test_named_slips_on_hidden_seeds(check, wrong, words, seeds):
    assert_slip_named(check, wrong, words, seeds)


@pytest.mark.parametrize("check, key", [(check_count_flips, count_flips_solution),
                                        (check_rarest_hits, rarest_hits_solution)],
                         ids=lambda value: getattr(value, "__name__", ""))
def test_the_key_passes_on_several_seeds_and_a_stub_is_not_attempted(check, key):
    assert_key_passes_and_stub_fails(check, key)
