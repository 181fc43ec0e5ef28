"""Checks for the exercises of chapter 1, "The mechanism".

Each ``check_*`` takes the learner's function, runs it on seeded random
inputs, and compares with the package's own implementation, which is itself
tested against torch's reference implementations (``tests/core/test_attention.py``).
The first input of each check is not square, so an answer with two axes the
wrong way round cannot pass it. A wrong answer that matches a classic slip
(the scale left out, dividing by d_k instead of its square root, a softmax over
the queries axis, heads reshaped without moving the axes ...) is named, with
how to fix it: each slip's answer is computed from the same inputs and compared.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator

import numpy as np
import torch

from mha.core import attention_numpy
from mha.core.attention import MultiHeadAttention, head_contributions, split_heads
from mha.core.validation import check_seed

from .checking import (
    CheckResult,
    answer_number,
    answer_tuple,
    array_or_none,
    compare_array,
    describe_difference,
    run_check,
)

__all__ = [
    "check_softmax",
    "check_attention",
    "check_causal_mask",
    "check_split_heads",
    "check_parameter_count",
    "check_head_contributions",
]


def check_softmax(softmax: Callable[[np.ndarray], np.ndarray], seed: int = 0) -> CheckResult:
    """``softmax(scores)`` over the last axis, including scores large enough to overflow a naive exp."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for shape, scale, label in (((3, 5), 1.0, "a (3, 5) matrix, rows independently"), ((4,), 1.0, "a vector"),
                                    ((2, 3, 6), 3.0, "a (2, 3, 6) array"),
                                    ((3, 4), 1000.0, "scores in the thousands: exp overflows unless you shift first")):
            # the thousands sit around +scale, so every row overflows a naive exp whatever the seed (a hidden case too)
            scores = rng.normal(loc=scale if scale >= 1000 else 0.0, scale=scale / 10 if scale >= 1000 else scale,
                                size=shape)
            yield label, (scores.copy(),), {}, (attention_numpy.softmax(scores), _softmax_slips(scores), scale >= 1000)

    def compare(got, want) -> str | None:
        answer, (expected, slips, overflows) = array_or_none(got), want
        problem = compare_array(got, expected, slips, "the result")
        if problem and overflows and answer is not None and answer.dtype.kind == "f" and not np.isfinite(answer).all():
            problem += (" Here exp overflowed: np.exp of a score above about 709 is inf, and inf / inf is NaN. "
                        "Subtract each row's largest score before exp; the softmax does not change.")
        return problem

    return run_check(softmax, cases(), compare, "computes softmax stably")


def _softmax_slips(scores: np.ndarray) -> dict[str, tuple[np.ndarray, str]]:
    """What a softmax over the wrong axis gives for ``scores``: each slip's answer and how to fix it."""
    slips = {f"axis {axis}": (attention_numpy.softmax(scores, axis=axis),
                              f"It is a softmax along axis {axis} instead of the last axis: each row (the last axis) "
                              "must sum to 1. Take the max and the sum with axis=-1, keepdims=True.")
             for axis in range(scores.ndim - 1)}
    whole = np.exp(scores - scores.max())
    slips["whole array"] = (whole / whole.sum(), "The whole array sums to 1, not each row: take the max and the sum "
                            "along the last axis (axis=-1, keepdims=True), not over everything.")
    return slips if scores.ndim > 1 else {}


