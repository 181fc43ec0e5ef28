"""The same attention math as :mod:`mha.core.attention`, in plain numpy.

Chapter 1 builds attention first with numpy, where every array is visible and
nothing is hidden in autograd; the torch module then has to agree with this
one (the tests check that it does). Same conventions: vectors are rows,
weights are (..., seq_q, seq_k) with rows = queries, masks are boolean with
True = may attend. Same input rules (:mod:`mha.core.validation`): arrays, tensors
or nested lists of real numbers, whole numbers read as float64; bad input
raises :class:`~mha.core.validation.InputError`, NaN or inf a
:class:`~mha.core.validation.NonFiniteWarning`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from mha.core.masks import as_mask, check_mask
from mha.core.validation import (
    InputError,
    as_float_arrays,
    check_attention_shapes,
    check_head_count,
    check_not_empty,
    check_rank,
    check_size,
    check_whole_number,
    warn_if_not_finite,
)

__all__ = ["softmax", "scaled_dot_product_attention", "multi_head_attention", "NumpyAttentionOutput"]


def softmax(scores: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(s) / sum(exp(s)) along ``axis``, computed stably by first subtracting the maximum.

    Subtracting the row maximum changes nothing mathematically (it cancels in the
    ratio) but keeps ``exp`` from overflowing; entries of ``-inf`` get weight 0.
    Chapter 1, "Attention from scratch".
    """
    (scores,) = as_float_arrays({"scores": scores})
    check_rank("scores", scores.shape, range(1, 65), "an array with at least one axis to normalise over")
    axis = check_whole_number("axis", axis)
    if not -scores.ndim <= axis < scores.ndim:
        raise InputError(f"axis = {axis} does not exist for scores of shape {scores.shape}; pass an axis from "
                         f"{-scores.ndim} to {scores.ndim - 1}, usually -1 (the last).")
    if scores.shape[axis] == 0:
        raise InputError(f"scores has shape {scores.shape}: axis {axis} is empty, and softmax over no "
                         "entries is 0/0. Give at least one score along that axis.")
    weights = _softmax(scores, axis)
    warn_if_not_finite(weights, {"scores": scores}, what="softmax(scores)")
    return weights


def _softmax(scores: np.ndarray, axis: int) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # a row of -inf gives NaN; the callers warn about it in words
        shifted = scores - scores.max(axis=axis, keepdims=True)
    exps = np.exp(shifted)
    return exps / exps.sum(axis=axis, keepdims=True)


def scaled_dot_product_attention(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """softmax(q kᵀ / sqrt(d_k)) v: ``q`` (..., seq_q, d_k), ``k`` (..., seq_k, d_k), ``v`` (..., seq_k, d_v).

    Returns ``output`` (..., seq_q, d_v) and ``weights`` (..., seq_q, seq_k).
    """
    q, k, v = as_float_arrays({"q": q, "k": k, "v": v})
    scores_shape = check_attention_shapes(q.shape, k.shape, v.shape)  # (..., seq_q, seq_k)
    if mask is not None:
        check_mask(mask, scores_shape)
        mask = as_mask(mask, device="cpu").numpy()
    output, weights = _attend(q, k, v, mask)
    warn_if_not_finite(output, {"q": q, "k": k, "v": v})
    return output, weights


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The steps of :func:`scaled_dot_product_attention`, on checked inputs."""
    with np.errstate(over="ignore", invalid="ignore"):  # overflow and NaN are reported by the callers, in words
        scores = q @ np.swapaxes(k, -2, -1) / np.sqrt(q.shape[-1])  # (..., seq_q, seq_k)
        if mask is not None:
            scores = np.where(mask, scores, -np.inf)
        weights = _softmax(scores, axis=-1)  # (..., seq_q, seq_k)
        return weights @ v, weights  # (..., seq_q, d_v), (..., seq_q, seq_k)


class NumpyAttentionOutput(NamedTuple):
    output: np.ndarray  # (batch, seq_q, d_model)
    weights: np.ndarray  # (batch, heads, seq_q, seq_k)
    head_outputs: np.ndarray  # (batch, heads, seq_q, d_head)


def multi_head_attention(
    x: np.ndarray,
    W_Q: np.ndarray,
    W_K: np.ndarray,
    W_V: np.ndarray,
    W_O: np.ndarray,
    n_heads: int,
    *,
    biases: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
    mask: np.ndarray | None = None,
) -> NumpyAttentionOutput:
    """Multi-head self-attention of ``x`` (batch, seq, d_model) with (d_model, d_model) weights.

    ``biases`` is ``(b_Q, b_K, b_V, b_O)``, each (d_model,). ``mask`` is boolean,
    broadcastable to (batch, heads, seq, seq); a 3-D mask is shared by all heads.
    """
    given = {"x": x, "W_Q": W_Q, "W_K": W_K, "W_V": W_V, "W_O": W_O}
    if biases is not None:
        try:
            given["b_Q"], given["b_K"], given["b_V"], given["b_O"] = biases
        except (TypeError, ValueError):
            raise InputError("biases should be (b_Q, b_K, b_V, b_O), four vectors of shape (d_model,), "
                             "or None for no biases.") from None
    named = dict(zip(given, as_float_arrays(given), strict=True))
    x = named["x"]
    check_rank("x", x.shape, (3,), "(batch, seq, d_model)")
    check_not_empty("x", x.shape, 1, "positions (seq = 0)")
    batch, seq, d_model = x.shape
    d_head = check_head_count(d_model, n_heads)
    n_heads = d_model // d_head
    for name, array in named.items():
        expected = (d_model,) if name.startswith("b_") else (d_model, d_model)
        if name != "x" and array.shape != expected:
            raise InputError(f"{name} has shape {array.shape}; with d_model = {d_model} it must be {expected}.")
    W_Q, W_K, W_V, W_O = (named[name] for name in ("W_Q", "W_K", "W_V", "W_O"))
    b_Q, b_K, b_V, b_O = (named.get(name, 0.0) for name in ("b_Q", "b_K", "b_V", "b_O"))
    if mask is not None:
        mask = as_mask(mask, device="cpu").numpy()
        if mask.ndim == 3:
            mask = mask[:, None]  # (batch, 1, seq_q, seq_k)
        check_mask(mask, (batch, n_heads, seq, seq))
    check_size("the attention weights (batch, heads, seq, seq)", (batch, n_heads, seq, seq))

    def split(a: np.ndarray) -> np.ndarray:
        return a.reshape(batch, seq, n_heads, d_head).transpose(0, 2, 1, 3)  # (batch, heads, seq, d_head)

    with np.errstate(over="ignore", invalid="ignore"):
        # 1-2. project, and split the features into heads
        q, k, v = split(x @ W_Q + b_Q), split(x @ W_K + b_K), split(x @ W_V + b_V)  # (batch, heads, seq, d_head)
        # 3-5. each head attends on its own slice
        z, weights = _attend(q, k, v, mask)  # (batch, heads, seq, d_head)
        # 6. concatenate the heads and mix them with W_O
        concatenated = z.transpose(0, 2, 1, 3).reshape(batch, seq, d_model)  # (batch, seq, d_model)
        output = concatenated @ W_O + b_O  # (batch, seq, d_model)
    warn_if_not_finite(output, named)
    return NumpyAttentionOutput(output, weights, z)
