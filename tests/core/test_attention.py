"""mha.core.attention checked against torch's own implementations, not against itself.

Property-based: hypothesis draws batch sizes, lengths, head counts, head sizes
and masks; everything is float64 so agreement within 1e-6 is a real test.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import mha
from mha.core import attention_numpy
from mha.core.attention import MultiHeadAttention, head_contributions, merge_heads, split_heads

TOLERANCE = 1e-6
settings.register_profile("book", max_examples=200, deadline=None, derandomize=True)
settings.load_profile("book")


@st.composite
def attention_problems(draw):
    """A random multi-head problem: sizes, inputs, a boolean mask (True = may attend) or None, and weights."""
    batch = draw(st.integers(1, 3))
    seq_q = draw(st.integers(1, 6))
    self_attention = draw(st.booleans())
    seq_k = seq_q if self_attention else draw(st.integers(1, 6))
    n_heads = draw(st.integers(1, 4))
    d_head = draw(st.integers(1, 5))
    mask_kind = draw(
        st.sampled_from(["none", "causal", "padding", "random"] if seq_q == seq_k else ["none", "padding", "random"])
    )
    seed = draw(st.integers(0, 2**31 - 1))
    generator = torch.Generator().manual_seed(seed)
    d_model = n_heads * d_head
    query = torch.randn(batch, seq_q, d_model, generator=generator, dtype=torch.float64)
    key = query if self_attention else torch.randn(batch, seq_k, d_model, generator=generator, dtype=torch.float64)
    if mask_kind == "none":
        mask = None
    elif mask_kind == "causal":
        mask = mha.causal_mask(seq_q).expand(batch, seq_q, seq_k)
    elif mask_kind == "padding":
        lengths = torch.randint(1, seq_k + 1, (batch,), generator=generator)
        mask = mha.padding_mask(lengths, seq_k).expand(batch, seq_q, seq_k)
    else:
        mask = torch.rand(batch, seq_q, seq_k, generator=generator) < 0.6
        mask[..., 0] |= ~mask.any(-1)  # every query keeps at least one key
    reference = torch.nn.MultiheadAttention(d_model, n_heads, batch_first=True, dtype=torch.float64)
    with torch.no_grad():
        for parameter in reference.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=torch.float64) * 0.5)
    return reference.eval(), query, key, mask, n_heads


@given(attention_problems())
@pytest.mark.slow
def test_module_equals_torch_multihead_attention(problem):
    reference, query, key, mask, n_heads = problem
    ours = MultiHeadAttention.from_torch(reference)
    blocked = None if mask is None else (~mask).repeat_interleave(n_heads, dim=0)  # torch: True = blocked
    expected_output, expected_weights = reference(query, key, key, attn_mask=blocked, need_weights=True,
                                                  average_attn_weights=False)
    result = ours(query, key, key, mask=mask)
    torch.testing.assert_close(result.output, expected_output, atol=TOLERANCE, rtol=0)
    torch.testing.assert_close(result.weights, expected_weights, atol=TOLERANCE, rtol=0)


@given(attention_problems())
@pytest.mark.slow
def test_each_head_equals_torch_scaled_dot_product_attention(problem):
    reference, query, key, mask, n_heads = problem
    ours = MultiHeadAttention.from_torch(reference)
    result = ours(query, key, key, mask=mask)
    q = split_heads(query @ ours.W_Q + ours.b_Q, n_heads)  # (batch, heads, seq_q, d_head)
    k = split_heads(key @ ours.W_K + ours.b_K, n_heads)
    v = split_heads(key @ ours.W_V + ours.b_V, n_heads)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else mask[:, None])
    torch.testing.assert_close(result.head_outputs, expected, atol=TOLERANCE, rtol=0)
    for head in range(n_heads):  # and head by head through the public function
        _, weights = mha.scaled_dot_product_attention(q[:, head], k[:, head], v[:, head], mask)
        torch.testing.assert_close(weights, result.weights[:, head], atol=TOLERANCE, rtol=0)


@given(attention_problems())
@pytest.mark.slow
def test_numpy_and_torch_agree(problem):
    reference, query, key, mask, n_heads = problem
    if query is not key:
        return  # the numpy version is self-attention only
    ours = MultiHeadAttention.from_torch(reference)
    as_numpy = [p.detach().numpy() for p in (ours.W_Q, ours.W_K, ours.W_V, ours.W_O)]
    biases = tuple(p.detach().numpy() for p in (ours.b_Q, ours.b_K, ours.b_V, ours.b_O))
    numpy_result = attention_numpy.multi_head_attention(query.numpy(), *as_numpy, n_heads, biases=biases,
                                                        mask=None if mask is None else mask.numpy())
    torch_result = ours(query, mask=mask)
    np.testing.assert_allclose(numpy_result.output, torch_result.output.detach().numpy(), atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(numpy_result.weights, torch_result.weights.detach().numpy(), atol=TOLERANCE, rtol=0)


@given(attention_problems())
@pytest.mark.slow
def test_concat_then_project_equals_sum_of_head_contributions(problem):
    reference, query, key, mask, n_heads = problem
    ours = MultiHeadAttention.from_torch(reference)
    result = ours(query, key, key, mask=mask)
    per_head = head_contributions(result.head_outputs, ours.W_O)  # (batch, heads, seq, d_model)
    torch.testing.assert_close(per_head.sum(dim=1) + ours.b_O, result.output, atol=TOLERANCE, rtol=0)
    for head in range(n_heads):
        W_O_head = ours.head_weights(head).W_O  # (d_head, d_model)
        torch.testing.assert_close(result.head_outputs[:, head] @ W_O_head, per_head[:, head], atol=TOLERANCE, rtol=0)


@pytest.mark.slow
def test_split_and_merge_are_inverse_and_slice_features_in_order():
    x = torch.arange(2 * 3 * 6, dtype=torch.float64).view(2, 3, 6)
    heads = split_heads(x, 3)  # (batch, heads, seq, d_head)
    assert heads.shape == (2, 3, 3, 2)
    torch.testing.assert_close(heads[:, 1], x[..., 2:4])  # head 1 = features 2 and 3
    torch.testing.assert_close(merge_heads(heads), x)


def test_weights_rows_sum_to_one_and_blocked_keys_get_zero():
    layer = MultiHeadAttention(8, 2, seed=3)
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    weights = layer(x, mask=mha.causal_mask(5)).weights
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 5))
    assert (weights.triu(1) == 0).all()


def test_head_mask_removes_exactly_that_heads_contribution():
    layer = MultiHeadAttention(12, 3, seed=0)
    x = torch.randn(1, 4, 12, generator=torch.Generator().manual_seed(0))
    full = layer(x)
    masked = layer(x, head_mask=torch.tensor([1.0, 0.0, 1.0]))
    contribution = head_contributions(full.head_outputs, layer.W_O)[:, 1]
    torch.testing.assert_close(masked.output, full.output - contribution)


def test_attention_override_replaces_the_weights():
    layer = MultiHeadAttention(8, 2, seed=0)
    x = torch.randn(1, 4, 8, generator=torch.Generator().manual_seed(0))
    uniform = layer(x, attention_override=lambda w: torch.full_like(w, 1 / w.shape[-1]))
    torch.testing.assert_close(uniform.weights, torch.full((1, 2, 4, 4), 0.25))
    v = split_heads(x @ layer.W_V + layer.b_V, 2)
    torch.testing.assert_close(uniform.head_outputs, v.mean(dim=2, keepdim=True).expand(-1, -1, 4, -1))


def test_same_seed_same_weights_and_different_seed_different_weights():
    a, b, c = MultiHeadAttention(16, 4, seed=7), MultiHeadAttention(16, 4, seed=7), MultiHeadAttention(16, 4, seed=8)
    assert torch.equal(a.W_Q, b.W_Q) and not torch.equal(a.W_Q, c.W_Q)
    assert torch.equal(MultiHeadAttention(16, 2, seed=7).W_Q, a.W_Q)  # the head count only changes the split


@pytest.mark.parametrize("n_heads", [1, 2, 4, 8])
def test_parameter_count_does_not_depend_on_head_count(n_heads):
    layer = MultiHeadAttention(64, n_heads)
    assert sum(p.numel() for p in layer.parameters()) == 4 * 64 * 64 + 4 * 64
