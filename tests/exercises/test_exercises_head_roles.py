"""The chapter-3 exercise checks pass the solutions and fail, with a useful message, on typical wrong answers."""

import numpy as np
import pytest
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha.exercises.head_roles import (
    check_best_offset,
    check_distance_matched_lift,
    check_is_positional,
    check_model_pair_accuracy,
    check_model_previous_token_share,
    check_previous_token_share,
    check_relation_accuracy,
    check_special_token_share,
    check_word_attention,
)

# --- solutions, written the way a learner would ---------------------------------------------------

def previous_token_share(weights):
    seq = len(weights)
    return float(np.mean([weights[i, i - 1] for i in range(1, seq)]))


def special_token_share(weights, tokens, special):
    columns = [j for j, token in enumerate(tokens) if token == special]
    return float(weights[:, columns].sum(axis=1).mean())


def is_positional(maps):
    previous_hits = previous_rows = next_hits = next_rows = 0
    for weights in maps:
        top = weights.argmax(axis=1)
        seq = len(weights)
        previous_hits += sum(top[i] == i - 1 for i in range(1, seq))
        next_hits += sum(top[i] == i + 1 for i in range(seq - 1))
        previous_rows += seq - 1
        next_rows += seq - 1
    return bool(max(previous_hits / previous_rows, next_hits / next_rows) >= 0.9)


def relation_accuracy(word_maps, pairs, direction):
    hits = total = 0
    for weights, sentence_pairs in zip(word_maps, pairs, strict=True):
        scores = np.where(np.eye(len(weights), dtype=bool), -np.inf, weights)
        for source, target in sentence_pairs:
            row, gold = (source, target) if direction == "source_to_target" else (target, source)
            hits += int(scores[row].argmax() == gold)
            total += 1
    return hits / total


def best_offset(pairs, direction, offsets=tuple(range(-5, 6))):
    gaps = [t - s if direction == "source_to_target" else s - t for s, t in pairs]
    candidates = sorted((k for k in offsets if k != 0), key=lambda k: (abs(k), k))
    best = max(candidates, key=lambda k: gaps.count(k))
    return gaps.count(best) / len(gaps), best


def word_attention(weights, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    pieces = [[t for t, w in enumerate(word_ids) if w == word] for word in range(n_words)]
    received = np.stack([weights[:, p].sum(axis=1) for p in pieces], axis=1)  # (seq, words)
    return np.stack([received[p].mean(axis=0) for p in pieces])  # (words, words)


def distance_matched_lift(weights, first, second):
    distance = second - first
    looking_back = [weights[q, q - distance] for q in range(distance, len(weights))]
    return float(weights[second, first] - np.mean(looking_back))


# --- every check passes its solution -------------------------------------------------------------

@pytest.mark.parametrize("check, solution", [
    (check_previous_token_share, previous_token_share),
    (check_special_token_share, special_token_share),
    (check_is_positional, is_positional),
    (check_relation_accuracy, relation_accuracy),
    (check_best_offset, best_offset),
    (check_word_attention, word_attention),
    (check_distance_matched_lift, distance_matched_lift),
])
def test_check_passes_the_solution(check, solution):
    result = check(solution)
    assert result.passed, result.message
    assert result.message.startswith("✓")


def test_not_attempted_yet():
    def stub(*args, **kwargs):
        raise NotImplementedError

    result = check_previous_token_share(stub)
    assert not result and "Not attempted yet" in result.message


# --- and fails typical wrong answers, saying why ------------------------------------------------

@pytest.mark.parametrize("wrong, words", [
    (lambda w: float(np.diagonal(w, offset=1).mean()), "NEXT token"),
    (lambda w: float(np.diagonal(w, offset=-1).sum() / len(w)), "row 0 has no previous token"),
    (lambda w: float(np.diagonal(w).mean()), "itself"),
])
def test_previous_token_share_explains_mistakes(wrong, words):
    result = check_previous_token_share(wrong)
    assert not result and words in result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda w, tokens, special: float(w[tokens.index(special)].mean()), "ROW"),
    (lambda w, tokens, special: float(w[:, tokens.index(special)].mean()), "add the weight on every column"),
    (lambda w, tokens, special: float(w[1:-1, [j for j, t in enumerate(tokens) if t == special]].sum(1).mean()),
     "all rows"),
])
def test_special_token_share_explains_mistakes(wrong, words):
    result = check_special_token_share(wrong)
    assert not result and words in result.message


def mean_share_instead_of_argmax(maps):
    previous = np.mean([np.diagonal(w, offset=-1).mean() for w in maps])
    following = np.mean([np.diagonal(w, offset=1).mean() for w in maps])
    return bool(max(previous, following) >= 0.9)


