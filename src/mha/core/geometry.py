"""The geometry of heads: circuits, ranks and subspaces (chapter 2, "Each head's own subspace").

A head never sees a token's whole ``d_model``-dimensional vector. It reads it
through its own ``W_Q``, ``W_K``, ``W_V`` of shape ``(d_model, d_head)`` and
writes through its own rows of ``W_O``, ``(d_head, d_model)``. Following
Elhage et al. 2021 ("A mathematical framework for transformer circuits"), two
``(d_model, d_model)`` matrices summarise a head:

* the **QK circuit** ``W_QK = W_Q @ W_K.T``: ``score(x_i, x_j) = x_i @ W_QK @ x_j.T / sqrt(d_head)``
  plus bias terms (:func:`score_terms`);
* the **OV circuit** ``W_OV = W_V @ W_O``: a head that puts weight ``A[i, j]`` on
  token ``j`` writes ``sum_j A[i, j] x_j @ W_OV`` plus a bias (:func:`head_writes`).

Both have rank at most ``d_head`` (:func:`numerical_rank`). The subspaces a head
reads from (the column space of ``W_Q``, ``W_K`` or ``W_V``) and writes to (the
row space of ``W_O``) are compared with principal angles
(:func:`principal_angle_cosines`, :func:`head_subspace_angles`) against random
subspaces of the same size (:func:`random_subspace_angles`), and with random
subspaces as anisotropic as the model's own residual stream
(:func:`anisotropic_random_bases`): is each head a lens on its own part of the
space (:func:`mean_pair_overlap`), and do a layer's lenses together read its
variance (:func:`variance_in_subspace`, :func:`variance_coverage`)? The stored
baselines of chapter 2 are read by :func:`load_subspace_baselines`.

Conventions are the book's: vectors are rows, so a head computes
``q = x @ W_Q + b_Q``; every function accepts leading batch axes (for example
``(layers, heads, d_model, d_head)``) and works in the dtype it is given (use
float64 for ranks and angles of float32 weights: see :func:`numerical_rank`).
"""

from __future__ import annotations

import math
import os
from typing import NamedTuple

import torch
from torch import Tensor

from mha.core.argument_checks import check_float_dtype
from mha.core.layouts import HEADS, takes_attention
from mha.core.validation import (
    InputError,
    as_path,
    check_finite_number,
    check_rank,
    check_real_tensor,
    check_same_shape,
    check_seed,
    check_share,
    check_size,
    check_whole_number,
)
from mha.data_files import DATA_DIRECTORY, read_verified_json

__all__ = [
    "qk_circuit",
    "ov_circuit",
    "ScoreTerms",
    "score_terms",
    "HeadWrites",
    "head_writes",
    "numerical_rank",
    "energy_rank",
    "orthonormal_basis",
    "principal_angle_cosines",
    "head_subspace_angles",
    "subspace_overlap",
    "random_subspace_angles",
    "projector_sum_spectrum",
    "share_in_subspace",
    "mean_pair_overlap",
    "anisotropic_random_bases",
    "variance_in_subspace",
    "variance_coverage",
    "SUBSPACE_BASELINES_PATH",
    "load_subspace_baselines",
]


def _check_same_d_model(name_a: str, a: Tensor, name_b: str, b: Tensor, axis_a: int, axis_b: int) -> None:
    for name, tensor, axis in ((name_a, a, axis_a), (name_b, b, axis_b)):
        check_rank(name, tensor.shape, range(-axis, 9), f"a tensor of at least {-axis} axes, d_model at axis {axis}")
    if a.shape[axis_a] != b.shape[axis_b]:
        raise ValueError(f"{name_a} has shape {tuple(a.shape)} and {name_b} has shape {tuple(b.shape)}: they should "
                         "share the d_model axis; pass each head's (d_model, d_head) matrix, vectors as rows.")


