"""Subject-verb agreement on real text: does a head look from the verb to its subject, across attractors? (3.2).

The items of :func:`mha.corpora.agreement.agreement_items` pair each subject of UD English-EWT with the verb form
that agrees with it, and name the nouns of the other number between them (attractors). For every item and head we
read the verb's ROW of the word-level map (:func:`mha.pretrained.word_maps.word_attention`) and take the other word
it attends to most (itself left out):

* **hit**: that word is the subject (its head word, as UD marks it); **share**: the weight on the subject;
* **to attractor**: that word is one of the attractors.

Rules that read no attention: the **nearest noun** (the nearest noun, proper noun or pronoun before the verb: an
attractor, when there is one, by construction) and **offset -k** (the word ``k`` places before the verb, ``k`` = 1
.. :data:`MAX_OFFSET`). Scores are kept per item (:class:`AgreementScores`), with each item's sentence for
intervals that resample sentences. ``scripts/ewt_agreement.py`` stores them with the patching of
:mod:`mha.analysis.head_roles.agreement_patching`; :func:`load_agreement` reads both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom

from mha.analysis.statistics import bootstrap_ratio_interval, detection_power
from mha.core.layouts import WORDS, takes_attention
from mha.core.validation import as_real_array, check_items, check_type, check_whole_number, is_real_number
from mha.corpora.agreement import AgreementItem
from mha.corpora.treebank import UDTree, check_trees
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.word_maps import word_attention

__all__ = ["MAX_OFFSET", "verb_row_scores", "nearest_noun", "AgreementScores", "score_agreement", "BinomialPower",
           "binomial_power", "attractor_verdict"]

MAX_OFFSET = 8
"""The fixed offsets tried: the word 1, 2, ..., 8 places before the verb."""


@takes_attention(word_maps=WORDS.with_leading(6))
def verb_row_scores(word_maps: np.ndarray, item: AgreementItem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One item's hit, share and to-attractor for every head: (..., words, words) -> three (...) arrays (3.2).

    ``word_maps`` are the sentence's word-level maps, rows = query. The verb's other word of largest weight (its
    own column left out, ties to the first) is the subject (hit) or an attractor; share is the weight on the subject.
    """
    check_type("item", item, AgreementItem, "an AgreementItem (mha.corpora.agreement.agreement_items)")
    word_maps = as_real_array("word_maps", word_maps, meaning="(..., words, words)")
    n = len(item.words)
    if word_maps.ndim < 2 or word_maps.shape[-2:] != (n, n):
        raise ValueError(f"word_maps has shape {word_maps.shape} but the item's sentence has {n} words; give "
                         "(..., words, words) maps of the item's own sentence.")
    row = word_maps[..., item.verb, :].copy()  # (..., words)
    row[..., item.verb] = -np.inf
    most = row.argmax(axis=-1)
    return most == item.subject, word_maps[..., item.verb, item.subject], np.isin(most, item.attractors)


def nearest_noun(tree: UDTree, item: AgreementItem) -> int | None:
    """The nearest noun, proper noun or pronoun before the item's verb, or None (3.2)."""
    check_type("tree", tree, UDTree, "a UDTree, as read_ud_trees(path) returns them")
    check_type("item", item, AgreementItem, "an AgreementItem of that tree (agreement_items)")
    before = [i for i in range(item.verb) if tree.upos[i] in ("NOUN", "PROPN", "PRON")]
    return before[-1] if before else None


