"""Scaled dot-product attention and multi-head attention in torch, as explicit steps.

This is the math of chapter 1 and nothing else. Every step the text names is a
line here, and the attention weights of every head are always returned: the
book needs them, so there is no fused fast path that hides them.

Conventions (the same in every module of :mod:`mha`):

* vectors are rows, so a projection is ``x @ W`` with ``W`` of shape ``(d_in, d_out)``;
* attention weights have shape ``(batch, heads, seq_q, seq_k)``: row = query
  (attends *from*), column = key (attended *to*); each row sums to 1;
* masks are boolean with ``True`` = *may attend* (see :mod:`mha.core.masks`);
* inputs may be tensors, numpy arrays or nested lists of real numbers, and
  bad input raises :class:`~mha.core.validation.InputError` (a ``ValueError``) that
  says how to fix it; NaN or inf in the inputs gives a
  :class:`~mha.core.validation.NonFiniteWarning` (the rules: :mod:`mha.core.validation`).

The numpy twin of this module is :mod:`mha.core.attention_numpy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import Tensor, nn

from mha.core.masks import as_mask, check_mask
from mha.core.validation import (
    InputError,
    as_float_tensors,
    as_tensor,
    check_attention_shapes,
    check_head_count,
    check_last_dim,
    check_not_empty,
    check_rank,
    check_same_shape,
    check_seed,
    check_size,
    check_whole_number,
    warn_if_not_finite,
)

__all__ = [
    "scaled_dot_product_attention",
    "split_heads",
    "merge_heads",
    "head_contributions",
    "AttentionOutput",
    "HeadWeights",
    "MultiHeadAttention",
]


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """softmax(q kᵀ / sqrt(d_k)) v, returning ``(output, weights)``.

    Shapes: ``q`` (..., seq_q, d_k), ``k`` (..., seq_k, d_k), ``v`` (..., seq_k, d_v),
    optional boolean ``mask`` broadcastable to (..., seq_q, seq_k) with True = may attend.
    Returns ``output`` (..., seq_q, d_v) and ``weights`` (..., seq_q, seq_k), computed
    in the widest float dtype of ``q``, ``k``, ``v``. Chapter 1, "Attention from scratch".
    """
    q, k, v = as_float_tensors({"q": q, "k": k, "v": v})
    scores_shape = check_attention_shapes(q.shape, k.shape, v.shape)  # (..., seq_q, seq_k)
    if mask is not None:
        mask = as_mask(mask, device=q.device)
        check_mask(mask, scores_shape)
    output, weights = _attend(q, k, v, mask)
    warn_if_not_finite(output, {"q": q, "k": k, "v": v})
    return output, weights


def _attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
    """The steps of :func:`scaled_dot_product_attention`, on checked inputs."""
    d_k = q.shape[-1]
    # 1. scores: one dot product per (query, key), scaled so their spread does not grow with d_k
    #    (scaled and masked in place: `scores` is a fresh tensor, and neither step's gradient needs it, so this saves
    #    two copies of the largest tensor here and changes no number)
    scores = (q @ k.transpose(-2, -1)).div_(math.sqrt(d_k))  # (..., seq_q, seq_k)
    # 2. mask: blocked keys get score -inf, so weight exactly 0
    if mask is not None:
        scores = scores.masked_fill_(~mask, float("-inf"))  # (..., seq_q, seq_k)
    # 3. softmax over the keys
    weights = scores.softmax(dim=-1)  # (..., seq_q, seq_k), rows sum to 1
    # 4. weighted sum of the values
    return weights @ v, weights  # (..., seq_q, d_v), (..., seq_q, seq_k)


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(batch, seq, d_model) -> (batch, heads, seq, d_head): head h gets features h*d_head:(h+1)*d_head."""
    x = as_tensor("x", x)
    check_rank("x", x.shape, (3,), "(batch, seq, d_model), e.g. x[None] for a single sequence")
    return _split_heads(x, check_head_count(x.shape[-1], n_heads))