def qk_circuit(W_Q: Tensor, W_K: Tensor) -> Tensor:
    """The QK circuit ``W_QK = W_Q @ W_K.T``: (..., d_model, d_head) twice -> (..., d_model, d_model).

    ``x_i @ W_QK @ x_j.T`` equals the dot product of query ``x_i @ W_Q`` and key
    ``x_j @ W_K`` (biases left out: see :func:`score_terms`). Its rank is at most
    ``d_head``. Chapter 2, "Each head's own subspace".
    """
    W_Q = check_real_tensor("W_Q", W_Q, meaning="(..., d_model, d_head)")
    W_K = check_real_tensor("W_K", W_K, meaning="(..., d_model, d_head)")
    check_rank("W_Q", W_Q.shape, range(2, 9), "(..., d_model, d_head)")
    if W_Q.shape != W_K.shape:
        raise ValueError(f"W_Q has shape {tuple(W_Q.shape)} and W_K {tuple(W_K.shape)}; one head's queries and keys "
                         "need the same (d_model, d_head) shape.")
    return W_Q @ W_K.transpose(-1, -2)  # (..., d_model, d_model)


def ov_circuit(W_V: Tensor, W_O: Tensor) -> Tensor:
    """The OV circuit ``W_OV = W_V @ W_O``: (..., d_model, d_head), (..., d_head, d_model) -> (..., d_model, d_model).

    A token ``x`` that the head attends to with weight 1 makes it write
    ``x @ W_OV`` (plus ``b_V @ W_O``). Its rank is at most ``d_head``.
    Chapter 2, "Each head's own subspace".
    """
    W_V = check_real_tensor("W_V", W_V)
    W_O = check_real_tensor("W_O", W_O)
    check_rank("W_V", W_V.shape, range(2, 9), "(..., d_model, d_head)")
    check_rank("W_O", W_O.shape, range(2, 9), "(..., d_head, d_model)")
    if W_O.shape[-2] != W_V.shape[-1] or W_O.shape[-1] != W_V.shape[-2]:
        raise ValueError(f"W_V has shape {tuple(W_V.shape)} and W_O {tuple(W_O.shape)}; for one head they should be "
                         "(d_model, d_head) and (d_head, d_model), W_O being the head's own rows of the output matrix.")
    return W_V @ W_O  # (..., d_model, d_model)


class ScoreTerms(NamedTuple):
    """The four parts of one head's scaled scores ``(x_i W_Q + b_Q)(x_j W_K + b_K)ᵀ / sqrt(d_head)``.

    Each is (..., n_q, n_k). ``query_only`` and ``constant`` are the same along
    every row, so the softmax removes them; ``key_only`` is a per-key bias
    ``b_Q W_Kᵀ x_jᵀ`` shared by every query.
    """

    bilinear: Tensor  # x_i W_QK x_jᵀ / sqrt(d_head)
    query_only: Tensor  # x_i W_Q b_Kᵀ / sqrt(d_head), constant along each row
    key_only: Tensor  # b_Q W_Kᵀ x_jᵀ / sqrt(d_head), constant down each column
    constant: Tensor  # b_Q b_Kᵀ / sqrt(d_head)

    def total(self) -> Tensor:
        """The scores the head feeds to the softmax, (..., n_q, n_k)."""
        return self.bilinear + self.query_only + self.key_only + self.constant


def score_terms(x_query: Tensor, x_key: Tensor, W_Q: Tensor, W_K: Tensor,
                b_Q: Tensor | None = None, b_K: Tensor | None = None) -> ScoreTerms:
    """Split one head's scaled scores into the QK-circuit term and three bias terms (chapter 2).

    ``x_query`` (..., n_q, d_model), ``x_key`` (..., n_k, d_model), ``W_Q``,
    ``W_K`` (d_model, d_head), biases (d_head,) or None. Returns
    :class:`ScoreTerms`, each (..., n_q, n_k); their sum is ``q @ k.T / sqrt(d_head)``.
    """
    x_query = check_real_tensor("x_query", x_query)
    x_key = check_real_tensor("x_key", x_key)
    W_Q = check_real_tensor("W_Q", W_Q)
    W_K = check_real_tensor("W_K", W_K)
    check_rank("W_Q", W_Q.shape, (2,), "(d_model, d_head), one head's query matrix")
    _check_same_d_model("x_query", x_query, "W_Q", W_Q, -1, 0)
    _check_same_d_model("x_key", x_key, "W_K", W_K, -1, 0)
    scale = 1.0 / math.sqrt(W_Q.shape[-1])
    zero = torch.zeros(W_Q.shape[-1], dtype=W_Q.dtype, device=W_Q.device)
    b_Q = zero if b_Q is None else b_Q
    b_K = zero if b_K is None else b_K
    n_q, n_k = x_query.shape[-2], x_key.shape[-2]
    bilinear = x_query @ qk_circuit(W_Q, W_K) @ x_key.transpose(-1, -2) * scale  # (..., n_q, n_k)
    query_only = (x_query @ W_Q @ b_K)[..., :, None].expand(*x_query.shape[:-2], n_q, n_k) * scale
    key_only = (x_key @ W_K @ b_Q)[..., None, :].expand(*x_key.shape[:-2], n_q, n_k) * scale
    constant = torch.full_like(bilinear, float(b_Q @ b_K) * scale)
    return ScoreTerms(bilinear, query_only, key_only, constant)


