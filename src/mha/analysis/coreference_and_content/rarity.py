"""How rare is a token, and does a head look at the rarest one? (chapter 3, "Content and rare words")

Voita et al. (2019) found, in a translation encoder, a head whose largest
weight falls on the least frequent token of the sentence. To look for such
a head in all-MiniLM-L6-v2 we need a token's frequency, and the book
downloads nothing, so we use proxies and say what each one gets wrong:

* :func:`vocabulary_rank`: the position of the token in the model's
  WordPiece vocabulary. From ``the`` (id 1996) onwards the BERT uncased
  vocabulary lists whole words roughly from most to least frequent in the
  text it was built from (``the``, ``of``, ``and``, ``in``, ``to`` ...), so a
  larger id means a rarer token. This is read off the file, not documented;
  it says nothing about the sentence-similarity data the model was later
  trained on; and ids below ``the`` (single characters and punctuation) are
  not in frequency order, so they get rank 0 (treated as the most common).
* :func:`count_rarity`: minus the number of times a token occurs in a
  reference text we choose (for example the book's own corpus): exact for that
  text, but a small text makes most content words tie at one or two.
* :func:`split_words`: words the tokenizer cuts into several pieces are rarer
  than words it keeps whole; a coarse yes/no with many exceptions.

:func:`extreme_hit_rates` then asks, for every head, how often a word
piece's most-attended word piece is the rarest (or the most common) one of
the sentence, next to the rate a random choice would get.

:func:`weight_from_queries` asks the other direction, the one of the claim that some heads attend *from* rare
tokens *to* common, informative ones: for each head, the weight that chosen queries (rare word pieces) send to
chosen keys (common content words), next to the weight that other queries of the same sentences send there
(:class:`QueryWeights`).

The module also holds the controlled sentences of the section: the same
frames filled once with a common and once with a rare noun, all single word
pieces so positions do not move (:func:`rare_common_items`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mha.core.argument_checks import check_items_of
from mha.core.layouts import LAYERS_HEADS, QUERY_KEY, takes_attention
from mha.core.validation import as_real_array, check_items, check_type

__all__ = [
    "vocabulary_rank",
    "count_tokens",
    "count_rarity",
    "split_words",
    "ExtremeHits",
    "extreme_hit_rates",
    "QueryWeights",
    "weight_from_queries",
    "COMMON_NOUNS",
    "RARE_NOUNS",
    "RARE_WORD_FRAMES",
    "RareCommonItem",
    "rare_common_items",
]


def vocabulary_rank(tokens: Sequence[str], vocabulary: dict[str, int], *, first_word: str = "the") -> np.ndarray:
    """A rarity score from the vocabulary order: token id minus the id of ``first_word`` (chapter 3).

    ``tokens`` (n,) are word pieces, ``vocabulary`` maps piece -> id (the
    tokenizer's ``get_vocab()``). Larger = rarer. Pieces with an id below
    ``first_word`` (single characters, punctuation) get 0, as if very common;
    special tokens (``[CLS]``, ``[SEP]``, ``[PAD]``, ``[MASK]``, ``[UNK]``) and
    pieces not in the vocabulary get NaN. Returns (n,) floats.
    """
    tokens = check_items_of("tokens", tokens, str, "a word piece, as text")
    check_type("vocabulary", vocabulary, Mapping, "the tokenizer's vocabulary, a dict of piece -> id (get_vocab())")
    check_type("first_word", first_word, str, "the first whole word of the vocabulary, as text")
    if first_word not in vocabulary:
        raise ValueError(f"{first_word!r} is not in the vocabulary; give the first whole word of a frequency-"
                         "ordered vocabulary.")
    start = vocabulary[first_word]
    ranks = []
    for token in tokens:
        if token not in vocabulary or (token.startswith("[") and token.endswith("]")):
            ranks.append(np.nan)
        else:
            ranks.append(float(max(vocabulary[token] - start, 0)))
    return np.array(ranks)


def count_tokens(token_lists: Iterable[Sequence[str]], *, skip: Iterable[str] = ("[CLS]", "[SEP]", "[PAD]")) -> Counter:
    """How often each token occurs over a reference text given as lists of tokens (chapter 3)."""
    token_lists = check_items("token_lists", token_lists, "a list of token lists, one per sentence")
    token_lists = [check_items_of(f"token_lists[{i}]", tokens, str, "a token, as text")
                   for i, tokens in enumerate(token_lists)]
    skip = set(check_items_of("skip", skip, str, "a token to leave out, as text"))
    return Counter(t for tokens in token_lists for t in tokens if t not in skip)


def count_rarity(tokens: Sequence[str], counts: Counter) -> np.ndarray:
    """A rarity score from counts: minus the token's count in the reference text (unseen tokens: 0) (chapter 3).

    Larger = rarer, as for :func:`vocabulary_rank`. Returns (n,) floats.
    """
    tokens = check_items_of("tokens", tokens, str, "a token, as text")
    check_type("counts", counts, Mapping, "the counts of a reference text, e.g. count_tokens(token_lists)")
    return -np.array([float(counts.get(t, 0)) for t in tokens])


def split_words(word_ids: Sequence[int | None]) -> np.ndarray:
    """For each token: 1.0 if its word was cut into several pieces, 0.0 if not, NaN for special tokens (chapter 3).

    A coarse rarity score (larger = rarer) of the same shape as the others, (n,).
    """
    word_ids = check_items("word_ids", word_ids, "the word ids of a sentence, one per token (None for special tokens)")
    pieces = Counter(w for w in word_ids if w is not None)
    return np.array([np.nan if w is None else float(pieces[w] > 1) for w in word_ids])


@dataclass(frozen=True)
class ExtremeHits:
    """For each head: rows whose most-attended key is an extreme token, and the random expectation (chapter 3).

    ``hits`` (heads...) counts content rows whose argmax over content keys is
    a token with the extreme rarity; ``expected`` (scalar) is the number a
    uniformly random choice among the content keys would hit on average;
    ``rows`` is the number of rows scored. Add several sentences' results
    with ``+``.
    """

    hits: np.ndarray
    expected: float
    rows: int

    def __add__(self, other: ExtremeHits) -> ExtremeHits:
        return ExtremeHits(self.hits + other.hits, self.expected + other.expected, self.rows + other.rows)

    @property
    def rate(self) -> np.ndarray:
        return self.hits / self.rows

    @property
    def chance(self) -> float:
        return self.expected / self.rows


@takes_attention(attention=QUERY_KEY.with_leading(6))
def extreme_hit_rates(attention: np.ndarray, rarity: Sequence[float], *, which: str = "rarest") -> ExtremeHits:
    """Does each head's most-attended token tend to be the rarest (or commonest) token of the sentence? (chapter 3)

    ``attention`` (..., n, n), rows = queries (attend FROM), columns = keys
    (attended TO); ``rarity`` (n,), larger = rarer, NaN for tokens to leave
    out ([CLS], [SEP]). Rows and keys are the tokens with a finite rarity;
    for each such row the argmax is taken over those keys only (ties: the
    first). A row hits when that key's rarity is the sentence's maximum
    (``which="rarest"``) or minimum (``"commonest"``); several tokens may
    share it. The random expectation per row is (tokens with the extreme
    value) / (keys).
    """
    attention = as_real_array("attention", attention)
    rarity = as_real_array("rarity", rarity)
    n = attention.shape[-1] if attention.ndim else 0
    if attention.ndim < 2 or attention.shape[-2] != n or rarity.shape != (n,):
        raise ValueError(f"attention {attention.shape} should be (..., n, n) and rarity ({n},), got {rarity.shape}.")
    if which not in ("rarest", "commonest"):
        raise ValueError(f"which must be 'rarest' or 'commonest', got {which!r}.")
    scored = np.isfinite(rarity)  # (n,)
    if scored.sum() < 2:
        raise ValueError("at least two tokens need a finite rarity to say which is the rarest.")
    extreme_value = rarity[scored].max() if which == "rarest" else rarity[scored].min()
    extreme = scored & (rarity == extreme_value)  # (n,)
    keys = np.flatnonzero(scored)
    rows = attention[..., scored, :][..., keys]  # (..., scored rows, scored keys)
    top = keys[rows.argmax(axis=-1)]  # (..., scored rows): the key each row attends to most
    hits = extreme[top].sum(axis=-1)  # (...)
    n_rows = int(scored.sum())
    return ExtremeHits(hits=hits, expected=n_rows * extreme.sum() / len(keys), rows=n_rows)


@dataclass(frozen=True)
class QueryWeights:
    """Per sentence, the weight two groups of queries send to a set of keys, summed over each group (chapter 3).

    ``sums`` (sentences, 2, layers, heads): for group 0 (e.g. rare queries) and group 1 (the baseline queries),
    the sum over the group's queries of each query's total weight on the target keys; ``counts`` (sentences, 2):
    how many queries each group has. :meth:`excess` pools them over sentences.
    """

    sums: np.ndarray
    counts: np.ndarray

    def mean(self, weights: np.ndarray | None = None) -> np.ndarray:
        """(2, layers, heads): each group's mean weight on the targets per query, sentences weighted by ``weights``."""
        weights = np.ones(len(self.counts)) if weights is None else np.asarray(weights, dtype=float)
        totals = np.einsum("s,sglh->glh", weights, self.sums)  # (2, layers, heads)
        return totals / (weights @ self.counts)[:, None, None]

    def excess(self, weights: np.ndarray | None = None) -> np.ndarray:
        """(layers, heads): group 0's mean minus group 1's; ``weights`` (sentences,) are the resample counts of
        :func:`mha.analysis.popular_story.unit_bootstrap` (all ones by default)."""
        group, baseline = self.mean(weights)
        return group - baseline


@takes_attention(attention=LAYERS_HEADS)
def weight_from_queries(attention: np.ndarray, word_ids: Sequence[int | None], queries: np.ndarray,
                        baseline: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each query's total weight on the target keys, summed over two groups of queries, for one sentence (chapter 3).

    ``attention`` (layers, heads, n, n), rows = queries (attend FROM); ``word_ids`` (n,) (None for special tokens);
    ``queries``, ``baseline`` and ``targets`` are boolean masks (n,): the queries studied (e.g. rare word pieces),
    the queries they are compared with, and the keys (e.g. common content words). A query's weight on the keys of
    its own word is left out (a piece of a split word looks at its other pieces for reasons of its own). Returns
    ``sums`` (2, layers, heads) and ``counts`` (2,), as one sentence's entries of :class:`QueryWeights`.
    """
    attention = as_real_array("attention", attention)
    word_ids = check_items("word_ids", word_ids, "the word ids of a sentence, one per token (None for special tokens)")
    n = len(word_ids)
    masks = []
    for name, mask in (("queries", queries), ("baseline", baseline), ("targets", targets)):
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (n,):
            raise ValueError(f"{name} must be a boolean mask of shape ({n},), one entry per token, got "
                             f"{mask.dtype} {mask.shape}.")
        masks.append(mask)
    queries, baseline, targets = masks
    if attention.ndim != 4 or attention.shape[-2:] != (n, n):
        raise ValueError(f"attention has shape {attention.shape}; it should be (layers, heads, {n}, {n}) for the "
                         f"{n} tokens of word_ids.")
    words = np.array([-1 if w is None else w for w in word_ids])  # (n,)
    keys = targets[None, :] & ~((words[:, None] == words[None, :]) & (words[:, None] >= 0))  # (n, n): own word out
    on_targets = (attention * keys).sum(axis=-1)  # (layers, heads, n): each query's weight on its target keys
    sums = np.stack([on_targets[..., group].sum(axis=-1) for group in (queries, baseline)])  # (2, layers, heads)
    return sums, np.array([queries.sum(), baseline.sum()], dtype=float)


# --- controlled sentences: the same frame with a common or a rare noun ------------------------------
# All single word pieces. Common nouns have vocabulary ranks below 4100, rare ones above 11500
# (vocabulary ids 2338..6045 and 13541..29242).
COMMON_NOUNS: tuple[str, ...] = (
    "book", "cup", "phone", "key", "chair", "ball", "letter", "picture", "bag", "clock", "coat", "knife",
    "bottle", "hat",
)
RARE_NOUNS: tuple[str, ...] = (
    "kettle", "briefcase", "microscope", "pendant", "medallion", "kite", "harmonica", "wallet", "flashlight",
    "cassette", "candle", "tuba", "harpsichord", "pendulum",
)
RARE_WORD_FRAMES: tuple[str, ...] = (
    "the old man found the {} under the bed .",
    "she put the {} on the table and left .",
    "my brother bought a new {} last week .",
    "we looked at the {} for a long time .",
)


@dataclass(frozen=True)
class RareCommonItem:
    """One frame filled with a common noun and with a rare noun at the same word index ``slot`` (chapter 3)."""

    frame: str
    common: str
    rare: str
    sentences: tuple[tuple[str, ...], tuple[str, ...]]  # (common version, rare version)
    slot: int


def rare_common_items() -> list[RareCommonItem]:
    """Every frame with every (common, rare) noun pair, paired by list position: 4 * 14 = 56 items (chapter 3)."""
    items = []
    for frame in RARE_WORD_FRAMES:
        words = frame.split()
        slot = words.index("{}")
        for common, rare in zip(COMMON_NOUNS, RARE_NOUNS, strict=True):
            versions = []
            for noun in (common, rare):
                filled = list(words)
                filled[slot] = noun
                filled[0] = filled[0].capitalize()
                versions.append(tuple(filled))
            items.append(RareCommonItem(frame, common, rare, (versions[0], versions[1]), slot))
    return items
