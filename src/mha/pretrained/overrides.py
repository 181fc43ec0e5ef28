"""The forms an intervention on the encoder's heads takes, and the helpers that build them (chapters 3 and 4).

An intervention is one call of :meth:`MiniLMEncoder.run_from_layer
<mha.pretrained.encoder.MiniLMEncoder.run_from_layer>` (or of the whole forward pass) with one of these: a
:data:`HeadMask` removes heads, an :data:`AttentionOverride` replaces heads' weights (batch, heads, seq_q, seq_k), row =
query, column = key, and a :data:`HeadOutputOverride` replaces heads' outputs before ``W_O``. :func:`override_heads`
builds an attention override that changes only the chosen heads; :func:`uniform_attention_weights` is the baseline "a
head that looks at nothing in particular".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy.typing as npt
import torch
from torch import Tensor

from mha.core.argument_checks import check_float_dtype
from mha.core.validation import check_rank, check_type, check_whole_number

__all__ = ["AttentionOverride", "HeadMask", "HeadOutputOverride", "HeadReplacement", "override_heads",
           "uniform_attention_weights"]

AttentionOverride = Callable[[int, Tensor, Tensor], Tensor]
"""``override(layer, weights, real_tokens) -> new_weights``: called once per layer with that layer's
attention weights (batch, heads, seq_q, seq_k) and the key mask ``real_tokens`` (batch, seq_k),
True = real token; returns weights of the same shape."""

HeadOutputOverride = Callable[[int, Tensor], Tensor]
"""``override(layer, z) -> new_z``: called once per layer with every head's output z (batch, heads, seq, d_head),
before ``W_O`` mixes the heads; returns outputs of the same shape (activation patching,
:mod:`mha.pretrained.patching`)."""

HeadReplacement = Callable[[int, Tensor, Tensor], Tensor]
"""``replace(layer, chosen_weights, real_tokens) -> new_weights`` for :func:`override_heads`: the weights of
the chosen heads of one layer (batch, chosen, seq_q, seq_k) in, their replacement (broadcastable to the same
shape) out; ``real_tokens`` (batch, seq_k) is True at real keys."""

HeadMask = Tensor | npt.ArrayLike
"""A head mask: (layers, heads), or (batch, layers, heads) for one mask per sentence; 1 keeps a head, 0 removes it."""


def uniform_attention_weights(real_tokens: Tensor, seq_q: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Weights that spread every query evenly over the real keys: 1 / (number of real keys), 0 at padding.

    ``real_tokens`` (batch, seq_k) bool -> weights (batch, 1, seq_q, seq_k)
    that broadcast over heads. The baseline "a head that looks at nothing in
    particular" (chapter 4, "Attention is not explanation").
    """
    check_type("real_tokens", real_tokens, Tensor, "the (batch, seq) bool real_tokens of a TokenizedBatch")
    check_rank("real_tokens", real_tokens.shape, (2,), "(batch, seq): True at each real token")
    seq_q = check_whole_number("seq_q", seq_q, minimum=1, meaning="queries in each row of weights")
    check_float_dtype("dtype", dtype)
    real = real_tokens.to(dtype)  # (batch, seq_k), 1 at real keys
    uniform = real / real.sum(dim=-1, keepdim=True)  # (batch, seq_k), rows sum to 1
    return uniform[:, None, None, :].expand(-1, 1, seq_q, -1)  # (batch, 1, seq_q, seq_k)


def override_heads(heads: Iterable[tuple[int, int]], replace: HeadReplacement) -> AttentionOverride:
    """An ``attention_override`` that hands the weights of the chosen heads to ``replace`` and keeps the others.

    ``heads`` lists ``(layer, head)`` pairs; in each layer with a chosen
    head, ``replace(layer, chosen_weights (batch, chosen, seq_q, seq_k),
    real_tokens (batch, seq_k))`` returns their new weights. Every
    counterfactual attention is one of these: :meth:`mha.pretrained.encoder.MiniLMEncoder.uniform_attention`,
    :func:`mha.pretrained.interventions.permuted_attention`
    (chapter 4, "Attention is not explanation").
    """
    heads_per_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        heads_per_layer.setdefault(int(layer), []).append(int(head))

    def override(layer: int, weights: Tensor, real_tokens: Tensor) -> Tensor:
        chosen = heads_per_layer.get(layer)
        if not chosen:
            return weights
        new_weights = weights.clone()  # (batch, heads, seq_q, seq_k)
        new_weights[:, chosen] = replace(layer, weights[:, chosen], real_tokens)  # (batch, chosen, seq_q, seq_k)
        return new_weights

    return override


def for_layer(override: AttentionOverride, layer: int, real_tokens: Tensor) -> Callable[[Tensor], Tensor]:
    """Bind a whole-model override to one layer, in the one-argument form
    :class:`~mha.core.attention.MultiHeadAttention` takes."""

    def layer_override(weights: Tensor) -> Tensor:
        return override(layer, weights, real_tokens)

    return layer_override