class HeadWrites(NamedTuple):
    """What an attention layer writes, split by head through the OV circuits (chapter 2)."""

    per_head: Tensor  # (..., heads, n_q, d_model): A_h @ X @ W_OV^h
    bias: Tensor  # (d_model,): sum_h b_V^h @ W_O^h + b_O, the same for every token

    def total(self) -> Tensor:
        """The layer's output, (..., n_q, d_model): the sum over heads plus the bias."""
        return self.per_head.sum(dim=-3) + self.bias


@takes_attention(weights=HEADS.with_leading(5))
def head_writes(x: Tensor, weights: Tensor, W_V: Tensor, W_O: Tensor,
                b_V: Tensor | None = None, b_O: Tensor | None = None) -> HeadWrites:
    """The layer output as a sum over heads of ``A_h X W_OV^h``, plus one bias vector (chapter 2).

    ``x`` (..., n, d_model) the tokens attended to, ``weights`` (..., heads, n_q, n)
    each head's attention (rows sum to 1), ``W_V`` (heads, d_model, d_head),
    ``W_O`` (heads, d_head, d_model), ``b_V`` (heads, d_head), ``b_O``
    (d_model,). Because every row of ``A_h`` sums to 1, head ``h``'s value bias
    reaches the output as the constant ``b_V^h @ W_O^h``.
    """
    x = check_real_tensor("x", x)
    weights = check_real_tensor("weights", weights)
    W_V = check_real_tensor("W_V", W_V)
    W_O = check_real_tensor("W_O", W_O)
    check_rank("x", x.shape, range(2, 9), "(..., n, d_model): the tokens attended to, one row per position")
    check_rank("W_V", W_V.shape, (3,), "(heads, d_model, d_head), e.g. stacked_head_weights().W_V[layer]")
    check_rank("weights", weights.shape, range(3, 9), "(..., heads, n_q, n_k) attention weights")
    if weights.shape[-3] != W_V.shape[0] or weights.shape[-1] != x.shape[-2]:
        raise ValueError(f"weights {tuple(weights.shape)}, x {tuple(x.shape)} and W_V {tuple(W_V.shape)} disagree: "
                         "weights should be (..., heads, n_q, n) for x (..., n, d_model) and W_V (heads, d_model, "
                         "d_head).")
    W_OV = ov_circuit(W_V, W_O)  # (heads, d_model, d_model)
    moved = torch.einsum("...nd,hde->...hne", x, W_OV)  # (..., heads, n, d_model): x_j @ W_OV^h
    per_head = weights @ moved  # (..., heads, n_q, d_model)
    bias = torch.zeros(W_O.shape[-1], dtype=W_O.dtype, device=W_O.device)  # (d_model,)
    if b_V is not None:
        b_V = check_real_tensor("b_V", b_V)
        check_same_shape("b_V", b_V.shape, "(heads, d_head)", W_V.shape[::2], "b_V holds one bias per value feature")
        bias = bias + torch.einsum("hd,hde->e", b_V, W_O)
    if b_O is not None:
        b_O = check_real_tensor("b_O", b_O)
        check_same_shape("b_O", b_O.shape, "(d_model,)", W_O.shape[-1:], "b_O holds one bias per output feature")
        bias = bias + b_O
    return HeadWrites(per_head, bias)


