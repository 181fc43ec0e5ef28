"""Treebank sentences drawn by a seed, and all-MiniLM-L6-v2's relation hits on them: the real test inputs of the
exercises' checks (3.2's held-out head, 4.3's in :mod:`mha.exercises.layers_and_probing`, 4.1's sentences in
:mod:`mha.exercises.caveats`), so that a hidden seed asks about other sentences than the public case.

The checks whose learner runs the model itself draw their cases here too: :func:`previous_token_cases` (3.1, a
sentence and a head) and :func:`relation_pair_case` (3.2, a treebank sentence, its gold pairs and two heads, with
every head's accuracy on them from :func:`pair_accuracies`, read right and read the classic wrong ways)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mha.analysis.head_roles.relations import RelationHits, relation_hits
from mha.analysis.head_roles.role_table import RELATION_DIRECTIONS
from mha.core.validation import check_seed, check_type, check_whole_number
from mha.corpora.annotation import AnnotatedSentence
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
from mha.pretrained.corpus_encoding import encode_records
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.word_maps import word_attention

__all__ = ["CASE_SENTENCES", "RELATIONS", "pair_accuracies", "previous_token_cases", "relation_pair_case",
           "treebank_relation_hits", "treebank_sentences"]

CASE_SENTENCES = 40  # treebank sentences per seed: enough pairs for every common relation, quick to encode


RELATIONS = ("det_noun", "adj_noun", "subj_verb", "obj_verb", "obj_prep", "aux_verb")  # each with >= 10 pairs


@lru_cache(maxsize=1)
def _treebank_sentences() -> tuple:
    return tuple(s for s in read_conllu(EWT_DEV_PATH) if 8 <= len(s.words) <= 25)


def treebank_sentences(seed: int, count: int) -> list:
    """``count`` EWT dev sentences of 8 to 25 words, drawn without replacement with ``seed``."""
    seed = check_seed("seed", seed)
    sentences = _treebank_sentences()
    count = check_whole_number("count", count, 1, len(sentences), meaning="sentences to draw")
    return [sentences[i] for i in np.random.default_rng(seed).choice(len(sentences), count, replace=False)]


def treebank_relation_hits(seed: int = 0) -> RelationHits:
    """all-MiniLM-L6-v2's relation hits (:func:`~mha.analysis.head_roles.relations.relation_hits`, row mode) on
    :data:`CASE_SENTENCES` EWT dev sentences of 8 to 25 words drawn with ``seed``: hits (40, relations, 6, 12)."""
    return _treebank_relation_hits(check_seed("seed", seed))


@lru_cache(maxsize=4)
def _treebank_relation_hits(seed: int) -> RelationHits:
    return relation_hits(encode_records(MiniLMEncoder.load(), treebank_sentences(seed, CASE_SENTENCES)))


TOUR_SENTENCE = "The keys to the old cabinet are on the table ."  # 3.1's sentence


def previous_token_cases(seed: int = 0) -> list[tuple[str, int, int]]:
    """Two ``(sentence, layer, head)`` cases: with seed 0, 3.1's sentence with its previous-token head L0H2 and its
    next-token head L1H8; with another seed, two EWT dev sentences drawn with it, each with a head drawn with it."""
    seed = check_seed("seed", seed)
    if seed == 0:
        return [(TOUR_SENTENCE, 0, 2), (TOUR_SENTENCE, 1, 8)]
    rng = np.random.default_rng(seed)
    config = MiniLMEncoder.load().config
    return [(sentence.text, int(rng.integers(config.n_layers)), int(rng.integers(config.n_heads)))
            for sentence in treebank_sentences(20_000 + seed, 2)]


def gold_pairs(sentence: AnnotatedSentence) -> list[tuple[int, int]]:
    """Every gold (source, target) word pair of ``sentence`` whose kind 3.2 scores, in the sentence's order."""
    kinds = {kind for _, kind, _ in RELATION_DIRECTIONS}
    return [(r.source, r.target) for r in sentence.relations if r.kind in kinds]


def pair_accuracies(encoder: MiniLMEncoder, sentence: AnnotatedSentence) -> dict[str, np.ndarray]:
    """Every head's accuracy (layers, heads) on the gold pairs of ``sentence`` (:func:`gold_pairs`), each pair read
    from its source word's row as in 3.2: ``"row"`` is the reference (:func:`relation_hits`, pooled over the
    source-to-target directions), the others the classic slips: ``"column"`` the argmax over the source's column
    (rows and columns swapped), ``"self"`` a word's own column left in the argmax, ``"tokens"`` the token map read
    at the word indices without merging the pieces (self excluded)."""
    encoder = check_encoder(encoder)
    sentence = check_type("sentence", sentence, AnnotatedSentence, "a gold sentence, e.g. read_conllu(...)[0]")
    pairs = gold_pairs(sentence)
    if not pairs:
        raise ValueError("sentence has no gold pair of the kinds 3.2 scores; choose one with relations.")
    record = encode_records(encoder, [sentence])[0]
    forward = [r for r, (_, _, direction) in enumerate(RELATION_DIRECTIONS) if direction == "source_to_target"]
    accuracies = {}
    for mode in ("row", "column"):
        hits = relation_hits([record], mode=mode)
        accuracies[mode] = hits.hits[0, forward].sum(0) / hits.pairs[0, forward].sum()  # (layers, heads)
    sources, targets = np.array(pairs).T  # (pairs,), (pairs,)
    tokens = np.asarray(record.attention, dtype=float)  # (layers, heads, seq, seq)
    words = word_attention(tokens, record.word_ids)  # (layers, heads, n_words, n_words)
    token_guess = np.where(np.eye(len(tokens[0, 0]), dtype=bool), -np.inf, tokens).argmax(-1)  # (layers, heads, seq)
    accuracies["self"] = (words.argmax(-1)[..., sources] == targets).mean(-1)
    accuracies["tokens"] = (token_guess[..., sources] == targets).mean(-1)
    return accuracies


def relation_pair_case(seed: int = 0) -> tuple[AnnotatedSentence, list[tuple[int, int]], list[tuple[int, int]],
                                               dict[str, np.ndarray]]:
    """An EWT dev sentence drawn with ``seed`` with at least 5 gold pairs, its pairs (:func:`gold_pairs`), two heads
    ``(layer, head)`` on which the reference and the three slips of :func:`pair_accuracies` all give different
    accuracies (so each slip can be named), and those accuracies (every head's)."""
    seed = check_seed("seed", seed)
    encoder = MiniLMEncoder.load()
    rng = np.random.default_rng(seed)
    candidates = [s for s in treebank_sentences(30_000 + seed, 60) if len(gold_pairs(s)) >= 5]
    for sentence in candidates:
        accuracies = pair_accuracies(encoder, sentence)
        values = np.stack(list(accuracies.values()), axis=-1)  # (layers, heads, 4)
        gaps = np.abs(values[..., :, None] - values[..., None, :]) + np.eye(values.shape[-1])
        usable = np.argwhere(gaps.min(axis=(-1, -2)) > 1e-9)  # heads where all four readings differ
        if len(usable) >= 2:
            chosen = usable[rng.choice(len(usable), 2, replace=False)]
            return sentence, gold_pairs(sentence), [tuple(int(i) for i in head) for head in chosen], accuracies
    raise RuntimeError(f"no drawn sentence separates the readings for seed {seed}; try another seed.")