def previous_only(maps):
    rows = sum(len(w) - 1 for w in maps)
    hits = sum(int((w.argmax(1)[1:] == np.arange(len(w) - 1)).sum()) for w in maps)
    return bool(hits / rows >= 0.9)


def both_directions_added(maps):
    rows = sum(len(w) - 1 for w in maps)
    hits = sum(int((w.argmax(1)[1:] == np.arange(len(w) - 1)).sum() + (w.argmax(1)[:-1] == np.arange(1, len(w))).sum())
               for w in maps)
    return bool(hits / rows >= 0.9)


@pytest.mark.parametrize("wrong", [mean_share_instead_of_argmax, previous_only, both_directions_added])
def test_is_positional_catches_mistakes(wrong):
    result = check_is_positional(wrong)
    assert not result and "at least 90%" in result.message


def test_is_positional_wants_a_bool():
    result = check_is_positional(lambda maps: 1.0)
    assert not result and "True or False" in result.message


def wrong_direction(word_maps, pairs, direction):
    other = "target_to_source" if direction == "source_to_target" else "source_to_target"
    return relation_accuracy(word_maps, pairs, other)


def self_included(word_maps, pairs, direction):
    hits = total = 0
    for weights, sentence_pairs in zip(word_maps, pairs, strict=True):
        for source, target in sentence_pairs:
            row, gold = (source, target) if direction == "source_to_target" else (target, source)
            hits += int(weights[row].argmax() == gold)
            total += 1
    return hits / total


@pytest.mark.parametrize("wrong, words", [(wrong_direction, "other direction"), (self_included, "own column")])
def test_relation_accuracy_explains_mistakes(wrong, words):
    result = check_relation_accuracy(wrong)
    assert not result and words in result.message


def sign_never_flipped(pairs, direction, offsets=tuple(range(-5, 6))):
    return best_offset(pairs, "source_to_target", offsets)


def percentage(pairs, direction, offsets=tuple(range(-5, 6))):
    accuracy, offset = best_offset(pairs, direction, offsets)
    return 100 * accuracy, offset


@pytest.mark.parametrize("wrong, words", [(sign_never_flipped, "sign is flipped"), (percentage, "not a percentage")])
def test_best_offset_explains_mistakes(wrong, words):
    result = check_best_offset(wrong)
    assert not result and words in result.message


def mean_columns(weights, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    pieces = [[t for t, w in enumerate(word_ids) if w == word] for word in range(n_words)]
    return np.array([[weights[np.ix_(r, c)].mean() for c in pieces] for r in pieces])


def sum_rows(weights, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    pieces = [[t for t, w in enumerate(word_ids) if w == word] for word in range(n_words)]
    return np.array([[weights[np.ix_(r, c)].sum() for c in pieces] for r in pieces])


def keeps_special_tokens(weights, word_ids):
    return weights


@pytest.mark.parametrize("wrong, words", [(mean_columns, "SUMMED"), (sum_rows, "AVERAGED"),
                                          (keeps_special_tokens, "Drop the special tokens")])
def test_word_attention_explains_mistakes(wrong, words):
    result = check_word_attention(wrong)
    assert not result and words in result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda w, f, s: float(w[s, f]), ["raw weight"]),
    (lambda w, f, s: float(w[f, s] - np.diagonal(w, offset=s - f).mean()), ["EARLIER"]),
    (lambda w, f, s: float(w[s, f] - 1 / len(w)), ["uniform"]),
])
def test_distance_matched_lift_explains_mistakes(wrong, words):
    result = check_distance_matched_lift(wrong)
    assert not result.passed
    for word in words:
        assert word in result.message, result.message


# --- named slips, on the public case and hidden seeds ------------------------------------------------

def positional_over_every_row(maps):
    rows = sum(len(w) for w in maps)
    hits = [sum(int((w.argmax(1)[1:] == np.arange(len(w) - 1)).sum()) for w in maps),
            sum(int((w.argmax(1)[:-1] == np.arange(1, len(w))).sum()) for w in maps)]
    return bool(max(hits) / rows >= 0.9)


def best_offset_ties_to_positive(pairs, direction, offsets=tuple(range(-5, 6))):
    gaps = [t - s if direction == "source_to_target" else s - t for s, t in pairs]
    best = max(sorted((k for k in offsets if k), key=lambda k: (abs(k), -k)), key=gaps.count)
    return gaps.count(best) / len(gaps), best


def best_offset_ignoring_offsets(pairs, direction, offsets=tuple(range(-5, 6))):
    gaps = [t - s if direction == "source_to_target" else s - t for s, t in pairs]
    best = max(sorted(set(gaps), key=lambda k: (abs(k), k)), key=gaps.count)
    return gaps.count(best) / len(gaps), best


