"""Scores that say what role a head plays, as defined in the circuits literature (chapter 3, "Induction heads").

Attention-pattern scores read a head's weights on a known input:

* :func:`previous_token_score` - mean attention from each position to the one before it;
* :func:`prefix_matching_score` - on a sequence with repeats, mean attention from
  a token to the token right *after* its earlier occurrence(s). This is the
  "prefix matching" of Olsson et al. 2022, "In-context learning and induction
  heads" (Transformer Circuits Thread), the signature of an induction head.

Weight scores read a head's matrices directly:

* :func:`copying_score` - does attending to token ``t`` raise the logit of ``t``?
  From the eigenvalues of the head's full OV circuit ``W_E W_V W_O W_U``, as in
  Elhage et al. 2021, "A mathematical framework for transformer circuits", and
  used for induction heads' copying by Olsson et al. 2022;
* :func:`k_composition_score` (and its Q and V twins) - how much a later head's
  keys read what an earlier head wrote (Elhage et al. 2021).

Conventions are the book's: vectors are rows, so a head computes
``q = x @ W_Q``, ``k = x @ W_K``, ``v = x @ W_V`` with ``W_Q, W_K, W_V`` of shape
``(d_model, d_head)`` and writes ``z @ W_O`` with ``W_O`` ``(d_head, d_model)``.
Hence ``W_QK = W_Q @ W_K.T`` ``(d_model, d_model)`` gives the score
``x_query @ W_QK @ x_key.T`` and ``W_OV = W_V @ W_O`` ``(d_model, d_model)``
maps an attended vector ``x`` to what the head writes, ``x @ W_OV``. Biases,
LayerNorm and the ``1/sqrt(d_head)`` scale are left out of the weight scores
(none changes which token a head copies or which subspace it reads).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from mha.core.geometry import ov_circuit, qk_circuit
from mha.core.layouts import BATCH_HEADS, LAYERS_BATCH_HEADS, takes_attention
from mha.core.validation import (
    InputError,
    check_rank,
    check_real_tensor,
    check_seed,
    check_size,
    check_type,
    check_whole_number,
)
from mha.lab.tiny_model import check_tiny_model

__all__ = [
    "attention_to_key_positions",
    "previous_token_score",
    "prefix_matching_score",
    "full_ov_circuit",
    "copying_score",
    "copying_top1_fraction",
    "k_composition_score",
    "q_composition_score",
    "v_composition_score",
    "composition_score_baseline",
    "head_role_scores",
    "attention_pattern_scores",
    "k_composition_scores",
]


def _check_weights(weights: Tensor) -> Tensor:
    return check_real_tensor("weights", weights, meaning="(..., batch, heads, seq_q, seq_k) attention weights")


def _matrices(named: dict[str, object], meaning: str) -> list[Tensor]:
    """Each of ``named`` as a real 2-d tensor, or an ``InputError`` naming the one that is not."""
    found = []
    for name, value in named.items():
        value = check_real_tensor(name, value, meaning=meaning)
        check_rank(name, value.shape, (2,), meaning)
        found.append(value)
    return found


def _circuit_factors(W_E, W_V, W_O, W_U) -> list[Tensor]:
    """``W_E`` (vocab, d_model), ``W_V`` (d_model, d_head), ``W_O`` (d_head, d_model), ``W_U`` (d_model, vocab), checked
    to be matrices that chain."""
    factors = _matrices({"W_E": W_E, "W_V": W_V, "W_O": W_O, "W_U": W_U}, "a matrix (rows, columns)")
    names = ("W_E", "W_V", "W_O", "W_U")
    named = list(zip(names, factors, strict=True))
    for (name_a, a), (name_b, b) in zip(named, named[1:], strict=False):  # each factor and the next
        if a.shape[1] != b.shape[0]:
            raise InputError(f"{name_a} has shape {tuple(a.shape)} and {name_b} {tuple(b.shape)}: they do not chain. "
                             "Give W_E (vocab, d_model), W_V (d_model, d_head), W_O (d_head, d_model) and W_U "
                             "(d_model, vocab).")
    return factors


def _circuits(named: dict[str, object]) -> list[Tensor]:
    """Two (d_model, d_model) circuits of the same shape, checked."""
    first, second = _matrices(named, "a (d_model, d_model) circuit, e.g. from qk_circuit or ov_circuit")
    (name_a, name_b) = named
    if first.shape != second.shape or first.shape[0] != first.shape[1]:
        raise InputError(f"{name_a} has shape {tuple(first.shape)} and {name_b} {tuple(second.shape)}; both should be "
                         "(d_model, d_model) circuits of one model.")
    return [first, second]


@takes_attention(weights=BATCH_HEADS.with_leading(4))
def attention_to_key_positions(weights: Tensor, key_positions: Tensor) -> Tensor:
    """Mean attention each head pays to one designated key per query (chapter 3).

    ``weights`` (..., batch, heads, seq_q, seq_k) and ``key_positions`` (batch,
    seq_q) integer, the key each query should attend to, or -1 to leave that
    query out. Returns (..., heads): the weight on the designated key, averaged
    over the batch and the queries that have one. With ``key_positions`` taken
    from a task's ``details["induction_key"]`` this is the prefix-matching
    score on exactly the positions the task designed.
    """
    weights = _check_weights(weights)
    batch, seq_q, seq_k = weights.shape[-4], weights.shape[-2], weights.shape[-1]
    if tuple(key_positions.shape) != (batch, seq_q):
        raise ValueError(f"key_positions has shape {tuple(key_positions.shape)}; it should be (batch, seq_q) = "
                         f"({batch}, {seq_q}), one key index (or -1) per query.")
    if int(key_positions.max()) >= seq_k:
        raise ValueError(f"key_positions holds {int(key_positions.max())}, but there are only {seq_k} keys.")
    scored = key_positions >= 0  # (batch, seq_q)
    if not scored.any():
        raise ValueError("key_positions is -1 everywhere, so there is nothing to score.")
    index = key_positions.clamp(min=0)[:, None, :, None]  # (batch, 1, seq_q, 1)
    index = index.expand(*weights.shape[:-1], 1)  # (..., batch, heads, seq_q, 1)
    on_key = weights.gather(-1, index).squeeze(-1)  # (..., batch, heads, seq_q)
    on_key = on_key * scored[:, None, :]  # zero where not scored
    return on_key.sum(dim=(-3, -1)) / scored.sum()  # (..., heads)


@takes_attention(weights=BATCH_HEADS.with_leading(4))
def previous_token_score(weights: Tensor) -> Tensor:
    """Mean attention from position ``i`` to position ``i - 1``, per head (chapter 3).

    ``weights`` (..., batch, heads, seq, seq) -> (..., heads): the mean over
    the batch and over queries ``i >= 1`` of ``weights[..., i, i - 1]``. A
    previous-token head scores near 1; a uniform causal head scores about
    ``mean_i 1/(i+1)``.
    """
    weights = _check_weights(weights)
    seq_q = weights.shape[-2]
    if seq_q < 2 or weights.shape[-1] < 2:
        raise ValueError(f"weights has shape {tuple(weights.shape)}; a previous token needs at least 2 positions.")
    below_diagonal = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (..., batch, heads, seq - 1)
    return below_diagonal.mean(dim=-1).mean(dim=-2)  # (..., heads)


@takes_attention(weights=BATCH_HEADS.with_leading(4))
def prefix_matching_score(weights: Tensor, tokens: Tensor, query_mask: Tensor | None = None) -> Tensor:
    """Olsson et al.'s prefix-matching score: attention to the token after an earlier copy of the current token.

    For query ``i`` holding token ``t``, the "prefix-matching" keys are every
    ``j + 1`` with ``j < i`` and ``tokens[j] == t``: the tokens that followed
    earlier occurrences of ``t``. The score is the weight on those keys, summed
    per query and averaged over the queries that have at least one (and where
    ``query_mask`` is True, if given). ``weights`` (..., batch, heads, seq,
    seq), ``tokens`` (batch, seq), ``query_mask`` (batch, seq) bool ->
    (..., heads). On a repeated random sequence an induction head scores near
    1. Olsson et al. 2022, "In-context learning and induction heads"; chapter 3.
    """
    weights = _check_weights(weights)
    batch, seq = weights.shape[-4], weights.shape[-2]
    if tuple(tokens.shape) != (batch, seq) or weights.shape[-1] != seq:
        raise ValueError(f"tokens has shape {tuple(tokens.shape)} and weights {tuple(weights.shape)}; self-attention "
                         f"weights (..., batch, heads, seq, seq) need tokens (batch, seq) = ({batch}, {seq}).")
    same_token = tokens[:, :, None] == tokens[:, None, :]  # (batch, seq_q, seq_k)
    earlier = torch.ones(seq, seq, dtype=torch.bool).tril(diagonal=-1)  # key j strictly before query i
    earlier_copy = same_token & earlier  # (batch, seq_q, seq_k): j < i holds the query's token
    follows_copy = torch.zeros_like(earlier_copy)
    follows_copy[..., 1:] = earlier_copy[..., :-1]  # key j + 1 follows an earlier copy
    scored = follows_copy.any(-1)  # (batch, seq_q)
    if query_mask is not None:
        if tuple(query_mask.shape) != (batch, seq):
            raise ValueError(f"query_mask has shape {tuple(query_mask.shape)}; "
                             f"it should be (batch, seq) = ({batch}, {seq}).")
        scored = scored & query_mask.bool()
    if not scored.any():
        raise ValueError("no query has an earlier copy of its token (inside query_mask), so prefix matching is "
                         "undefined; "
                         "use a sequence with repeats, e.g. mha.lab.tasks.InductionTask.")
    on_followers = (weights * follows_copy[:, None]).sum(-1)  # (..., batch, heads, seq_q)
    on_followers = on_followers * scored[:, None, :]
    return on_followers.sum(dim=(-3, -1)) / scored.sum()  # (..., heads)


def full_ov_circuit(W_E: Tensor, W_V: Tensor, W_O: Tensor, W_U: Tensor) -> Tensor:
    """The head's effect on the logits per attended token: ``W_E @ W_V @ W_O @ W_U`` (vocab, vocab).

    ``W_E`` (vocab, d_model), ``W_V`` (d_model, d_head), ``W_O`` (d_head,
    d_model), ``W_U`` (d_model, vocab). Row ``a``, column ``b``: how much
    attending fully to token ``a`` raises the logit of token ``b`` (direct path,
    no LayerNorm). A copying head has a large diagonal. Chapter 3.
    """
    W_E, W_V, W_O, W_U = _circuit_factors(W_E, W_V, W_O, W_U)
    return W_E @ W_V @ W_O @ W_U  # (vocab, vocab)


def copying_score(W_E: Tensor, W_V: Tensor, W_O: Tensor, W_U: Tensor) -> float:
    """How much a head copies: ``sum(eigenvalues) / sum(|eigenvalues|)`` of its full OV circuit, in [-1, 1].

    Shapes as in :func:`full_ov_circuit`. Positive eigenvalues of ``W_E W_V
    W_O W_U`` mean that attending to a token raises that same token's logit
    (an eigenvector is mapped onto a positive multiple of itself); +1 = all
    eigenvalues positive, a pure copier; -1 = pure anti-copier; near 0 = no
    consistent sign. This is the eigenvalue summary of Elhage et al. 2021
    ("A mathematical framework for transformer circuits"), which Olsson et
    al. 2022 use for induction heads' copying. The (vocab, vocab) circuit has
    at most ``d_head`` non-zero eigenvalues, the same as those of the small
    ``W_O W_U W_E W_V`` (d_head, d_head), which is what is computed. Chapter 3.
    """
    W_E, W_V, W_O, W_U = _circuit_factors(W_E, W_V, W_O, W_U)
    small = (W_O @ W_U @ W_E @ W_V).detach()  # (d_head, d_head): same non-zero eigenvalues as the full circuit
    eigenvalues = torch.linalg.eigvals(small.double())  # (d_head,) complex
    total = eigenvalues.abs().sum()
    if total == 0:
        return 0.0
    return float(eigenvalues.sum().real / total)  # the sum is the trace, so real


def copying_top1_fraction(ov_circuit: Tensor) -> float:
    """Fraction of tokens ``a`` whose own logit is the one most raised by attending to ``a``.

    ``ov_circuit`` (vocab, vocab) from :func:`full_ov_circuit` -> a number in
    [0, 1]: the share of rows whose largest entry is on the diagonal, a
    diagonal-dominance check that complements :func:`copying_score`. Chance
    level is ``1 / vocab``. Chapter 3.
    """
    (ov_circuit,) = _matrices({"ov_circuit": ov_circuit}, "(vocab, vocab)")
    if ov_circuit.shape[0] != ov_circuit.shape[1]:
        raise ValueError(f"ov_circuit has shape {tuple(ov_circuit.shape)}; it should be square (vocab, vocab).")
    return float((ov_circuit.argmax(dim=-1) == torch.arange(ov_circuit.shape[0])).float().mean())


def _normalised_product_norm(product: Tensor, first: Tensor, second: Tensor) -> float:
    denominator = torch.linalg.matrix_norm(first) * torch.linalg.matrix_norm(second)  # Frobenius
    if denominator == 0:
        return 0.0
    return float(torch.linalg.matrix_norm(product) / denominator)


def k_composition_score(W_QK_later: Tensor, W_OV_earlier: Tensor) -> float:
    """K-composition: how much a later head's keys read what an earlier head wrote (Elhage et al. 2021).

    With vectors as rows, the earlier head writes ``y @ W_OV_earlier`` into the
    residual stream at the key position, and the later head scores a key as
    ``x_q @ W_QK_later @ x_k.T``, so the part of its score that reads the
    earlier head is ``x_q @ (W_QK_later @ W_OV_earlier.T) @ y.T``. The score is

        ||W_QK_later @ W_OV_earlier.T||_F / (||W_QK_later||_F ||W_OV_earlier||_F),

    with ``W_QK_later = W_Q @ W_K.T`` and ``W_OV_earlier = W_V @ W_O``, both
    (d_model, d_model). (In the paper's vectors-as-columns notation, where
    ``W_OV`` is our transpose, this is ``||W_QK W_OV|| / (||W_QK|| ||W_OV||)``.)
    It lies in [0, 1]; compare with :func:`composition_score_baseline`, what
    random matrices of the same shapes give. Induction heads K-compose with a
    previous-token head. Chapter 3.
    """
    W_QK_later, W_OV_earlier = _circuits({"W_QK_later": W_QK_later, "W_OV_earlier": W_OV_earlier})
    return _normalised_product_norm(W_QK_later @ W_OV_earlier.T, W_QK_later, W_OV_earlier)


def q_composition_score(W_QK_later: Tensor, W_OV_earlier: Tensor) -> float:
    """Q-composition: how much a later head's queries read what an earlier head wrote (Elhage et al. 2021).

    ``||W_OV_earlier @ W_QK_later||_F / (||W_OV_earlier||_F ||W_QK_later||_F)``.
    The earlier head's output ``y @ W_OV_earlier`` at the query position enters
    the score as ``y @ W_OV_earlier @ W_QK_later @ x_k.T``. Shapes and
    reference as in :func:`k_composition_score`. Chapter 3.
    """
    W_QK_later, W_OV_earlier = _circuits({"W_QK_later": W_QK_later, "W_OV_earlier": W_OV_earlier})
    return _normalised_product_norm(W_OV_earlier @ W_QK_later, W_OV_earlier, W_QK_later)


def v_composition_score(W_OV_later: Tensor, W_OV_earlier: Tensor) -> float:
    """V-composition: how much a later head's values read what an earlier head wrote (Elhage et al. 2021).

    ``||W_OV_earlier @ W_OV_later||_F / (||W_OV_earlier||_F ||W_OV_later||_F)``.
    The later head moves ``y @ W_OV_earlier @ W_OV_later``. Shapes and
    reference as in :func:`k_composition_score`. Chapter 3.
    """
    W_OV_later, W_OV_earlier = _circuits({"W_OV_later": W_OV_later, "W_OV_earlier": W_OV_earlier})
    return _normalised_product_norm(W_OV_earlier @ W_OV_later, W_OV_earlier, W_OV_later)


def composition_score_baseline(d_model: int, d_head: int, n_samples: int = 200, seed: int = 0) -> float:
    """The mean composition score of random Gaussian rank-``d_head`` matrices (d_model, d_model): the chance level.

    Composition scores are never 0 even for unrelated heads, so a head pair
    is only "composing" when it scores clearly above this. Chapter 3.
    """
    d_model = check_whole_number("d_model", d_model, minimum=1)
    d_head = check_whole_number("d_head", d_head, minimum=1, maximum=d_model, meaning="at most d_model")
    n_samples = check_whole_number("n_samples", n_samples, minimum=1, maximum=10**5,
                                   meaning="random pairs of heads, one at a time; 200 give the chance level")
    check_size("one sample's random circuits (d_model, d_model)", (d_model, d_model))
    generator = torch.Generator().manual_seed(check_seed("seed", seed))
    scores = []
    for _ in range(n_samples):
        W_Q, W_K, W_V, W_O = (torch.randn(d_model, d_head, generator=generator) for _ in range(4))
        scores.append(k_composition_score(qk_circuit(W_Q, W_K), ov_circuit(W_V, W_O.T)))
    return float(sum(scores) / len(scores))


@takes_attention(attention_weights=LAYERS_BATCH_HEADS)
def head_role_scores(model, tokens: Tensor, query_mask: Tensor | None = None, *,
                     attention_weights: Tensor | None = None) -> dict[str, Tensor]:
    """Every head's previous-token, prefix-matching and copying scores for a
    :class:`~mha.lab.tiny_model.TinyTransformer`.

    ``tokens`` (batch, seq), best a batch from :class:`mha.lab.tasks.InductionTask`
    (e.g. its ``held_out()`` periods), and an optional ``query_mask`` (batch,
    seq) restricting prefix matching (e.g. ``details["repeat_mask"]``).
    ``attention_weights`` (layers, batch, heads, seq, seq): the model's weights
    on ``tokens`` when the caller has already run it (they are not recomputed).
    Returns a dict of (layers, heads) tensors: ``previous_token``,
    ``prefix_matching``, ``copying`` (eigenvalue score of the direct-path OV
    circuit). Chapter 3.
    """
    model = check_tiny_model(model)
    with torch.no_grad():
        if attention_weights is None:
            attention_weights = model(tokens).attention_weights  # (the model checks the tokens)
        else:
            check_rank("tokens", tokens.shape, (2,), "(batch, seq) integer token ids")
            batch, seq = tokens.shape
            expected = (model.config.n_layers, batch, model.config.n_heads, seq, seq)
            if tuple(attention_weights.shape) != expected:
                raise ValueError(f"attention_weights has shape {tuple(attention_weights.shape)}; the model's weights "
                                 f"on these tokens have shape (layers, batch, heads, seq, seq) = {expected}. Pass "
                                 f"model(tokens).attention_weights, or leave it out.")
        weights = attention_weights  # (layers, batch, heads, seq, seq)
        n_layers, n_heads = weights.shape[0], weights.shape[2]
        copying = torch.tensor([[copying_score(model.W_E, hw.W_V, hw.W_O, model.W_U)
                                 for hw in (model.head_weights(layer, head) for head in range(n_heads))]
                                for layer in range(n_layers)])  # (layers, heads)
        return {
            "previous_token": previous_token_score(weights),  # (layers, heads)
            "prefix_matching": prefix_matching_score(weights, tokens, query_mask),  # (layers, heads)
            "copying": copying,
        }


def k_composition_scores(model, earlier_layer: int = 0, later_layer: int = 1) -> Tensor:
    """K-composition between every head of ``earlier_layer`` and every head of ``later_layer``: (heads_earlier,
    heads_later).

    ``model`` is a :class:`~mha.lab.tiny_model.TinyTransformer`; entry
    ``[a, b]`` is :func:`k_composition_score` of later head ``b``'s ``W_QK``
    with earlier head ``a``'s ``W_OV``. Chapter 3.
    """
    model = check_tiny_model(model)
    if not earlier_layer < later_layer:
        raise ValueError(f"earlier_layer ({earlier_layer}) must come before later_layer ({later_layer}).")
    n_heads = model.config.n_heads
    with torch.no_grad():
        earlier = [model.head_weights(earlier_layer, head) for head in range(n_heads)]
        later = [model.head_weights(later_layer, head) for head in range(n_heads)]
        return torch.tensor([[k_composition_score(qk_circuit(b.W_Q, b.W_K), ov_circuit(a.W_V, a.W_O)) for b in later]
                             for a in earlier])  # (heads_earlier, heads_later)


def attention_pattern_scores(model, tokens: Tensor) -> dict[str, np.ndarray]:
    """Four attention-pattern scores of every head of ``model`` (a TinyTransformer) on ``tokens`` (batch, seq).

    Returns a dict of (layers, heads) numpy arrays: ``previous_token`` and ``prefix_matching`` (as above), ``own_token``
    (mean weight of a query on itself) and ``duplicate_token`` (the weight on the earlier copies of the query's token
    themselves, averaged over the queries that have one; both 0 when no query has one). Chapter 3.
    """
    model = check_tiny_model(model)
    check_type("tokens", tokens, Tensor, "(batch, seq) integer token ids, e.g. InductionTask().sample(128, 0).inputs")
    with torch.no_grad():
        weights = model(tokens).attention_weights  # (layers, batch, heads, seq, seq); the model checks the tokens
    seq = tokens.shape[1]
    earlier_copy = (tokens[:, :, None] == tokens[:, None, :]) & torch.ones(seq, seq, dtype=torch.bool).tril(-1)
    scored = earlier_copy.any(-1)  # (batch, seq): the queries whose token occurred earlier
    on_copies = (weights * earlier_copy[:, None]).sum(-1) * scored[:, None]  # (layers, batch, heads, seq)
    on_copies = on_copies.sum(dim=(1, -1)) / scored.sum().clamp(min=1)  # (layers, heads)
    return {"previous_token": previous_token_score(weights).numpy(),
            "prefix_matching": prefix_matching_score(weights, tokens).numpy() if scored.any()
            else np.zeros(on_copies.shape),
            "own_token": weights.diagonal(dim1=-2, dim2=-1).mean(dim=(1, -1)).numpy(),
            "duplicate_token": on_copies.numpy()}