@dataclass(frozen=True)
class AgreementScores:
    """Every head's and rule's scores on agreement items, one row per item (3.2).

    ``sentences`` (items,): each item's sentence (for resampling); ``attracted`` (items,): whether it has an
    attractor; ``distance`` (items,): verb minus subject in words; ``narrow`` (items,): whether the item is of the
    narrow definition (a basic-tree subject and a verb whose form shows number; see
    :func:`mha.corpora.agreement.agreement_items`). ``hits``, ``to_attractor`` (items, layers, heads)
    of 0/1, ``share`` (items, layers, heads); ``nearest_noun`` (items,) 0/1; ``offset_hits`` (items, MAX_OFFSET),
    column ``k - 1`` for the word ``k`` before the verb.
    """

    sentences: np.ndarray
    attracted: np.ndarray
    distance: np.ndarray
    hits: np.ndarray
    share: np.ndarray
    to_attractor: np.ndarray
    nearest_noun: np.ndarray
    offset_hits: np.ndarray
    narrow: np.ndarray

    def select(self, sentences, attracted: bool | None = None, min_distance: int = 1, *,
               narrow: bool = False) -> np.ndarray:
        """Indices of the items in ``sentences`` (any iterable of sentence indices), with or without an attractor
        (None: both), at least ``min_distance`` words apart; with ``narrow``, only the narrow definition's."""
        keep = np.isin(self.sentences, np.asarray(list(sentences))) & (self.distance >= min_distance)
        if attracted is not None:
            keep &= self.attracted == attracted
        if narrow:
            keep &= self.narrow
        return np.flatnonzero(keep)

    def rate(self, counts, items) -> np.ndarray:
        """Mean of ``counts`` (items, ...) over ``items``."""
        return np.asarray(counts, dtype=float)[np.asarray(items)].mean(axis=0)

    def interval(self, counts, items, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """95% bootstrap interval of :meth:`rate`, resampling whole sentences (:func:`bootstrap_ratio_interval`)."""
        items = np.asarray(items)
        groups, inverse = np.unique(self.sentences[items], return_inverse=True)
        counts = np.asarray(counts, dtype=float)[items]
        sums = np.zeros((len(groups),) + counts.shape[1:])
        np.add.at(sums, inverse, counts)
        return bootstrap_ratio_interval(sums, np.bincount(inverse).astype(float), seed=seed)

    def to_dict(self, decimals: int = 6) -> dict:
        """JSON-ready lists, shares rounded to ``decimals`` (what ``scripts/ewt_agreement.py`` stores)."""
        return {"sentences": self.sentences.tolist(), "attracted": self.attracted.astype(int).tolist(),
                "distance": self.distance.tolist(), "hits": self.hits.astype(int).tolist(),
                "share": np.round(self.share, decimals).tolist(),
                "to_attractor": self.to_attractor.astype(int).tolist(),
                "nearest_noun": self.nearest_noun.astype(int).tolist(),
                "offset_hits": self.offset_hits.astype(int).tolist(), "narrow": self.narrow.astype(int).tolist()}

    @classmethod
    def from_dict(cls, content: dict) -> AgreementScores:
        """The inverse of :meth:`to_dict`; ``KeyError``, ``TypeError`` or ``ValueError`` on a malformed one."""
        arrays = {key: np.asarray(content[key]) for key in ("sentences", "attracted", "distance", "hits", "share",
                                                             "to_attractor", "nearest_noun", "offset_hits",
                                                             "narrow")}
        n = len(arrays["sentences"])
        if any(value.shape[:1] != (n,) for value in arrays.values()) or arrays["hits"].ndim != 3 or (
                arrays["share"].shape != arrays["hits"].shape):
            raise ValueError("the agreement scores need one row per item in every array")
        return cls(arrays["sentences"].astype(int), arrays["attracted"].astype(bool), arrays["distance"].astype(int),
                   arrays["hits"].astype(float), arrays["share"].astype(float), arrays["to_attractor"].astype(float),
                   arrays["nearest_noun"].astype(float), arrays["offset_hits"].astype(float),
                   arrays["narrow"].astype(bool))


def score_agreement(encoder: MiniLMEncoder, trees: Sequence[UDTree], items: Sequence[AgreementItem], *,
                    batch_size: int = 32) -> AgreementScores:
    """Trace the sentences of ``items`` from their words and score every head and rule on every item (3.2).

    ``trees`` are the sentences the items were found in (:func:`mha.corpora.agreement.agreement_items`).
    """
    check_type("encoder", encoder, MiniLMEncoder, "the pretrained encoder, MiniLMEncoder.load()")
    trees = check_trees("trees", trees)
    items = check_items("items", items, "a list of AgreementItem (mha.corpora.agreement.agreement_items)")
    batch_size = check_whole_number("batch_size", batch_size, minimum=1, meaning="sentences per forward pass")
    for item in items:
        check_type("each item", item, AgreementItem, "an AgreementItem (agreement_items)")
        if not 0 <= item.tree < len(trees) or trees[item.tree].words != item.words:
            raise ValueError(f"an item names sentence {item.tree}, which is not its sentence in trees; give the "
                             "trees the items were found in.")
    config = encoder.config
    shape = (len(items), config.n_layers, config.n_heads)
    hits, share, to_attractor = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    sentences = sorted({item.tree for item in items})
    for first in range(0, len(sentences), batch_size):
        batch = sentences[first:first + batch_size]
        trace = encoder.trace([list(trees[s].words) for s in batch], is_split_into_words=True)
        for index, sentence in enumerate(batch):
            maps = word_attention(trace.attention_maps(index), trace.word_ids[index][: trace.lengths[index]])
            for i in (i for i, item in enumerate(items) if item.tree == sentence):
                hits[i], share[i], to_attractor[i] = verb_row_scores(maps, items[i])
    nearest = np.array([nearest_noun(trees[item.tree], item) == item.subject for item in items])
    offsets = np.array([[item.verb - k == item.subject for k in range(1, MAX_OFFSET + 1)] for item in items])
    return AgreementScores(np.array([item.tree for item in items]), np.array([bool(item.attractors) for item in items]),
                           np.array([item.verb - item.subject for item in items]), hits, share, to_attractor,
                           nearest.astype(float), offsets.astype(float),
                           np.array([item.shows_number and not item.enhanced for item in items], dtype=bool))


@dataclass(frozen=True)
class BinomialPower:
    """What an exact one-sided binomial test on ``n_items`` pairs can detect (3.2): ``critical``, the fewest hits
    whose p-value against ``null_rate`` is at most ``alpha`` (None when even all of them are not); ``power``, the
    chance of reaching it for a head whose true rate is ``rate``; ``smallest_rate``, the smallest true rate reached
    with probability ``target`` (None when none is)."""

    n_items: int
    null_rate: float
    rate: float
    alpha: float
    critical: int | None
    power: float
    target: float
    smallest_rate: float | None


def binomial_power(n_items: int, null_rate: float, rate: float, *, alpha: float = 0.05,
                   target: float = 0.8) -> BinomialPower:
    """The power of the exact one-sided binomial test "a head finds the subject more often than ``null_rate``" on
    ``n_items`` independent pairs, for a head that finds it with probability ``rate``, and the smallest rate it
    detects with probability ``target`` (3.2). Pairs are treated as independent, which holds when nearly each
    comes from its own sentence."""
    n_items = check_whole_number("n_items", n_items, minimum=1, maximum=10**6,
                                 meaning="independent pairs; the test tabulates every count up to it")
    for name, value, low, high in (("null_rate", null_rate, 0, 1), ("rate", rate, 0, 1), ("alpha", alpha, 0, 1),
                                   ("target", target, 0, 1)):
        if not is_real_number(value) or not low <= value <= high or (name in ("alpha", "target") and value in (0, 1)):
            raise ValueError(f"{name} must be a probability {'strictly ' if name in ('alpha', 'target') else ''}"
                             f"between 0 and 1, got {value!r}.")
    tails = binom.sf(np.arange(n_items + 1) - 1, n_items, null_rate)  # P(hits >= k) under the null, k = 0 .. n
    called = np.flatnonzero(tails <= alpha)
    critical = int(called[0]) if called.size else None
    if critical is None:
        return BinomialPower(n_items, float(null_rate), float(rate), float(alpha), None, 0.0, float(target), None)

    def power(r: float) -> float:  # a head that finds the subject with probability r reaches the critical count
        return detection_power(n_items, r, critical)

    smallest = None if power(1.0) < target else float(brentq(lambda r: power(r) - target, 0.0, 1.0, xtol=1e-10))
    return BinomialPower(n_items, float(null_rate), float(rate), float(alpha), critical, power(float(rate)),
                         float(target), smallest)


def attractor_verdict(low: float, high: float, power: float, *, bar: float = 0.5,
                      target: float = 0.8) -> tuple[str, str | None]:
    """The verdict on "a head finds the verb's subject across an attractor" from the chosen head's 95% interval
    ``(low, high)`` on the attractor pairs and the test's ``power`` to detect a head at the ``bar`` (3.2):

    * **holds** when ``low >= bar``;
    * **fails on this model** when ``high < bar`` and ``power >= target``: the test could have found a head at the
      bar, and the interval rules it out;
    * **not shown** otherwise, with the reason as its qualifier: too little power, or an interval that reaches
      the bar.
    """
    for name, value in (("low", low), ("high", high), ("power", power), ("bar", bar), ("target", target)):
        if not is_real_number(value) or not 0 <= value <= 1:
            raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}.")
    if low > high:
        raise ValueError(f"the interval's low end {low!r} is above its high end {high!r}; give (low, high).")
    if low >= bar:
        return "holds", None
    if power < target:
        return "not shown", "too few pairs to detect a head at the bar"
    if high < bar:
        return "fails on this model", None
    return "not shown", "the interval reaches the bar"