def _split_heads(x: Tensor, d_head: int) -> Tensor:
    batch, seq, d_model = x.shape
    return x.reshape(batch, seq, d_model // d_head, d_head).transpose(1, 2)  # (batch, heads, seq, d_head)


def merge_heads(z: Tensor) -> Tensor:
    """(batch, heads, seq, d_head) -> (batch, seq, heads * d_head): concatenate the heads' outputs."""
    z = as_tensor("z", z)
    check_rank("z", z.shape, (4,), "(batch, heads, seq, d_head), as split_heads returns")
    return _merge_heads(z)


def _merge_heads(z: Tensor) -> Tensor:
    batch, n_heads, seq, d_head = z.shape
    return z.transpose(1, 2).reshape(batch, seq, n_heads * d_head)  # (batch, seq, d_model)


def head_contributions(head_outputs: Tensor, W_O: Tensor) -> Tensor:
    """Each head's share of the output: z_h @ W_O[h*d_head:(h+1)*d_head, :].

    ``head_outputs`` (batch, heads, seq, d_head), ``W_O`` (heads * d_head, d_model)
    -> (batch, heads, seq, d_model). Summing over the heads axis gives
    ``merge_heads(head_outputs) @ W_O``: concatenating and projecting is the
    same as projecting each head and adding (chapter 1, "Multi-head attention").
    A NaN or inf in either input stays in the heads and positions it touches.
    """
    head_outputs, W_O = as_float_tensors({"head_outputs": head_outputs, "W_O": W_O})
    check_rank("head_outputs", head_outputs.shape, (4,), "(batch, heads, seq, d_head), as AttentionOutput.head_outputs")
    check_rank("W_O", W_O.shape, (2,), "(heads * d_head, d_model)")
    batch, n_heads, seq, d_head = head_outputs.shape
    if W_O.shape[0] != n_heads * d_head:
        raise InputError(
            f"W_O has shape {tuple(W_O.shape)} but the {n_heads} heads of size {d_head} need "
            f"{n_heads * d_head} rows (one per concatenated feature)."
        )
    W_O_per_head = W_O.reshape(n_heads, d_head, W_O.shape[1])  # (heads, d_head, d_model)
    return torch.einsum("bhsd,hdm->bhsm", head_outputs, W_O_per_head)  # (batch, heads, seq, d_model)


def _project(x: Tensor, W: Tensor, b: Tensor | None) -> Tensor:
    """x @ W + b for x (..., d_in), W (d_in, d_out). Computed with ``addmm``, as ``nn.Linear`` does, so
    pretrained models rebuilt on this module round exactly like their reference implementations."""
    if b is None:
        return x @ W
    return torch.addmm(b, x.reshape(-1, x.shape[-1]), W).view(*x.shape[:-1], W.shape[1])


class AttentionOutput(NamedTuple):
    """What :class:`MultiHeadAttention` returns: the output and everything the book inspects."""

    output: Tensor  # (batch, seq_q, d_model)
    weights: Tensor  # (batch, heads, seq_q, seq_k)
    head_outputs: Tensor  # (batch, heads, seq_q, d_head), z_h before W_O


class HeadWeights(NamedTuple):
    """One head's own parameters, vectors-as-rows: ``q_h = x @ W_Q + b_Q`` and so on."""

    W_Q: Tensor  # (d_model, d_head)
    W_K: Tensor  # (d_model, d_head)
    W_V: Tensor  # (d_model, d_head)
    W_O: Tensor  # (d_head, d_model): the rows of W_O that read this head
    b_Q: Tensor | None  # (d_head,)
    b_K: Tensor | None
    b_V: Tensor | None


class MultiHeadAttention(nn.Module):
    """Multi-head attention with every step spelled out (chapter 1, "Multi-head attention").

    ``d_model`` features are projected to queries, keys and values, split into
    ``n_heads`` heads of ``d_head = d_model // n_heads`` features, each head
    runs :func:`scaled_dot_product_attention` on its own slice, and the heads'
    outputs are concatenated and projected by ``W_O``.

    Parameters are stored vectors-as-rows (``W_Q`` is ``(d_model, d_model)``;
    columns ``h*d_head:(h+1)*d_head`` belong to head ``h``). ``seed`` makes
    the initialisation reproducible without touching torch's global RNG.
    Inputs are converted to the layer's dtype and device (a float64 numpy
    array becomes float32 for the default layer); see :mod:`mha.core.validation`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        *,
        bias: bool = True,
        seed: int = 0,
        dtype: torch.dtype = torch.float32,
    ) -> None:
        super().__init__()
        self.d_head = check_head_count(d_model, n_heads)
        self.d_model, self.n_heads = int(d_model), int(n_heads)
        d_model = self.d_model
        check_size("each of W_Q, W_K, W_V and W_O (d_model, d_model)", (d_model, d_model))
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise InputError(f"dtype must be a floating-point torch dtype such as torch.float32 or torch.float64, "
                             f"got {dtype!r}.")
        generator = torch.Generator().manual_seed(check_seed("seed", seed))
        bound = math.sqrt(6.0 / (d_model + d_model))  # Glorot-uniform: keeps activations' scale

        def matrix() -> nn.Parameter:
            return nn.Parameter(torch.empty(d_model, d_model, dtype=dtype).uniform_(-bound, bound, generator=generator))

        def vector() -> nn.Parameter | None:
            return nn.Parameter(torch.zeros(d_model, dtype=dtype)) if bias else None

        self.W_Q, self.W_K, self.W_V, self.W_O = matrix(), matrix(), matrix(), matrix()
        self.b_Q, self.b_K, self.b_V, self.b_O = vector(), vector(), vector(), vector()

    def forward(
        self,
        query: Tensor,
        key: Tensor | None = None,
        value: Tensor | None = None,
        *,
        mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        attention_override: Callable[[Tensor], Tensor] | None = None,
        head_outputs_override: Callable[[Tensor], Tensor] | None = None,
    ) -> AttentionOutput:
        """Attend from ``query`` (batch, seq_q, d_model) to ``key``/``value`` (batch, seq_k, d_model).

        ``key`` and ``value`` default to ``query`` (self-attention). ``mask`` is
        boolean, True = may attend, broadcastable to (batch, heads, seq_q, seq_k);
        a 3-D mask (batch, seq_q, seq_k) is shared by all heads. ``head_mask``
        (heads,) or (batch, heads) scales each head's output (0 removes the head).
        ``attention_override`` maps the weights (batch, heads, seq_q, seq_k) to
        replacement weights, and ``head_outputs_override`` maps the heads' outputs
        z (batch, heads, seq_q, d_head) to replacement outputs before ``W_O``
        (activation patching), for interventions in later chapters.
        """
        query = self._input("query", query)
        key = query if key is None else self._input("key", key)
        value = key if value is None else self._input("value", value)
        check_same_shape("key", key.shape, "value", value.shape, "each key position needs exactly one value vector")
        if key.shape[0] != query.shape[0]:
            raise InputError(f"query has shape {tuple(query.shape)} but key has shape {tuple(key.shape)}; they need "
                             "the same batch size (first axis), as sequence b of the queries attends to sequence "
                             "b of the keys.")
        check_not_empty("query", query.shape, 1, "queries (seq_q = 0)")
        check_not_empty("key", key.shape, 1, "keys (seq_k = 0)")
        if mask is not None:
            mask = as_mask(mask, device=query.device)
            if mask.ndim == 3:
                mask = mask[:, None]  # (batch, 1, seq_q, seq_k): the same mask for every head
            check_mask(mask, (query.shape[0], self.n_heads, query.shape[1], key.shape[1]))
        check_size("the attention weights (batch, heads, seq_q, seq_k)",
                   (query.shape[0], self.n_heads, query.shape[1], key.shape[1]))

        # 1. project: every head's queries, keys and values at once
        q = _project(query, self.W_Q, self.b_Q)  # (batch, seq_q, d_model)
        k = _project(key, self.W_K, self.b_K)  # (batch, seq_k, d_model)
        v = _project(value, self.W_V, self.b_V)  # (batch, seq_k, d_model)
        # 2. split the features into heads
        q = _split_heads(q, self.d_head)  # (batch, heads, seq_q, d_head)
        k = _split_heads(k, self.d_head)  # (batch, heads, seq_k, d_head)
        v = _split_heads(v, self.d_head)  # (batch, heads, seq_k, d_head)
        # 3-5. scaled scores, mask, softmax, weighted sum of values; each head on its own slice
        z, weights = _attend(q, k, v, mask)  # (batch, heads, seq_q, d_head)
        if attention_override is not None:
            name = "attention_override(weights)"
            (new_weights,) = as_float_tensors({name: attention_override(weights)}, weights.dtype, weights.device)
            check_same_shape(name, new_weights.shape, "weights", weights.shape,
                             "an override must return one weight per (batch, head, query, key)")
            weights = new_weights
            z = weights @ v  # (batch, heads, seq_q, d_head)
        if head_mask is not None:
            head_mask = self._head_scale(head_mask, batch=query.shape[0])  # (batch or 1, heads, 1, 1)
            z = z * head_mask  # (batch, heads, seq_q, d_head)
        if head_outputs_override is not None:
            name = "head_outputs_override(z)"
            (new_z,) = as_float_tensors({name: head_outputs_override(z)}, z.dtype, z.device)
            check_same_shape(name, new_z.shape, "z", z.shape,
                             "an override must return one output vector per (batch, head, query)")
            z = new_z  # (batch, heads, seq_q, d_head)
        # 6. concatenate the heads and mix them with W_O
        output = _project(_merge_heads(z), self.W_O, self.b_O)  # (batch, seq_q, d_model)
        warn_if_not_finite(output, lambda: {
            "query": query, "key": key, "value": value, "head_mask": head_mask,
            "attention_override(weights)": weights if attention_override else None,
            **{f"the layer's {name}": p for name, p in self.named_parameters()}})
        return AttentionOutput(output, weights, z)

    def _input(self, name: str, x) -> Tensor:
        """``x`` as a (batch, seq, d_model) tensor in the layer's dtype and on its device."""
        W = self.W_Q
        if not (isinstance(x, Tensor) and x.dtype == W.dtype and x.device == W.device):  # usually nothing to do
            (x,) = as_float_tensors({name: x}, W.dtype, W.device)
        check_rank(name, x.shape, (3,), "(batch, seq, d_model)")
        check_last_dim(name, x.shape, self.d_model, "d_model")
        return x

    def _head_scale(self, head_mask: Tensor, batch: int) -> Tensor:
        head_mask = as_tensor("head_mask", head_mask)
        if head_mask.shape not in ((self.n_heads,), (batch, self.n_heads)):
            raise InputError(
                f"head_mask has shape {tuple(head_mask.shape)}; give one number per head, shape "
                f"({self.n_heads},) or ({batch}, {self.n_heads}), with 1 to keep a head and 0 to remove it."
            )
        scale = head_mask.to(dtype=self.W_O.dtype, device=self.W_O.device)
        return scale.view(-1, self.n_heads, 1, 1)  # (batch or 1, heads, 1, 1)

    def head_weights(self, head: int) -> HeadWeights:
        """Head ``head``'s own W_Q, W_K, W_V (d_model, d_head), its rows of W_O (d_head, d_model), and biases."""
        head = check_whole_number("head", head)
        if not 0 <= head < self.n_heads:
            raise InputError(f"head must be in 0..{self.n_heads - 1}, got {head}.")
        cols = slice(head * self.d_head, (head + 1) * self.d_head)

        def bias(b: Tensor | None) -> Tensor | None:
            return None if b is None else b[cols]

        return HeadWeights(self.W_Q[:, cols], self.W_K[:, cols], self.W_V[:, cols], self.W_O[cols, :],
                           bias(self.b_Q), bias(self.b_K), bias(self.b_V))

    @classmethod
    def from_torch(cls, reference: nn.MultiheadAttention) -> MultiHeadAttention:
        """A copy of a ``torch.nn.MultiheadAttention`` (same d_model for q, k, v) with identical weights."""
        if not isinstance(reference, nn.MultiheadAttention):
            raise InputError(f"reference must be a torch.nn.MultiheadAttention, got {type(reference).__name__}; "
                             "build one with torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True).")
        if not reference._qkv_same_embed_dim:
            raise InputError("only nn.MultiheadAttention with kdim = vdim = embed_dim can be copied; "
                             "build the reference without kdim and vdim.")
        has_bias = reference.in_proj_bias is not None
        if has_bias != (reference.out_proj.bias is not None):
            raise InputError("copying needs biases on both the input and output projections, or on neither.")
        ours = cls(reference.embed_dim, reference.num_heads, bias=has_bias, dtype=reference.in_proj_weight.dtype)
        with torch.no_grad():
            w_q, w_k, w_v = reference.in_proj_weight.chunk(3)  # each (d_model_out, d_model_in): x @ w.T
            for mine, theirs in ((ours.W_Q, w_q), (ours.W_K, w_k), (ours.W_V, w_v),
                                 (ours.W_O, reference.out_proj.weight)):
                mine.copy_(theirs.T)
            if has_bias:
                b_q, b_k, b_v = reference.in_proj_bias.chunk(3)
                for mine, theirs in ((ours.b_Q, b_q), (ours.b_K, b_k), (ours.b_V, b_v),
                                     (ours.b_O, reference.out_proj.bias)):
                    mine.copy_(theirs)
        return ours

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, n_heads={self.n_heads}, d_head={self.d_head}, bias={self.b_Q is not None}"
