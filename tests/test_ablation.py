"""The analysis on top of the interventions: mask builders, gradient importance, pruning curves, column means."""

import numpy as np
import pytest
import torch

from mha.analysis.ablation import (column_means, head_mask_gradients, heads_removable, keep_one_head_masks,
                                   michel_importance, pruning_masks, single_head_masks)
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import sentence_embeddings

SENTENCES = ["The trophy does not fit in the suitcase because it is too big .", "A short one ."]  # padded batch


def test_mask_builders():
    single = single_head_masks(2, 3)
    assert single.shape == (6, 2, 3) and (single.sum(axis=(1, 2)) == 5).all() and single[4, 1, 1] == 0
    keep = keep_one_head_masks(2, 3, layer=1, keep=[0, 2])
    assert keep[1].tolist() == [[1, 1, 1], [0, 0, 1]]
    pruned = pruning_masks([5, 0, 3, 1, 2, 4], [0, 2, 6], 2, 3)
    assert pruned[0].all() and pruned[1].ravel().tolist() == [0, 1, 1, 1, 1, 0] and not pruned[2].any()
    with pytest.raises(ValueError, match="distinct"):
        pruning_masks([0, 0], [1], 2, 3)


def test_gradients_predict_the_effect_of_small_mask_changes():
    encoder = MiniLMEncoder.load()
    inputs = encoder.tokenize(SENTENCES)

    def loss(vectors):  # a scalar of the sentence vectors
        return (vectors[0] * vectors[1]).sum()

    gradients = head_mask_gradients(encoder, inputs, loss)
    assert gradients.shape == (2, 6, 12)
    # finite difference on one head, scaled in both sentences
    epsilon, (layer, head) = 1e-2, (4, 7)
    mask = torch.ones(6, 12)
    mask[layer, head] = 1 - epsilon
    with torch.no_grad():
        base, nudged = (encoder(inputs, head_mask=m) for m in (torch.ones(6, 12), mask))
        value = [float(loss(sentence_embeddings(t.hidden_states[-1], inputs.real_tokens))) for t in (base, nudged)]
    assert (value[0] - value[1]) / epsilon == pytest.approx(gradients[:, layer, head].sum(), rel=0.05, abs=1e-5)
    with pytest.raises(ValueError, match="configs, 6, 12"):
        head_mask_gradients(encoder, inputs, loss, mask=np.ones((12, 6)))


def test_michel_importance():
    gradients = np.array([[[1.0, -3.0], [0.0, 2.0]], [[-1.0, 1.0], [0.0, -2.0]]])  # (examples, layers, heads)
    raw = michel_importance(gradients, normalize_layers=False)
    assert np.allclose(raw, [[1.0, 2.0], [0.0, 2.0]])
    assert np.allclose(michel_importance(gradients), [[1 / np.sqrt(5), 2 / np.sqrt(5)], [0.0, 1.0]])


def test_heads_removable_reads_the_first_crossing():
    counts = [0, 10, 20, 30, 40]
    assert heads_removable(counts, [1.0, 0.99, 0.95, 0.99, 0.5], reference=1.0, max_drop=0.02) == 10
    assert heads_removable(counts, [1.0] * 5, reference=1.0, max_drop=0.02) == 40
    with pytest.raises(ValueError, match="increase"):
        heads_removable([0, 20, 10], [1, 1, 1], 1.0, 0.1)


def test_column_means():
    attention = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert np.allclose(column_means(attention), [0.75, 0.25])
    with pytest.raises(ValueError, match="seq_q, seq_k"):
        column_means([1.0, 0.0])
