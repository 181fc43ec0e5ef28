"""Weights times the length of the transformed values (Kobayashi et al. 2020), on hand-made numbers."""

import numpy as np
import pytest

from mha.analysis.caveats.norms import norm_based_attention, transformed_value_norms, weighted_vector_norms


def test_transformed_value_norms_use_each_heads_own_output_rows():
    values = np.array([[[3.0, 0.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 0.0]]])  # (heads 2, seq 2, d_head 2)
    W_O = np.stack([np.eye(2, 3), 2 * np.eye(2, 3)])  # (heads, d_head, d_model 3)
    assert np.allclose(transformed_value_norms(values, W_O), [[3.0, 1.0], [2 * np.sqrt(2), 0.0]])
    with pytest.raises(ValueError, match="do not fit"):
        transformed_value_norms(values, W_O[:, :1])


def test_a_heavily_weighted_short_vector_sends_little():
    attention = np.array([[0.9, 0.1], [0.5, 0.5]])
    norms = np.array([0.1, 2.0])  # key 0 is a sink: most weight, short vector
    assert np.allclose(weighted_vector_norms(attention, norms), [[0.09, 0.2], [0.05, 1.0]])
    shares = norm_based_attention(attention, norms)
    assert np.allclose(shares.sum(-1), 1.0) and shares[0, 1] > shares[0, 0]
    with pytest.raises(ValueError, match="one norm per key"):
        weighted_vector_norms(attention, norms[:1])
