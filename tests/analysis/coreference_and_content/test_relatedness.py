"""The crossed related / unrelated design of chapter 3's section on content words."""

import numpy as np
import pytest

from mha.analysis.coreference_and_content.relatedness import (
    FRAMES,
    RELATED_PAIRS,
    crossed_contrast,
    crossed_items,
    slot_weights,
)
from mha.pretrained.tokenizer import load_tokenizer


def test_every_item_crosses_two_pairs_in_one_frame():
    items = crossed_items()
    assert len(items) == sum(len(FRAMES[k]) * len(RELATED_PAIRS[k]) for k in RELATED_PAIRS) == 108
    for item in items:
        (a1, b1), (a2, b2) = item.pairs
        fills = [(s[item.slot_a], s[item.slot_b]) for s in item.sentences]
        assert fills == [(a1, b1), (a2, b2), (a1, b2), (a2, b1)]
        assert len({len(s) for s in item.sentences}) == 1
        # the four sentences differ only in the two slots
        for sentence in item.sentences[1:]:
            assert [w for i, w in enumerate(sentence) if i not in (item.slot_a, item.slot_b)] == \
                   [w for i, w in enumerate(item.sentences[0]) if i not in (item.slot_a, item.slot_b)]


@pytest.mark.slow
def test_every_word_is_one_word_piece():
    vocabulary = load_tokenizer().get_vocab()
    words = {w for pairs in RELATED_PAIRS.values() for pair in pairs for w in pair}
    assert not [w for w in sorted(words) if w not in vocabulary]


def test_crossed_contrast_cancels_single_word_effects():
    # weight = effect of a + effect of b + 0.3 if related: only the 0.3 survives
    a_effect, b_effect = {"a1": 0.1, "a2": 0.4}, {"b1": 0.05, "b2": 0.2}
    order = [("a1", "b1", True), ("a2", "b2", True), ("a1", "b2", False), ("a2", "b1", False)]
    weights = np.array([[[a_effect[a] + b_effect[b] + 0.3 * related] for a, b, related in order]])  # (1, 4, 1)
    assert crossed_contrast(weights)[0, 0] == pytest.approx(0.3)


def test_slot_weights_read_source_row_target_column():
    maps = np.zeros((2, 4, 4))
    maps[:, 1, 3] = [0.25, 0.5]
    assert slot_weights(maps, 1, 3).tolist() == [0.25, 0.5]
    with pytest.raises(ValueError):
        slot_weights(maps, 1, 4)


def test_unit_labels_are_shared_by_frames():
    items = crossed_items(["associates"])
    assert len({item.unit for item in items}) == len(RELATED_PAIRS["associates"])
    with pytest.raises(ValueError, match="unknown kinds"):
        crossed_items(["colours"])


def test_noun_pairs_and_their_cosines():
    from mha.analysis.coreference_and_content.relatedness import noun_pairs, pair_cosines, word_input_vectors
    from mha.analysis.head_roles.long_range import WordPair
    from mha.corpora.treebank import UDTree

    trees = [
        UDTree(
            ("the", "dog", "saw", "a", "cat", "and", "a", "dog"),
            ("DET", "NOUN", "VERB", "DET", "NOUN", "CCONJ", "DET", "NOUN"),
            (1, 2, -1, 4, 2, 7, 7, 4),
            ("det", "nsubj", "root", "det", "obj", "cc", "det", "conj"),
        )
    ]
    pairs = noun_pairs(trees)
    assert pairs == [WordPair(0, 1, 4, "noun_noun"), WordPair(0, 4, 7, "noun_noun")]  # dog-dog is no pair
    vocabulary = {"dog": 0, "cat": 1, "##s": 2}
    embeddings = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    vectors = word_input_vectors(["[CLS]", "dog", "cat", "##s", "[SEP]"], [None, 0, 1, 1, None], embeddings, vocabulary)
    assert vectors.tolist() == [[1.0, 0.0], [0.5, 1.0]]  # a word's pieces are averaged
    cosine = pair_cosines([WordPair(0, 0, 1, "noun_noun")], [vectors])
    assert cosine[0] == pytest.approx(0.5 / np.sqrt(1.25))
    with pytest.raises(ValueError, match="vocabulary"):
        word_input_vectors(["[CLS]", "emu", "[SEP]"], [None, 0, None], embeddings, vocabulary)


def test_crossed_slot_weights_reuse_a_trace_and_refuse_one_of_other_items():
    from mha.analysis.coreference_and_content.relatedness import crossed_slot_weights, crossed_trace
    from mha.pretrained.encoder import MiniLMEncoder

    encoder = MiniLMEncoder.load()
    items = crossed_items()[:3]
    trace = crossed_trace(encoder, items)
    weights = crossed_slot_weights(encoder, items, trace)
    assert weights.shape == (3, 4, 2, encoder.config.n_layers, encoder.config.n_heads)
    assert np.array_equal(weights, crossed_slot_weights(encoder, items))  # the same as encoding them again
    assert ((weights >= 0) & (weights <= 1)).all()
    with pytest.raises(ValueError, match="holds 12 sentences but 2 items have 8"):
        crossed_slot_weights(encoder, items[:2], trace)
    with pytest.raises(ValueError, match="non-empty list of CrossedItem"):
        crossed_trace(encoder, [])
