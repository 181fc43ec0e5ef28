"""mha.lab.head_count_sweep: attention shares, head roles, answer parts, curve thresholds, the shipped head-count sweep."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.lab.head_count_sweep import (ROLES, analysis_batch, answer_part_accuracy, answer_parts, ask_attention_override,
                            fact_attention_by, first_step_below, head_role, load_sweep, previous_positions,
                            relation_shares, token_names, train_two_relation_model)
from mha.lab.tasks import TwoRelationTask
from mha.lab.training import TrainingConfig

torch.set_num_threads(1)
TASK = TwoRelationTask()


def one_hot_maps(batch, targets):
    """(batch, 1, seq, seq) maps whose row i puts all weight on targets[b, i] (or on i itself if -1)."""
    seq = targets.shape[1]
    weights = torch.zeros(batch, 1, seq, seq)
    for b in range(batch):
        for i in range(seq):
            weights[b, 0, i, targets[b, i] if targets[b, i] >= 0 else i] = 1.0
    return weights


def test_a_head_on_the_fact_and_a_head_on_the_previous_token_score_one_each():
    batch = TASK.sample(4, 0)
    fact_position = batch.details["fact_position"]
    to_fact = one_hot_maps(4, fact_position)
    to_previous = one_hot_maps(4, previous_positions(fact_position))
    shares = relation_shares(torch.cat([to_fact, to_previous], dim=1), fact_position)  # (2 heads, 3)
    torch.testing.assert_close(shares, torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]))


def test_shares_sum_to_one_and_a_half_split_head_scores_half_each():
    batch = TASK.sample(3, 1)
    fact_position = batch.details["fact_position"]
    split = 0.5 * one_hot_maps(3, fact_position) + 0.5 * one_hot_maps(3, previous_positions(fact_position))
    shares = relation_shares(split, fact_position)
    torch.testing.assert_close(shares, torch.tensor([[0.5, 0.5, 0.0]]))
    random = torch.rand(3, 4, TASK.seq_len, TASK.seq_len).softmax(-1)
    torch.testing.assert_close(relation_shares(random, fact_position).sum(-1), torch.ones(4))


def test_fact_attention_by_key_splits_the_fact_share_by_the_key_asked():
    batch = TASK.sample(64, 4)
    fact_position = batch.details["fact_position"]
    on_fact = one_hot_maps(64, fact_position)  # (batch, 1, seq, seq)
    by_key = fact_attention_by(on_fact, batch, TASK)
    torch.testing.assert_close(by_key, torch.ones(1, TASK.n_keys))
    torch.testing.assert_close(fact_attention_by(on_fact, batch, TASK, by="value"), torch.ones(1, TASK.n_values))
    # a head that finds the fact only when key 3 is asked
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)
    asked = batch.inputs[rows, queries] - TASK.first_ask
    picky = one_hot_maps(64, torch.full_like(fact_position, -1))  # every row on itself
    picky[rows[asked == 3], 0, queries[asked == 3]] = 0.0
    picky[rows[asked == 3], 0, queries[asked == 3], fact_position[rows[asked == 3], queries[asked == 3]]] = 1.0
    expected = torch.zeros(1, TASK.n_keys)
    expected[0, 3] = 1.0
    torch.testing.assert_close(fact_attention_by(picky, batch, TASK, by="key"), expected)
    with pytest.raises(ValueError, match="by must be"):
        fact_attention_by(picky, batch, TASK, by="modifier")


def test_ask_attention_override_puts_the_weight_where_asked():
    batch = TASK.sample(5, 6)
    fact_position = batch.details["fact_position"]
    weights = torch.rand(5, 2, TASK.seq_len, TASK.seq_len).softmax(-1)
    for fact_weight in (0.0, 0.3, 1.0):
        new = ask_attention_override(fact_position, fact_weight)(weights)
        shares = relation_shares(new, fact_position)
        torch.testing.assert_close(shares, torch.tensor([[fact_weight, 1 - fact_weight, 0.0]] * 2))
        not_ask = fact_position < 0
        torch.testing.assert_close(new.transpose(1, 2)[not_ask], weights.transpose(1, 2)[not_ask])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ask_attention_override(fact_position, 1.5)


def test_ask_attention_override_can_keep_each_heads_own_split():
    batch = TASK.sample(4, 7)
    fact_position = batch.details["fact_position"]
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)
    weights = torch.rand(4, 3, TASK.seq_len, TASK.seq_len).softmax(-1)
    new = ask_attention_override(fact_position, None)(weights)
    own_ratio = weights[rows, :, queries, fact_position[rows, queries]] / (
        weights[rows, :, queries, fact_position[rows, queries]] + weights[rows, :, queries, queries - 1])
    torch.testing.assert_close(new[rows, :, queries, fact_position[rows, queries]], own_ratio)
    torch.testing.assert_close(new.sum(-1), torch.ones(4, 3, TASK.seq_len))


def test_previous_positions_only_at_ask_positions():
    fact_position = torch.tensor([[-1, -1, 0, -1, 1]])
    assert previous_positions(fact_position).tolist() == [[-1, -1, 1, -1, 3]]


@pytest.mark.parametrize("fact, previous, role", [(0.9, 0.05, "fact"), (0.5, 0.5, "fact"), (0.02, 0.97, "previous"),
                                                  (0.47, 0.49, "split"), (0.2, 0.2, "split"), (0.19, 0.6, "previous"),
                                                  (0.1, 0.3, "other"), (0.0, 0.0, "other")])
def test_head_role_labels(fact, previous, role):
    assert head_role(fact, previous) == role
    assert role in ROLES


def test_answer_parts_separates_value_and_modifier():
    first = TASK.first_answer
    # n_modifiers = 4, so answer (v, m) is first + 4 v + m
    target = torch.tensor([first + 4 * 4 + 1, first + 0, first + 31])  # (v4, m1), (v0, m0), (v7, m3)
    predicted = torch.tensor([first + 4 * 4 + 2, first + 1 * 4 + 0, 5])  # right v wrong m; wrong v right m; a fact
    parts = answer_parts(predicted, target, TASK)
    assert parts == pytest.approx({"value": 1 / 3, "modifier": 1 / 3, "both": 0.0})
    assert answer_parts(target, target, TASK) == {"value": 1.0, "modifier": 1.0, "both": 1.0}
    with pytest.raises(ValueError, match="same"):
        answer_parts(target[:2], target, TASK)


def test_answer_part_accuracy_reads_the_ask_positions_of_a_batch():
    batch = TASK.sample(8, 2)
    perfect = torch.nn.functional.one_hot(batch.targets.clamp(min=0), TASK.vocab_size).float()  # (batch, seq, vocab)
    assert answer_part_accuracy(perfect, batch, TASK) == {"value": 1.0, "modifier": 1.0, "both": 1.0}


def test_first_step_below():
    assert first_step_below([0, 100, 200, 300], [3.0, 0.4, 0.9, 0.1], 0.5) == 100
    assert first_step_below([0, 100], [3.0, 2.0], 0.5) is None
    assert first_step_below([0, 100], [3.0, 0.5], 0.5) == 100
    with pytest.raises(ValueError, match="one loss per step"):
        first_step_below([0, 100], [1.0], 0.5)


def test_token_names_decode_a_sequence():
    batch = TASK.sample(1, 3)
    names = token_names(TASK, batch.inputs[0].tolist())
    assert len(names) == TASK.seq_len
    assert all("=" in name for name in names[:TASK.n_facts])
    assert names[TASK.n_facts].startswith("m") and names[TASK.n_facts + 1].startswith("ask k")
    assert token_names(TASK, [TASK.first_answer + 4 * 5 + 3]) == ["v5·m3"]
    with pytest.raises(ValueError, match="outside"):
        token_names(TASK, [TASK.vocab_size])


def test_analysis_batch_is_fixed_by_the_seed():
    a, b = analysis_batch(TASK, 1), analysis_batch(TASK, 1)
    assert torch.equal(a.inputs, b.inputs) and a.inputs.shape == (256, TASK.seq_len)
    assert not torch.equal(a.inputs, analysis_batch(TASK, 2).inputs)


def test_train_two_relation_model_reports_progress():
    sweep_task = TwoRelationTask()
    from mha.lab.tiny_model import TinyTransformerConfig

    config = TinyTransformerConfig(vocab_size=sweep_task.vocab_size, max_seq_len=sweep_task.seq_len, d_model=32,
                                   n_layers=1, n_heads=4)
    seen = []
    model, log = train_two_relation_model(config, sweep_task, TrainingConfig(steps=40, log_every=20, eval_batch_size=32),
                                          on_log=lambda step, model, log: seen.append(step))
    assert seen == [20, 40] and [row["step"] for row in log.rows] == [0, 20, 40]
    assert not model.training


# --- the shipped sweep -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep():
    return load_sweep()


def test_sweep_covers_every_head_count_with_at_least_three_seeds_at_one_parameter_count(sweep):
    assert set(sweep.head_counts) >= {1, 2, 4, 8, 16, 32}
    assert len(sweep.seeds) >= 3
    counts = {run["parameters"] for run in sweep.runs.values()}
    assert len(counts) == 1, counts
    assert len(sweep.runs) == len(sweep.head_counts) * len(sweep.seeds)


@pytest.mark.parametrize("n_heads, seed, words", [(3, 0, "does not divide d_model = 32"), (64, 0, "does not divide"),
                                                  ("4", 0, "whole number"), (4, 99, "no run with seed 99")])
def test_sweep_explains_runs_that_do_not_exist(sweep, n_heads, seed, words):
    with pytest.raises(ValueError, match=words):
        sweep.run(n_heads, seed)


def test_sweep_curves_and_checkpoints_agree(sweep):
    steps, losses = sweep.loss_curves(4)
    assert losses.shape == (len(sweep.seeds), len(steps)) and steps[0] == 0
    np.testing.assert_allclose(sweep.loss_at(4, int(steps[-1])), [sweep.run(4, s)["final_loss"] for s in sweep.seeds],
                               rtol=1e-5)
    model = sweep.model(4, sweep.seeds[0])
    assert model.config.n_heads == 4 and model.config.d_model == sweep.d_model
    batch = analysis_batch(sweep.task, sweep.seeds[0])
    with torch.no_grad():
        shares = relation_shares(model(batch.inputs).attention_weights[0], batch.details["fact_position"])
    np.testing.assert_allclose(shares[:, 0].numpy(), sweep.run(4, sweep.seeds[0])["attention_to_fact"], atol=1e-4)
    roles = sweep.role_curves(4, sweep.seeds[0])
    assert roles["fact"].shape == (len(roles["step"]), 4)
