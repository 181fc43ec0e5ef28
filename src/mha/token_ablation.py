"""Does the token a head attends to matter? Remove it from that head and measure the sentence vector (chapter 4).

Chapter 4 ("Caveats", section "Attention is not explanation") compares two
answers to "which tokens does head ``h`` of layer ``l`` rely on?":

* **attention**: how much weight the head gives each key, averaged over the
  sentence's queries (a column mean of its map);
* **intervention**: how much the model's output changes when that key's
  contribution to that head is removed: column ``j`` of the head's map is set
  to 0 (without renormalising the rows), so ``A[i, j] v_j`` is taken out of
  every query's output of this one head and nothing else changes; the layers
  above then run as usual. The change is measured on the sentence vector
  (:mod:`mha.sentence_embedding`) as ``1 - cosine`` with the unchanged one.

:func:`key_removal_effects` starts from the stored input of layer ``l``, so
the layers below are not recomputed, and removes every key of every sentence
in one batch, one copy of the sentence per (head, key).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from .encoder import EncoderTrace, MiniLMEncoder
from .sentence_embedding import sentence_embeddings

__all__ = ["key_removal_effects", "column_means"]


def key_removal_effects(encoder: MiniLMEncoder, trace: EncoderTrace,
                        heads: Sequence[tuple[int, int]]) -> np.ndarray:
    """1 - cos(sentence vector, sentence vector with key ``j`` removed from one head): (batch, len(heads), seq) (chapter 4).

    ``trace`` is a trace of the full model on a batch of sentences. For each
    sentence, each ``(layer, head)`` in ``heads`` and each key ``j`` (token
    ``j`` of the padded batch, ``[CLS]`` and ``[SEP]`` included), the head's
    weights on column ``j`` are set to 0 for every query, in that layer
    only, and the model runs on from there. Padding positions get NaN.
    """
    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads
    heads = [(int(l), int(h)) for l, h in heads]
    bad = [(l, h) for l, h in heads if not (0 <= l < n_layers and 0 <= h < n_heads)]
    if bad or not heads:
        raise ValueError(f"heads must be a non-empty list of (layer, head) with layers 0..{n_layers - 1} and heads "
                         f"0..{n_heads - 1}; got {bad or heads}.")
    device = encoder.word_embeddings.device
    real = trace.inputs.real_tokens.to(device)  # (batch, seq)
    batch, seq = real.shape
    full = sentence_embeddings(trace.hidden_states[-1].to(device), real)  # (batch, d_model)
    effects = np.full((batch, len(heads), seq), np.nan)
    for layer in sorted({l for l, _ in heads}):
        in_layer = [(row, h) for row, (l, h) in enumerate(heads) if l == layer]
        per_sentence = len(in_layer) * seq  # copies of each sentence: one per (head, key)
        copies = batch * per_sentence
        # copy c is sentence c // per_sentence, head in_layer[(c % per_sentence) // seq], key c % seq
        chosen_heads = torch.tensor([h for _, h in in_layer], device=device).repeat_interleave(seq).repeat(batch)
        removed_keys = torch.arange(seq, device=device).repeat(batch * len(in_layer))  # (copies,)
        rows = torch.arange(copies, device=device)

        def remove_key(weights: Tensor) -> Tensor:
            weights = weights.clone()  # (copies, heads, seq_q, seq_k)
            weights[rows, chosen_heads, :, removed_keys] = 0.0
            return weights

        copy_real = real.repeat_interleave(per_sentence, dim=0)  # (copies, seq)
        key_mask = None if bool(real.all()) else copy_real[:, None, :]  # (copies, 1, seq_k)
        with torch.inference_mode():
            x = trace.hidden_states[layer].to(device).repeat_interleave(per_sentence, dim=0)  # (copies, seq, d_model)
            x, _ = encoder.layers[layer](x, mask=key_mask, attention_override=remove_key)
            for later in encoder.layers[layer + 1:]:
                x, _ = later(x, mask=key_mask)
            changed = sentence_embeddings(x, copy_real).view(batch, len(in_layer), seq, -1)  # (batch, heads, seq, d)
            # 1 - cos(a, b) = |a - b|² / 2 for unit vectors. Taking the difference first keeps the small effects
            # exact: 1 - (a · b) in float32 cancels to noise below about 1e-6, which differs from CPU to CPU.
            difference = changed.double() - full.double()[:, None, None, :]  # (batch, heads in layer, seq, d)
            removal_effect = (0.5 * difference.pow(2).sum(dim=-1)).cpu().numpy()  # (batch, heads in layer, seq)
        for position, (row, _) in enumerate(in_layer):
            effects[:, row] = removal_effect[:, position]
    effects[~real.cpu().numpy()[:, None, :].repeat(len(heads), axis=1)] = np.nan
    return effects


def column_means(attention) -> np.ndarray:
    """Attention each key receives, averaged over the queries: (..., seq_q, seq_k) -> (..., seq_k) (chapter 4).

    For a head whose output were mean-pooled directly, this is exactly the
    weight with which each key's value enters the pooled vector.
    """
    attention = np.asarray(attention, dtype=np.float64)
    if attention.ndim < 2:
        raise ValueError(f"attention has shape {attention.shape}; give (..., seq_q, seq_k).")
    return attention.mean(axis=-2)