def numerical_rank(matrix: Tensor, rtol: float | None = None) -> Tensor:
    """How many singular values exceed ``rtol`` times the largest: (..., m, n) -> (...) integer tensor.

    The default ``rtol`` is ``max(m, n) * eps`` of the matrix's dtype, as in
    ``torch.linalg.matrix_rank``: singular values below it are rounding
    noise. A product computed in float32 carries noise near 1e-7 of its
    largest singular value, so compute in float64, or pass a larger ``rtol``.
    Chapter 2, "Each head's own subspace".
    """
    matrix = check_real_tensor("matrix", matrix)
    check_rank("matrix", matrix.shape, range(2, 9), "(..., m, n)")
    if rtol is None:
        rtol = max(matrix.shape[-2:]) * torch.finfo(matrix.dtype).eps
    rtol = check_finite_number("rtol", rtol, minimum=0, meaning="a share of the largest singular value")
    singular_values = torch.linalg.svdvals(matrix)  # (..., min(m, n)), descending
    return (singular_values > rtol * singular_values[..., :1]).sum(dim=-1)


def energy_rank(matrix: Tensor, energy: float = 0.99) -> Tensor:
    """The fewest singular directions that hold ``energy`` of the squared Frobenius norm: (..., m, n) -> (...).

    ``r`` such that ``s_1² + ... + s_r² >= energy * sum(s²)``: the dimensions a
    matrix *uses*, as opposed to the most it could use. The book calls it the
    *energy rank*, to keep it apart from the numerical rank
    (:func:`numerical_rank`, which it never exceeds) and from the pattern rank
    of an attention pattern (``min_head_width``). Chapter 2, "The low-rank
    bottleneck".
    """
    matrix = check_real_tensor("matrix", matrix)
    check_rank("matrix", matrix.shape, range(2, 9), "(..., m, n)")
    if not 0.0 < check_share("energy", energy, meaning="of the squared norm, e.g. 0.99") <= 1.0:
        raise ValueError(f"energy is a share of the squared norm, between 0 (excluded) and 1; got {energy}.")
    squared = torch.linalg.svdvals(matrix) ** 2  # (..., min(m, n)), descending
    held = squared.cumsum(dim=-1) / squared.sum(dim=-1, keepdim=True)  # (..., min(m, n))
    tolerance = 1e3 * torch.finfo(squared.dtype).eps  # so that energy = 1.0 ignores rounding noise
    return (held < energy - tolerance).sum(dim=-1) + 1


def orthonormal_basis(W: Tensor) -> Tensor:
    """An orthonormal basis of the column space of ``W``: (..., d, k) -> (..., d, k), for ``W`` of full column rank.

    The columns of a head's ``W_Q`` (d_model, d_head) span the directions of
    ``d_model`` it reads: ``x @ W_Q`` depends only on ``x``'s component there.
    Computed from the SVD, so it is the same subspace for any choice of the
    head's internal basis. Chapter 2.
    """
    W = check_real_tensor("W", W)
    check_rank("W", W.shape, range(2, 9), "(..., d, k)")
    if W.shape[-1] > W.shape[-2]:
        raise ValueError(f"W has shape {tuple(W.shape)}: a basis of its column space needs k <= d; "
                         "for a head's W_O (d_head, d_model), pass W_O.transpose(-1, -2) to get the space it writes "
                         "to.")
    return torch.linalg.svd(W, full_matrices=False).U  # (..., d, k)


def principal_angle_cosines(A: Tensor, B: Tensor) -> Tensor:
    """Cosines of the principal angles between the column spaces of ``A`` (..., d, k_a) and ``B`` (..., d, k_b).

    Returns (..., min(k_a, k_b)) in descending order (smallest angle first):
    the singular values of ``Q_Aᵀ Q_B`` for orthonormal bases ``Q_A``, ``Q_B``.
    A cosine of 1 is a direction the two spaces share; 0 a direction of one
    orthogonal to all of the other. Chapter 2, "Each head's own subspace".
    """
    A = check_real_tensor("A", A)
    B = check_real_tensor("B", B)
    _check_same_d_model("A", A, "B", B, -2, -2)
    overlap = orthonormal_basis(A).transpose(-1, -2) @ orthonormal_basis(B)  # (..., k_a, k_b)
    return torch.linalg.svdvals(overlap).clamp(0.0, 1.0)  # (..., min(k_a, k_b))


