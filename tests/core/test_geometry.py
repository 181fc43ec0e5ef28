"""Tests for mha.core.geometry on hand-made matrices with known answers, and on the real MiniLM heads."""

from __future__ import annotations

import math

import pytest
import torch

from mha.core.attention import MultiHeadAttention
from mha.core.geometry import (
    anisotropic_random_bases,
    energy_rank,
    head_subspace_angles,
    head_writes,
    load_subspace_baselines,
    mean_pair_overlap,
    numerical_rank,
    orthonormal_basis,
    ov_circuit,
    principal_angle_cosines,
    projector_sum_spectrum,
    qk_circuit,
    random_subspace_angles,
    score_terms,
    share_in_subspace,
    subspace_overlap,
    variance_coverage,
    variance_in_subspace,
)

torch.set_num_threads(1)
f64 = torch.float64


def unit(i: int, d: int) -> torch.Tensor:
    vector = torch.zeros(d, dtype=f64)
    vector[i] = 1.0
    return vector


# --- circuits ------------------------------------------------------------------------------------

def test_qk_circuit_of_basis_vectors_is_an_outer_product():
    W_Q = unit(0, 3)[:, None]  # reads feature 0
    W_K = unit(2, 3)[:, None]  # reads feature 2
    expected = torch.zeros(3, 3, dtype=f64)
    expected[0, 2] = 1.0
    assert torch.equal(qk_circuit(W_Q, W_K), expected)


def test_circuits_give_the_dot_products_head_by_head():
    g = torch.Generator().manual_seed(0)
    W_Q, W_K, W_V = (torch.randn(2, 8, 3, generator=g, dtype=f64) for _ in range(3))  # 2 heads
    W_O = torch.randn(2, 3, 8, generator=g, dtype=f64)
    x = torch.randn(5, 8, generator=g, dtype=f64)
    W_QK, W_OV = qk_circuit(W_Q, W_K), ov_circuit(W_V, W_O)
    assert W_QK.shape == W_OV.shape == (2, 8, 8)
    for h in range(2):
        assert torch.allclose(x @ W_QK[h] @ x.T, (x @ W_Q[h]) @ (x @ W_K[h]).T)
        assert torch.allclose(x @ W_OV[h], (x @ W_V[h]) @ W_O[h])
        assert torch.allclose(W_QK[h], qk_circuit(W_Q[h], W_K[h]))  # batched and single heads agree
        assert torch.allclose(W_OV[h], ov_circuit(W_V[h], W_O[h]))


def test_circuits_reject_mismatched_shapes():
    with pytest.raises(ValueError, match="same"):
        qk_circuit(torch.zeros(8, 3), torch.zeros(8, 4))
    with pytest.raises(ValueError, match="d_head, d_model"):
        ov_circuit(torch.zeros(8, 3), torch.zeros(8, 3))


def test_score_terms_by_hand_and_sum_to_the_heads_scores():
    # d_model = 2, d_head = 1: q = x0 + 1, k = x1 + 2, scale 1
    W_Q, W_K = torch.tensor([[1.0], [0.0]], dtype=f64), torch.tensor([[0.0], [1.0]], dtype=f64)
    b_Q, b_K = torch.tensor([1.0], dtype=f64), torch.tensor([2.0], dtype=f64)
    x = torch.tensor([[3.0, 5.0], [7.0, 11.0]], dtype=f64)
    terms = score_terms(x, x, W_Q, W_K, b_Q, b_K)
    assert torch.equal(terms.bilinear, torch.tensor([[15.0, 33.0], [35.0, 77.0]], dtype=f64))  # x0_i * x1_j
    assert torch.equal(terms.query_only, torch.tensor([[6.0, 6.0], [14.0, 14.0]], dtype=f64))  # 2 * x0_i
    assert torch.equal(terms.key_only, torch.tensor([[5.0, 11.0], [5.0, 11.0]], dtype=f64))  # 1 * x1_j
    assert torch.equal(terms.constant, torch.full((2, 2), 2.0, dtype=f64))
    q, k = x @ W_Q + b_Q, x @ W_K + b_K
    assert torch.equal(terms.total(), q @ k.T)


