"""Tests for mha.lab.circuit_scores on hand-made attention maps and hand-made weights with known answers."""

from __future__ import annotations

import pytest
import torch

from mha.core.geometry import ov_circuit, qk_circuit
from mha.lab.circuit_scores import (
    attention_to_key_positions,
    composition_score_baseline,
    copying_score,
    copying_top1_fraction,
    full_ov_circuit,
    head_role_scores,
    k_composition_score,
    k_composition_scores,
    prefix_matching_score,
    previous_token_score,
    q_composition_score,
    v_composition_score,
)
from mha.lab.tasks import InductionTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

torch.set_num_threads(1)


def previous_token_map(seq: int) -> torch.Tensor:
    """(seq, seq): position 0 attends to itself, every other position to the one before."""
    weights = torch.zeros(seq, seq)
    weights[0, 0] = 1
    weights[torch.arange(1, seq), torch.arange(seq - 1)] = 1
    return weights


def uniform_causal_map(seq: int) -> torch.Tensor:
    weights = torch.ones(seq, seq).tril()
    return weights / weights.sum(-1, keepdim=True)


def induction_map(tokens: torch.Tensor) -> torch.Tensor:
    """(seq, seq) for one row of tokens: attend to the token after the first earlier copy, else to yourself."""
    seq = len(tokens)
    weights = torch.eye(seq)
    for query in range(seq):
        earlier = [j for j in range(query) if tokens[j] == tokens[query]]
        if earlier:
            weights[query] = 0
            weights[query, earlier[0] + 1] = 1
    return weights


REPEATED = torch.tensor([[5, 1, 7, 3, 5, 1, 7, 3]])  # (1, 8): a block of 4, repeated


def as_heads(*maps: torch.Tensor) -> torch.Tensor:
    """(1, heads, seq, seq) from (seq, seq) maps."""
    return torch.stack(maps)[None]


def test_previous_token_score_on_known_maps():
    seq = 6
    scores = previous_token_score(as_heads(previous_token_map(seq), torch.eye(seq), uniform_causal_map(seq)))
    expected_uniform = sum(1 / (i + 1) for i in range(1, seq)) / (seq - 1)
    torch.testing.assert_close(scores, torch.tensor([1.0, 0.0, expected_uniform]))


def test_previous_token_score_keeps_leading_axes():
    weights = as_heads(previous_token_map(5), torch.eye(5)).expand(3, 2, 2, 5, 5)  # (layers, batch, heads, seq, seq)
    assert previous_token_score(weights).shape == (3, 2)


def test_prefix_matching_on_known_maps():
    tokens = REPEATED
    half = (induction_map(tokens[0]) + previous_token_map(8)) / 2
    scores = prefix_matching_score(as_heads(induction_map(tokens[0]), previous_token_map(8), half), tokens)
    torch.testing.assert_close(scores, torch.tensor([1.0, 0.0, 0.5]))


def test_prefix_matching_counts_every_earlier_copy():
    tokens = torch.tensor([[2, 4, 2, 6, 2]])  # the last 2 has copies at 0 and 2, followed by 1 and 3
    weights = torch.eye(5)
    weights[4] = torch.tensor([0.1, 0.3, 0.2, 0.4, 0.0])
    weights[2] = torch.tensor([0.5, 0.5, 0.0, 0.0, 0.0])  # query 2: follower of copy 0 is key 1
    score = prefix_matching_score(weights[None, None], tokens)
    torch.testing.assert_close(score, torch.tensor([(0.5 + (0.3 + 0.4)) / 2]))
    only_last = torch.tensor([[False, False, False, False, True]])
    torch.testing.assert_close(prefix_matching_score(weights[None, None], tokens, only_last), torch.tensor([0.7]))


def test_prefix_matching_agrees_with_the_task_designed_keys():
    batch = InductionTask().sample(16, 0)
    weights = torch.stack([induction_map(row) for row in batch.inputs])[:, None]  # (batch, 1, seq, seq)
    designed = attention_to_key_positions(weights, batch.details["induction_key"])
    by_tokens = prefix_matching_score(weights, batch.inputs, batch.details["repeat_mask"])
    torch.testing.assert_close(designed, torch.tensor([1.0]))
    torch.testing.assert_close(by_tokens, torch.tensor([1.0]))


