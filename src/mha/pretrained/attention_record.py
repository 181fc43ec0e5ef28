"""One sentence's attention for every head, as the encoder gives it and the role table reads it (chapter 3).

:class:`AttentionRecord` is what :func:`mha.pretrained.corpus_encoding.encode_records` returns for each sentence and
what the scores of :mod:`mha.analysis` (the role table, relations, layer profiles) read: the maps (layers, heads,
seq, seq), row = query (attends FROM), column = key (attended TO), with the tokens, their word ids and the gold
annotation. :func:`as_record` also accepts a mapping or any object with those fields (a
:class:`~mha.pretrained.traces.SentenceTrace`), and :func:`check_record` says what is wrong with one that does not fit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from mha.core.layouts import LAYERS_HEADS, check_attention_layout
from mha.core.validation import check_type
from mha.corpora.annotation import AnnotatedSentence

__all__ = ["AttentionLike", "AttentionRecord", "RecordLike", "as_record", "check_record"]


@dataclass(frozen=True)
class AttentionRecord:
    """One sentence's attention for every head, with its tokens and (optional) gold annotation (chapter 3).

    ``attention`` is (layers, heads, seq, seq), rows = queries (attend FROM),
    columns = keys (attended TO), each row summing to 1. ``tokens`` and
    ``word_ids`` have ``seq`` entries; ``word_ids[t]`` is the index of the word
    token ``t`` belongs to, None for special tokens such as ``[CLS]``.
    ``sentence`` is the gold :class:`~mha.corpora.annotation.AnnotatedSentence` whose
    ``words`` those word ids index, or None when there is no annotation.
    """

    attention: np.ndarray
    tokens: Sequence[str]
    word_ids: Sequence[int | None]
    sentence: AnnotatedSentence | None = None


class AttentionLike(Protocol):
    """Anything that carries one sentence's ``attention``, ``tokens`` and ``word_ids``, e.g. a SentenceTrace."""

    attention: np.ndarray
    tokens: Sequence[str]
    word_ids: Sequence[int | None]


RecordLike = AttentionRecord | AttentionLike | Mapping[str, object]
"""What :func:`head_role_table` accepts for one sentence."""


def as_record(item: RecordLike, index: int) -> AttentionRecord:
    """Accept an AttentionRecord, a mapping with its field names, or any object with those attributes."""
    if isinstance(item, AttentionRecord):
        return item
    get = item.get if isinstance(item, Mapping) else (lambda name, default=None: getattr(item, name, default))
    attention, tokens, word_ids = get("attention"), get("tokens"), get("word_ids")
    if attention is None or tokens is None or word_ids is None:
        raise ValueError(
            f"record {index} needs 'attention' (layers, heads, seq, seq), 'tokens' and 'word_ids' "
            f"(and optionally 'sentence'); got {type(item).__name__} without them."
        )
    return AttentionRecord(np.asarray(attention), list(tokens), list(word_ids), get("sentence"))


def check_record(record: AttentionRecord, index: int, shape: tuple[int, int] | None) -> np.ndarray:
    """Record ``index``'s attention as float64 (layers, heads, seq, seq), or a ValueError saying what is wrong.

    The maps must be square, cover as many tokens as there are tokens and word ids, hold (layers, heads) = ``shape``
    when ``shape`` is given (the earlier records' model), and have rows that are probabilities.
    """
    check_type("record", record, AttentionRecord, "an AttentionRecord, e.g. one of encode_records(encoder, sentences)")
    attention = np.asarray(record.attention, dtype=np.float64)
    check_attention_layout(f"record {index}'s attention", attention, LAYERS_HEADS)
    seq = attention.shape[-1]
    if len(record.tokens) != seq or len(record.word_ids) != seq:
        raise ValueError(
            f"record {index}: attention covers {seq} tokens but there are {len(record.tokens)} tokens and "
            f"{len(record.word_ids)} word ids; all three must describe the same sequence."
        )
    if shape is not None and attention.shape[:2] != shape:
        raise ValueError(
            f"record {index}: attention has {attention.shape[:2]} (layers, heads) but earlier records had {shape}; "
            "score one model at a time."
        )
    if not np.isfinite(attention).all() or (attention < 0).any() or np.abs(attention.sum(-1) - 1).max() > 1e-3:
        raise ValueError(
            f"record {index}: every attention row must be non-negative and sum to 1 (after softmax); "
            "were scores passed before the softmax, or was the map transposed?"
        )
    return attention
