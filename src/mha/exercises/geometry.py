"""Checks for the exercises of chapter 2, "The geometry of subspace projection": circuits, ranks, subspaces and
the low-rank bottleneck.

Each ``check_*`` takes the learner's function, runs it on small seeded numpy
inputs whose answers are known, and compares with the package's own
implementation (:mod:`mha.core.geometry`, :mod:`mha.core.low_rank_fitting`, tested on
hand-made matrices in ``tests/core/test_geometry.py`` and
``tests/core/test_low_rank_fitting.py``). When an answer is wrong, the message also
names the common slip it matches (a bias term left out, singular values not
squared, rows not centred ...).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from mha.core.geometry import energy_rank, numerical_rank, principal_angle_cosines, score_terms
from mha.core.low_rank_fitting import dense_random_pattern, min_head_width
from mha.core.validation import check_seed

from .checking import CheckResult, answer_array, answer_number, compare_array, run_check

__all__ = [
    "check_attention_from_circuit",
    "check_numerical_rank",
    "check_principal_angle_cosines",
    "check_min_head_width",
    "check_rank_two_scores",
    "check_energy_rank",
]


def _softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = np.exp(scores - scores.max(axis=axis, keepdims=True))
    return shifted / shifted.sum(axis=axis, keepdims=True)


# --- chapter 2, "Each head's own subspace" ------------------------------------------------------

def check_attention_from_circuit(attention: Callable, seed: int = 0) -> CheckResult:
    """``attention(x, W_Q, W_K, b_Q)``: x (n, d_model), W_Q and W_K (d_model, d_head), b_Q (d_head,) -> (n, n)
    weights of one head.

    The reference head also has a key bias ``b_K`` that the learner is not
    given; the answer is compared with the head's real weights, ``b_K`` included.
    """
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n, d_model, d_head in ((3, 4, 2), (5, 8, 2), (6, 12, 4), (7, 16, 8)):
            x = rng.normal(size=(n, d_model))
            W_Q, W_K = (rng.normal(size=(d_model, d_head)) for _ in range(2))
            b_Q, b_K = (rng.normal(size=d_head) for _ in range(2))
            terms = score_terms(*(torch.from_numpy(a) for a in (x, x, W_Q, W_K, b_Q, b_K)))
            want = terms.total().softmax(dim=-1).numpy()  # the real head, b_K included
            slips = {
                "without_key_bias": (terms.bilinear.softmax(dim=-1).numpy(),
                                     "Your weights are softmax(x W_QK xᵀ / sqrt(d_head)): the per-key term "
                                     "b_Q W_Kᵀ x_jᵀ / sqrt(d_head) is missing. It differs from key to key, so it "
                                     "survives the softmax."),
                "unscaled": (((terms.bilinear + terms.key_only) * d_head ** 0.5).softmax(dim=-1).numpy(),
                             "Divide the scores by sqrt(d_head) before the softmax."),
                "wrong_axis": (_softmax((terms.bilinear + terms.key_only).numpy(), axis=0),
                               "The softmax runs over keys, along each row (axis -1), not down the columns."),
            }
            yield f"x {x.shape}, d_head = {d_head}", (x.copy(), W_Q.copy(), W_K.copy(), b_Q.copy()), {}, (want, slips)

    return run_check(attention, cases(), lambda got, want: compare_array(got, want[0], want[1], "the weight matrix"),
                     "computes a head's attention through its QK circuit")


def check_numerical_rank(rank: Callable, seed: int = 0) -> CheckResult:
    """``rank(matrix, rtol)`` -> how many singular values exceed ``rtol`` times the largest."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for d, k, scale, rtol, label in ((12, 3, 1.0, 1e-5, "a float32 product through 3 dimensions"),
                                         (40, 7, 1.0, 1e-5, "a float32 product through 7 dimensions"),
                                         (30, 5, 1e-9, 1e-5, "the same kind of product, every entry times 1e-9"),
                                         (30, 4, 1e3, 1e-5, "the same kind of product, every entry times 1000"),
                                         (20, 20, 1.0, 1e-5, "a square matrix of full rank")):
            A, B = rng.normal(size=(d, k)), rng.normal(size=(k, d))
            matrix = ((A @ B) * scale).astype(np.float32)  # rounding leaves tiny nonzero singular values
            want = int(numerical_rank(torch.from_numpy(matrix).double(), rtol=rtol))
            singular_values = np.linalg.svd(matrix.astype(np.float64), compute_uv=False)
            hints = {"all_nonzero": int((singular_values > 0).sum()),
                     "absolute": int((singular_values > rtol).sum())}
            yield f"{label}, shape {matrix.shape}, rtol = {rtol:g}", (matrix.copy(), rtol), {}, (want, hints)

    def compare(got, expected) -> str | None:
        want, hints = expected
        value = answer_number(got, "the rank", whole=True)
        if value == want:
            return None
        message = f"you found rank {value}; it is {want}."
        if value == hints["all_nonzero"] != want:
            message += (" You counted every nonzero singular value: rounding leaves tiny ones where the exact rank "
                        "has zeros. Count only those above rtol times the largest.")
        elif value == hints["absolute"] != want:
            message += (" You compared the singular values with rtol itself; the tolerance is relative: rtol times "
                        "the largest singular value, so that scaling the matrix does not change its rank.")
        return message

    return run_check(rank, cases(), compare, "counts the singular values that are not rounding noise")