def test_scores_reject_unusable_inputs():
    with pytest.raises(ValueError, match="no query"):
        prefix_matching_score(as_heads(torch.eye(3)), torch.tensor([[1, 2, 3]]))
    with pytest.raises(ValueError, match="tokens"):
        prefix_matching_score(as_heads(torch.eye(3)), torch.tensor([[1, 2]]))
    with pytest.raises(ValueError, match="weights"):
        previous_token_score(torch.eye(3))
    with pytest.raises(ValueError, match="nothing to score"):
        attention_to_key_positions(as_heads(torch.eye(3)), torch.full((1, 3), -1))


def test_copying_score_signs():
    eye = torch.eye(4)
    assert copying_score(eye, eye, eye, eye) == pytest.approx(1.0)  # attending to t raises t: a copier
    assert copying_score(eye, eye, -eye, eye) == pytest.approx(-1.0)  # lowers t: an anti-copier
    rotation = torch.tensor([[0.0, 1.0], [-1.0, 0.0]])  # eigenvalues +i, -i: no consistent sign
    assert copying_score(torch.eye(2), rotation, torch.eye(2), torch.eye(2)) == pytest.approx(0.0, abs=1e-12)
    mixed = torch.diag(torch.tensor([3.0, -1.0]))
    assert copying_score(torch.eye(2), mixed, torch.eye(2), torch.eye(2)) == pytest.approx(0.5)


def test_copying_score_matches_the_full_circuit_eigenvalues():
    generator = torch.Generator().manual_seed(0)
    W_E, W_U = torch.randn(10, 6, generator=generator), torch.randn(6, 10, generator=generator)
    W_V, W_O = torch.randn(6, 2, generator=generator), torch.randn(2, 6, generator=generator)
    eigenvalues = torch.linalg.eigvals(full_ov_circuit(W_E, W_V, W_O, W_U).double())
    expected = float(eigenvalues.sum().real / eigenvalues.abs().sum())
    assert copying_score(W_E, W_V, W_O, W_U) == pytest.approx(expected, abs=1e-6)


def test_copying_top1_fraction():
    assert copying_top1_fraction(torch.eye(5)) == 1.0
    assert copying_top1_fraction(torch.eye(5).roll(1, dims=1)) == 0.0
    with pytest.raises(ValueError, match="square"):
        copying_top1_fraction(torch.ones(2, 3))


def basis(d: int, i: int) -> torch.Tensor:
    """(d, 1) column: standard basis vector e_i."""
    vector = torch.zeros(d, 1)
    vector[i] = 1
    return vector


def test_k_composition_when_the_later_keys_read_what_the_earlier_head_wrote():
    d = 4
    # earlier head: reads direction 0, writes direction 2
    W_OV_earlier = ov_circuit(basis(d, 0), basis(d, 2).T)
    # later head A: queries read direction 1, keys read direction 2 (the earlier head's output)
    keys_read_it = qk_circuit(basis(d, 1), basis(d, 2))
    assert k_composition_score(keys_read_it, W_OV_earlier) == pytest.approx(1.0)
    assert q_composition_score(keys_read_it, W_OV_earlier) == pytest.approx(0.0)
    # later head B: queries read direction 2, keys read direction 1: Q-composition, not K
    queries_read_it = qk_circuit(basis(d, 2), basis(d, 1))
    assert k_composition_score(queries_read_it, W_OV_earlier) == pytest.approx(0.0)
    assert q_composition_score(queries_read_it, W_OV_earlier) == pytest.approx(1.0)
    # later head C: values read direction 2
    assert v_composition_score(ov_circuit(basis(d, 2), basis(d, 3).T), W_OV_earlier) == pytest.approx(1.0)
    assert v_composition_score(ov_circuit(basis(d, 1), basis(d, 3).T), W_OV_earlier) == pytest.approx(0.0)