def head_subspace_angles(W: Tensor, W_other: Tensor | None = None) -> Tensor:
    """Principal angles (radians, ascending) between every pair of heads' subspaces (chapter 2).

    ``W`` (heads, d_model, d_head), e.g. ``stacked_head_weights().W_Q.flatten(0, 1)``
    for all 72 heads; ``W_other`` (heads_b, d_model, d_head), default ``W``.
    Returns (heads, heads_b, d_head). Column spaces are compared, so pass
    ``W_O.transpose(-1, -2)`` for the spaces heads write to.
    """
    W = check_real_tensor("W", W)
    check_rank("W", W.shape, (3,), "(heads, d_model, d_head)")
    W_other = W if W_other is None else check_real_tensor("W_other", W_other)
    check_rank("W_other", W_other.shape, (3,), "(heads, d_model, d_head)")
    _check_same_d_model("W", W, "W_other", W_other, -2, -2)
    basis, basis_other = orthonormal_basis(W), orthonormal_basis(W_other)  # (heads, d_model, d_head)
    overlap = torch.einsum("adk,bdl->abkl", basis, basis_other)  # (heads, heads_b, d_head, d_head)
    cosines = torch.linalg.svdvals(overlap).clamp(0.0, 1.0)  # (heads, heads_b, d_head), descending
    return torch.arccos(cosines)  # ascending angles


def subspace_overlap(angles: Tensor) -> Tensor:
    """Mean squared cosine of principal angles: (..., k) radians -> (...), 1 = same subspace, 0 = orthogonal.

    For two random ``k``-dimensional subspaces of ``d`` dimensions its expected
    value is ``k / d`` (chapter 2).
    """
    angles = check_real_tensor("angles", angles)
    if angles.ndim == 0 or angles.shape[-1] == 0:
        raise InputError(f"angles has shape {tuple(angles.shape)}; give (..., k) principal angles with k >= 1, e.g. "
                         "from head_subspace_angles: a mean over no angles is no number.")
    return torch.cos(angles).pow(2).mean(dim=-1)


def random_subspace_angles(d_model: int, d_head: int, n_pairs: int = 200, seed: int = 0,
                           dtype: torch.dtype = torch.float64) -> Tensor:
    """Principal angles (radians, ascending) between ``n_pairs`` pairs of random ``d_head``-dim subspaces of
    ``d_model``.

    The baseline for :func:`head_subspace_angles`: subspaces spanned by
    Gaussian random columns, which are uniformly distributed. Returns
    (n_pairs, d_head). Chapter 2.
    """
    d_model = check_whole_number("d_model", d_model, minimum=1)
    d_head = check_whole_number("d_head", d_head, minimum=1)
    n_pairs = check_whole_number("n_pairs", n_pairs, minimum=1)
    if d_head > d_model:
        raise ValueError(f"need 1 <= d_head <= d_model, got d_head = {d_head}, d_model = {d_model}.")
    check_size("each set of random bases (n_pairs, d_model, d_head)", (n_pairs, d_model, d_head))
    check_float_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    A = torch.randn(n_pairs, d_model, d_head, generator=generator, dtype=dtype)  # (pairs, d_model, d_head)
    B = torch.randn(n_pairs, d_model, d_head, generator=generator, dtype=dtype)
    return torch.arccos(principal_angle_cosines(A, B))  # (pairs, d_head)


def projector_sum_spectrum(W: Tensor) -> Tensor:
    """Eigenvalues (descending) of the sum of the heads' orthogonal projectors: (heads, d_model, d_head) -> (d_model,).

    The eigenvalue of a unit direction ``u`` is ``sum_h |P_h u|²``: how many
    heads, in total, read it. Heads that tiled ``d_model`` without overlap
    would give all ones; directions no head reads give 0; the eigenvalues
    always sum to ``heads * d_head``. Chapter 2.
    """
    W = check_real_tensor("W", W)
    check_rank("W", W.shape, (3,), "(heads, d_model, d_head)")
    return torch.linalg.eigvalsh(_projector_sum(W)).flip(-1)  # (d_model,), descending


def _projector_sum(W: Tensor) -> Tensor:
    """``sum_h P_h`` for (..., heads, d_model, d_head) -> (..., d_model, d_model), checked."""
    W = check_real_tensor("W", W)
    check_rank("W", W.shape, range(3, 9), "(..., heads, d_model, d_head)")
    basis = orthonormal_basis(W)  # (..., heads, d_model, d_head)
    return torch.einsum("...hdk,...hek->...de", basis, basis)  # (..., d_model, d_model)


