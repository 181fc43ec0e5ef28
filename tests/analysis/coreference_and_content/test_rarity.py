"""Rarity proxies and the rarest-token hit rates of chapter 3's section on rare words."""

from collections import Counter

import numpy as np
import pytest

from mha.analysis.coreference_and_content.rarity import (
    COMMON_NOUNS,
    RARE_NOUNS,
    QueryWeights,
    count_rarity,
    count_tokens,
    extreme_hit_rates,
    rare_common_items,
    split_words,
    vocabulary_rank,
    weight_from_queries,
)
from mha.pretrained.tokenizer import load_tokenizer


def test_vocabulary_rank_on_a_toy_vocabulary():
    vocabulary = {"[CLS]": 101, ".": 1012, "the": 1996, "of": 1997, "kettle": 22421}
    ranks = vocabulary_rank(["[CLS]", "the", "of", ".", "kettle", "zzz"], vocabulary)
    assert np.isnan(ranks[0]) and np.isnan(ranks[5])
    assert ranks[1:5].tolist() == [0.0, 1.0, 0.0, 22421 - 1996]


@pytest.mark.slow
def test_the_real_vocabulary_starts_with_common_words():
    vocabulary = load_tokenizer().get_vocab()
    ranks = vocabulary_rank(["the", "of", "and", "kettle"], vocabulary)
    assert ranks.tolist()[:3] == [0.0, 1.0, 2.0] and ranks[3] > 10_000


def test_count_rarity_and_split_words():
    counts = count_tokens([["[CLS]", "the", "dog", "[SEP]"], ["the", "cat"]])
    assert counts == Counter({"the": 2, "dog": 1, "cat": 1})
    assert count_rarity(["the", "dog", "emu"], counts).tolist() == [-2.0, -1.0, 0.0]
    flags = split_words([None, 0, 1, 1, 2, None])
    assert np.isnan(flags[0]) and flags[1:5].tolist() == [0.0, 1.0, 1.0, 0.0]


def test_extreme_hit_rates_by_hand():
    rarity = np.array([np.nan, 1.0, 5.0, 2.0, np.nan])  # word at position 2 is the rarest
    attention = np.full((2, 5, 5), 0.1)                  # (heads, n, n)
    attention[0, :, 2] = 0.6                              # head 0: every row on the rarest word
    attention[1, :, 0] = 0.6                              # head 1: every row on [CLS] ...
    attention[1, :, 1] = 0.2                              # ... and, among words, on the commonest
    hits = extreme_hit_rates(attention, rarity)
    assert hits.hits.tolist() == [3, 0] and hits.rows == 3
    assert hits.chance == pytest.approx(1 / 3)
    assert extreme_hit_rates(attention, rarity, which="commonest").hits.tolist() == [0, 3]
    total = hits + hits
    assert total.rows == 6 and total.rate.tolist() == [1.0, 0.0]


@pytest.mark.slow
def test_rare_common_items_keep_positions():
    vocabulary = load_tokenizer().get_vocab()
    assert all(w in vocabulary for w in COMMON_NOUNS + RARE_NOUNS)
    ranks_common = vocabulary_rank(list(COMMON_NOUNS), vocabulary)
    ranks_rare = vocabulary_rank(list(RARE_NOUNS), vocabulary)
    assert ranks_common.max() < ranks_rare.min()
    items = rare_common_items()
    assert len(items) == 56
    for item in items:
        common, rare = item.sentences
        assert len(common) == len(rare) and common[item.slot] == item.common and rare[item.slot] == item.rare
        assert [w for i, w in enumerate(common) if i != item.slot] == [w for i, w in enumerate(rare) if i != item.slot]


def test_weight_from_queries_by_hand():
    # [CLS] rare-a ##b common the [SEP]: word ids None 0 0 1 2 None; the rare word is split into two pieces
    word_ids = [None, 0, 0, 1, 2, None]
    attention = np.full((1, 2, 6, 6), 1 / 6)
    attention[0, 1, 1] = [0.1, 0.0, 0.5, 0.3, 0.1, 0.0]  # head 1: the rare piece sends 0.3 to "common"
    attention[0, 1, 2] = [0.0, 0.6, 0.0, 0.2, 0.2, 0.0]
    queries = np.array([False, True, True, False, False, False])  # the two rare pieces
    baseline = np.array([False, False, False, False, True, False])  # "the"
    targets = np.array([False, True, True, True, False, False])  # the rare word's own pieces and "common"
    sums, counts = weight_from_queries(attention, word_ids, queries, baseline, targets)
    # a rare piece's weight on its own word's pieces is left out: only "common" (key 3) counts for it
    assert counts.tolist() == [2.0, 1.0]
    assert np.allclose(sums[0, 0], [2 / 6, 0.3 + 0.2])
    assert np.allclose(sums[1, 0], [3 / 6, 3 / 6])  # "the" reaches all three target pieces: 3 x 1/6
    with pytest.raises(ValueError, match="boolean mask"):
        weight_from_queries(attention, word_ids, queries.astype(int), baseline, targets)


def test_query_weights_pool_over_sentences_and_resample():
    sums = np.array([[[[1.0]], [[1.0]]], [[[0.0]], [[3.0]]]])  # (2 sentences, 2 groups, 1 layer, 1 head)
    counts = np.array([[2.0, 4.0], [1.0, 2.0]])
    weights = QueryWeights(sums, counts)
    assert float(weights.excess()[0, 0]) == pytest.approx(1 / 3 - 4 / 6)  # pooled: (1 + 0) / 3 - (1 + 3) / 6
    assert float(weights.excess(np.array([2.0, 0.0]))[0, 0]) == pytest.approx(2 / 4 - 2 / 8)  # first sentence twice