def test_k_composition_is_the_term_in_the_actual_attention_score():
    """Feed an earlier head's output into a later head's keys and check the bilinear term the score measures."""
    generator = torch.Generator().manual_seed(1)
    W_Q, W_K = torch.randn(6, 2, generator=generator), torch.randn(6, 2, generator=generator)
    W_V, W_O = torch.randn(6, 2, generator=generator), torch.randn(2, 6, generator=generator)
    x_query, y_attended = torch.randn(1, 6, generator=generator), torch.randn(1, 6, generator=generator)
    key_vector = y_attended @ W_V @ W_O  # what the earlier head wrote at the key position
    score = (x_query @ W_Q) @ (key_vector @ W_K).T
    composed = qk_circuit(W_Q, W_K) @ ov_circuit(W_V, W_O).T  # the matrix k_composition_score takes the norm of
    torch.testing.assert_close(score, x_query @ composed @ y_attended.T)


def test_composition_scores_lie_in_zero_one_and_baseline_is_chance():
    baseline = composition_score_baseline(d_model=16, d_head=4, n_samples=50)
    assert 0 < baseline < 1 and baseline == composition_score_baseline(d_model=16, d_head=4, n_samples=50)
    assert k_composition_score(torch.zeros(3, 3), torch.eye(3)) == 0.0


def test_model_level_scores_have_layer_by_head_shapes():
    task = InductionTask(vocab_size=24, seq_len=16, periods=(3, 5), held_out_periods=(4,))
    model = TinyTransformer(TinyTransformerConfig(vocab_size=24, max_seq_len=16, d_model=12, n_layers=2, n_heads=3))
    batch = task.sample(4, 0)
    scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"])
    assert set(scores) == {"previous_token", "prefix_matching", "copying"}
    assert all(value.shape == (2, 3) for value in scores.values())
    assert k_composition_scores(model).shape == (3, 3)
    with pytest.raises(ValueError, match="before"):
        k_composition_scores(model, earlier_layer=1, later_layer=1)


def test_head_role_scores_reuse_weights_already_computed_and_refuse_weights_of_other_tokens():
    task = InductionTask(vocab_size=24, seq_len=16, periods=(3, 5), held_out_periods=(4,))
    model = TinyTransformer(TinyTransformerConfig(vocab_size=24, max_seq_len=16, d_model=12, n_layers=2, n_heads=3))
    batch = task.sample(4, 0)
    fresh = head_role_scores(model, batch.inputs, batch.details["repeat_mask"])
    with torch.no_grad():
        weights = model(batch.inputs).attention_weights  # (layers, batch, heads, seq, seq)
    reused = head_role_scores(model, batch.inputs, batch.details["repeat_mask"], attention_weights=weights)
    assert all(torch.equal(fresh[key], reused[key]) for key in fresh)
    # weights that are not this model's on these tokens change the scores, so they must match in shape at least
    with pytest.raises(ValueError, match=r"attention_weights has shape \(2, 3, 3, 16, 16\).*\(2, 4, 3, 16, 16\)"):
        head_role_scores(model, batch.inputs, attention_weights=weights[:, :3])
    shuffled = head_role_scores(model, batch.inputs, batch.details["repeat_mask"],
                                attention_weights=weights.flip(-1).softmax(-1))
    assert not torch.equal(shuffled["previous_token"], fresh["previous_token"])


def test_head_role_scores_with_given_weights_still_say_what_is_wrong_with_the_tokens():
    model = TinyTransformer(TinyTransformerConfig(vocab_size=24, max_seq_len=16, d_model=12, n_layers=2, n_heads=3))
    tokens = torch.zeros(4, 16, dtype=torch.long)
    with torch.no_grad():
        weights = model(tokens).attention_weights  # (layers, batch, heads, seq, seq)
    with pytest.raises(ValueError, match=r"tokens.*\(batch, seq\)"):
        head_role_scores(model, tokens[None], attention_weights=weights)