def share_in_subspace(vectors: Tensor, W: Tensor) -> Tensor:
    """The share of each vector's squared length inside the column space of ``W``, in [0, 1] (chapter 2).

    ``vectors`` (..., n, d_model), ``W`` (..., d_model, k) -> (..., n). A random
    ``k``-dimensional subspace holds ``k / d_model`` of a typical vector.
    """
    vectors = check_real_tensor("vectors", vectors)
    W = check_real_tensor("W", W)
    _check_same_d_model("vectors", vectors, "W", W, -1, -2)
    coordinates = vectors @ orthonormal_basis(W)  # (..., n, k)
    return coordinates.pow(2).sum(dim=-1) / vectors.pow(2).sum(dim=-1)


def mean_pair_overlap(W: Tensor) -> Tensor:
    """The mean :func:`subspace_overlap` over every pair of different heads: (heads, d_model, d_head) -> scalar.

    One number for how much a layer's heads share: 1 if they all read one subspace, ``d_head / d_model`` on average
    for random subspaces (the isotropic baseline), lower still if they avoid each other. Chapter 2, "Each head's
    own subspace".
    """
    W = check_real_tensor("W", W)
    check_rank("W", W.shape, (3,), "(heads, d_model, d_head), one layer's heads")
    if W.shape[0] < 2:
        raise InputError(f"W has {W.shape[0]} head; a mean over pairs of heads needs at least two.")
    overlap = subspace_overlap(head_subspace_angles(W))  # (heads, heads)
    others = ~torch.eye(W.shape[0], dtype=torch.bool, device=W.device)
    return overlap[others].mean()


def _check_covariance(covariance: Tensor) -> Tensor:
    covariance = check_real_tensor("covariance", covariance, meaning="(d_model, d_model)")
    check_rank("covariance", covariance.shape, (2,), "(d_model, d_model), a covariance matrix")
    if covariance.shape[0] != covariance.shape[1] or not torch.allclose(covariance, covariance.T, rtol=1e-5,
                                                                        atol=1e-8 * float(covariance.abs().max())):
        raise InputError(f"covariance has shape {tuple(covariance.shape)} and must be a symmetric (d_model, d_model) "
                         "matrix, such as torch.cov(states.T) for states (tokens, d_model).")
    if not torch.isfinite(covariance).all() or float(torch.trace(covariance)) <= 0:
        raise InputError("covariance must be finite with a positive trace (total variance); got a zero or "
                         "non-finite matrix.")
    return covariance


def anisotropic_random_bases(covariance: Tensor, n_sets: int, n_heads: int, d_head: int, seed: int = 0) -> Tensor:
    """Random heads as anisotropic as the data: (d_model, d_model) -> (n_sets, n_heads, d_model, d_head).

    Each head's ``d_head`` columns are independent Gaussian vectors with the given covariance (``L z`` with
    ``L Lᵀ = covariance`` from its eigendecomposition, small negative eigenvalues set to 0), so its span leans
    towards the directions in which the tokens vary most: the baseline "a head that reads the residual stream at
    random, weighted by what is there". Compare :func:`random_subspace_angles`, the isotropic baseline. Seeded; in
    the covariance's dtype. Chapter 2, "Each head's own subspace".
    """
    covariance = _check_covariance(covariance)
    n_sets = check_whole_number("n_sets", n_sets, minimum=1)
    n_heads = check_whole_number("n_heads", n_heads, minimum=1)
    d_head = check_whole_number("d_head", d_head, minimum=1)
    d_model = covariance.shape[0]
    if d_head > d_model:
        raise InputError(f"need d_head <= d_model, got d_head = {d_head}, d_model = {d_model}.")
    check_size("the random bases (n_sets, n_heads, d_model, d_head)", (n_sets, n_heads, d_model, d_head))
    eigenvalues, eigenvectors = torch.linalg.eigh(covariance)  # (d_model,), (d_model, d_model)
    root = eigenvectors * eigenvalues.clamp(min=0).sqrt()  # (d_model, d_model): root @ root.T = covariance
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    z = torch.randn(n_sets, n_heads, d_model, d_head, generator=generator, dtype=covariance.dtype)
    return root @ z  # (n_sets, n_heads, d_model, d_head)


