"""From wordpiece tokens to words: word-level attention maps (chapter 3, empirical head roles).

A tokenizer may cut one word into several pieces ("unbelievable" ->
"un", "##believ", "##able"), but gold relations link words. Following Clark
et al. (2019, "What does BERT look at?") we merge pieces with a
rule that keeps each row a distribution over what it attends to:

* attention RECEIVED by a word (a column, the key side) is the SUM over its
  pieces' columns: attending to any piece is attending to the word;
* attention SENT by a word (a row, the query side) is the MEAN over its
  pieces' rows: the word looks where its pieces look, on average.

Row = query = the word attending FROM; column = key = the word attended TO,
as everywhere in :mod:`mha`. Special tokens (``word_id`` None, such as
``[CLS]`` and ``[SEP]``) are dropped by default, so word rows sum to 1 minus
the attention the word's pieces sent to special tokens (at most 1); with
``keep_special=True`` every special token becomes a unit of its own and the
rows sum to exactly 1.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mha.core.argument_checks import check_items_of
from mha.core.layouts import QUERY_KEY, takes_attention
from mha.core.validation import as_array, check_items, check_whole_number

__all__ = ["word_units", "word_attention", "word_strings"]


def word_units(word_ids: Sequence[int | None], *, keep_special: bool = False) -> list[tuple[int, ...]]:
    """The token positions that make up each word-level unit (chapter 3, empirical head roles).

    ``word_ids`` has one entry per token: the index of the word the token
    belongs to (0, 1, ...; every word from 0 to the largest must appear) or
    None for a special token. Without ``keep_special`` unit ``k`` is word
    ``k``; with it, units are ordered by their first token and each special
    token is a unit alone (``[CLS]``, word 0, ..., ``[SEP]``). Returns a list
    of tuples of token positions.
    """
    word_ids = check_items("word_ids", word_ids, "the word ids of a sentence, one per token (None for special tokens)")
    word_ids = list(word_ids)
    positions: dict[int, list[int]] = {}
    for position, word in enumerate(word_ids):
        if word is None:
            continue
        word = check_whole_number(f"word_ids[{position}]", word, minimum=0,
                                  meaning="a word index for a word's pieces; None for special tokens")
        positions.setdefault(word, []).append(position)
    missing = sorted(set(range(max(positions, default=-1) + 1)) - set(positions))
    if missing:
        raise ValueError(
            f"word_ids skip words {missing}: every word from 0 to {max(positions)} needs at least one token "
            f"(was the sequence truncated, or the ids taken from a different sentence?)."
        )
    if not keep_special:
        return [tuple(positions[word]) for word in range(len(positions))]
    units = [(p,) for p, word in enumerate(word_ids) if word is None] + [tuple(v) for v in positions.values()]
    return sorted(units, key=lambda unit: unit[0])


@takes_attention(attention=QUERY_KEY.with_leading(6))
def word_attention(attention: np.ndarray, word_ids: Sequence[int | None], *, keep_special: bool = False) -> np.ndarray:
    """Token-level attention (..., seq, seq) -> word-level attention (..., units, units) (chapter 3, empirical head
    roles).

    Rows are queries (attend FROM), columns keys (attended TO). The attention
    a unit receives is the sum over its tokens' columns, the attention it
    sends is the mean over its tokens' rows (Clark et al. 2019), for every
    leading axis at once (layers, heads, ...). ``word_ids`` (length ``seq``)
    gives each token's word, None for special tokens, which are dropped unless
    ``keep_special`` (see :func:`word_units` for the unit order). Rows of the
    result sum to at most 1, exactly 1 when ``keep_special`` and the token
    rows summed to 1.
    """
    attention = as_array("attention", attention)  # its own dtype: (..., seq, seq), rows are queries
    word_ids = list(check_items("word_ids", word_ids, "the word ids of a sentence, one per token (None for specials)"))
    if attention.ndim < 2 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention has shape {attention.shape}; it should be (..., seq, seq) with rows = queries.")
    if attention.shape[-1] != len(word_ids):
        raise ValueError(
            f"attention covers {attention.shape[-1]} tokens but word_ids has {len(word_ids)} entries; "
            "give one word id (or None) per token of the same sequence."
        )
    units = word_units(word_ids, keep_special=keep_special)
    membership = np.zeros((len(word_ids), len(units)))  # (seq, units): token t belongs to unit u
    for u, positions in enumerate(units):
        membership[list(positions), u] = 1.0
    mean_over_rows = (membership / membership.sum(axis=0)).T  # (units, seq): averages a unit's rows
    received = attention @ membership  # (..., seq, units): columns summed within each unit
    return mean_over_rows @ received  # (..., units, units): rows averaged within each unit


def word_strings(tokens: Sequence[str], word_ids: Sequence[int | None], *, keep_special: bool = False,
                 continuation_prefix: str = "##") -> list[str]:
    """One label per word-level unit, pieces glued back together (chapter 3, empirical head roles).

    ``tokens`` and ``word_ids`` are parallel (one entry per token). A piece
    starting with ``continuation_prefix`` (BERT's ``##``) is appended without
    its prefix; other pieces of the same word are joined directly. The units
    and their order are those of :func:`word_units`, so the labels name the
    rows and columns of :func:`word_attention`.
    """
    tokens = check_items_of("tokens", tokens, str, "a token, as text")
    word_ids = check_items("word_ids", word_ids, "the word ids of a sentence, one per token (None for specials)")
    if len(tokens) != len(word_ids):
        raise ValueError(f"tokens has {len(tokens)} entries but word_ids has {len(word_ids)}; they must be parallel.")
    labels = []
    for positions in word_units(word_ids, keep_special=keep_special):
        pieces = [tokens[p] for p in positions]
        label = pieces[0] + "".join(
            piece[len(continuation_prefix):] if continuation_prefix and piece.startswith(continuation_prefix) else piece
            for piece in pieces[1:]
        )
        labels.append(label)
    return labels