def check_attention(attention: Callable, seed: int = 0) -> CheckResult:
    """``attention(q, k, v, mask=None) -> (output, weights)`` in numpy, masks with True = may attend."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for seq_q, seq_k, d_k, d_v, masked in ((3, 5, 4, 2, False), (4, 4, 16, 5, True), (2, 6, 8, 3, False),
                                               (6, 6, 64, 8, True)):
            q, k, v = (rng.normal(size=(s, d)) for s, d in ((seq_q, d_k), (seq_k, d_k), (seq_k, d_v)))
            mask = np.tril(np.ones((seq_q, seq_k), dtype=bool)) if masked else None
            label = f"q {q.shape}, k {k.shape}, v {v.shape}" + (", causal mask" if masked else ", no mask")
            want = attention_numpy.scaled_dot_product_attention(q, k, v, mask)
            yield label, (q, k, v), {"mask": mask}, (want, _attention_slips(q, k, mask))

    def compare(got, want) -> str | None:
        output, weights = answer_tuple(got, ("output", "weights"))
        (want_output, want_weights), slips = want
        return (compare_array(weights, want_weights, slips, "weights")
                or describe_difference("output", output, want_output))

    return run_check(attention, cases(), compare, "computes scaled dot-product attention")


def _attention_slips(q: np.ndarray, k: np.ndarray, mask: np.ndarray | None) -> dict[str, tuple[np.ndarray, str]]:
    """The weights each classic slip gives for these inputs (computed, not guessed), and how to fix it."""
    d_k = q.shape[-1]

    def weights(divide_by: float, axis: int = -1, mask_after: bool = False, allowed=mask,
                blocked: float = -np.inf) -> np.ndarray:
        scores = q @ k.T / divide_by  # (seq_q, seq_k)
        if allowed is not None and not mask_after:
            scores = np.where(allowed, scores, blocked)
        with warnings.catch_warnings():  # an inverted mask blocks whole rows: NaN, as the learner's softmax gives
            warnings.simplefilter("ignore")
            result = attention_numpy.softmax(scores, axis=axis)
        return result * allowed if allowed is not None and mask_after else result

    slips = {
        "unscaled": (weights(1.0), "These are the weights without the scale: the scores were not divided by √d_k "
                     "(d_k = q.shape[-1], the width of a query). Divide the scores by np.sqrt(d_k) before the "
                     "softmax."),
        "divided by d_k": (weights(d_k), "You divided the scores by d_k; the scale is its square root, √d_k. Use "
                           "np.sqrt(d_k)."),
        "queries axis": (weights(np.sqrt(d_k), axis=0), "The softmax ran over the queries (down each column, axis 0), "
                         "so each key's column sums to 1. It runs over the keys, along each row (axis -1), so that "
                         "each query's weights sum to 1."),
        "key length": (weights(np.sqrt(k.shape[0])), "You divided the scores by the square root of the number of keys "
                       "(seq_k); the scale is √d_k, the width of a query and a key: np.sqrt(q.shape[-1])."),
    }
    if mask is not None:
        slips["masked after"] = (weights(np.sqrt(d_k), mask_after=True), "The blocked weights were zeroed after the "
                                 "softmax, so the rows no longer sum to 1. Set the blocked scores to -inf before it.")
        inverted = ("The mask is inverted: you blocked the keys where the mask is True. True means the query MAY "
                    "attend to that key; block where it is False: np.where(mask, scores, -np.inf).")
        slips["inverted mask"] = (weights(np.sqrt(d_k), allowed=~mask), inverted)
        slips["inverted mask, finite"] = (weights(np.sqrt(d_k), allowed=~mask, blocked=-1e9), inverted)
    return slips


def check_causal_mask(causal_mask: Callable[[int], np.ndarray], seed: int = 0) -> CheckResult:
    """``causal_mask(n)`` -> boolean (n, n), True where query i may attend to key j (j <= i); a seed other than 0
    draws other sizes."""
    sizes = (5, 1, 2, 3, 8) if check_seed("seed", seed) == 0 else tuple(np.random.default_rng(seed).integers(2, 40, 5))

    def cases() -> Iterator:
        for n in sizes:  # the first is large enough that the transpose, or a strict triangle, differs from the answer
            n = int(n)
            slips = {"strict": (np.tril(np.ones((n, n), dtype=bool), k=-1), "Each query may also attend to itself: "
                                "keep the diagonal (j <= i, not j < i)."),
                     "no mask": (np.ones((n, n), dtype=bool), "Every entry is True, so every query sees the future "
                                 "too: block the keys after each query.")}
            yield f"n = {n}", (n,), {}, (np.tril(np.ones((n, n), dtype=bool)), slips)

    return run_check(causal_mask, cases(), lambda got, want: compare_array(got, want[0], want[1], "the mask"),
                     "builds a causal mask")


def check_split_heads(split: Callable[[np.ndarray, int], np.ndarray], seed: int = 0) -> CheckResult:
    """``split(x, n_heads)``: (batch, seq, d_model) -> (batch, heads, seq, d_head), head h = features
    h*d_head:(h+1)*d_head."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for batch, seq, d_model, n_heads in ((2, 5, 12, 3), (1, 3, 4, 2), (2, 4, 12, 4), (3, 2, 16, 8)):
            x = rng.normal(size=(batch, seq, d_model))
            want = split_heads(torch.from_numpy(x), n_heads).numpy()
            yield f"x {x.shape}, {n_heads} heads", (x.copy(), n_heads), {}, (want, _split_heads_slips(x, n_heads))

    return run_check(split, cases(), lambda got, want: compare_array(got, want[0], want[1], "the result", head_axis=1),
                     "splits the features into heads")


