"""The cost counts of one attention layer (mha.core.attention_cost), against a hand count and torch's FLOP counter."""

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mha.core.attention import MultiHeadAttention
from mha.core.attention_cost import COMPONENTS, attention_cost
from mha.core.validation import InputError


def test_a_small_layer_counted_by_hand():
    # d_model 4 in 2 heads of 2, one sequence of 3 tokens, float32
    cost = attention_cost(4, 2, 3, 1)
    # x (3, 4) @ W (4, 4): 12 outputs of 4 multiply-adds = 96 operations, and 12 bias additions; three of them
    assert cost.operations["Q, K, V projections"] == 3 * (96 + 12)
    # per head q (3, 2) @ kᵀ (2, 3): 9 scores of 2 multiply-adds = 36; two heads 72; 18 scores scaled
    assert cost.operations["scores"] == 72 + 18
    assert cost.operations["softmax"] == 5 * 18  # max, subtract, exp, sum, divide per weight
    # per head A (3, 3) @ v (3, 2): 6 outputs of 3 multiply-adds = 36; two heads 72
    assert cost.operations["weighted sum"] == 72
    assert cost.operations["output projection"] == 96 + 12
    assert cost.product_operations == {"Q, K, V projections": 288, "scores": 72, "softmax": 0, "weighted sum": 72,
                                       "output projection": 96}
    assert cost.total_operations == 324 + 90 + 90 + 72 + 108
    assert cost.per_weight_operations == 18 + 90
    # bytes written, 4 per number: q, k, v (3 x 12), the scores and the weights (2 x 3 x 3 each), z and the output
    assert cost.bytes_written == {"Q, K, V projections": 144, "scores": 72, "softmax": 72, "weighted sum": 48,
                                  "output projection": 48}
    assert cost.map_bytes == 144
    assert attention_cost(4, 2, 3, 1, bytes_per_number=8).map_bytes == 288
    assert tuple(cost.operations) == COMPONENTS


@pytest.mark.parametrize("d_model, n_heads, seq_len, batch",
                         [(4, 2, 3, 1), (32, 1, 24, 2), (32, 32, 24, 2), (48, 6, 10, 3), (64, 8, 17, 1)])
def test_the_products_agree_with_torchs_flop_counter_on_the_books_layer(d_model, n_heads, seq_len, batch):
    layer = MultiHeadAttention(d_model, n_heads, seed=0)
    x = torch.randn(batch, seq_len, d_model, generator=torch.Generator().manual_seed(0))
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        out = layer(x)
    by_op = {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}
    cost = attention_cost(d_model, n_heads, seq_len, batch)
    # the projections are addmm (x @ W + b), the two per-head products bmm; the counter counts 2 per multiply-add
    assert by_op["aten.addmm"] == cost.product_operations["Q, K, V projections"] + \
        cost.product_operations["output projection"]
    assert by_op["aten.bmm"] == cost.product_operations["scores"] + cost.product_operations["weighted sum"]
    assert counter.get_total_flops() == cost.total_product_operations
    # the weights the layer returns are one of the two maps
    assert out.weights.element_size() * out.weights.nelement() == cost.bytes_written["softmax"]


def test_the_products_do_not_depend_on_the_head_count_and_the_maps_grow_with_it():
    d_model, seq_len, batch = 768, 512, 2
    costs = {h: attention_cost(d_model, h, seq_len, batch) for h in (1, 2, 12, 48, 768)}
    products = {h: c.total_product_operations for h, c in costs.items()}
    assert set(products.values()) == {4 * batch * seq_len * d_model * (2 * d_model + seq_len)}
    for h, cost in costs.items():
        assert cost.per_weight_operations == 6 * batch * h * seq_len ** 2  # scaling 1, softmax 5 per weight
        assert cost.map_bytes == 2 * 4 * batch * h * seq_len ** 2


@pytest.mark.parametrize("arguments, message", [((32, 3, 24), "not divisible by n_heads = 3"),
                                                ((32, 4, 0), "seq_len must be a whole number of at least 1"),
                                                ((32, 4, 24, 0), "batch must be a whole number of at least 1"),
                                                ((32, 4, 24.0), "seq_len must be a whole number")])
def test_bad_shapes_are_refused_with_what_to_change(arguments, message):
    with pytest.raises(InputError, match=message):
        attention_cost(*arguments)
