"""Encode a whole corpus into attention records, in batches (chapter 3, empirical head roles).

:func:`mha.analysis.role_table.head_role_table` scores heads from one
:class:`~mha.analysis.role_table.AttentionRecord` per sentence. This module produces those
records from the pretrained encoder of :mod:`mha.pretrained.encoder`, many sentences per
forward pass, so that encoding the ~600 sentences of
:func:`mha.corpora.templates.generate_corpus` takes seconds rather than minutes.

Gold sentences (:class:`~mha.corpora.templates.AnnotatedSentence`) are encoded from their
own words (``is_split_into_words=True``), so the word ids of each record index
``sentence.words`` exactly, as the relation scores require. Sentences are
grouped by length before batching (less padding, less work) and the records
come back in the order the sentences were given. Padding is removed: each
record's ``attention`` is (layers, heads, n, n) for that sentence's own ``n``
tokens, row = query (attends FROM), column = key (attended TO).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mha.corpora.templates import AnnotatedSentence
from mha.pretrained.encoder import MiniLMEncoder
from mha.analysis.role_table import AttentionRecord

__all__ = ["encode_records"]


def encode_records(
    encoder: MiniLMEncoder,
    sentences: Sequence[AnnotatedSentence | str],
    *,
    batch_size: int = 256,
    dtype: type = np.float32,
) -> list[AttentionRecord]:
    """One :class:`~mha.analysis.role_table.AttentionRecord` per sentence, encoded in batches (chapter 3, empirical head roles).

    ``sentences`` holds :class:`~mha.corpora.templates.AnnotatedSentence` objects (encoded
    from their words, and kept as the record's ``sentence``) or plain strings
    (tokenised by the model, no gold annotation), not both. Sentences of
    similar length share a batch of at most ``batch_size``. Each record has
    ``attention`` (layers, heads, n, n) as ``dtype``, ``tokens`` and
    ``word_ids`` (n entries, None for ``[CLS]`` and ``[SEP]``); the list
    follows the order of ``sentences``.
    """
    if isinstance(sentences, (str, AnnotatedSentence)):
        raise ValueError("sentences must be a list (of AnnotatedSentence objects or of strings), not a single one.")
    sentences = list(sentences)
    if not sentences:
        raise ValueError("sentences is empty; give at least one sentence to encode.")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1, got {batch_size!r}.")
    annotated = [isinstance(s, AnnotatedSentence) for s in sentences]
    if any(annotated) and not all(annotated):
        raise ValueError("sentences mixes AnnotatedSentence objects and strings; encode each kind separately.")
    if not any(annotated) and not all(isinstance(s, str) for s in sentences):
        bad = next(s for s in sentences if not isinstance(s, str))
        raise ValueError(f"each sentence must be an AnnotatedSentence or a string, got {type(bad).__name__}.")
    split = all(annotated)
    inputs = [list(s.words) for s in sentences] if split else sentences

    # 1. group by length (in words or characters) so each batch pads little
    order = sorted(range(len(sentences)), key=lambda i: len(inputs[i]))
    records: list[AttentionRecord | None] = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        # 2. one forward pass for the batch: attention (layers, batch, heads, seq, seq), padded
        trace = encoder.trace([inputs[i] for i in chunk], is_split_into_words=split)
        for position, index in enumerate(chunk):
            # 3. cut each sentence out of the batch, without its padding
            n = trace.lengths[position]
            records[index] = AttentionRecord(
                attention=trace.attention_maps(position).astype(dtype),  # (layers, heads, n, n)
                tokens=list(trace.tokens[position][:n]),
                word_ids=list(trace.word_ids[position][:n]),
                sentence=sentences[index] if split else None,
            )
    return records  # type: ignore[return-value]
