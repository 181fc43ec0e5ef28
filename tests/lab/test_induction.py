"""mha.lab.induction: roles found by score on hand-made scores and maps, and on the stored lab models."""

import json

import pytest
import torch

from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint
from mha.lab.circuit_scores import prefix_matching_score, previous_token_score
from mha.lab.induction import (
    ROLE_SCORE_THRESHOLD,
    attention_by_offset,
    head_ablation_losses,
    heads_with_role,
    held_out_batch,
    induction_role_table,
    role_labels,
    uniform_causal_weights,
)
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
    table = induction_role_table({"seed 0": seed0}, held_out_batch())
    assert list(table.columns) == ["model", "layer", "head", "previous_token", "prefix_matching", "copying", "role"]
    layer0 = table[table.layer == 0]
    layer1 = table[table.layer == 1]
    assert layer0.loc[layer0.role == "previous-token", "head"].tolist() == stored["previous_token_heads_layer0"]
    assert layer1.loc[layer1.role == "induction", "head"].tolist() == stored["induction_heads_layer1"]
    torch.testing.assert_close(
        torch.tensor(layer1.prefix_matching.tolist()), torch.tensor(stored["prefix_matching"][1]), atol=1e-5, rtol=0
    )
    assert (
        ROLE_SCORE_THRESHOLD
        == json.loads((LAB_DIRECTORY / "induction_roles.json").read_text())["thresholds"]["previous_token"]
    )


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


def test_repeated_block_batch_lays_out_copies_of_one_block():
    from mha.lab.induction import repeated_block_batch

    task = InductionTask()
    batch = repeated_block_batch(task, 4, 8, seed=3)
    assert batch.inputs.shape == (8, task.seq_len) and set(batch.details["period"].tolist()) == {7}  # only 7 fits 4x
    tokens = torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)  # (batch, seq + 1): the whole sequence
    for row in range(8):
        period = int(batch.details["period"][row])
        first = task.seq_len + 1 - 4 * period
        block = tokens[row, first:first + period]
        assert torch.equal(tokens[row, first:], block.repeat(4))  # four identical copies at the end
        assert len(set(tokens[row, :first + period].tolist())) == first + period  # noise and block: no repeats
        assert batch.details["repeat_start"][row] == first + period
        copy_index = batch.details["copy_index"][row]
        assert copy_index[:first].eq(0).all() and copy_index[first:].tolist() == sorted(copy_index[first:].tolist())
        masked = batch.details["repeat_mask"][row].nonzero().flatten()
        keys = batch.details["induction_key"][row, masked]
        assert torch.equal(tokens[row, keys - 1], batch.inputs[row, masked])  # the key follows an earlier copy
        assert torch.equal(batch.inputs[row, keys], batch.targets[row, masked])  # ... and holds the next token
    assert repeated_block_batch(task, 3, 64, seed=0).details["period"].unique().tolist() == [7, 11]


@pytest.mark.parametrize("copies, periods", [(1, None), (2.0, None), (3, (14,)), (6, (7,)), (2, ())])
def test_repeated_block_batch_rejects_what_does_not_fit(copies, periods):
    from mha.lab.induction import repeated_block_batch

    with pytest.raises(ValueError, match="copies"):
        repeated_block_batch(InductionTask(), copies, 4, seed=0, periods=periods)


def test_first_step_above_reads_the_first_crossing():
    from mha.lab.induction import first_step_above

    rows = [{"step": 0, "score": 0.1}, {"step": 100, "score": 0.6}, {"step": 200, "score": 0.4}]
    assert first_step_above(rows, "score", 0.5) == 100
    assert first_step_above(rows, "score", 0.05) == 0
    assert first_step_above(rows, "score", 0.9) is None


@pytest.mark.slow
def test_train_until_induction_stops_after_the_phase_change():
    from mha.lab.induction import train_until_induction
    from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
    from mha.lab.training import TrainingConfig

    task = InductionTask(vocab_size=24, seq_len=12, periods=(3, 4, 6), held_out_periods=(5,))
    model = TinyTransformer(TinyTransformerConfig(vocab_size=24, max_seq_len=12, d_model=16, n_heads=2), seed=0)
    training = TrainingConfig(steps=40, learning_rate=3e-3, log_every=10, eval_batch_size=32, seed=0)
    # a loss that is always "settled": the run stops settle_steps after its first log row below it
    result = train_until_induction(model, task, training, held_out_batch(task, size=16), score_every=20,
                                   settled_loss=100.0, settle_steps=20)
    assert result["formed"] and result["settled_step"] == 0 and result["steps"] == 20
    assert [row["step"] for row in result["head_scores"]] == [0, 20]
    unsettled = train_until_induction(TinyTransformer(model.config, seed=1), task, training,
                                      held_out_batch(task, size=16), score_every=20, settled_loss=1e-9)
    assert not unsettled["formed"] and unsettled["phase_step"] is None and unsettled["steps"] == 40
    # stop_when_formed: the first scoring step whose best prefix matching passes the bar ends the run
    scores = [row["best_prefix_matching"] for row in unsettled["head_scores"]]
    bar = min(scores[1:]) - 1e-6  # passed at step 20 at the latest, never before it unless step 0 passes too
    early = train_until_induction(TinyTransformer(model.config, seed=1), task, training,
                                  held_out_batch(task, size=16), score_every=20, settled_loss=1e-9,
                                  stop_when_formed=bar)
    first = next(row["step"] for row in unsettled["head_scores"] if row["best_prefix_matching"] > bar)
    assert early["steps"] == first and early["head_scores"][-1]["best_prefix_matching"] > bar
    with pytest.raises(ValueError, match="stop_when_formed"):
        train_until_induction(model, task, training, stop_when_formed=1.5)


def test_stored_phase_spread_covers_its_grid_and_matches_the_stored_seed_logs():
    from mha.lab.checkpoints import load_json

    study = load_json("induction_phase_spread.json")
    assert study["complete"]
    grid = {(run["d_model"], run["learning_rate"], run["seed"]) for run in study["runs"]}
    assert grid == {(d, lr, s) for d in study["widths"] for lr in study["learning_rates"] for s in study["seeds"]}
    assert all(run["formed"] and run["phase_step"] <= run["steps"] for run in study["runs"])
    stored = {run["seed"]: run for run in study["runs"] if run.get("from_stored_checkpoint")}
    assert stored[0]["phase_step"] == load_json("induction_2layer_seed0.json")["steepest_repeat_loss_drop"]["step"]
    for run in study["runs"]:  # a role threshold is passed no earlier than a lower one
        firsts = [run["first_step_prefix_matching_above"][str(t)] for t in study["thresholds"]]
        assert firsts == sorted(firsts)
