"""Sentence embeddings the way all-MiniLM-L6-v2 is used: mean of the last layer over real tokens, then unit length.

Chapter 4 ("Caveats") judges heads by what they do for the model's own
task. all-MiniLM-L6-v2 is a sentence-embedding model: its model card (and the
``1_Pooling`` and ``2_Normalize`` folders shipped with its weights) say that a
sentence's vector is the **mean** of the last layer's hidden states over the
sentence's real tokens (``[CLS]`` and ``[SEP]`` included, padding excluded),
scaled to unit length, and that two sentences are compared by the cosine
similarity of their vectors. This module does exactly that, for hidden states
from :class:`mha.pretrained.encoder.MiniLMEncoder` with or without interventions.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from mha.core.argument_checks import check_items_of
from mha.core.validation import InputError, as_real_array, check_real_tensor, check_whole_number
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.overrides import AttentionOverride

__all__ = ["mean_pool", "sentence_embeddings", "embed", "cosine_similarity_matrix"]


def mean_pool(hidden_states: Tensor, real_tokens: Tensor) -> Tensor:
    """Mean of ``hidden_states`` (..., batch, seq, d_model) over the real tokens of each sentence -> (..., batch,
    d_model).

    ``real_tokens`` (batch, seq) is True at real tokens (``[CLS]`` and
    ``[SEP]`` included) and False at padding; leading axes of
    ``hidden_states`` (e.g. one per intervention) broadcast. A sentence with no
    real token (a row of ``real_tokens`` all False) has no mean and is refused,
    naming the row. Chapter 4.
    """
    hidden_states = check_real_tensor("hidden_states", hidden_states, meaning="(..., batch, seq, d_model)")
    if not isinstance(real_tokens, Tensor) or real_tokens.dtype != torch.bool:
        raise InputError(f"real_tokens should be a bool tensor (batch, seq), True at real tokens, got "
                         f"{getattr(real_tokens, 'dtype', type(real_tokens).__name__)}; use trace.real_tokens.")
    if hidden_states.ndim < 3 or real_tokens.shape != hidden_states.shape[-3:-1]:
        raise ValueError(
            f"real_tokens has shape {tuple(real_tokens.shape)} but hidden_states {tuple(hidden_states.shape)} needs "
            f"{tuple(hidden_states.shape[-3:-1])} = (batch, seq): one True/False per token."
        )
    empty = (~real_tokens.any(dim=-1)).nonzero().flatten().tolist()  # rows with no real token
    if empty:
        raise InputError(f"sentence {empty[0]} of the batch has no real token (its row of real_tokens is all False),"
                         " so it has no mean: every sentence has at least [CLS] and [SEP]. Drop that row, or pass "
                         "the real_tokens that came with these hidden states.")
    weights = real_tokens.to(hidden_states.dtype)  # (batch, seq), 1 at real tokens
    summed = (hidden_states * weights[..., None]).sum(dim=-2)  # (..., batch, d_model)
    return summed / weights.sum(dim=-1, keepdim=True)  # (..., batch, d_model)


def sentence_embeddings(hidden_states: Tensor, real_tokens: Tensor) -> Tensor:
    """The model's sentence vectors: :func:`mean_pool`, then each vector scaled to length 1 (chapter 4).

    ``hidden_states`` (..., batch, seq, d_model) are last-layer states,
    ``real_tokens`` (batch, seq); returns (..., batch, d_model) unit vectors,
    so that a dot product is a cosine similarity.
    """
    pooled = mean_pool(hidden_states, real_tokens)  # (..., batch, d_model)
    return pooled / pooled.norm(dim=-1, keepdim=True).clamp(min=1e-12)


def embed(encoder: MiniLMEncoder, sentences: Sequence[str], *, head_mask=None,
          attention_override: AttentionOverride | None = None, batch_size: int = 128) -> np.ndarray:
    """Unit-length sentence vectors (sentences, d_model) as numpy, encoded in batches of similar length (chapter 4).

    ``head_mask`` and ``attention_override`` are passed to
    :meth:`mha.pretrained.encoder.MiniLMEncoder.trace`, so the vectors of a model with
    heads removed or overridden come out the same way. Sentences are sorted
    by length before batching (less padding); the rows follow the order of
    ``sentences``.
    """
    encoder = check_encoder(encoder)
    if isinstance(sentences, str):
        raise ValueError("sentences must be a list of strings, not one string; wrap it: [sentence].")
    sentences = list(check_items_of("sentences", sentences, str, "a sentence, as text"))
    if not sentences:
        raise ValueError("sentences is empty; give at least one sentence to embed.")
    batch_size = check_whole_number("batch_size", batch_size, minimum=1, meaning="sentences per forward pass")
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    vectors = np.zeros((len(sentences), encoder.config.d_model), dtype=np.float32)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        trace = encoder.trace([sentences[i] for i in chunk], head_mask=head_mask,
                              attention_override=attention_override)
        real = trace.real_tokens.to(trace.hidden_states.device)  # (batch, seq)
        vectors[chunk] = sentence_embeddings(trace.hidden_states[-1], real).float().cpu().numpy()
    return vectors


def cosine_similarity_matrix(a, b) -> np.ndarray:
    """Cosine similarity of every row of ``a`` (n, d) with every row of ``b`` (m, d) -> (n, m) (chapter 4).

    Rows need not be unit length; zero rows give similarity 0.
    """
    a, b = as_real_array("a", a, meaning="(n, d): one vector a row"), as_real_array("b", b, meaning="(m, d)")
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must be (n, d) and (m, d) with the same d; got {a.shape} and {b.shape}.")
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return a @ b.T
