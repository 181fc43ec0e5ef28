"""A sentence turned into vectors without a trained model, for the random-weight demos of chapter 1.

Chapter 1 studies the *mechanism*, so it needs token vectors but not trained
ones: each word gets a fixed pseudo-random vector (the same word always gets
the same vector) plus a sinusoidal position code (Vaswani et al. 2017). Trained
embeddings arrive in chapter 3.
"""

from __future__ import annotations

import math
import re
import zlib

import torch

__all__ = ["MAX_TOKENS", "split_into_tokens", "sinusoidal_positions", "embed_tokens"]

MAX_TOKENS = 24
"""Longest sentence the chapter-1 views accept: longer maps stop being readable."""

_TOKEN = re.compile(r"\w+(?:'\w+)?|[^\w\s]")


def split_into_tokens(sentence: str, max_tokens: int = MAX_TOKENS) -> list[str]:
    """Split ``sentence`` into words and punctuation marks: ``"It's late."`` -> ``["It's", "late", "."]``.

    Raises a ``ValueError`` that says how to fix it for a non-string, an empty
    sentence, or one with more than ``max_tokens`` tokens.
    """
    if not isinstance(sentence, str):
        raise ValueError(f"the sentence must be text (str), got {type(sentence).__name__}: {sentence!r}.")
    tokens = _TOKEN.findall(sentence)
    if not tokens:
        raise ValueError("the sentence is empty: type a few words, e.g. 'The cat sat on the mat.'")
    if len(tokens) > max_tokens:
        raise ValueError(
            f"the sentence has {len(tokens)} tokens, more than the {max_tokens} these maps can show legibly; "
            f"shorten it to at most {max_tokens} words and punctuation marks."
        )
    return tokens


def sinusoidal_positions(seq_len: int, d_model: int) -> torch.Tensor:
    """Position codes of Vaswani et al. (2017): sin/cos pairs at geometric frequencies, (seq_len, d_model)."""
    position = torch.arange(seq_len, dtype=torch.float64)[:, None]  # (seq, 1)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),)
    angle = position / (10_000 ** (pair / d_model))  # (seq, ceil(d_model/2))
    codes = torch.zeros(seq_len, d_model, dtype=torch.float64)
    codes[:, 0::2] = torch.sin(angle)
    codes[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return codes.float()


def embed_tokens(tokens: list[str], d_model: int, seed: int = 0) -> torch.Tensor:
    """(1, seq, d_model) vectors: a fixed random vector per lower-cased word plus its position code.

    The word vectors have unit expected squared length per feature, like a
    freshly initialised embedding table; the same word and seed always give
    the same vector, whatever sentence it appears in.
    """
    if d_model < 2 or d_model % 2:
        raise ValueError(f"d_model must be an even number of at least 2 (sin/cos pairs), got {d_model}.")
    word_vectors = []
    for token in tokens:
        word_seed = zlib.crc32(token.lower().encode()) ^ (seed * 0x9E3779B1 & 0xFFFFFFFF)
        generator = torch.Generator().manual_seed(word_seed)
        word_vectors.append(torch.randn(d_model, generator=generator))
    words = torch.stack(word_vectors)  # (seq, d_model)
    return (words + sinusoidal_positions(len(tokens), d_model) / math.sqrt(2))[None]  # (1, seq, d_model)
