"""mha.lab.permutation: reordering heads renames them and changes nothing the layer computes."""

import numpy as np
import pytest
import torch

from mha.core.attention_numpy import multi_head_attention
from mha.lab.permutation import head_order_columns, permute_head_weights, permute_heads
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

torch.set_num_threads(1)


def test_columns_move_in_blocks_of_d_head():
    assert head_order_columns([2, 0, 1], d_head=2) == [4, 5, 0, 1, 2, 3]


@pytest.mark.parametrize("order", [[0, 0, 1], [1, 2, 3], [0, 2]])
def test_a_bad_order_is_explained(order):
    with pytest.raises(ValueError, match="permutation"):
        head_order_columns(order, d_head=2)


@pytest.mark.parametrize("n_heads, order", [(2, [1, 0]), (4, [3, 0, 1, 2]), (4, [2, 3, 1, 0]), (3, [0, 1, 2])])
def test_numpy_layer_output_is_unchanged_and_head_maps_are_reordered(n_heads, order):
    rng = np.random.default_rng(0)
    d_model = 4 * n_heads
    matrices = [rng.normal(size=(d_model, d_model)) for _ in range(4)]
    x = rng.normal(size=(2, 6, d_model))
    before = multi_head_attention(x, *matrices, n_heads)
    after = multi_head_attention(x, *permute_head_weights(*matrices, order), n_heads)
    np.testing.assert_allclose(after.output, before.output, atol=1e-10)
    np.testing.assert_allclose(after.weights, before.weights[:, order])


def test_shapes_that_do_not_split_into_heads_are_explained():
    W = np.zeros((6, 6))
    with pytest.raises(ValueError, match="do not split"):
        permute_head_weights(W, W, W, W, [0, 1, 2, 3])
    with pytest.raises(ValueError, match="W_O"):
        permute_head_weights(W, W, W, np.zeros((4, 6)), [1, 0])


def test_permuted_model_computes_the_same_logits_with_reordered_heads():
    model = TinyTransformer(TinyTransformerConfig(vocab_size=11, max_seq_len=9, n_layers=2, n_heads=4), seed=3)
    tokens = torch.randint(0, 11, (3, 9), generator=torch.Generator().manual_seed(0))
    permuted = permute_heads(model, 0, [2, 3, 1, 0])
    with torch.no_grad():
        before, after = model(tokens), permuted(tokens)
    torch.testing.assert_close(after.logits, before.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(after.attention_weights[0], before.attention_weights[0][:, [2, 3, 1, 0]])
    torch.testing.assert_close(after.attention_weights[1], before.attention_weights[1], atol=1e-6, rtol=1e-5)
    assert torch.equal(permuted.head_weights(0, 0).W_Q, model.head_weights(0, 2).W_Q)
    assert not torch.equal(model.head_weights(0, 0).W_Q, model.head_weights(0, 2).W_Q)  # the original is untouched


def test_permute_heads_checks_the_layer_and_the_length_of_the_order():
    model = TinyTransformer(TinyTransformerConfig(vocab_size=5, max_seq_len=4, n_layers=1, n_heads=2), seed=0)
    with pytest.raises(ValueError, match="layer must be"):
        permute_heads(model, 1, [1, 0])
    with pytest.raises(ValueError, match="2 heads"):
        permute_heads(model, 0, [0, 1, 2])
