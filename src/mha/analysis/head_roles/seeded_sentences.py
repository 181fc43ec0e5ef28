"""Treebank sentences drawn by a seed, and all-MiniLM-L6-v2's relation hits on them: the real test inputs of the
exercises' checks (3.2's held-out head, 4.3's in :mod:`mha.exercises.layers_and_probing`, 4.1's sentences in
:mod:`mha.exercises.caveats`), so that a hidden seed asks about other sentences than the public case."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mha.analysis.head_roles.relations import RelationHits, relation_hits
from mha.core.validation import check_seed, check_whole_number
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
from mha.pretrained.corpus_encoding import encode_records
from mha.pretrained.encoder import MiniLMEncoder

__all__ = ["CASE_SENTENCES", "RELATIONS", "treebank_relation_hits", "treebank_sentences"]

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