def test_score_terms_match_a_layer_and_the_query_only_terms_do_not_change_the_weights():
    layer = MultiHeadAttention(12, 3, seed=1, dtype=f64)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for b in (layer.b_Q, layer.b_K, layer.b_V, layer.b_O):
            b.copy_(torch.randn(12, generator=g, dtype=f64))
        x = torch.randn(1, 6, 12, generator=g, dtype=f64)
        weights = layer(x).weights[0]  # (heads, seq, seq)
        for h in range(3):
            own = layer.head_weights(h)
            terms = score_terms(x[0], x[0], own.W_Q, own.W_K, own.b_Q, own.b_K)
            assert torch.allclose(terms.total().softmax(-1), weights[h], atol=1e-12)
            assert torch.allclose((terms.bilinear + terms.key_only).softmax(-1), weights[h], atol=1e-12)
            assert not torch.allclose(terms.bilinear.softmax(-1), weights[h], atol=1e-3)


def test_head_writes_sum_to_the_layer_output():
    layer = MultiHeadAttention(12, 3, seed=2, dtype=f64)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for b in (layer.b_Q, layer.b_K, layer.b_V, layer.b_O):
            b.copy_(torch.randn(12, generator=g, dtype=f64))
        x = torch.randn(2, 5, 12, generator=g, dtype=f64)
        result = layer(x)
        W_V = torch.stack([layer.head_weights(h).W_V for h in range(3)])
        W_O = torch.stack([layer.head_weights(h).W_O for h in range(3)])
        b_V = torch.stack([layer.head_weights(h).b_V for h in range(3)])
        writes = head_writes(x, result.weights, W_V, W_O, b_V, layer.b_O)
    assert writes.per_head.shape == (2, 3, 5, 12)
    assert torch.allclose(writes.total(), result.output, atol=1e-12)


# --- ranks ---------------------------------------------------------------------------------------

def test_numerical_rank_counts_singular_values_above_the_tolerance():
    diagonal = torch.diag(torch.tensor([2.0, 1.0, 1e-3, 1e-16], dtype=f64))
    assert int(numerical_rank(diagonal)) == 3
    assert int(numerical_rank(diagonal, rtol=1e-2)) == 2
    stacked = torch.stack([diagonal, torch.eye(4, dtype=f64), torch.zeros(4, 4, dtype=f64) + 1.0])
    assert numerical_rank(stacked).tolist() == [3, 4, 1]


def test_numerical_rank_of_a_product_through_a_narrow_middle():
    g = torch.Generator().manual_seed(3)
    A, B = torch.randn(40, 5, generator=g, dtype=f64), torch.randn(5, 40, generator=g, dtype=f64)
    assert int(numerical_rank(A @ B)) == 5
    assert int(numerical_rank((A @ B).float())) == 5  # float32 default tolerance is eps(float32) * 40


def test_energy_rank_by_hand():
    # squared singular values 9, 4, 1 (total 14): 9/14 = 0.64, 13/14 = 0.93, 14/14 = 1
    matrix = torch.diag(torch.tensor([3.0, 2.0, 1.0], dtype=f64))
    assert int(energy_rank(matrix, energy=0.5)) == 1
    assert int(energy_rank(matrix, energy=0.9)) == 2
    assert int(energy_rank(matrix, energy=0.99)) == 3
    assert int(energy_rank(matrix, energy=1.0)) == 3
    assert int(energy_rank(torch.diag(torch.tensor([1.0, 0.0], dtype=f64)), energy=1.0)) == 1
    with pytest.raises(ValueError, match="energy"):
        energy_rank(matrix, energy=1.5)


# --- subspaces -----------------------------------------------------------------------------------

def test_orthonormal_basis_spans_the_columns():
    W = torch.tensor([[1.0, 1.0], [0.0, 1.0], [0.0, 0.0]], dtype=f64)
    basis = orthonormal_basis(W)
    assert torch.allclose(basis.T @ basis, torch.eye(2, dtype=f64))
    assert torch.allclose(basis @ basis.T @ W, W)  # projecting W onto the basis leaves it unchanged
    with pytest.raises(ValueError, match="transpose"):
        orthonormal_basis(torch.zeros(2, 5))


@pytest.mark.parametrize("theta", [0.0, 0.3, math.pi / 4, math.pi / 2])
def test_principal_angle_between_two_lines(theta):
    A = unit(0, 3)[:, None]
    B = (math.cos(theta) * unit(0, 3) + math.sin(theta) * unit(1, 3))[:, None]
    assert torch.allclose(principal_angle_cosines(A, B), torch.tensor([abs(math.cos(theta))], dtype=f64), atol=1e-12)


