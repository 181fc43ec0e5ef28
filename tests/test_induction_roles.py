"""mha.lab.induction: roles found by score on hand-made scores and maps, and on the stored lab models."""

import json

import pytest
import torch

from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint
from mha.lab.circuit_scores import prefix_matching_score, previous_token_score
from mha.lab.induction import (ROLE_SCORE_THRESHOLD, attention_by_offset, head_ablation_losses, heads_with_role,
                                 held_out_batch, role_labels, role_table, uniform_causal_weights)
from mha.lab.tasks import INDUCTION_HELD_OUT_PERIODS, InductionTask

torch.set_num_threads(1)


def test_uniform_causal_weights_rows_sum_to_one_and_stay_causal():
    weights = uniform_causal_weights(5, batch=2, heads=3)
    assert weights.shape == (2, 3, 5, 5)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 3, 5))
    assert torch.all(weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(weights[0, 0, 3], torch.tensor([0.25, 0.25, 0.25, 0.25, 0.0]))


def test_chance_level_of_the_previous_token_score():
    seq = 40
    expected = sum(1 / (i + 1) for i in range(1, seq)) / (seq - 1)
    assert float(previous_token_score(uniform_causal_weights(seq))[0]) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("seq", [0, -1, 2.5, True])
def test_uniform_causal_weights_rejects_bad_lengths(seq):
    with pytest.raises(ValueError, match="whole number"):
        uniform_causal_weights(seq)


def test_heads_with_role_is_by_score_and_allows_several_or_none():
    scores = torch.tensor([[0.1, 0.6, 0.5], [0.9, 0.2, 0.7]])
    assert heads_with_role(scores) == [(0, 1), (1, 0), (1, 2)]  # 0.5 is not above 0.5
    assert heads_with_role(scores, threshold=0.95) == []
    # reorder the heads: the roles move with the scores, in (layer, head) order
    assert heads_with_role(scores[:, [2, 0, 1]]) == [(0, 2), (1, 0), (1, 1)]


def test_heads_with_role_wants_a_layers_by_heads_table():
    with pytest.raises(ValueError, match="layers, heads"):
        heads_with_role(torch.zeros(4))


def test_role_labels_name_each_head():
    scores = {"previous_token": torch.tensor([[0.9, 0.1], [0.6, 0.0]]),
              "prefix_matching": torch.tensor([[0.0, 0.2], [0.7, 0.8]])}
    assert role_labels(scores) == [["previous-token", "-"], ["previous-token + induction", "induction"]]
    with pytest.raises(ValueError, match="prefix_matching"):
        role_labels({"previous_token": scores["previous_token"]})


def test_attention_by_offset_of_hand_made_heads():
    seq = 8
    previous = torch.zeros(seq, seq)
    previous[0, 0] = 1
    previous[torch.arange(1, seq), torch.arange(seq - 1)] = 1
    three_back = torch.eye(seq)
    three_back[3:] = 0
    three_back[torch.arange(3, seq), torch.arange(seq - 3)] = 1
    weights = torch.stack([previous, three_back])[None]  # (batch 1, heads 2, seq, seq)
    offsets = attention_by_offset(weights)
    assert offsets.shape == (2, seq)
    assert offsets[0].argmax() == 1 and offsets[0, 1] == pytest.approx(1.0)
    assert offsets[1].argmax() == 3 and offsets[1, 3] == pytest.approx(1.0)
    mask = torch.zeros(1, seq, dtype=torch.bool)
    mask[0, :2] = True  # only queries 0 and 1: offsets 2.. are unreachable
    assert torch.isnan(attention_by_offset(weights, mask)[0, 2:]).all()


def test_attention_by_offset_checks_shapes():
    with pytest.raises(ValueError, match="query_mask"):
        attention_by_offset(torch.ones(2, 1, 4, 4) / 4, torch.ones(3, 4, dtype=torch.bool))


def test_held_out_batch_uses_only_held_out_periods_and_is_the_logged_one():
    batch = held_out_batch()
    assert set(batch.details["period"].tolist()) <= set(INDUCTION_HELD_OUT_PERIODS)
    assert batch.inputs.shape == (512, InductionTask().seq_len)
    torch.testing.assert_close(batch.inputs, held_out_batch().inputs)


@pytest.fixture(scope="module")
def seed0():
    return load_checkpoint("induction_2layer_seed0")[0]


def test_role_table_reproduces_the_stored_roles(seed0):
    stored = json.loads((LAB_DIRECTORY / "induction_roles.json").read_text())["models"]["induction_2layer_seed0"]
    table = role_table({"seed 0": seed0}, held_out_batch())
    assert list(table.columns) == ["model", "layer", "head", "previous_token", "prefix_matching", "copying", "role"]
    layer0 = table[table.layer == 0]
    layer1 = table[table.layer == 1]
    assert layer0.loc[layer0.role == "previous-token", "head"].tolist() == stored["previous_token_heads_layer0"]
    assert layer1.loc[layer1.role == "induction", "head"].tolist() == stored["induction_heads_layer1"]
    torch.testing.assert_close(torch.tensor(layer1.prefix_matching.tolist()), torch.tensor(stored["prefix_matching"][1]),
                               atol=1e-5, rtol=0)
    assert ROLE_SCORE_THRESHOLD == json.loads((LAB_DIRECTORY / "induction_roles.json").read_text())["thresholds"]["previous_token"]


def test_removing_the_previous_token_head_breaks_induction(seed0):
    batch = held_out_batch(size=128)
    losses = head_ablation_losses(seed0, InductionTask(), batch)
    assert losses.shape == (2, 4)
    with torch.no_grad():
        weights = seed0(batch.inputs).attention_weights
    previous_head = int(previous_token_score(weights)[0].argmax())
    assert int(losses[0].argmax()) == previous_head
    assert float(losses[0, previous_head]) > torch.log(torch.tensor(64.0))  # worse than guessing uniformly
    assert prefix_matching_score(weights, batch.inputs, batch.details["repeat_mask"])[1].min() > ROLE_SCORE_THRESHOLD
