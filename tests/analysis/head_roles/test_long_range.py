"""Bridging and copying heads (3.1): long-range pairs from UD trees, controls and distance-matched lifts."""

from __future__ import annotations

import numpy as np
import pytest

from mha.analysis.head_roles.long_range import (
    WordPair,
    distance_baseline,
    form_matched_controls,
    long_arcs,
    pair_lifts,
    paired_constructions,
)
from mha.corpora.treebank import EWT_DEV_PATH, SAMPLE_TREEBANK_PATH, UDTree, read_conllu, read_ud_trees


def tree(words, heads, deprels, upos=None):
    return UDTree(tuple(words), tuple(upos or ["X"] * len(words)), tuple(heads), tuple(deprels))


# "if it rains then we stay": if -> rains (mark), rains -> stay (advcl), then -> stay (advmod)
IF_THEN = tree(["if", "it", "rains", "then", "we", "stay"], [2, 2, 5, 5, 5, -1],
               ["mark", "nsubj", "advcl", "advmod", "nsubj", "root"])
# "either tea or coffee": either -> tea (cc:preconj), or -> coffee (cc), coffee -> tea (conj)
EITHER_OR = tree(["either", "tea", "or", "coffee"], [1, -1, 3, 1], ["cc:preconj", "root", "cc", "conj"])


def test_paired_constructions_finds_if_then_and_correlatives():
    pairs = paired_constructions([IF_THEN, EITHER_OR])
    assert pairs == [WordPair(0, 0, 3, "if_then"), WordPair(1, 0, 2, "either_or")]
    assert pairs[0].distance == 3


def test_a_then_in_another_clause_is_not_paired():
    # then attached to a different word than the one the if-clause depends on
    other = tree(["if", "it", "rains", "we", "stay", "then", "go"], [2, 2, 4, 4, -1, 6, 4],
                 ["mark", "nsubj", "advcl", "nsubj", "root", "advmod", "conj"])
    assert paired_constructions([other]) == []


def test_trees_line_up_with_the_annotated_sentences():
    trees, sentences = read_ud_trees(SAMPLE_TREEBANK_PATH), read_conllu(SAMPLE_TREEBANK_PATH)
    assert [t.words for t in trees] == [s.words for s in sentences]
    assert all(sum(h < 0 for h in t.heads) == 1 for t in trees)


@pytest.mark.slow
def test_the_treebank_holds_a_few_textbook_pairs():
    pairs = paired_constructions(read_ud_trees(EWT_DEV_PATH))
    kinds = {p.kind for p in pairs}
    assert "if_then" in kinds and "either_or" in kinds
    assert 5 <= len(pairs) <= 100


def test_long_arcs_respect_distance_and_skip_punctuation():
    t = tree(["a", "b", "c", "d", "e", "f", "g", "."], [6, 6, 6, 6, 6, 6, -1, 6],
             ["nsubj", "x", "x", "x", "x", "x", "root", "punct"])
    arcs = long_arcs([t], min_distance=6)
    assert arcs == [WordPair(0, 0, 6, "nsubj")]
    assert len(long_arcs([t], min_distance=1)) == 6
    with pytest.raises(ValueError, match="min_distance"):
        long_arcs([t], min_distance=0)


def test_controls_use_the_same_later_word_without_a_partner():
    unpaired_then = tree(
        ["we", "ate", "and", "then", "left"], [1, -1, 4, 4, 1], ["nsubj", "root", "cc", "advmod", "conj"]
    )
    pairs = paired_constructions([IF_THEN, unpaired_then])
    controls = form_matched_controls([IF_THEN, unpaired_then], pairs)
    assert controls == [WordPair(1, 0, 3, "control_if_then")]  # distance 3, as the only pair's


def test_distance_baseline_and_lifts_on_a_known_map():
    n = 4
    previous = np.zeros((1, 2, n, n))  # head 0 looks at the previous word, head 1 at itself
    for q in range(n):
        previous[0, 0, q, max(q - 1, 0)] = 1.0
        previous[0, 1, q, q] = 1.0
    baseline = distance_baseline([previous])
    assert baseline.shape == (2, n, 1, 2)
    assert baseline[0, 1, 0, 0] == pytest.approx(1.0)  # one word back: always, for head 0
    assert baseline[0, 2, 0, 0] == pytest.approx(0.0)
    assert baseline[0, 0, 0, 1] == pytest.approx(1.0)  # itself, for head 1
    weights, lifts = pair_lifts([previous], [WordPair(0, 1, 2, "x"), WordPair(0, 0, 3, "y")], baseline)
    assert weights[:, 0, 0].tolist() == [1.0, 0.0]
    assert lifts[:, 0, 0].tolist() == [0.0, 0.0]  # exactly what the distance predicts
    _, ahead = pair_lifts([previous], [WordPair(0, 1, 2, "x")], baseline, "first_to_second")
    assert ahead[0, 0, 0] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="direction"):
        pair_lifts([previous], [WordPair(0, 1, 2, "x")], baseline, "backwards")
    with pytest.raises(ValueError, match="names word"):
        pair_lifts([previous], [WordPair(0, 1, 9, "x")], baseline)
