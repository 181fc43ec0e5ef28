"""Attention masks: which keys each query may look at (chapter 1, "Attention from scratch").

Convention used everywhere in this book: a mask is **boolean** and ``True``
means *may attend*. Rows are queries (the position attending *from*), columns
are keys (the position attended *to*). This matches the boolean ``attn_mask``
of :func:`torch.nn.functional.scaled_dot_product_attention`; note that
:class:`torch.nn.MultiheadAttention` uses the opposite sense (``True`` = blocked).

The builders return torch tensors; :func:`check_mask` accepts numpy arrays and nested lists too.
Bad arguments raise :class:`mha.core.validation.InputError` (a ``ValueError``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from mha.core.argument_checks import check_device
from mha.core.validation import InputError, as_tensor, check_size, check_whole_number

__all__ = ["causal_mask", "padding_mask", "as_mask", "check_mask"]


def causal_mask(seq_len: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Lower-triangular mask of shape ``(seq_len, seq_len)``: query ``i`` may attend to keys ``0..i``."""
    seq_len = check_whole_number("seq_len", seq_len, minimum=1)
    check_size("the causal mask (seq_len, seq_len)", (seq_len, seq_len))
    try:
        device = None if device is None else torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"device = {device!r} is not a torch device; use 'cpu', 'cuda' or a torch.device.") from None
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).tril()  # (seq_q, seq_k)


def padding_mask(lengths: Sequence[int] | torch.Tensor, seq_len: int | None = None) -> torch.Tensor:
    """Key-padding mask of shape ``(batch, 1, seq_len)`` for right-padded sequences.

    Sequence ``b`` has ``lengths[b]`` real tokens followed by padding; every
    query may attend to the real keys and to none of the padding keys. The
    middle axis of size 1 broadcasts over queries.
    """
    lengths = as_tensor("lengths", lengths)
    if lengths.ndim != 1 or len(lengths) == 0:
        raise InputError(f"lengths should be a non-empty list of sequence lengths, got shape {tuple(lengths.shape)}.")
    if lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise InputError(f"lengths has dtype {lengths.dtype}; give each sequence's length as a whole number of "
                         f"tokens, e.g. lengths.long() (torch) or lengths.astype(int) (numpy).")
    if (lengths < 1).any():
        raise InputError(
            f"every sequence needs at least one real token, got lengths {lengths.tolist()}; "
            "drop empty sequences from the batch."
        )
    longest = int(lengths.max())
    seq_len = longest if seq_len is None else check_whole_number("seq_len", seq_len, minimum=1)
    if seq_len < longest:
        raise InputError(f"seq_len = {seq_len} is shorter than the longest sequence ({longest}); pass seq_len >= "
                         f"{longest}.")
    check_size("the padding mask (batch, 1, seq_len)", (len(lengths), 1, seq_len))
    positions = torch.arange(seq_len)  # (seq_k,)
    return (positions[None, :] < lengths[:, None])[:, None, :]  # (batch, 1, seq_k)


def as_mask(mask, device: torch.device | str | None = None) -> torch.Tensor:
    """``mask`` (tensor, numpy array or nested list) as a boolean tensor on ``device``; raise unless it is boolean."""
    given_dtype = mask.dtype if isinstance(mask, (torch.Tensor, np.ndarray)) else None
    mask = as_tensor("mask", mask, device=check_device("device", device))
    if mask.dtype != torch.bool:
        raise InputError(
            f"mask has dtype {given_dtype or mask.dtype}, but it must be boolean with True meaning 'may attend'. "
            "Convert it with mask.bool() (torch) or mask.astype(bool) (numpy), "
            "or build one with mha.core.masks.causal_mask / mha.core.masks.padding_mask."
        )
    return mask


def check_mask(mask, scores_shape: Sequence[int]) -> None:
    """Raise an :class:`~mha.core.validation.InputError` unless ``mask`` is a usable mask for scores of
    ``scores_shape``.

    A usable mask (tensor, numpy array or nested list) is boolean, broadcasts
    to ``scores_shape`` = ``(..., seq_q, seq_k)``, and leaves every query at
    least one key. A query with no key left would make softmax divide zero by
    zero and return NaN, so this is reported instead of silently producing NaN.
    """
    mask = as_mask(mask)
    scores_shape = tuple(scores_shape)
    try:
        broadcast = np.broadcast_shapes(tuple(mask.shape), scores_shape)
    except ValueError:
        broadcast = None
    if broadcast != scores_shape:
        raise InputError(
            f"mask has shape {tuple(mask.shape)}, which does not broadcast to the attention scores' shape "
            f"{scores_shape} = (..., seq_q, seq_k). Give it shape (seq_q, seq_k) = {scores_shape[-2:]}, "
            f"or add leading axes of size 1 or of the matching size."
        )
    row_has_a_key = mask.any(-1) if mask.ndim else mask  # (..., seq_q)
    if not row_has_a_key.all():
        where = tuple(int(i) for i in torch.nonzero(~row_has_a_key)[0])
        raise InputError(
            f"the mask blocks every key for the query at mask index {where} (last index = query position). "
            "Softmax over no keys is 0/0, so that query's weights would be NaN. Let each query attend "
            "to at least one key (for padding, mask padded keys, not whole rows), or drop that query."
        )
