"""scripts/subspace_baselines.py: the layer inputs' covariance that chapter 2's anisotropic baseline draws from."""

import numpy as np
import pytest
import torch

from mha.pretrained.encoder import MiniLMEncoder
from scripts.subspace_baselines import layer_input_covariances


@pytest.mark.slow
def test_covariance_of_batched_padded_sentences_matches_numpy_one_sentence_at_a_time():
    encoder = MiniLMEncoder.load()
    sentences = [["The", "dog", "barked", "."], ["A", "much", "longer", "sentence", "than", "the", "first", "one", "."],
                 ["Hi"]]
    covariance, count = layer_input_covariances(encoder, sentences)
    states = np.concatenate([encoder.trace([words], is_split_into_words=True).hidden_states[:, 0].double().numpy()
                             for words in sentences], axis=1)  # (layers + 1, tokens, d_model), no padding at all
    assert count == states.shape[1]  # every real token, [CLS] and [SEP] included, once
    n_layers = encoder.config.n_layers
    assert covariance.shape == (n_layers, 384, 384)
    for layer in (0, n_layers - 1):  # the input of the first and of the last layer
        expected = np.cov(states[layer].T, bias=True)
        assert torch.allclose(covariance[layer], torch.from_numpy(expected), atol=1e-4 * float(np.abs(expected).max()))
