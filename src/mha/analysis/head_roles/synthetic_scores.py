"""One head's role-table scores on given maps, and seeded synthetic pairs: the reference answers and hidden inputs
of the synthetic checks of 3.1 and 3.2 (:mod:`mha.exercises.head_roles`).

:func:`one_head_table` scores one head (1 layer, 1 head) over hand-made or random maps with
:func:`~mha.analysis.head_roles.role_table.head_role_table`; :func:`relation_accuracy_on_maps` does the same for a
relation on word-level maps of :func:`placeholder_sentence` sentences; :func:`random_offset_cases` draws sentences
whose pairs mostly sit one gap apart (3.2's fixed-offset baseline); :func:`pooled_best_head` chooses a head by its
pooled accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from mha.analysis.head_roles.role_table import head_role_table
from mha.core.layouts import QUERY_KEY, WORDS, AttentionLayout, check_attention_layout
from mha.core.validation import as_real_array, check_items, check_seed, check_whole_number
from mha.corpora.annotation import AnnotatedSentence, Relation
from mha.pretrained.attention_record import AttentionRecord

__all__ = ["one_head_table", "placeholder_sentence", "pooled_best_head", "random_offset_cases",
           "relation_accuracy_on_maps"]

DIRECTIONS = ("source_to_target", "target_to_source")


def _square_maps(maps, layout: AttentionLayout = QUERY_KEY, name: str = "maps") -> list[np.ndarray]:
    maps = check_items(name, maps, f"a list of {layout.name} attention maps")
    for i, m in enumerate(maps):
        check_attention_layout(f"{name}[{i}]", m, layout)
    arrays = [as_real_array(f"{name}[{i}]", m, meaning="(seq, seq)") for i, m in enumerate(maps)]
    for i, array in enumerate(arrays):
        if array.ndim != 2 or array.shape[0] != array.shape[1] or array.shape[0] < 2:
            raise ValueError(f"maps[{i}] has shape {array.shape}; each map should be (seq, seq) with seq >= 2.")
    if not arrays:
        raise ValueError("maps is empty; give at least one (seq, seq) map.")
    return [array.astype(float) for array in arrays]


def one_head_table(maps, tokens: Sequence[Sequence[str]] | None = None, **options) -> pd.Series:
    """:func:`~mha.analysis.head_roles.role_table.head_role_table`'s row for one head (1 layer, 1 head) over several
    (seq, seq) ``maps``. Without ``tokens`` each map is ``[CLS] w0 ... [SEP]``; with them, tokens in brackets are
    special and the others are numbered as words 0, 1, 2 ... ``options`` go to ``head_role_table``."""
    maps = _square_maps(maps)
    if tokens is not None:
        tokens = [list(check_items(f"tokens[{i}]", t, "a list of token strings")) for i, t in
                  enumerate(check_items("tokens", tokens, "one list of token strings per map"))]
        if [len(t) for t in tokens] != [len(m) for m in maps] or not all(isinstance(t, str) for s in tokens for t in s):
            raise ValueError("tokens must hold one list of strings per map, one string per row of that map.")
    records = []
    for index, weights in enumerate(maps):
        if tokens is None:
            own_tokens = ["[CLS]", *[f"w{i}" for i in range(len(weights) - 2)], "[SEP]"]
        else:
            own_tokens = tokens[index]
        word_ids, counter = [], 0
        for token in own_tokens:  # number the non-special tokens 0, 1, 2, ...
            word_ids.append(None if token.startswith("[") else counter)
            counter += not token.startswith("[")
        records.append(AttentionRecord(weights[None, None], own_tokens, word_ids))
    return head_role_table(records, **options).iloc[0]


def placeholder_sentence(n_words: int, pairs: Sequence[tuple[int, int]]) -> AnnotatedSentence:
    """A sentence of ``n_words`` placeholder words with one det_noun relation per (source, target) pair."""
    n_words = check_whole_number("n_words", n_words, 1, 10**4, meaning="words of the placeholder sentence")
    pairs = check_items("pairs", pairs, "a list of (source, target) word indices")
    checked = []
    for pair in pairs:
        if not (isinstance(pair, Sequence) and len(pair) == 2):
            raise ValueError(f"each pair should be (source, target) word indices, got {pair!r:.60}.")
        checked.append(tuple(check_whole_number("a pair's word", w, 0, n_words - 1) for w in pair))
    return AnnotatedSentence(tuple(f"w{i}" for i in range(n_words)),
                             tuple(Relation("det_noun", s, t) for s, t in checked))


def relation_accuracy_on_maps(word_maps, pairs, direction: str, ignore_self: bool = True) -> float:
    """The role table's pooled det_noun accuracy of one head over word-level ``word_maps`` (n, n), ``pairs[s]``
    listing sentence s's (source, target) pairs; ``direction`` ``"source_to_target"`` reads the source's row."""
    word_maps = _square_maps(word_maps, WORDS, "word_maps")
    pairs = check_items("pairs", pairs, "one list of (source, target) pairs per map")
    if len(pairs) != len(word_maps) or direction not in DIRECTIONS:
        raise ValueError(f"give one list of pairs per map and a direction in {DIRECTIONS}; got {len(pairs)} lists "
                         f"for {len(word_maps)} maps and {direction!r:.40}.")
    records = [AttentionRecord(m[None, None], [f"w{i}" for i in range(len(m))], list(range(len(m))),
                               placeholder_sentence(len(m), p)) for m, p in zip(word_maps, pairs, strict=True)]
    column = "det_noun_acc" if direction == "source_to_target" else "noun_det_acc"
    return float(head_role_table(records, ignore_self=bool(ignore_self), min_relation_count=1).iloc[0][column])


def random_offset_cases(seed: int) -> list:
    """(label, pairs, direction, offsets) for five random sentences whose pairs mostly sit one gap apart."""
    rng = np.random.default_rng(check_seed("seed", seed))
    found = []
    for index in range(5):
        n_words, gap = int(rng.integers(8, 20)), int(rng.choice([-3, -2, -1, 1, 2, 3]))
        sources = rng.choice(n_words, size=int(rng.integers(3, 7)), replace=False)
        pairs = []
        for source in sources.tolist():
            target = source + gap if rng.random() < 0.6 else int(rng.integers(0, n_words))
            if 0 <= target < n_words and target != source:
                pairs.append((source, target))
        pairs = pairs or [(0, 1)]
        offsets = tuple(range(-3, 4)) if index == 4 else None
        found.append((f"random pairs in a sentence of {n_words} words", pairs, DIRECTIONS[index % 2], offsets))
    return found


def pooled_best_head(hits, pairs, items) -> tuple[int, float]:
    """The flat head with the highest pooled accuracy over the sentences ``items`` (first on ties), and that
    accuracy: ``hits`` (sentences, layers, heads), ``pairs`` (sentences,)."""
    hits, pairs = as_real_array("hits", hits, meaning="(sentences, layers, heads)"), as_real_array("pairs", pairs)
    items = np.asarray(check_items("items", items, "sentence indices"))
    if hits.ndim != 3 or pairs.shape != hits.shape[:1] or items.dtype.kind not in "iu" or not len(items) \
            or items.min() < 0 or items.max() >= len(pairs) or pairs[items].sum() <= 0:
        raise ValueError(f"give hits (sentences, layers, heads), pairs (sentences,) and sentence indices with some "
                         f"pairs; got shapes {hits.shape}, {pairs.shape} and items {items!r:.60}.")
    accuracy = hits[items].sum(axis=0).ravel() / pairs[items].sum()  # (layers * heads,)
    best = int(np.argmax(accuracy))
    return best, float(accuracy[best])
