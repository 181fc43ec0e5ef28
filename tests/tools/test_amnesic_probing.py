"""scripts/amnesic_probing.py: labels, per-sentence counts and the erased run (section 4.4)."""

import numpy as np
import pytest
from conftest import load_script

from mha.analysis.caveats.probing import LinearEraser, most_frequent_labels
from mha.pretrained.encoder import MiniLMEncoder

amnesic = load_script("amnesic_probing")


def test_kept_labels_are_those_that_the_notebook_keeps():
    labels = ["NOUN"] * 5 + ["VERB"] * 3 + ["DET"] * 3 + ["ADJ"] * 2 + ["X"]
    kept = amnesic.kept_labels(labels, k=3)
    assert list(amnesic.merged(labels, kept)) == list(most_frequent_labels(labels, 3))


def test_counts_per_sentence():
    correct = np.array([True, False, True, True, False])
    assert amnesic.per_sentence(correct, np.array([0, 0, 1, 1, 2]), 4) == [1, 2, 0, 0]


def test_an_eraser_that_removes_nothing_gives_the_clean_run_and_one_that_removes_moves_it():
    encoder = MiniLMEncoder.load()
    sentences = [["the", "cat", "sat"], ["a", "dog", "barked", "loudly"]]
    words, vectors = amnesic.final_word_vectors(encoder, sentences)
    assert words.shape == (7, encoder.config.d_model)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-5)
    nothing = LinearEraser(np.zeros(32), np.zeros((32, 32)), 0)
    same_words, same_vectors = amnesic.final_word_vectors(encoder, sentences, 1, 1, nothing)
    np.testing.assert_allclose(same_words, words, atol=1e-5)
    everything = LinearEraser(np.zeros(32), np.eye(32), 32)  # the head's output set to 0
    _, removed = amnesic.final_word_vectors(encoder, sentences, 1, 1, everything)
    assert (1 - (removed * vectors).sum(1)).min() > 1e-6
    masked = encoder.head_mask([(1, 1)])
    trace = encoder.trace([sentences[0]], is_split_into_words=True, head_mask=masked)  # the head removed by its mask
    from mha.pretrained.sentence_embedding import sentence_embeddings
    expected = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()[0]
    assert removed[0] == pytest.approx(expected, abs=1e-5)
