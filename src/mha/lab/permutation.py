"""Reorder the heads of a layer without changing what the layer computes (chapter 3, "Heads are not preassigned").

Head ``i`` of a :class:`mha.core.attention.MultiHeadAttention` layer owns columns
``i*d_head .. (i+1)*d_head`` of ``W_Q``, ``W_K``, ``W_V`` (and of their
biases) and the same *rows* of ``W_O``. Moving those slices together to
another position renames the head and nothing else: the layer's output is a
sum over heads, and a sum does not depend on the order of its terms. So a
head's index carries no meaning of its own; which index ends up with which
role is an accident of the random initialisation. Chapter 3 uses this to
show that roles move with the weights, not with the index.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch

from mha.core.validation import check_items, check_rank, check_real_tensor, check_whole_number
from mha.lab.tiny_model import check_tiny_model

__all__ = ["head_order_columns", "permute_head_weights", "permute_heads"]


def head_order_columns(order: Sequence[int], d_head: int) -> list[int]:
    """The feature indices that put old head ``order[k]`` in place of head ``k``: concatenated column blocks.

    ``order`` must be a permutation of ``0 .. len(order) - 1``; raises
    ``ValueError`` (saying what is wrong) otherwise.
    """
    order = check_items("order", order, "a list of head indices, a permutation of 0 .. heads - 1")
    order = [check_whole_number(f"order[{k}]", h, minimum=0, meaning="a head index") for k, h in enumerate(order)]
    d_head = check_whole_number("d_head", d_head, minimum=1, meaning="features per head")
    if sorted(order) != list(range(len(order))):
        raise ValueError(f"order {order} is not a permutation of the heads 0..{len(order) - 1}: list every head "
                         f"exactly once, e.g. {list(reversed(range(len(order))))}.")
    return [old * d_head + feature for old in order for feature in range(d_head)]


def permute_head_weights(W_Q, W_K, W_V, W_O, order: Sequence[int]):
    """``(W_Q, W_K, W_V, W_O)`` with the heads reordered so that new head ``k`` is old head ``order[k]``.

    ``W_Q``, ``W_K``, ``W_V`` (d_model, n_heads * d_head) have their column
    blocks reordered, ``W_O`` (n_heads * d_head, d_model) its row blocks, with
    ``n_heads = len(order)``. Works on numpy arrays and torch tensors alike
    (the same kind comes back). Multi-head attention with the returned
    matrices gives the same output; head ``k``'s weights are old head
    ``order[k]``'s. Chapter 3.
    """
    W_Q, W_K = check_real_tensor("W_Q", W_Q), check_real_tensor("W_K", W_K)
    W_V, W_O = check_real_tensor("W_V", W_V), check_real_tensor("W_O", W_O)
    check_rank("W_Q", W_Q.shape, (2,), "(d_model, d_model): one layer's query matrix, heads side by side")
    n_features = W_Q.shape[1]
    if n_features % len(order):
        raise ValueError(f"W_Q has {n_features} columns, which do not split into len(order) = {len(order)} heads.")
    for name, matrix, axis in (("W_K", W_K, 1), ("W_V", W_V, 1), ("W_O", W_O, 0)):
        if matrix.shape[axis] != n_features:
            raise ValueError(f"{name} has shape {tuple(matrix.shape)}; its {'rows' if axis == 0 else 'columns'} "
                             f"should match the {n_features} columns of W_Q (one block of d_head per head).")
    columns = head_order_columns(order, n_features // len(order))
    return W_Q[:, columns], W_K[:, columns], W_V[:, columns], W_O[columns, :]


def permute_heads(model, layer: int, order: Sequence[int]):
    """A copy of a :class:`~mha.lab.tiny_model.TinyTransformer` with layer ``layer``'s heads reordered.

    New head ``k`` of that layer is old head ``order[k]``; the copy computes
    the same logits as ``model`` (up to float rounding) and its attention
    weights are the old ones with the heads reordered. ``model`` is not
    changed. Chapter 3, "Heads are not preassigned".
    """
    model = check_tiny_model(model)
    if not 0 <= layer < model.config.n_layers:
        raise ValueError(f"layer must be in 0..{model.config.n_layers - 1}, got {layer}.")
    if len(order) != model.config.n_heads:
        raise ValueError(f"order has {len(order)} entries but layer {layer} has {model.config.n_heads} heads; "
                         f"give a new position for every head.")
    permuted = copy.deepcopy(model)
    attention = permuted.attention(layer)
    columns = head_order_columns(order, attention.d_head)
    with torch.no_grad():
        for name in ("W_Q", "W_K", "W_V"):
            getattr(attention, name).copy_(getattr(attention, name)[:, columns])  # column blocks
        attention.W_O.copy_(attention.W_O[columns, :])  # row blocks
        for name in ("b_Q", "b_K", "b_V"):  # b_O is shared by all heads and stays
            bias = getattr(attention, name)
            if bias is not None:
                bias.copy_(bias[columns])
    return permuted
