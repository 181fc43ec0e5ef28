"""Bridging heads and copying heads, tested on real text (3.1 "A tour of all 72 heads").

The popular story of attention heads has two more characters than the ones the role table scores. A
**bridging** head links the two ends of a long-range construction: *if* ... *then*, *either* ... *or*, a subject
and its verb far apart. A **copying** head attends to the token itself (a high weight on the diagonal). This
module finds long-range word pairs in a Universal Dependencies treebank, and scores every head on them against a
**distance-matched baseline**: attention falls off with distance, so a far pair's weight is compared with the
weight the same head gives, on average, to any word at the same distance in the same direction. Word-level maps
(:func:`mha.pretrained.word_maps.word_attention`) are used throughout; row = query (attends FROM), column = key
(attended TO).

The full tree of each sentence (form, UPOS, head, relation) comes from :func:`mha.corpora.treebank.read_ud_trees`
(import it from there), which numbers the words as :func:`mha.corpora.treebank.read_conllu` does. Self-attention
(copying) per sentence is :func:`mha.analysis.head_roles.role_table.sentence_head_scores`'s
``content_same_token_share``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mha.core.layouts import LAYERS_HEADS_WORDS, check_attention_layout
from mha.core.validation import check_items, check_whole_number
from mha.corpora.treebank import UDTree, check_trees

__all__ = ["WordPair", "CORRELATIVES", "paired_constructions", "long_arcs",
           "form_matched_controls", "distance_baseline", "pair_lifts"]

#: correlative pairs: UD marks the first word ``cc:preconj``; the second is the ``cc`` of the next conjunct
CORRELATIVES: dict[str, tuple[str, ...]] = {"both": ("and",), "either": ("or",), "neither": ("nor", "or"),
                                            "whether": ("or",)}


@dataclass(frozen=True)
class WordPair:
    """Two words of one sentence, ``first`` before ``second`` (word indices), and what links them (3.1)."""

    sentence: int
    first: int
    second: int
    kind: str

    @property
    def distance(self) -> int:
        return self.second - self.first


def paired_constructions(trees: Sequence[UDTree]) -> list[WordPair]:
    """The textbook long-range pairs: *if* ... *then* and correlatives (*either* ... *or*, ...) (3.1).

    *if* ... *then*: an *if* that marks (``mark``) a clause, and a *then* (``advmod``) later in the sentence whose
    head is the word that clause depends on (the main clause). Correlatives: a ``cc:preconj`` word of
    :data:`CORRELATIVES` and the first matching ``cc`` after it that shares its head's coordination (its head is
    a ``conj`` of the preconj's head). Kinds are ``"if_then"`` and ``"<first>_<second>"``.
    """
    trees = check_trees("trees", trees)
    pairs = []
    for s, tree in enumerate(trees):
        lower = [w.lower() for w in tree.words]
        for i, (word, deprel) in enumerate(zip(lower, tree.deprels, strict=True)):
            if word == "if" and deprel == "mark" and tree.heads[i] >= 0:
                governor = tree.heads[tree.heads[i]]  # the word the if-clause depends on
                for j in range(i + 1, len(lower)):
                    if lower[j] == "then" and tree.heads[j] == governor and governor >= 0:
                        pairs.append(WordPair(s, i, j, "if_then"))
                        break
            elif deprel == "cc:preconj" and word in CORRELATIVES:
                coordinated = tree.heads[i]
                for j in range(i + 1, len(lower)):
                    head = tree.heads[j]
                    if (lower[j] in CORRELATIVES[word] and tree.deprels[j] == "cc" and head >= 0
                            and tree.heads[head] == coordinated and tree.deprels[head] == "conj"):
                        pairs.append(WordPair(s, i, j, f"{word}_{lower[j]}"))
                        break
    return pairs


def long_arcs(trees: Sequence[UDTree], *, min_distance: int = 6,
              skip_deprels: Sequence[str] = ("punct", "root")) -> list[WordPair]:
    """Every dependency arc that spans at least ``min_distance`` words, as a pair of words (3.1).

    Relations in ``skip_deprels`` are left out (a full stop hangs off the main verb however far it is). The kind
    is the dependent's relation without its subtype (``nsubj``, ``advcl``, ...).
    """
    trees = check_trees("trees", trees)
    min_distance = check_whole_number("min_distance", min_distance, minimum=1, meaning="words between the two")
    pairs = []
    for s, tree in enumerate(trees):
        for dependent, (head, deprel) in enumerate(zip(tree.heads, tree.deprels, strict=True)):
            base = deprel.split(":")[0]
            if head < 0 or base in skip_deprels or deprel in skip_deprels:
                continue
            if abs(head - dependent) >= min_distance:
                pairs.append(WordPair(s, min(head, dependent), max(head, dependent), base))
    return pairs


def form_matched_controls(trees: Sequence[UDTree], pairs: Sequence[WordPair]) -> list[WordPair]:
    """Control pairs: the same later word, a word as far back, but no partner (3.1).

    For each kind of pair, every other occurrence (in ``trees``) of its second word's form (lower-cased: *then*,
    *or*, *and*) that is not itself the second word of a pair gives one control per earlier word whose distance
    lies within the range of that kind's pair distances (shortest to longest), of kind ``"control_<kind>"``. A
    head that links *or* back to *either* should give these less weight (after the distance baseline); a head
    that makes every *or* look a few words back gives them as much.
    """
    taken = {(p.sentence, p.second) for p in pairs}
    spans: dict[str, tuple[int, int]] = {}
    forms: dict[str, str] = {}
    for p in pairs:
        low, high = spans.get(p.kind, (p.distance, p.distance))
        spans[p.kind] = (min(low, p.distance), max(high, p.distance))
        forms[p.kind] = trees[p.sentence].words[p.second].lower()
    controls = []
    for s, tree in enumerate(trees):
        for j, word in enumerate(tree.words):
            if (s, j) in taken:
                continue
            for kind in sorted(spans):
                if forms[kind] == word.lower():
                    low, high = spans[kind]
                    controls.extend(WordPair(s, i, j, f"control_{kind}") for i in range(max(j - high, 0), j - low + 1))
    return controls


def _check_maps(word_maps: Sequence[np.ndarray]) -> list[np.ndarray]:
    for index, m in enumerate(word_maps):
        check_attention_layout(f"word_maps[{index}]", m, LAYERS_HEADS_WORDS)
    maps = [np.asarray(m, dtype=float) for m in word_maps]
    if not maps:
        raise ValueError("word_maps is empty; give one word-level map (layers, heads, words, words) per sentence.")
    for index, m in enumerate(maps):
        if m.ndim < 2 or m.shape[-1] != m.shape[-2] or m.shape[:-2] != maps[0].shape[:-2]:
            raise ValueError(f"word_maps[{index}] has shape {m.shape}; every map must be (layers, heads, words, "
                             f"words) with the same leading axes as word_maps[0] {maps[0].shape}.")
    return maps


def distance_baseline(word_maps: Sequence[np.ndarray], max_distance: int | None = None) -> np.ndarray:
    """Mean weight a head gives a word ``d`` words away, per direction and distance (3.1).

    ``word_maps`` holds one word-level map (layers, heads, words, words) per sentence, rows = queries. Returns an
    array (2, max_distance + 1, layers, heads): ``[0, d]`` is the mean over all rows ``q`` of every sentence of
    the weight on word ``q - d`` (looking back), ``[1, d]`` the weight on ``q + d`` (looking ahead); NaN where no
    sentence is long enough. ``d = 0`` is the word itself in both.
    """
    word_maps = check_items("word_maps", word_maps, "a list of word-level attention maps")
    maps = _check_maps(word_maps)
    longest = max(m.shape[-1] for m in maps)
    max_distance = longest - 1 if max_distance is None else max_distance
    sums = np.zeros((2, max_distance + 1, *maps[0].shape[:-2]))
    counts = np.zeros((2, max_distance + 1))
    for m in maps:
        n = m.shape[-1]
        for d in range(min(n, max_distance + 1)):
            back = np.diagonal(m, offset=-d, axis1=-2, axis2=-1)  # (layers, heads, n - d): row q, column q - d
            ahead = np.diagonal(m, offset=d, axis1=-2, axis2=-1)  # (layers, heads, n - d): row q, column q + d
            sums[0, d] += back.sum(-1)
            sums[1, d] += ahead.sum(-1)
            counts[:, d] += n - d
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / np.where(counts > 0, counts, np.nan)[(...,) + (None,) * (sums.ndim - 2)]


def pair_lifts(word_maps: Sequence[np.ndarray], pairs: Sequence[WordPair], baseline: np.ndarray,
               direction: str = "second_to_first") -> tuple[np.ndarray, np.ndarray]:
    """Each pair's weight in every head, and that weight minus the distance-matched baseline (3.1).

    ``direction="second_to_first"`` reads the later word's row and the earlier word's column (*then* looking back
    at *if*); ``"first_to_second"`` the earlier word's row. ``baseline`` comes from :func:`distance_baseline`
    over the same (or a larger) set of sentences. Returns ``(weights, lifts)``, each (pairs, layers, heads).
    """
    if direction not in ("second_to_first", "first_to_second"):
        raise ValueError(f"direction must be 'second_to_first' or 'first_to_second', got {direction!r}.")
    maps = _check_maps(word_maps)
    if not pairs:
        raise ValueError("pairs is empty; find pairs with paired_constructions() or long_arcs() first.")
    weights, lifts = [], []
    for pair in pairs:
        m = maps[pair.sentence]
        if pair.second >= m.shape[-1]:
            raise ValueError(f"pair {pair} names word {pair.second}, but sentence {pair.sentence}'s map has "
                             f"{m.shape[-1]} words; were the maps and the trees read from the same file?")
        if pair.distance >= baseline.shape[1]:
            raise ValueError(f"pair {pair} spans {pair.distance} words but the baseline stops at "
                             f"{baseline.shape[1] - 1}; compute it over the same sentences.")
        if direction == "second_to_first":
            weight, expected = m[..., pair.second, pair.first], baseline[0, pair.distance]
        else:
            weight, expected = m[..., pair.first, pair.second], baseline[1, pair.distance]
        weights.append(weight)
        lifts.append(weight - expected)
    return np.stack(weights), np.stack(lifts)