def _split_heads_slips(x: np.ndarray, n_heads: int) -> dict[str, tuple[np.ndarray, str]]:
    """What splitting heads the classic wrong ways gives for ``x``, and how to fix each."""
    batch, seq, d_model = x.shape
    d_head = d_model // n_heads
    return {
        "no transpose": (x.reshape(batch, n_heads, seq, d_head), "You reshaped straight to (batch, heads, seq, "
                         "d_head) without moving an axis. A reshape keeps the numbers in memory order, so each "
                         "'head' gets pieces of several tokens. Reshape to (batch, seq, heads, d_head) first, then "
                         "swap the seq and heads axes."),
        "strided": (x.reshape(batch, seq, d_head, n_heads).transpose(0, 3, 1, 2), "Head h got every n_heads-th "
                    "feature (h, h + n_heads, ...) rather than one block of d_head neighbours: split the last axis "
                    "into (heads, d_head), not (d_head, heads)."),
    }


def check_parameter_count(count: Callable[..., int], seed: int = 0) -> CheckResult:
    """``count(d_model, n_heads, bias=True)``: learnable numbers in one multi-head attention layer; a seed other
    than 0 draws other sizes."""
    rng = np.random.default_rng(check_seed("seed", seed))
    sizes = ((8, 2, True), (8, 4, False), (64, 8, True), (768, 12, True), (384, 12, False)) if seed == 0 else tuple(
        (int(heads * rng.integers(1, 17)), int(heads), bool(rng.integers(2))) for heads in rng.integers(2, 13, size=5))

    def cases() -> Iterator:
        for d_model, n_heads, bias in sizes:
            layer = MultiHeadAttention(d_model, n_heads, bias=bias)
            want = sum(p.numel() for p in layer.parameters())  # counted from a real layer
            biases = 4 * d_model if bias else 0
            slips = {
                "per head": (n_heads * want, "You gave every head full-size projections. The heads split d_model "
                             "between them, so the count does not grow with n_heads."),
                "no biases": (want - biases, "Add the biases: with bias=True each of the four projections has one."),
                "no W_O": (want - d_model * d_model - biases // 4, "Count the output projection W_O too (and its "
                           "bias, when there is one)."),
                "no W_O matrix": (want - d_model * d_model, "Count the output projection W_O's matrix too, not only "
                                  "its bias."),
            }
            yield f"d_model = {d_model}, n_heads = {n_heads}, bias = {bias}", (d_model, n_heads), {"bias": bias}, \
                (want, slips)

    def compare(got, expected) -> str | None:
        value, (want, slips) = answer_number(got, "the count", whole=True), expected
        if value == want:
            return None
        hint = next((f" {hint}" for slip, hint in slips.values() if slip == value), "")
        return f"you counted {value:,} parameters; the layer has {want:,}.{hint}"

    return run_check(count, cases(), compare, "counts the parameters")


def check_head_contributions(contributions: Callable[[np.ndarray, np.ndarray], np.ndarray],
                             seed: int = 0) -> CheckResult:
    """``contributions(z, W_O)``: z (batch, heads, seq, d_head), W_O (heads*d_head, d_model) -> (batch, heads, seq,
    d_model)."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for batch, n_heads, seq, d_head, d_model in ((2, 3, 4, 2, 5), (1, 2, 3, 2, 4), (1, 4, 5, 3, 12)):
            z = rng.normal(size=(batch, n_heads, seq, d_head))
            W_O = rng.normal(size=(n_heads * d_head, d_model))
            want = head_contributions(torch.from_numpy(z), torch.from_numpy(W_O)).numpy()
            interleaved = W_O.reshape(d_head, n_heads, d_model).transpose(1, 0, 2)  # head h: rows h, h + heads, ...
            slips = {"interleaved rows": (np.einsum("bhsd,hdm->bhsm", z, interleaved), "Head h used rows h, "
                                          "h + heads, ... of W_O; it writes with one block of d_head neighbouring "
                                          "rows, the block its features came from in the concatenation."),
                     "W_O.T": (np.einsum("bhsd,hdm->bhsm", z, W_O.T.reshape(n_heads, d_head, d_model)),
                               _TRANSPOSED_W_O)}
            yield f"z {z.shape}, W_O {W_O.shape}", (z.copy(), W_O.copy()), {}, (want, slips)

    return run_check(contributions, cases(),
                     lambda got, want: compare_array(got, want[0], want[1], "the result", head_axis=1),
                     "splits the output into per-head contributions")


_TRANSPOSED_W_O = ("You used W_O.T, the output projection transposed (the column-vector convention). Here vectors are "
                   "rows: W_O is (heads * d_head, d_model) as it is, and head h writes z_h @ W_O[h * d_head:(h + 1) "
                   "* d_head].")
