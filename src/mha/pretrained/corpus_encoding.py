"""Encode a whole corpus into attention records, in batches (chapter 3, empirical head roles).

:func:`mha.analysis.head_roles.role_table.head_role_table` scores heads from one
:class:`~mha.pretrained.attention_record.AttentionRecord` per sentence. This module produces those
records from the pretrained encoder of :mod:`mha.pretrained.encoder`, many sentences per
forward pass, so that encoding the ~600 sentences of
:func:`mha.corpora.templates.generate_corpus` takes seconds rather than minutes.

Gold sentences (:class:`~mha.corpora.annotation.AnnotatedSentence`) are encoded from their
own words (``is_split_into_words=True``), so the word ids of each record index
``sentence.words`` exactly, as the relation scores require. Sentences are
sorted by their number of wordpieces and batched by a token budget: a batch
holds at most ``max_tokens`` padded tokens (and at most ``batch_size``
sentences), so a batch of short template sentences is large and one of long
treebank sentences small, which bounds both the memory (attention grows with
the square of the length) and the padding. The records come back in the order
the sentences were given. Padding is removed: each
record's ``attention`` is (layers, heads, n, n) for that sentence's own ``n``
tokens, row = query (attends FROM), column = key (attended TO).

:func:`encode_word_head_outputs` batches the same way and keeps, instead of the weights, what every head wrote:
its output ``z_h`` (before ``W_O``) averaged over each word's wordpieces, the features that the probes of
section 4.4 ("Probing and its limits") read.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from mha.core.validation import InputError, check_items, check_whole_number
from mha.corpora.annotation import AnnotatedSentence
from mha.pretrained.attention_record import AttentionRecord
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.word_maps import word_units

__all__ = ["encode_records", "encode_word_head_outputs"]


def encode_records(
    encoder: MiniLMEncoder,
    sentences: Sequence[AnnotatedSentence | str],
    *,
    batch_size: int = 256,
    max_tokens: int = 4096,
    dtype: type = np.float32,
) -> list[AttentionRecord]:
    """One :class:`~mha.pretrained.attention_record.AttentionRecord` per sentence, encoded in batches (chapter 3,
    empirical head roles).

    ``sentences`` holds :class:`~mha.corpora.annotation.AnnotatedSentence` objects (encoded
    from their words, and kept as the record's ``sentence``) or plain strings
    (tokenised by the model, no gold annotation), not both. Sentences of
    similar length share a batch of at most ``batch_size`` sentences and
    ``max_tokens`` tokens, padding included. Each record has
    ``attention`` (layers, heads, n, n) as ``dtype``, ``tokens`` and
    ``word_ids`` (n entries, None for ``[CLS]`` and ``[SEP]``); the list
    follows the order of ``sentences``.
    """
    check_encoder(encoder)
    if isinstance(sentences, (str, AnnotatedSentence)):
        raise ValueError("sentences must be a list (of AnnotatedSentence objects or of strings), not a single one.")
    sentences = list(check_items("sentences", sentences, "a list of AnnotatedSentence objects or of strings"))
    if not sentences:
        raise ValueError("sentences is empty; give at least one sentence to encode.")
    batch_size, max_tokens, dtype = _check_options(batch_size, max_tokens, dtype)
    annotated = [isinstance(s, AnnotatedSentence) for s in sentences]
    if any(annotated) and not all(annotated):
        raise ValueError("sentences mixes AnnotatedSentence objects and strings; encode each kind separately.")
    if not any(annotated) and not all(isinstance(s, str) for s in sentences):
        bad = next(s for s in sentences if not isinstance(s, str))
        raise ValueError(f"each sentence must be an AnnotatedSentence or a string, got {type(bad).__name__}.")
    split = all(annotated)
    inputs = [list(s.words) for s in sentences] if split else sentences

    # 1. sort by length in wordpieces, so each batch pads little, and cut batches by the token budget
    lengths = encoder.tokenize(inputs, is_split_into_words=split).real_tokens.sum(dim=1).tolist()  # (sentences,)
    order = sorted(range(len(sentences)), key=lambda i: lengths[i])
    records: list[AttentionRecord | None] = [None] * len(sentences)
    for chunk in _batches(order, lengths, batch_size, max_tokens):
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


def encode_word_head_outputs(
    encoder: MiniLMEncoder,
    sentences: Sequence[Sequence[str]],
    *,
    batch_size: int = 256,
    max_tokens: int = 4096,
    dtype: type = np.float32,
) -> list[np.ndarray]:
    """Every head's output ``z_h`` for every word of every sentence: one (layers, heads, words, d_head) array each.

    ``sentences`` are lists of words (a treebank's own words, encoded with ``is_split_into_words=True``), batched by
    length as in :func:`encode_records`. ``z_h = weights_h @ v_h`` is the head's output before ``W_O``
    (:attr:`mha.pretrained.traces.EncoderTrace.head_outputs`); a word cut into several wordpieces gets the mean
    of its pieces' outputs (:func:`mha.pretrained.word_maps.word_units`), and ``[CLS]`` and ``[SEP]`` are dropped,
    so ``result[i][layer, head, w]`` belongs to ``sentences[i][w]`` (section 4.4, "Probing and its limits").
    """
    check_encoder(encoder)
    if isinstance(sentences, str) or not len(check_items("sentences", sentences, "a list of sentences")):
        raise ValueError("sentences must be a non-empty list of sentences, each a list of words.")
    sentences = [list(check_items(f"sentences[{i}]", words, "a list of words")) for i, words in enumerate(sentences)]
    bad = next((i for i, words in enumerate(sentences)
                if not words or not all(isinstance(w, str) and w for w in words)), None)
    if bad is not None:
        raise ValueError(f"sentence {bad} is {sentences[bad]!r}; each sentence must be a non-empty list of "
                         "non-empty word strings (use [list(s.words) for s in sentences] for AnnotatedSentence).")
    batch_size, max_tokens, dtype = _check_options(batch_size, max_tokens, dtype)
    lengths = encoder.tokenize(sentences, is_split_into_words=True).real_tokens.sum(dim=1).tolist()  # (sentences,)
    order = sorted(range(len(sentences)), key=lambda i: lengths[i])
    outputs: list[np.ndarray | None] = [None] * len(sentences)
    for chunk in _batches(order, lengths, batch_size, max_tokens):
        trace = encoder.trace([sentences[i] for i in chunk], is_split_into_words=True)
        head_outputs = trace.head_outputs.detach().cpu().numpy()  # (layers, batch, heads, seq, d_head)
        for position, index in enumerate(chunk):
            n = trace.lengths[position]
            units = word_units(trace.word_ids[position][:n])  # token positions of each word, specials dropped
            per_token = head_outputs[:, position, :, :n]  # (layers, heads, n, d_head)
            outputs[index] = np.stack([per_token[:, :, list(unit)].mean(axis=2) for unit in units],
                                      axis=2).astype(dtype)  # (layers, heads, words, d_head)
    return outputs  # type: ignore[return-value]


def _check_options(batch_size: int, max_tokens: int, dtype) -> tuple[int, int, np.dtype]:
    """The batching options and the float dtype of the results, checked."""
    batch_size = check_whole_number("batch_size", batch_size, minimum=1)
    max_tokens = check_whole_number("max_tokens", max_tokens, minimum=1)
    try:
        dtype = np.dtype(dtype)
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.kind != "f":
        raise InputError("dtype should be a numpy float type for the results, e.g. np.float32 or np.float64.")
    return batch_size, max_tokens, dtype


def _batches(order: list[int], lengths: list[int], batch_size: int, max_tokens: int) -> list[list[int]]:
    """``order`` (sorted by length) cut into batches of at most ``batch_size`` sentences whose padded size (count
    times the longest length) stays within ``max_tokens``; a sentence longer than the budget goes alone."""
    batches: list[list[int]] = []
    for index in order:
        current = batches[-1] if batches else None
        if current and len(current) < batch_size and (len(current) + 1) * lengths[index] <= max_tokens:
            current.append(index)
        else:
            batches.append([index])
    return batches
