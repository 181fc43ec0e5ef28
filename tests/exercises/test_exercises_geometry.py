"""Every chapter-2 exercise check passes the solution and fails, with a useful message, on typical wrong answers."""

import numpy as np
import pytest

from mha.exercises.geometry import (
    check_attention_from_circuit,
    check_energy_rank,
    check_min_head_width,
    check_numerical_rank,
    check_principal_angle_cosines,
    check_rank_two_scores,
)


def softmax(scores, axis=-1):
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# --- solutions, written the way a learner would --------------------------------------------------

def attention_solution(x, W_Q, W_K, b_Q):
    W_QK = W_Q @ W_K.T
    scores = (x @ W_QK @ x.T + (x @ W_K @ b_Q)[None, :]) / np.sqrt(W_Q.shape[1])
    return softmax(scores)


def numerical_rank_solution(matrix, rtol):
    s = np.linalg.svd(matrix, compute_uv=False)
    return int((s > rtol * s[0]).sum())


def cosines_solution(A, B):
    Q_A, _ = np.linalg.qr(A)
    Q_B, _ = np.linalg.qr(B)
    return np.linalg.svd(Q_A.T @ Q_B, compute_uv=False)


def min_width_solution(pattern):
    log = np.log(pattern)
    centred = log - log.mean(axis=1, keepdims=True)
    s = np.linalg.svd(centred, compute_uv=False)
    return int((s > 1e-9 * s[0]).sum())


def rank_two_solution(permutation):
    n = len(permutation)
    angles = 2 * np.pi * np.arange(n) / n
    keys = np.stack([np.cos(angles), np.sin(angles)], axis=1)  # key j on the unit circle
    scale = 10.0 / (1.0 - np.cos(2 * np.pi / n))  # neighbours on the circle score less by scale * (1 - cos)
    return scale * keys[permutation] @ keys.T  # query i points at key perm[i]


def energy_rank_solution(matrix, energy):
    s2 = np.linalg.svd(matrix, compute_uv=False) ** 2
    return int(np.searchsorted(np.cumsum(s2) / s2.sum(), energy - 1e-12) + 1)


# --- wrong answers -------------------------------------------------------------------------------

def not_attempted(*args):
    raise NotImplementedError


def attention_without_key_bias(x, W_Q, W_K, b_Q):
    return softmax(x @ W_Q @ W_K.T @ x.T / np.sqrt(W_Q.shape[1]))


def attention_unscaled(x, W_Q, W_K, b_Q):
    return softmax(x @ W_Q @ W_K.T @ x.T + (x @ W_K @ b_Q)[None, :])


def rank_counting_nonzero(matrix, rtol):
    return int((np.linalg.svd(matrix.astype(np.float64), compute_uv=False) > 0).sum())


def rank_with_absolute_tolerance(matrix, rtol):
    return int((np.linalg.svd(matrix.astype(np.float64), compute_uv=False) > rtol).sum())


def cosines_without_orthonormalising(A, B):
    return np.linalg.svd(A.T @ B, compute_uv=False)


def cosines_ascending(A, B):
    return cosines_solution(A, B)[::-1]


def width_without_centring(pattern):
    log = np.log(pattern)
    s = np.linalg.svd(log, compute_uv=False)
    return int((s > 1e-9 * s[0]).sum())


def full_rank_scores(permutation):
    n = len(permutation)
    scores = np.zeros((n, n))
    scores[np.arange(n), permutation] = 10.0
    return scores


def rank_two_too_soft(permutation):
    return rank_two_solution(permutation) / 100.0


def energy_rank_unsquared(matrix, energy):
    s = np.linalg.svd(matrix, compute_uv=False)
    return int(np.searchsorted(np.cumsum(s) / s.sum(), energy) + 1)


def energy_rank_one_short(matrix, energy):
    return energy_rank_solution(matrix, energy) - 1


# --- the tests -----------------------------------------------------------------------------------

@pytest.mark.parametrize("check, solution", [
    (check_attention_from_circuit, attention_solution),
    (check_numerical_rank, numerical_rank_solution),
    (check_principal_angle_cosines, cosines_solution),
    (check_min_head_width, min_width_solution),
    (check_rank_two_scores, rank_two_solution),
    (check_energy_rank, energy_rank_solution),
])
def test_check_passes_the_solution_and_reports_a_missing_attempt(check, solution):
    result = check(solution)
    assert result.passed, result.message
    assert result.message.startswith("✓")
    missing = check(not_attempted)
    assert not missing.passed and "Not attempted" in missing.message


@pytest.mark.parametrize("check, wrong, words", [
    (check_attention_from_circuit, attention_without_key_bias, "per-key term"),
    (check_attention_from_circuit, attention_unscaled, "sqrt(d_head)"),
    (check_numerical_rank, rank_counting_nonzero, "every nonzero singular value"),
    (check_numerical_rank, rank_with_absolute_tolerance, "relative"),
    (check_principal_angle_cosines, cosines_without_orthonormalising, "orthonormalise"),
    (check_principal_angle_cosines, cosines_ascending, "largest first"),
    (check_min_head_width, width_without_centring, "row's mean"),
    (check_rank_two_scores, full_rank_scores, "rank 4"),
    (check_rank_two_scores, rank_two_too_soft, "scale all the scores up"),
    (check_energy_rank, energy_rank_unsquared, "sum of their squares"),
    (check_energy_rank, energy_rank_one_short, "One short"),
])
def test_check_explains_a_typical_mistake(check, wrong, words):
    result = check(wrong)
    assert not result.passed
    assert words in result.message, result.message


def test_checks_reject_the_wrong_kind_of_answer():
    assert "whole number" in check_numerical_rank(lambda m, r: 2.5).message
    assert "shape" in check_rank_two_scores(lambda p: np.zeros(3)).message
