"""Checks for the exercises of chapter 1, "The mechanism".

Each ``check_*`` takes the learner's function, runs it on seeded random
inputs, and compares with the package's own implementation, which is itself
tested against torch's reference implementations (``tests/test_attention.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from mha.core import attention_numpy
from mha.core.attention import MultiHeadAttention, head_contributions, split_heads
from .checking import CheckResult, answer_number, answer_tuple, describe_difference, run_check

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
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for shape, scale, label in (((4,), 1.0, "a vector"), ((3, 5), 1.0, "a (3, 5) matrix, rows independently"),
                                    ((2, 3, 6), 3.0, "a (2, 3, 6) array"),
                                    ((3, 4), 1000.0, "scores in the thousands: exp overflows unless you shift first")):
            # the thousands sit around +scale, so every row overflows a naive exp whatever the seed (a hidden case too)
            scores = rng.normal(loc=scale if scale >= 1000 else 0.0, scale=scale / 10 if scale >= 1000 else scale,
                                size=shape)
            yield label, (scores.copy(),), {}, attention_numpy.softmax(scores)

    return run_check(softmax, cases(), lambda got, want: describe_difference("the result", got, want), "computes softmax stably")


def check_attention(attention: Callable, seed: int = 0) -> CheckResult:
    """``attention(q, k, v, mask=None) -> (output, weights)`` in numpy, masks with True = may attend."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for seq_q, seq_k, d_k, d_v, masked in ((3, 3, 4, 4, False), (2, 5, 8, 3, False), (4, 4, 16, 5, True),
                                               (6, 6, 64, 8, True)):
            q, k, v = (rng.normal(size=(s, d)) for s, d in ((seq_q, d_k), (seq_k, d_k), (seq_k, d_v)))
            mask = np.tril(np.ones((seq_q, seq_k), dtype=bool)) if masked else None
            label = f"q {q.shape}, k {k.shape}, v {v.shape}" + (", causal mask" if masked else ", no mask")
            yield label, (q, k, v), {"mask": mask}, attention_numpy.scaled_dot_product_attention(q, k, v, mask)

    def compare(got, want) -> str | None:
        output, weights = answer_tuple(got, ("output", "weights"))
        return describe_difference("weights", weights, want[1]) or describe_difference("output", output, want[0])

    return run_check(attention, cases(), compare, "computes scaled dot-product attention")


def check_causal_mask(causal_mask: Callable[[int], np.ndarray], seed: int = 0) -> CheckResult:
    """``causal_mask(n)`` -> boolean (n, n), True where query i may attend to key j (j <= i); a seed other than 0
    draws other sizes."""
    sizes = (1, 2, 3, 5, 8) if seed == 0 else tuple(np.random.default_rng(seed).integers(1, 40, size=5))
    cases = ((f"n = {n}", (int(n),), {}, np.tril(np.ones((n, n), dtype=bool))) for n in sizes)
    return run_check(causal_mask, cases, lambda got, want: describe_difference("the mask", got, want), "builds a causal mask")


def check_split_heads(split: Callable[[np.ndarray, int], np.ndarray], seed: int = 0) -> CheckResult:
    """``split(x, n_heads)``: (batch, seq, d_model) -> (batch, heads, seq, d_head), head h = features h*d_head:(h+1)*d_head."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for batch, seq, d_model, n_heads in ((1, 3, 4, 2), (2, 5, 12, 3), (2, 4, 12, 4), (3, 2, 16, 8)):
            x = rng.normal(size=(batch, seq, d_model))
            want = split_heads(torch.from_numpy(x), n_heads).numpy()
            yield f"x {x.shape}, {n_heads} heads", (x.copy(), n_heads), {}, want

    return run_check(split, cases(), lambda got, want: describe_difference("the result", got, want, head_axis=1),
                     "splits the features into heads")


def check_parameter_count(count: Callable[..., int], seed: int = 0) -> CheckResult:
    """``count(d_model, n_heads, bias=True)``: learnable numbers in one multi-head attention layer; a seed other
    than 0 draws other sizes."""
    rng = np.random.default_rng(seed)
    sizes = ((8, 2, True), (8, 4, False), (64, 8, True), (768, 12, True), (384, 12, False)) if seed == 0 else tuple(
        (int(heads * rng.integers(1, 17)), int(heads), bool(rng.integers(2))) for heads in rng.integers(1, 13, size=5))

    def cases() -> Iterator:
        for d_model, n_heads, bias in sizes:
            layer = MultiHeadAttention(d_model, n_heads, bias=bias)
            want = sum(p.numel() for p in layer.parameters())  # counted from a real layer
            yield f"d_model = {d_model}, n_heads = {n_heads}, bias = {bias}", (d_model, n_heads), {"bias": bias}, want

    def compare(got, want) -> str | None:
        got = answer_number(got, "the count", whole=True)
        return None if got == want else f"you counted {got:,} parameters; the layer has {want:,}."

    return run_check(count, cases(), compare, "counts the parameters")


def check_head_contributions(contributions: Callable[[np.ndarray, np.ndarray], np.ndarray], seed: int = 0) -> CheckResult:
    """``contributions(z, W_O)``: z (batch, heads, seq, d_head), W_O (heads*d_head, d_model) -> (batch, heads, seq, d_model)."""
    rng = np.random.default_rng(seed)

    def cases() -> Iterator:
        for batch, n_heads, seq, d_head in ((1, 2, 3, 2), (2, 3, 4, 4), (1, 4, 5, 3)):
            z = rng.normal(size=(batch, n_heads, seq, d_head))
            W_O = rng.normal(size=(n_heads * d_head, n_heads * d_head))
            want = head_contributions(torch.from_numpy(z), torch.from_numpy(W_O)).numpy()
            yield f"z {z.shape}, W_O {W_O.shape}", (z.copy(), W_O.copy()), {}, want

    return run_check(contributions, cases(), lambda got, want: describe_difference("the result", got, want, head_axis=1),
                     "splits the output into per-head contributions")