def test_principal_angles_between_planes_sharing_one_line():
    # span(e0, e1) and span(e0, cos t e1 + sin t e2): angles 0 and t
    t = 0.7
    A = torch.stack([unit(0, 4), unit(1, 4)], dim=1)
    B = torch.stack([unit(0, 4) * 2.0, math.cos(t) * unit(1, 4) + math.sin(t) * unit(2, 4)], dim=1)
    assert torch.allclose(principal_angle_cosines(A, B), torch.tensor([1.0, math.cos(t)], dtype=f64), atol=1e-12)
    angles = head_subspace_angles(torch.stack([A, B]))
    assert angles.shape == (2, 2, 2)
    assert torch.allclose(angles[0, 1], torch.tensor([0.0, t], dtype=f64), atol=1e-6)
    assert torch.allclose(angles[0, 0], torch.zeros(2, dtype=f64), atol=1e-6)
    assert torch.allclose(subspace_overlap(angles[0, 1]), torch.tensor((1 + math.cos(t) ** 2) / 2, dtype=f64))


def test_subspace_angles_do_not_depend_on_the_basis():
    g = torch.Generator().manual_seed(4)
    W, other = torch.randn(10, 3, generator=g, dtype=f64), torch.randn(10, 3, generator=g, dtype=f64)
    mixing = torch.randn(3, 3, generator=g, dtype=f64)  # invertible with probability 1
    assert torch.allclose(principal_angle_cosines(W, other), principal_angle_cosines(W @ mixing, other), atol=1e-10)


def test_scipy_agrees_on_principal_angles():
    linalg = pytest.importorskip("scipy.linalg")
    g = torch.Generator().manual_seed(5)
    A, B = torch.randn(20, 4, generator=g, dtype=f64), torch.randn(20, 4, generator=g, dtype=f64)
    ours = torch.arccos(principal_angle_cosines(A, B)).numpy()
    theirs = sorted(linalg.subspace_angles(A.numpy(), B.numpy()))
    assert ours == pytest.approx(theirs, abs=1e-8)


def test_random_subspaces_overlap_by_d_head_over_d_model_on_average():
    angles = random_subspace_angles(60, 6, n_pairs=400, seed=0)
    assert angles.shape == (400, 6)
    assert float(subspace_overlap(angles).mean()) == pytest.approx(6 / 60, rel=0.05)
    assert torch.equal(angles, random_subspace_angles(60, 6, n_pairs=400, seed=0))


def test_projector_sum_spectrum_of_a_tiling_and_of_two_copies():
    eye = torch.eye(6, dtype=f64)
    tiling = torch.stack([eye[:, 0:2], eye[:, 2:4], eye[:, 4:6]])  # three heads read disjoint coordinates
    assert torch.allclose(projector_sum_spectrum(tiling), torch.ones(6, dtype=f64))
    copies = torch.stack([eye[:, 0:2], eye[:, 0:2] @ torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=f64)])
    assert torch.allclose(projector_sum_spectrum(copies), torch.tensor([2.0, 2, 0, 0, 0, 0], dtype=f64), atol=1e-12)


def test_share_in_subspace_by_hand():
    vectors = torch.tensor([[3.0, 4.0, 0.0], [0.0, 0.0, 2.0]], dtype=f64)
    assert torch.allclose(share_in_subspace(vectors, unit(0, 3)[:, None]), torch.tensor([9 / 25, 0.0], dtype=f64))
    plane = torch.stack([unit(0, 3), unit(1, 3)], dim=1)
    assert torch.allclose(share_in_subspace(vectors, plane), torch.tensor([1.0, 0.0], dtype=f64))


# --- the real model ------------------------------------------------------------------------------

@pytest.mark.slow
def test_minilm_circuits_have_rank_d_head_and_the_layer_output_is_a_sum_over_heads():
    from mha.pretrained.encoder import MiniLMEncoder

    encoder = MiniLMEncoder.load()
    stacked = encoder.stacked_head_weights()
    W_QK = qk_circuit(stacked.W_Q[0].double(), stacked.W_K[0].double())  # (heads, 384, 384)
    W_OV = ov_circuit(stacked.W_V[0].double(), stacked.W_O[0].double())
    assert numerical_rank(W_QK).tolist() == [32] * 12
    assert numerical_rank(W_OV).tolist() == [32] * 12
    trace = encoder.trace("The keys to the old cabinet are on the table .")
    layer = 2
    x = trace.hidden_states[layer]  # (1, seq, 384), the input of layer 2
    attention = encoder.layers[layer].attention
    with torch.no_grad():
        expected = attention(x).output
        writes = head_writes(x, trace.attention_weights[layer], stacked.W_V[layer], stacked.W_O[layer],
                             stacked.b_V[layer], attention.b_O)
    assert torch.allclose(writes.total(), expected, atol=1e-4)