def variance_in_subspace(W: Tensor, covariance: Tensor) -> Tensor:
    """The share of the total variance that lies in the column space of ``W``: (..., d_model, k) -> (...), in [0, 1].

    ``trace(Qᵀ Σ Q) / trace(Σ)`` for an orthonormal basis ``Q``: what a head reading that subspace sees of the
    tokens' spread. A random ``k``-dimensional subspace holds ``k / d_model`` of it on average; the covariance
    analogue of :func:`share_in_subspace`. Chapter 2, "Each head's own subspace".
    """
    covariance = _check_covariance(covariance)
    W = check_real_tensor("W", W)
    _check_same_d_model("W", W, "covariance", covariance, -2, -1)
    basis = orthonormal_basis(W)  # (..., d_model, k)
    held = torch.einsum("...dk,de,...ek->...", basis, covariance, basis)
    return held / torch.trace(covariance)


def variance_coverage(W: Tensor, covariance: Tensor, min_heads: float | tuple[float, ...] = 0.1) -> Tensor:
    """The share of the variance in directions that a layer's heads, together, read at least ``min_heads`` times.

    ``W`` (..., heads, d_model, d_head), ``covariance`` (d_model, d_model) -> (...), or (..., thresholds) for a
    tuple of thresholds. The directions are the eigenvectors ``u`` of the heads' projector sum
    (:func:`projector_sum_spectrum`), read ``sum_h |P_h u|²`` times; the share is the sum of ``uᵀ Σ u`` over the
    directions read at least ``min_heads`` times, over ``trace(Σ)``. Heads that tiled the space give 1 (every
    direction read once); heads that piled onto a few directions leave the rest, and the variance there, unread.
    Chapter 2, "Each head's own subspace".
    """
    covariance = _check_covariance(covariance)
    thresholds = min_heads if isinstance(min_heads, tuple) else (min_heads,)
    if not thresholds or not all(isinstance(t, (int, float)) and not isinstance(t, bool) and t > 0
                                 for t in thresholds):
        raise InputError(f"min_heads is how many heads' worth of reading counts as read: a number above 0 (the "
                         f"book uses 0.1) or a tuple of them; got {min_heads!r}.")
    projector_sum = _projector_sum(W)  # (..., d_model, d_model)
    _check_same_d_model("W", projector_sum, "covariance", covariance, -1, -1)
    times_read, directions = torch.linalg.eigh(projector_sum)  # (..., d_model), (..., d_model, d_model)
    variance = torch.einsum("...di,de,...ei->...i", directions, covariance, directions)  # (..., d_model)
    bars = torch.tensor(thresholds, dtype=times_read.dtype)  # (thresholds,)
    read = times_read[..., None, :] >= bars[:, None]  # (..., thresholds, d_model)
    shares = (variance[..., None, :] * read).sum(dim=-1) / torch.trace(covariance)  # (..., thresholds)
    return shares if isinstance(min_heads, tuple) else shares[..., 0]


SUBSPACE_BASELINES_PATH = DATA_DIRECTORY / "subspace_baselines.json"
"""Chapter 2's heads against random subspaces as anisotropic as the residual stream (scripts/subspace_baselines.py)."""


def load_subspace_baselines(path: str | os.PathLike | None = None) -> dict:
    """The stored comparison of chapter 2, "Each head's own subspace" (``data/subspace_baselines.json``), hash-checked.

    A dict with the setup (sentences, draws, seed, thresholds) and, per layer, the real heads' mean pair overlap,
    variance share and coverage for queries, keys and values, beside the same numbers for every random draw
    (anisotropic and isotropic). Written by ``python -m scripts.subspace_baselines``; a missing or damaged file
    raises ``ValueError`` saying how to restore it.
    """
    path = SUBSPACE_BASELINES_PATH if path is None else as_path("path", path)
    content, how = read_verified_json(path, what="the stored subspace baselines",
                                      regenerate="python -m scripts.subspace_baselines", limit=2_000_000)
    if not isinstance(content, dict) or not isinstance(content.get("layers"), list) or not content["layers"]:
        raise ValueError(f"the stored subspace baselines {path} have no list of layers. {how}")
    return content