def check_principal_angle_cosines(cosines: Callable, seed: int = 0) -> CheckResult:
    """``cosines(A, B)`` -> cosines of the principal angles between the column spaces, descending, shape (min(k_a,
    k_b),)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for d, k_a, k_b, shared in ((3, 1, 1, 0), (5, 2, 2, 1), (12, 3, 3, 0), (20, 4, 2, 1)):
            common = rng.normal(size=(d, shared))
            A = np.concatenate([common, rng.normal(size=(d, k_a - shared))], axis=1) @ rng.normal(size=(k_a, k_a))
            B = np.concatenate([common, rng.normal(size=(d, k_b - shared))], axis=1) * rng.uniform(0.5, 3.0, size=k_b)
            want = principal_angle_cosines(torch.from_numpy(A), torch.from_numpy(B)).numpy()
            label = f"A {A.shape}, B {B.shape}" + (f", sharing {shared} direction" if shared else "")
            slips = {
                "raw": (np.linalg.svd(A.T @ B, compute_uv=False)[: len(want)],
                        "These are the singular values of Aᵀ B: orthonormalise the columns of A and B first "
                        "(np.linalg.qr or the SVD), or the lengths of the columns leak into the answer."),
                "ascending": (want[::-1], "The right numbers in the wrong order: sort them largest first (smallest "
                              "angle first)."),
                "angles": (np.arccos(np.clip(want, -1.0, 1.0)),
                           "These are the angles in radians; return their cosines."),
            }
            yield label, (A.copy(), B.copy()), {}, (want, slips)

    return run_check(cosines, cases(), lambda got, want: compare_array(got, want[0], want[1], "the array of cosines"),
                     "computes the cosines of the principal angles")


# --- chapter 2, "The low-rank bottleneck" --------------------------------------------------------

def check_min_head_width(width: Callable, seed: int = 0) -> CheckResult:
    """``width(pattern)`` -> the smallest d_head that gives the strictly positive pattern (n, n) exactly."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n, rank in ((5, 1), (8, 2), (10, 4), (9, None)):
            if rank is None:
                pattern = dense_random_pattern(n, seed=seed).numpy()
                label = f"a dense random pattern over {n} tokens"
            else:
                scores = rng.normal(size=(n, rank)) @ rng.normal(size=(rank, n)) + rng.normal(size=(n, 1))
                pattern = _softmax(scores)
                label = f"softmax of rank-{rank} scores plus a constant per row, {n} tokens"
            want = min_head_width(torch.from_numpy(pattern))
            log = np.log(pattern)
            hints = {"uncentred": int(np.linalg.matrix_rank(log, tol=1e-9 * np.abs(log).max())),
                     "of_pattern": int(np.linalg.matrix_rank(pattern))}
            yield label, (pattern.copy(),), {}, (want, hints)

    def compare(got, expected) -> str | None:
        want, hints = expected
        value = answer_number(got, "the width", whole=True)
        if value == want:
            return None
        message = f"you found width {value}; the smallest that works is {want}."
        if value == hints["uncentred"] != want:
            message += (" That is the rank of log(pattern) itself. The softmax ignores a constant added to a row, "
                        "so subtract each row's mean first: the centred matrix has the smallest rank of them all.")
        elif value == hints["of_pattern"] != want:
            message += (" That is the rank of the pattern; the head has to produce its scores, log(pattern) up to row "
                        "constants.")
        return message

    return run_check(width, cases(), compare, "finds the smallest head width that reproduces a pattern")


