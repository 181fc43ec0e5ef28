"""What a head's map looks like: Kovaleva et al.'s (2019) pattern types, and the token classes they rest on
(chapter 3, "A tour of all 72 heads").

:func:`pattern_label` names a head's pattern (vertical, diagonal, vertical + diagonal, block or heterogeneous)
from three shares of its weight that :func:`mha.analysis.head_roles.role_table.head_role_table` measures; the shares
need to know which tokens are punctuation (:func:`is_punctuation`) and which segment each token is in
(:func:`block_segments`). Rows are queries (attend from), columns keys (attended to).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence

import numpy as np

from mha.core.validation import check_finite_number, check_items, check_share, check_type

__all__ = ["PATTERN_LABELS", "block_segments", "is_punctuation", "pattern_label"]

PATTERN_LABELS: tuple[str, ...] = ("vertical", "diagonal", "vertical+diagonal", "block", "heterogeneous")


def is_punctuation(token: str, continuation_prefix: str = "##") -> bool:
    """True when a token (prefix such as ``##`` removed) is non-empty and made only of Unicode punctuation."""
    check_type("token", token, str, "a token, as text")
    if continuation_prefix and token.startswith(continuation_prefix) and len(token) > len(continuation_prefix):
        token = token[len(continuation_prefix):]
    return bool(token) and all(unicodedata.category(ch).startswith("P") for ch in token)


def block_segments(tokens: Sequence[str], word_ids: Sequence[int | None], *, sep_token: str = "[SEP]") -> np.ndarray:
    """Which contiguous segment each token belongs to, for the "block" pattern (chapter 3, empirical head roles).

    Kovaleva et al. (2019) call a head "block" when it attends within its own
    sentence of a two-sentence input. We make that precise for any input:
    content tokens (word id not None) are cut into runs at each ``sep_token``;
    if that gives two or more runs, each run is a segment; if it gives one
    (a single sentence), the sentence is cut into two halves by word index,
    words ``0 .. ceil(n_words / 2) - 1`` forming segment 0 and the rest
    segment 1 (a word's pieces always share a segment). Returns an int array
    of shape (seq,), -1 for special tokens.
    """
    tokens = check_items("tokens", tokens, "a list of tokens (text)")
    segments = np.full(len(tokens), -1)
    current, seen_content = 0, False
    for position, (token, word) in enumerate(zip(tokens, word_ids, strict=True)):
        if word is None:
            if token == sep_token and seen_content:
                current, seen_content = current + 1, False
            continue
        segments[position], seen_content = current, True
    if len(set(segments[segments >= 0].tolist())) < 2:
        words = np.array([-1 if w is None else w for w in word_ids])
        half = math.ceil((words.max() + 1) / 2) if (words >= 0).any() else 0
        segments = np.where(words < 0, -1, (words >= half).astype(int))
    return segments


def pattern_label(vertical_share: float, diagonal_share: float, block_share: float, *,
                  uniform_vertical: float = 0.0, uniform_diagonal: float = 0.0, uniform_block: float = 0.0,
                  dominant: float = 0.5, minor: float = 0.2, mixed_total: float = 0.6, block: float = 0.8,
                  lift: float = 1.5) -> str:
    """Kovaleva et al.'s (2019) pattern type of a head from three attention shares (chapter 3, empirical head roles).

    The shares are means over content-token rows (query = a real word piece):
    ``vertical_share`` is the weight on fixed tokens (special tokens and
    punctuation) two or more positions away, ``diagonal_share`` the weight on
    other tokens at most one position away (previous, same, next); weight on
    a fixed token next to the query fits both patterns and counts for
    neither, so a next-token head is not called vertical because the word
    before "." looks at ".". ``block_share`` is the weight on content keys in
    the query's own segment (:func:`block_segments`). The ``uniform_*`` arguments are the
    same shares for uniform attention over the same rows (chance level); a
    share only counts as high when it is also at least ``lift`` times its
    chance level, so short sentences, where a few fixed tokens are a large
    part of every row, are not labelled by accident. Rules, first match wins:
    "vertical" if vertical is high (>= ``dominant``) and diagonal < ``minor``;
    "diagonal" if diagonal is high and vertical < ``minor``;
    "vertical+diagonal" if both >= ``minor`` and their sum is >= ``mixed_total``
    and >= ``lift`` times its chance level; "block" if block >= ``block`` and
    >= ``lift`` times chance; otherwise "heterogeneous".
    """
    shares = {"vertical_share": vertical_share, "diagonal_share": diagonal_share, "block_share": block_share,
              "uniform_vertical": uniform_vertical, "uniform_diagonal": uniform_diagonal,
              "uniform_block": uniform_block, "dominant": dominant, "minor": minor, "mixed_total": mixed_total,
              "block": block}
    (vertical_share, diagonal_share, block_share, uniform_vertical, uniform_diagonal, uniform_block, dominant, minor,
     mixed_total, block) = (check_share(name, value, meaning="a share of a row's attention, or a threshold on one")
                            for name, value in shares.items())
    lift = check_finite_number("lift", lift, minimum=0, meaning="how many times its chance level a share must be")

    def high(share: float, chance: float, threshold: float) -> bool:
        return share >= threshold and share >= lift * chance

    if high(vertical_share, uniform_vertical, dominant) and diagonal_share < minor:
        return "vertical"
    if high(diagonal_share, uniform_diagonal, dominant) and vertical_share < minor:
        return "diagonal"
    if (vertical_share >= minor and diagonal_share >= minor
            and high(vertical_share + diagonal_share, uniform_vertical + uniform_diagonal, mixed_total)):
        return "vertical+diagonal"
    if high(block_share, uniform_block, block):
        return "block"
    return "heterogeneous"
