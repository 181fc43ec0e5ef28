"""A sentence turned into vectors without a trained model, for the random-weight demos of chapter 1.

Chapter 1 studies the *mechanism*, so it needs token vectors but not trained
ones: each word gets a fixed pseudo-random vector (the same word always gets
the same vector) plus a sinusoidal position code (Vaswani et al. 2017). Trained
embeddings arrive in chapter 3.

The word vectors come from a generator simple enough to write twice: a 32-bit
FNV-1a hash of the word picks the state of a xorshift generator (Marsaglia 2003),
whose uniform numbers become normal ones by the Box-Muller transform. The
website's head explorer (``website/views.js``) computes the same vectors in the
reader's browser, so a sentence typed there gets the maps this module gives,
and neither depends on the CPU's floating-point kernels.
"""

from __future__ import annotations

import math
import re

import numpy as np
import torch

from mha.core.validation import check_items, check_seed, check_size, check_type, check_whole_number

__all__ = ["MAX_TOKENS", "split_into_tokens", "word_vector", "sinusoidal_positions", "embed_tokens"]

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
    max_tokens = check_whole_number("max_tokens", max_tokens, minimum=1, meaning="the longest sentence shown")
    tokens = _TOKEN.findall(sentence)
    if not tokens:
        raise ValueError("the sentence is empty: type a few words, e.g. 'The cat sat on the mat.'")
    if len(tokens) > max_tokens:
        raise ValueError(
            f"the sentence has {len(tokens)} tokens, more than the {max_tokens} these maps can show legibly; "
            f"shorten it to at most {max_tokens} words and punctuation marks."
        )
    return tokens


LARGEST_TOY_WIDTH = 2**14
"""The widest toy vector :func:`word_vector` draws: it draws one number at a time in Python."""
_MASK32 = 0xFFFFFFFF
_FNV_OFFSET, _FNV_PRIME = 0x811C9DC5, 0x01000193
_SEED_MIX = 0x9E3779B1  # spreads consecutive seeds over the 32 bits


def _xorshift32(state: int) -> int:
    """One step of Marsaglia's xorshift generator on a nonzero 32-bit state."""
    state ^= (state << 13) & _MASK32
    state ^= state >> 17
    return state ^ ((state << 5) & _MASK32)


def word_vector(word: str, d_model: int, seed: int = 0) -> np.ndarray:
    """The fixed pseudo-random vector (d_model,) of a word, in float64: standard normal numbers, one per feature.

    The lower-cased word's UTF-8 bytes are hashed (32-bit FNV-1a, started from the mixed seed) into the state of
    a xorshift generator; after four steps to spread the state, each pair of its uniform numbers (u1, u2) in
    (0, 1) gives two normal ones, sqrt(-2 ln u1) cos(2 pi u2) and sqrt(-2 ln u1) sin(2 pi u2).
    """
    check_type("word", word, str, "a word, as text")
    d_model = check_whole_number("d_model", d_model, minimum=1, maximum=LARGEST_TOY_WIDTH,
                                 meaning="features of the word's vector, drawn one by one in Python")
    state = _FNV_OFFSET ^ (check_seed("seed", seed) * _SEED_MIX & _MASK32)
    for byte in word.lower().encode("utf-8"):
        state = ((state ^ byte) * _FNV_PRIME) & _MASK32
    state = state or 1  # xorshift never leaves 0
    for _ in range(4):
        state = _xorshift32(state)
    normals = []
    while len(normals) < d_model:
        uniforms = []
        for _ in range(2):
            state = _xorshift32(state)
            uniforms.append((state + 0.5) / 2.0**32)  # (0, 1): never 0, so the logarithm is finite
        radius, angle = math.sqrt(-2.0 * math.log(uniforms[0])), 2.0 * math.pi * uniforms[1]
        normals += [radius * math.cos(angle), radius * math.sin(angle)]
    return np.array(normals[:d_model])


def sinusoidal_positions(seq_len: int, d_model: int) -> torch.Tensor:
    """Position codes of Vaswani et al. (2017): sin/cos pairs at geometric frequencies, (seq_len, d_model), float64."""
    seq_len = check_whole_number("seq_len", seq_len, minimum=1, meaning="positions in the sequence")
    d_model = check_whole_number("d_model", d_model, minimum=1, meaning="features of each position's code")
    check_size("the position codes (seq_len, d_model)", (seq_len, d_model))
    position = torch.arange(seq_len, dtype=torch.float64)[:, None]  # (seq, 1)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # (ceil(d_model/2),)
    angle = position / (10_000 ** (pair / d_model))  # (seq, ceil(d_model/2))
    codes = torch.zeros(seq_len, d_model, dtype=torch.float64)
    codes[:, 0::2] = torch.sin(angle)
    codes[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    return codes


def embed_tokens(tokens: list[str], d_model: int, seed: int = 0) -> torch.Tensor:
    """(1, seq, d_model) float32 vectors: a fixed random vector per lower-cased word plus its position code.

    The word vectors (:func:`word_vector`) have unit expected squared length per feature, like a freshly
    initialised embedding table; the same word and seed always give the same vector, whatever sentence it appears
    in. The sum is formed in float64 and rounded to float32 once.
    """
    tokens = check_items("tokens", tokens, "a list of tokens, e.g. split_into_tokens(sentence)")
    d_model = check_whole_number("d_model", d_model, minimum=2, maximum=LARGEST_TOY_WIDTH,
                                 meaning="features of each token's vector")
    if len(tokens) == 0:
        raise ValueError("tokens is empty: give at least one token, e.g. split_into_tokens('The cat sat.').")
    if d_model % 2:
        raise ValueError(f"d_model must be an even number of at least 2 (sin/cos pairs), got {d_model}.")
    words = torch.from_numpy(np.stack([word_vector(token, d_model, seed) for token in tokens]))  # (seq, d_model)
    return (words + sinusoidal_positions(len(tokens), d_model) / math.sqrt(2)).float()[None]  # (1, seq, d_model)
