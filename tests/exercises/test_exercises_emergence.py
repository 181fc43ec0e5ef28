"""The chapter-3 emergence exercise checks pass the solutions and fail, with a useful message, on typical slips."""

import numpy as np
import pytest

from mha.exercises.emergence import (
    check_heads_with_role,
    check_k_composition,
    check_permute_heads,
    check_prefix_matching_score,
    check_previous_token_score,
    check_uniform_previous_token_score,
)

# --- solutions, written the way a learner would ---------------------------------------------------

def previous_token_score(weights):
    below = np.diagonal(weights, offset=-1, axis1=-2, axis2=-1)  # (batch, heads, seq - 1): weights[i, i-1]
    return below.mean(axis=(0, 2))


def prefix_matching_score(weights, tokens):
    seq = len(tokens)
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(seq):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys].sum(axis=-1)
            count += 1
    return totals / count


def k_composition(W_Q, W_K, W_V, W_O):
    W_QK, W_OV = W_Q @ W_K.T, W_V @ W_O
    return np.linalg.norm(W_QK @ W_OV.T) / (np.linalg.norm(W_QK) * np.linalg.norm(W_OV))


def heads_with_role(scores, threshold):
    return [(layer, head) for layer in range(scores.shape[0]) for head in range(scores.shape[1])
            if scores[layer, head] > threshold]


def permute_heads(W_Q, W_K, W_V, W_O, order):
    d_head = W_Q.shape[1] // len(order)
    columns = [old * d_head + f for old in order for f in range(d_head)]
    return W_Q[:, columns], W_K[:, columns], W_V[:, columns], W_O[columns, :]


def uniform_previous_token_score(seq):
    return float(np.mean([1 / (i + 1) for i in range(1, seq)]))


# --- every check passes its solution -------------------------------------------------------------

@pytest.mark.parametrize("check, solution", [
    (check_previous_token_score, previous_token_score),
    (check_prefix_matching_score, prefix_matching_score),
    (check_k_composition, k_composition),
    (check_heads_with_role, heads_with_role),
    (check_permute_heads, permute_heads),
    (check_uniform_previous_token_score, uniform_previous_token_score),
])
def test_check_passes_the_solution(check, solution):
    result = check(solution)
    assert result.passed, result.message
    assert result.message.startswith("✓")


def test_numpy_argwhere_answer_passes():
    assert check_heads_with_role(lambda scores, threshold: np.argwhere(scores > threshold)).passed


@pytest.mark.parametrize("check", [check_previous_token_score, check_prefix_matching_score, check_k_composition,
                                   check_heads_with_role, check_permute_heads, check_uniform_previous_token_score])
def test_the_stub_is_reported_as_not_attempted(check):
    def stub(*args):
        raise NotImplementedError

    result = check(stub)
    assert not result.passed and "Not attempted yet" in result.message


# --- typical wrong answers fail with a message that names the slip -------------------------------------

@pytest.mark.parametrize("wrong, words", [
    (lambda w: np.diagonal(w, offset=1, axis1=-2, axis2=-1).mean(axis=(0, 2)), "rows and columns swapped"),
    (lambda w: np.diagonal(w, axis1=-2, axis2=-1)[..., 1:].mean(axis=(0, 2)), "main diagonal"),
    (lambda w: np.diagonal(w, offset=-1, axis1=-2, axis2=-1).sum(axis=-1).mean(axis=0) / w.shape[-1], "seq - 1 rows"),
    (lambda w: np.diagonal(w, offset=-1, axis1=-2, axis2=-1).mean(axis=-1), "has shape"),
])
def test_previous_token_score_slips(wrong, words):
    result = check_previous_token_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


def duplicate_token_score(weights, tokens):
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(len(tokens)):
        keys = [j for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys].sum(axis=-1)
            count += 1
    return totals / count