@pytest.mark.parametrize("check, wrong, words, seeds", [
    (check_is_positional, mean_share_instead_of_argmax, ["Case 3", "mean WEIGHT on the neighbour"], (0, 1, 2)),
    (check_is_positional, both_directions_added, ["Case 5", "You added the previous-token and next-token"], (0, 1)),
    (check_is_positional, positional_over_every_row, ["Case 1", "You divided by every row"], (0, 1)),
    (check_best_offset, best_offset_ties_to_positive, ["then to the NEGATIVE one"], (0, 5)),
    (check_best_offset, best_offset_ignoring_offsets, ["not among `offsets`"], (0, 17)),
], ids=lambda value: getattr(value, "__name__", ""))
def test_named_slips_on_hidden_seeds(check, wrong, words, seeds):
    assert_slip_named(check, wrong, words, seeds)


@pytest.mark.parametrize("check, key", [(check_is_positional, is_positional), (check_best_offset, best_offset)],
                         ids=lambda value: getattr(value, "__name__", ""))
def test_the_key_passes_on_several_seeds_and_a_stub_is_not_attempted(check, key):
    assert_key_passes_and_stub_fails(check, key)


# --- the learner's function runs the model (3.1, 3.2) -------------------------------------------------

def model_previous_token_share(encoder, sentence, layer, head):
    weights = encoder.trace(sentence).sentence().attention[layer, head]  # (seq, seq)
    return float(np.mean([weights[i, i - 1] for i in range(1, len(weights))]))


def _model_word_map(encoder, words, layer, head, exclude_self=True):
    from mha.pretrained.word_maps import word_attention as merge

    trace = encoder.trace(words, is_split_into_words=True).sentence()
    word_map = merge(trace.attention[layer, head], trace.word_ids)  # (words, words)
    if exclude_self:
        np.fill_diagonal(word_map, -np.inf)
    return word_map


def model_pair_accuracy(encoder, words, pairs, layer, head):
    word_map = _model_word_map(encoder, words, layer, head)
    return sum(int(word_map[source].argmax() == target) for source, target in pairs) / len(pairs)


def test_the_model_checks_pass_their_keys_on_several_seeds_and_a_stub_is_not_attempted():
    assert_key_passes_and_stub_fails(check_model_previous_token_share, model_previous_token_share, seeds=(0, 1, 2, 3))
    assert_key_passes_and_stub_fails(check_model_pair_accuracy, model_pair_accuracy, seeds=(0, 1, 2, 3))


@pytest.mark.parametrize("wrong, words", [
    (lambda encoder, sentence, layer, head: float(np.diagonal(
        encoder.trace(sentence).sentence().attention[layer, head], offset=1).mean()), ["NEXT token", "swapped"]),
    (lambda encoder, sentence, layer, head: float(np.diagonal(
        encoder.trace(sentence).sentence().attention[layer], offset=-1, axis1=-2, axis2=-1).mean()), ["all 12 heads"]),
    (lambda encoder, sentence, layer, head: float(np.diagonal(
        encoder.trace(sentence).sentence().attention[layer - 1, head - 1], offset=-1).mean()), ["counted from 0"]),
    (lambda encoder, sentence, layer, head: float(np.diagonal(
        encoder.trace(sentence).sentence().attention[layer, head][1:-1, 1:-1], offset=-1).mean()), ["[CLS]"]),
], ids=["next token", "whole layer", "counted from 1", "special tokens left out"])
def test_model_previous_token_share_names_the_slip(wrong, words):
    assert_slip_named(check_model_previous_token_share, wrong, words)


def pair_accuracy_by_column(encoder, words, pairs, layer, head):
    word_map = _model_word_map(encoder, words, layer, head)
    return float(np.mean([word_map[:, source].argmax() == target for source, target in pairs]))


def pair_accuracy_with_self(encoder, words, pairs, layer, head):
    word_map = _model_word_map(encoder, words, layer, head, exclude_self=False)
    return float(np.mean([word_map[source].argmax() == target for source, target in pairs]))


def pair_accuracy_on_tokens(encoder, words, pairs, layer, head):
    weights = encoder.trace(words, is_split_into_words=True).sentence().attention[layer, head].copy()
    np.fill_diagonal(weights, -np.inf)
    return float(np.mean([weights[source].argmax() == target for source, target in pairs]))


@pytest.mark.parametrize("wrong, words", [(pair_accuracy_by_column, ["COLUMN"]),
                                          (pair_accuracy_with_self, ["own column"]),
                                          (pair_accuracy_on_tokens, ["merge the pieces"])])
def test_model_pair_accuracy_names_the_slip(wrong, words):
    assert_slip_named(check_model_pair_accuracy, wrong, words)