def check_rank_two_scores(make_scores: Callable, threshold: float = 0.9, seed: int = 0) -> CheckResult:
    """``make_scores(permutation)`` -> (n, n) scores of rank <= 2 whose softmax puts >= ``threshold`` on key
    ``permutation[i]`` in row ``i`` (other permutations for a seed other than 0)."""

    def cases() -> Iterator:
        for n, draw in ((4, 0), (8, 1), (16, 2), (32, 3)):
            permutation = np.random.default_rng(draw if check_seed("seed", seed) == 0 else [seed, draw]).permutation(n)
            label = f"a random permutation of {n} tokens" if n > 4 else f"permutation {permutation.tolist()}"
            yield label, (permutation.copy(),), {}, permutation

    def compare(got, permutation) -> str | None:
        n = len(permutation)
        scores = answer_array(got, "the array of scores", (n, n)).astype(np.float64)
        rank = int(numerical_rank(torch.from_numpy(scores), rtol=1e-9))
        if rank > 2:
            return (f"these scores have rank {rank}, but a head of width 2 can only make rank 2. Give each query a "
                    "2-d vector and each key a 2-d vector, and take dot products.")
        on_target = _softmax(scores)[np.arange(n), permutation]  # (n,)
        worst = int(on_target.argmin())
        if on_target[worst] < threshold:
            return (f"row {worst} puts only {on_target[worst]:.3f} of its weight on key {int(permutation[worst])} "
                    f"(it should be at least {threshold}). If the right key already has the largest score, scale "
                    "all the scores up: the softmax sharpens.")
        return None

    return run_check(make_scores, cases(), compare, f"makes rank-2 scores that follow a permutation (weight >= "
                                                    f"{threshold})")


def check_energy_rank(rank: Callable, seed: int = 0) -> CheckResult:
    """``rank(matrix, energy)`` -> fewest singular directions holding ``energy`` of the squared Frobenius norm."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for shape, decay, energy in (((6, 6), 0.5, 0.9), ((10, 8), 0.7, 0.99), ((12, 12), 0.8, 0.9),
                                     ((20, 15), 0.9, 0.99)):
            left, _ = np.linalg.qr(rng.normal(size=(shape[0], shape[0])))
            right, _ = np.linalg.qr(rng.normal(size=(shape[1], shape[1])))
            k = min(shape)
            singular_values = decay ** np.arange(k)  # known, decaying spectrum
            matrix = left[:, :k] @ np.diag(singular_values) @ right[:, :k].T
            want = int(energy_rank(torch.from_numpy(matrix), energy=energy))
            held_unsquared = np.cumsum(singular_values) / singular_values.sum()
            hints = {"unsquared": int((held_unsquared < energy).sum()) + 1,
                     "one_short": want - 1}
            label = f"shape {shape}, singular values {decay}^k, energy = {energy}"
            yield label, (matrix.copy(), energy), {}, (want, hints)

    def compare(got, expected) -> str | None:
        want, hints = expected
        value = answer_number(got, "the number of directions", whole=True)
        if value == want:
            return None
        message = f"you found {value}; the answer is {want}."
        if value == hints["unsquared"] != want:
            message += " You added up singular values; the squared Frobenius norm is the sum of their squares."
        elif value == hints["one_short"]:
            message += (" One short: you counted the directions *before* the running share reaches the energy; "
                        "include the one that reaches it.")
        return message

    return run_check(rank, cases(), compare, "counts the directions a matrix uses")
