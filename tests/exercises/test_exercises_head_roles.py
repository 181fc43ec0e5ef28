"""The chapter-3 exercise checks pass the solutions and fail, with a useful message, on typical wrong answers."""

import numpy as np
import pytest

from mha.exercises.head_roles import (
    check_best_offset,
    check_distance_matched_lift,
    check_is_positional,
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
    for weights, sentence_pairs in zip(word_maps, pairs):
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
    for weights, sentence_pairs in zip(word_maps, pairs):
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