def prefix_matching_over_all_queries(weights, tokens):
    totals = np.zeros(weights.shape[0])
    for i in range(len(tokens)):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        totals += weights[:, i, keys].sum(axis=-1)
    return totals / len(tokens)


def prefix_matching_most_recent_copy_only(weights, tokens):
    totals, count = np.zeros(weights.shape[0]), 0
    for i in range(len(tokens)):
        keys = [j + 1 for j in range(i) if tokens[j] == tokens[i]]
        if keys:
            totals += weights[:, i, keys[-1]]
            count += 1
    return totals / count


@pytest.mark.parametrize("wrong, words", [
    (duplicate_token_score, "FOLLOWED"),
    (prefix_matching_over_all_queries, "only over the queries"),
    (prefix_matching_most_recent_copy_only, "Case 2"),
])
def test_prefix_matching_slips(wrong, words):
    result = check_prefix_matching_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda Q, K, V, O: np.linalg.norm((Q @ K.T) @ (V @ O)) / (np.linalg.norm(Q @ K.T) * np.linalg.norm(V @ O)),
     "vectors as COLUMNS"),
    (lambda Q, K, V, O: np.linalg.norm((V @ O) @ (Q @ K.T)) / (np.linalg.norm(Q @ K.T) * np.linalg.norm(V @ O)),
     "Q-composition"),
    (lambda Q, K, V, O: np.linalg.norm((Q @ K.T) @ (V @ O).T), "divide by"),
    (lambda Q, K, V, O: np.array([1.0, 2.0]), "one number"),
])
def test_k_composition_slips(wrong, words):
    result = check_k_composition(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda s, t: [tuple(np.unravel_index(np.argmax(s), s.shape))], "Several heads can share a role"),
    (lambda s, t: [(int(l), int(h)) for l, h in np.argwhere(s >= t)], "not ABOVE"),
    (lambda s, t: [int(i) for i in np.flatnonzero(s > t)], "flat index"),
    (lambda s, t: [(0, 3)], "not by index"),  # the index, not the score: fails once the heads are reordered
])
def test_heads_with_role_slips(wrong, words):
    result = check_heads_with_role(wrong)
    assert not result.passed
    assert words in result.message, result.message


def permute_wo_columns(W_Q, W_K, W_V, W_O, order):
    d_head = W_Q.shape[1] // len(order)
    columns = [old * d_head + f for old in order for f in range(d_head)]
    return W_Q[:, columns], W_K[:, columns], W_V[:, columns], W_O[:, columns]


def permute_inverse(W_Q, W_K, W_V, W_O, order):
    return permute_heads(W_Q, W_K, W_V, W_O, list(np.argsort(order)))


def permute_forgetting_w_v(W_Q, W_K, W_V, W_O, order):
    Q, K, _, O = permute_heads(W_Q, W_K, W_V, W_O, order)
    return Q, K, W_V, O


@pytest.mark.parametrize("wrong, words", [
    (permute_wo_columns, "COLUMNS of W_O"),
    (permute_inverse, "inverse order"),
    (permute_forgetting_w_v, "W_V is unchanged"),
    (lambda *args: args[0], "as a tuple"),
])
def test_permute_heads_slips(wrong, words):
    result = check_permute_heads(wrong)
    assert not result.passed
    assert words in result.message, result.message


@pytest.mark.parametrize("wrong, words", [
    (lambda seq: 1 / seq, "later ones included"),
    (lambda seq: float(np.mean([1 / i for i in range(1, seq)])), "not 1 / i"),
    (lambda seq: sum(1 / (i + 1) for i in range(1, seq)) / seq, "seq - 1 queries"),
])
def test_uniform_previous_token_slips(wrong, words):
    result = check_uniform_previous_token_score(wrong)
    assert not result.passed
    assert words in result.message, result.message


def test_a_function_that_raises_is_reported_with_the_case():
    result = check_prefix_matching_score(lambda weights, tokens: weights[5])
    assert not result.passed and "raised IndexError on case 1" in result.message