# --- anisotropic baselines and variance (chapter 2, "Lenses or copies?") -------------------------------

def test_mean_pair_overlap_matches_scipy_principal_angles():
    from scipy import linalg
    W = torch.randn(3, 9, 2, generator=torch.Generator().manual_seed(4), dtype=f64)
    by_pair = [float((torch.cos(torch.from_numpy(linalg.subspace_angles(W[a].numpy(), W[b].numpy()))) ** 2).mean())
               for a in range(3) for b in range(3) if a != b]
    assert float(mean_pair_overlap(W)) == pytest.approx(sum(by_pair) / len(by_pair), abs=1e-12)
    with pytest.raises(ValueError, match="at least two"):
        mean_pair_overlap(W[:1])


def test_anisotropic_draws_live_in_the_covariance_and_match_it():
    mixing = torch.randn(5, 2, generator=torch.Generator().manual_seed(1), dtype=f64)
    low_rank = mixing @ mixing.T  # rank 2: every draw lies in span(mixing), up to sqrt(eps) of the zero eigenvalues
    draws = anisotropic_random_bases(low_rank, n_sets=3, n_heads=2, d_head=2, seed=0)
    assert draws.shape == (3, 2, 5, 2)
    basis = torch.linalg.qr(mixing).Q
    columns = draws.transpose(-1, -2).reshape(-1, 5)  # (draws, 5)
    assert torch.allclose(columns - columns @ basis @ basis.T, torch.zeros_like(columns), atol=1e-6)  # sqrt of rounding
    covariance = torch.diag(torch.tensor([4.0, 1.0, 0.25], dtype=f64))
    many = anisotropic_random_bases(covariance, n_sets=4000, n_heads=5, d_head=1, seed=2)
    sample = many.transpose(-1, -2).reshape(-1, 3)  # (20000, 3) Gaussian vectors
    assert torch.allclose(sample.T @ sample / len(sample), covariance, atol=0.08)
    assert torch.equal(many, anisotropic_random_bases(covariance, n_sets=4000, n_heads=5, d_head=1, seed=2))
    with pytest.raises(ValueError, match="symmetric"):
        anisotropic_random_bases(torch.tensor([[1.0, 2.0], [0.0, 1.0]], dtype=f64), 1, 1, 1)


def test_variance_in_subspace_and_coverage_by_hand():
    covariance = torch.diag(torch.tensor([4.0, 3.0, 2.0, 1.0], dtype=f64))  # total variance 10
    assert float(variance_in_subspace(unit(0, 4)[:, None], covariance)) == pytest.approx(0.4)
    diagonal = (unit(0, 4) + unit(3, 4))[:, None]  # half of directions 0 and 3: (4 + 1) / 2 of 10
    assert float(variance_in_subspace(diagonal, covariance)) == pytest.approx(0.25)
    tiling = torch.stack([torch.eye(4, dtype=f64)[:, :2], torch.eye(4, dtype=f64)[:, 2:]])
    assert float(variance_coverage(tiling, covariance)) == pytest.approx(1.0)
    copies = torch.stack([torch.eye(4, dtype=f64)[:, 1:3]] * 2)  # both heads read directions 1 and 2 only
    assert float(variance_coverage(copies, covariance)) == pytest.approx(0.5)
    # a head reading e0 and one reading v = e1 + 0.1 e2: each of the two directions read once, the rest never
    tilted = torch.stack([unit(0, 4)[:, None], (unit(1, 4) + 0.1 * unit(2, 4))[:, None]])
    assert float(variance_coverage(tilted, covariance)) == pytest.approx((4 + (3 + 0.01 * 2) / 1.01) / 10)
    shares = variance_coverage(copies, covariance, (1.5, 2.5))  # the copies' directions are read twice
    assert shares.shape == (2,) and torch.allclose(shares, torch.tensor([0.5, 0.0], dtype=f64), atol=1e-12)
    with pytest.raises(ValueError, match="min_heads"):
        variance_coverage(tiling, covariance, 0.0)


def test_missing_subspace_baselines_say_how_to_restore(tmp_path):
    with pytest.raises(ValueError, match="scripts.subspace_baselines"):
        load_subspace_baselines(tmp_path / "subspace_baselines.json")
