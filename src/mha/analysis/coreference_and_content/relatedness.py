"""Do heads link related words? A crossed sentence design that varies only relatedness (chapter 3).

Pictures of attention often show a line from "Paris" to "France" or from
"doctor" to "nurse", and it is tempting to say that a head "links related
words". To measure it, the section "Content and rare words" of chapter 3
("Empirical head roles") compares sentences that are identical except for
whether two words are related, using a crossed (2 x 2) design. Take two
related pairs (a1, b1) and (a2, b2) of the same kind and one frame with two
slots, and write four sentences::

    related:    frame(a1, b1)   frame(a2, b2)      "my aunt visited paris and then france ..."
    unrelated:  frame(a1, b2)   frame(a2, b1)      "my aunt visited paris and then japan ..."

Every word appears once in a related and once in an unrelated sentence, in
the same slot, so anything that depends on one word alone (a head that
always looks at country names, or at a rare word, or at a position) cancels
in ``mean(related) - mean(unrelated)``; only what depends on the pair
remains. All words here are single word pieces of the model's vocabulary, so
the token positions are the same in all four sentences.

Word lists and frames were written for this book. Slot ``a`` always comes
before slot ``b``; "a -> b" reads the row of ``a`` (query, attends FROM) and
the column of ``b`` (key, attended TO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from mha.core.argument_checks import check_items_of
from mha.core.layouts import WORDS, takes_attention
from mha.core.validation import as_array, as_real_array, check_items, check_rank, check_type, check_whole_number
from mha.corpora.treebank import check_trees

__all__ = ["RELATED_PAIRS", "FRAMES", "CrossedItem", "crossed_items", "slot_weights", "crossed_trace",
           "crossed_slot_weights", "crossed_contrast", "noun_pairs", "word_input_vectors", "pair_cosines"]

#: related word pairs by kind, each pair (a, b); within a kind any a fits any frame with any b
RELATED_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "capital_country": (
        ("paris", "france"), ("tokyo", "japan"), ("rome", "italy"), ("berlin", "germany"),
        ("madrid", "spain"), ("cairo", "egypt"), ("moscow", "russia"), ("beijing", "china"),
        ("athens", "greece"), ("dublin", "ireland"), ("vienna", "austria"), ("warsaw", "poland"),
    ),
    "person_place": (
        ("doctor", "hospital"), ("teacher", "school"), ("chef", "kitchen"), ("pilot", "airport"),
        ("farmer", "farm"), ("judge", "court"), ("priest", "church"), ("waiter", "restaurant"),
        ("banker", "bank"), ("sailor", "ship"), ("actor", "theatre"), ("clerk", "office"),
    ),
    "associates": (
        ("cat", "dog"), ("king", "queen"), ("knife", "fork"), ("salt", "pepper"),
        ("bread", "butter"), ("pen", "paper"), ("sun", "moon"), ("lock", "key"),
        ("needle", "thread"), ("table", "chair"), ("doctor", "nurse"), ("shoe", "sock"),
    ),
}

#: frames with an {a} slot before a {b} slot, chosen so that related and unrelated fillers read equally well
FRAMES: dict[str, tuple[str, ...]] = {
    "capital_country": (
        "my aunt visited {a} and then {b} last summer .",
        "he showed me photos of {a} and of {b} .",
        "she talked about {a} before she talked about {b} .",
    ),
    "person_place": (
        "the {a} walked slowly into the {b} .",
        "yesterday the {a} stood near the {b} .",
        "the {a} was waiting outside the {b} .",
    ),
    "associates": (
        "she drew the {a} and the {b} on the card .",
        "we could see the {a} but not the {b} .",
        "the word {a} came before the word {b} on the list .",
    ),
}


@dataclass(frozen=True)
class CrossedItem:
    """Four sentences of one crossed design: related (a1 b1), (a2 b2) then unrelated (a1 b2), (a2 b1) (chapter 3).

    ``sentences`` holds four word tuples in that order; ``slot_a`` and
    ``slot_b`` are the word indices of the two slots, the same in all four.
    """

    kind: str
    frame: str
    pairs: tuple[tuple[str, str], tuple[str, str]]
    sentences: tuple[tuple[str, ...], ...]
    slot_a: int
    slot_b: int

    @property
    def unit(self) -> str:
        """The two crossed pairs, e.g. ``"capital_country:paris-france/tokyo-japan"``, shared by every frame."""
        (a1, b1), (a2, b2) = self.pairs
        return f"{self.kind}:{a1}-{b1}/{a2}-{b2}"

    @property
    def labels(self) -> tuple[str, str, str, str]:
        (a1, b1), (a2, b2) = self.pairs
        return (f"{a1}-{b1}", f"{a2}-{b2}", f"{a1}-{b2}", f"{a2}-{b1}")


def _fill(frame: str, a: str, b: str) -> tuple[tuple[str, ...], int, int]:
    words = frame.split()
    slot_a, slot_b = words.index("{a}"), words.index("{b}")
    words[slot_a], words[slot_b] = a, b
    words[0] = words[0].capitalize() if slot_a != 0 else words[0]
    return tuple(words), slot_a, slot_b


def crossed_items(kinds: Sequence[str] | None = None) -> list[CrossedItem]:
    """Every crossed item: for each kind, frame and pair i, pair i is crossed with pair i + 1 (cyclically).

    Returns ``len(frames) * len(pairs)`` items per kind (3 * 12 = 36, 108 in
    all), the same on every call. Chapter 3, "Content and rare words".
    """
    kinds = list(RELATED_PAIRS) if kinds is None else list(check_items_of("kinds", kinds, str, "a kind (text)"))
    unknown = [k for k in kinds if k not in RELATED_PAIRS]
    if unknown:
        raise ValueError(f"unknown kinds {unknown}; choose from {', '.join(RELATED_PAIRS)}.")
    items = []
    for kind in kinds:
        pairs = RELATED_PAIRS[kind]
        for frame in FRAMES[kind]:
            for i, (a1, b1) in enumerate(pairs):
                a2, b2 = pairs[(i + 1) % len(pairs)]
                filled = [_fill(frame, a, b) for a, b in ((a1, b1), (a2, b2), (a1, b2), (a2, b1))]
                items.append(CrossedItem(kind, frame, ((a1, b1), (a2, b2)), tuple(f[0] for f in filled),
                                         filled[0][1], filled[0][2]))
    return items


@takes_attention(word_maps=WORDS.with_leading(6))
def slot_weights(word_maps: np.ndarray, source: int, target: int) -> np.ndarray:
    """The weight from the ``source`` word's row to the ``target`` word's column: (..., words, words) -> (...).

    Chapter 3, "Content and rare words".
    """
    word_maps = as_real_array("word_maps", word_maps)
    n = word_maps.shape[-1] if word_maps.ndim else 0
    source = check_whole_number("source", source, meaning="the source word's index")
    target = check_whole_number("target", target, meaning="the target word's index")
    if word_maps.ndim < 2 or word_maps.shape[-2] != n or not (0 <= source < n and 0 <= target < n):
        raise ValueError(f"word_maps {word_maps.shape} should be (..., words, words) and the slots {source}, {target} "
                         f"word indices in 0..{n - 1}.")
    return word_maps[..., source, target]


def crossed_trace(encoder, items: Sequence[CrossedItem]):
    """Run ``encoder`` once on the four sentences of every item of ``items`` (in order: item, then sentence).

    Returns the :class:`mha.pretrained.traces.EncoderTrace`; ``ValueError`` if ``items`` is empty or the tokenizer
    cuts a word into pieces (the crossed design needs every position to be the same in the four sentences).
    Chapter 3, "Content and rare words".
    """
    items = list(check_items_of("items", items, CrossedItem, "a CrossedItem, e.g. from crossed_items()"))
    if not items:
        raise ValueError("items must be a non-empty list of CrossedItem objects, e.g. crossed_items().")
    sentences = [list(words) for item in items for words in item.sentences]
    trace = encoder.trace(sentences, is_split_into_words=True)
    split = [i for i, words in enumerate(sentences) if trace.lengths[i] != len(words) + 2]
    if split:
        raise ValueError(f"the tokenizer cut a word of sentence {split[0]} into pieces; the crossed design needs "
                         "single-piece words so that every position is the same in the four sentences.")
    return trace


def crossed_slot_weights(encoder, items: Sequence[CrossedItem], trace=None) -> np.ndarray:
    """Every head's word-level weight between the two slots of every sentence of ``items``, in both directions.

    Runs ``encoder`` (a :class:`mha.pretrained.encoder.MiniLMEncoder`) once on the four sentences of each item
    (:func:`crossed_trace`; pass its ``trace`` to reuse one already made) and returns (items, 4, 2, layers, heads):
    sentence in the order of :class:`CrossedItem`, then direction (0: row ``a`` -> column ``b``, 1: row ``b`` ->
    column ``a``), read from :func:`mha.pretrained.word_maps.word_attention` maps. :func:`crossed_contrast` turns it
    into related minus unrelated. Chapter 3, "Content and rare words"; chapter 4, "Layer dependence".
    """
    from mha.pretrained.word_maps import word_attention

    items = list(check_items_of("items", items, CrossedItem, "a CrossedItem, e.g. from crossed_items()"))
    trace = crossed_trace(encoder, items) if trace is None else trace
    if len(trace.lengths) != 4 * len(items):
        raise ValueError(f"the trace holds {len(trace.lengths)} sentences but {len(items)} items have "
                         f"{4 * len(items)}; pass crossed_trace(encoder, items) for these items.")
    n_layers, n_heads = trace.attention_weights.shape[0], trace.attention_weights.shape[2]
    weights = np.zeros((len(items), 4, 2, n_layers, n_heads))  # (items, sentence, direction, layers, heads)
    for k, item in enumerate(items):
        for j in range(4):
            index = 4 * k + j
            maps = word_attention(trace.attention_maps(index), trace.word_ids[index][: trace.lengths[index]])
            weights[k, j, 0] = slot_weights(maps, item.slot_a, item.slot_b)  # row a, column b
            weights[k, j, 1] = slot_weights(maps, item.slot_b, item.slot_a)  # row b, column a
    return weights


def crossed_contrast(weights) -> np.ndarray:
    """Related minus unrelated, per crossed item: (items, 4, heads...) -> (items, heads...).

    ``weights[:, 0:2]`` are the two related sentences and ``weights[:, 2:4]``
    the two unrelated ones (the order of :class:`CrossedItem`); the result is
    the mean of the first two minus the mean of the last two, in which every
    single word's own effect cancels. Chapter 3, "Content and rare words".
    """
    weights = as_real_array("weights", weights)
    if weights.ndim < 2 or weights.shape[1] != 4:
        raise ValueError(f"weights has shape {weights.shape}; give (items, 4, heads...) with the sentences in the "
                         "order related (a1 b1), related (a2 b2), unrelated (a1 b2), unrelated (a2 b1).")
    return weights[:, :2].mean(axis=1) - weights[:, 2:].mean(axis=1)


def noun_pairs(trees, *, upos: Sequence[str] = ("NOUN", "PROPN")):
    """Every pair of nouns in each sentence of a treebank, for relatedness on real text (3.1, 3.4).

    ``trees`` are :class:`mha.corpora.treebank.UDTree` objects
    (:func:`mha.corpora.treebank.read_ud_trees`). Returns
    :class:`mha.analysis.head_roles.long_range.WordPair` objects of kind ``"noun_noun"``, earlier word first, for every
    two words whose UPOS is in ``upos`` and whose lower-cased forms differ (a word repeated is not a pair of related
    words). Real text has no gold "related" label; :func:`pair_cosines` gives a stand-in.
    """
    trees = check_trees("trees", trees)
    from mha.analysis.head_roles.long_range import WordPair

    wanted = set(upos)
    pairs = []
    for s, tree in enumerate(trees):
        nouns = [i for i, tag in enumerate(tree.upos) if tag in wanted]
        for x, first in enumerate(nouns):
            for second in nouns[x + 1:]:
                if tree.words[first].lower() != tree.words[second].lower():
                    pairs.append(WordPair(s, first, second, "noun_noun"))
    return pairs


def word_input_vectors(tokens: Sequence[str], word_ids: Sequence[int | None], embeddings: np.ndarray,
                       vocabulary: dict[str, int]) -> np.ndarray:
    """Each word's input embedding: the mean of its word pieces' rows of ``embeddings`` (3.1, 3.4).

    ``tokens`` and ``word_ids`` describe one encoded sentence (special tokens have word id None and are
    skipped); ``embeddings`` is the model's (vocabulary, d_model) word-embedding matrix and ``vocabulary`` maps
    a piece to its row. Returns (words, d_model).
    """
    tokens = check_items_of("tokens", tokens, str, "a token, as text")
    word_ids = check_items_of("word_ids", word_ids, (int, np.integer, type(None)), "a word index, or None for [CLS]")
    if len(word_ids) != len(tokens):
        raise ValueError(f"tokens has {len(tokens)} entries and word_ids {len(word_ids)}; give one word id per token.")
    embeddings = as_array("embeddings", embeddings)  # (vocabulary, d_model), in its own dtype
    check_rank("embeddings", embeddings.shape, (2,), "(vocabulary, d_model): one row per word piece")
    check_type("vocabulary", vocabulary, Mapping, "the tokenizer's vocabulary, a dict of piece -> row")
    rows: dict[int, list[int]] = {}
    for token, word in zip(tokens, word_ids, strict=True):
        if word is None:
            continue
        if token not in vocabulary:
            raise ValueError(f"word piece {token!r} is not in the vocabulary; pass the tokenizer's vocabulary "
                             "(mha.pretrained.tokenizer.load_wordpieces().vocabulary()).")
        rows.setdefault(int(word), []).append(vocabulary[token])
    if sorted(rows) != list(range(len(rows))):
        raise ValueError("word_ids must number the words 0, 1, 2, ... without gaps.")
    return np.stack([embeddings[rows[w]].mean(axis=0) for w in range(len(rows))])


def pair_cosines(pairs, vectors: Sequence[np.ndarray]) -> np.ndarray:
    """Cosine similarity of the two words of each pair, from per-sentence word vectors (3.1, 3.4).

    ``vectors[s]`` is (words, d) for sentence ``s`` (e.g. :func:`word_input_vectors`). Returns (pairs,).
    """
    from mha.analysis.head_roles.long_range import WordPair

    pairs = check_items_of("pairs", pairs, WordPair, "a WordPair, e.g. from noun_pairs(trees)")
    vectors = check_items("vectors", vectors, "one (words, d) array of word vectors per sentence")
    cosines = []
    for pair in pairs:
        a, b = vectors[pair.sentence][pair.first], vectors[pair.sentence][pair.second]
        cosines.append(float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b))))
    return np.array(cosines)
