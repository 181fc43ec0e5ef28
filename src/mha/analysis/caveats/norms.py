"""What a head actually moves: attention weights next to the size of the vectors they weight (chapter 4).

Chapter 4 ("Caveats", section "Attention is not explanation") separates two
things a heatmap mixes up. Head ``h``'s output at query ``i`` is

    sum_j  A[i, j] * (v_j @ W_O^h)

where ``A`` is the head's attention map (row = query, attends FROM; column =
key, attended TO), ``v_j`` is key ``j``'s value (``x_j @ W_V^h + b_V^h``,
(d_head,)) and ``W_O^h`` (d_head, d_model) is the head's slice of the output
projection. The weight ``A[i, j]`` says how much of key ``j``'s vector is
taken; ``|| A[i, j] v_j W_O^h ||`` says how large a vector actually arrives.
A token can get most of the weight and still send almost nothing, when its
transformed value is short: Kobayashi et al. (2020, "Attention is not only a
weight: analyzing transformers with vector norms") showed this for BERT's
``[CLS]``, ``[SEP]`` and punctuation. This module computes those norms.
"""

from __future__ import annotations

import numpy as np

from mha.core.layouts import QUERY_KEY, takes_attention
from mha.core.validation import as_real_array

__all__ = ["transformed_value_norms", "weighted_vector_norms", "norm_based_attention"]


def transformed_value_norms(values, W_O) -> np.ndarray:
    """``|| v_j @ W_O^h ||`` for every head and key: (..., heads, seq) (chapter 4).

    ``values`` (..., heads, seq, d_head) are the heads' values (bias
    included), ``W_O`` (..., heads, d_head, d_model) each head's rows of the
    output projection, e.g. ``encoder.stacked_head_weights().W_O``. Leading
    axes (layers) broadcast.
    """
    values, W_O = as_real_array("values", values), as_real_array("W_O", W_O)
    if values.ndim < 3 or W_O.ndim < 3 or values.shape[-1] != W_O.shape[-2] or values.shape[-3] != W_O.shape[-3]:
        raise ValueError(f"values {values.shape} and W_O {W_O.shape} do not fit: give values (..., heads, seq, d_head) "
                         "and W_O (..., heads, d_head, d_model) with the same heads and d_head.")
    return np.linalg.norm(values @ W_O, axis=-1)  # (..., heads, seq)


@takes_attention(attention=QUERY_KEY.with_leading(6))
def weighted_vector_norms(attention, value_norms) -> np.ndarray:
    """``A[i, j] * || v_j W_O^h ||``: the length of what key ``j`` sends to query ``i`` (chapter 4).

    ``attention`` (..., seq_q, seq_k), ``value_norms`` (..., seq_k) from
    :func:`transformed_value_norms`; returns (..., seq_q, seq_k). Because
    the weight is a positive number, the length of ``A[i, j] v_j W_O^h`` is
    exactly the weight times the length of ``v_j W_O^h``.
    """
    attention, value_norms = as_real_array("attention", attention), as_real_array("value_norms", value_norms)
    if value_norms.shape != attention.shape[:-2] + attention.shape[-1:]:
        raise ValueError(f"value_norms has shape {value_norms.shape}; for attention {attention.shape} it should be "
                         f"{attention.shape[:-2] + attention.shape[-1:]}: one norm per key.")
    return attention * value_norms[..., None, :]


@takes_attention(attention=QUERY_KEY.with_leading(6))
def norm_based_attention(attention, value_norms) -> np.ndarray:
    """Rows of :func:`weighted_vector_norms` scaled to sum to 1: each key's share of what arrives (chapter 4).

    Comparable with the attention map itself: both are (..., seq_q,
    seq_k) with rows summing to 1; they differ exactly where keys with
    long and short transformed values compete.
    """
    weighted = weighted_vector_norms(attention, value_norms)
    return weighted / np.maximum(weighted.sum(axis=-1, keepdims=True), 1e-12)
