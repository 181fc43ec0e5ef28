"""Attention rollout and the masking measure of how much a position is still its own token."""

import numpy as np
import pytest

from mha.analysis.caveats.attention_flow import attention_rollout, masking_influence, own_token_share
from mha.pretrained.encoder import MiniLMEncoder


def test_rollout_of_identity_maps_is_the_identity_and_layers_chain_in_order():
    assert np.allclose(attention_rollout(np.tile(np.eye(3), (2, 1, 1))), np.tile(np.eye(3), (2, 1, 1)))
    previous = np.array([[0.0, 1.0], [0.0, 1.0]])  # every position reads position 1
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])
    rollout = attention_rollout(np.stack([previous, swap]), residual_weight=0.0)
    assert np.allclose(rollout[0], previous) and np.allclose(rollout[1], swap @ previous)
    half = attention_rollout(previous[None], residual_weight=0.5)[0]
    assert np.allclose(half, [[0.5, 0.5], [0.0, 1.0]])
    heads = np.stack([previous, np.eye(2)])[None]  # (layers 1, heads 2, 2, 2): averaged first
    assert np.allclose(attention_rollout(heads, residual_weight=0.0)[0], [[0.5, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match="residual_weight"):
        attention_rollout(previous[None], residual_weight=2.0)


def test_own_token_share():
    mixing = np.array([[2.0, 1.0, 1.0], [0.0, 1.0, 3.0], [5.0, 5.0, 0.0]])
    assert np.allclose(own_token_share(mixing), [0.5, 0.25, 0.0])
    assert np.allclose(own_token_share(mixing, positions=[0, 1]), [2 / 3, 1.0])
    with pytest.raises(ValueError, match="non-negative"):
        own_token_share(-mixing)


def test_masking_influence():
    encoder = MiniLMEncoder.load()
    tokens, influence = masking_influence(encoder, "The cat sat .")
    assert tokens == ["[CLS]", "the", "cat", "sat", ".", "[SEP]"] and influence.shape == (7, 6, 6)
    assert (influence[:, :, [0, 5]] == 0).all()  # [CLS] and [SEP] are never replaced
    embeddings = influence[0]  # before any layer a position depends on its own token only
    assert np.allclose(embeddings - np.diag(np.diag(embeddings)), 0.0) and (np.diag(embeddings)[1:5] > 0).all()
    assert (influence[6][1:5, 1:5] > 0).all()  # after six layers everything depends on everything
