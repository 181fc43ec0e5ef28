"""Tests for mha.lab.tasks: every task's layout, targets, loss mask and determinism."""

from __future__ import annotations

import pytest
import torch

from mha.lab.tasks import (
    IGNORE_INDEX,
    INDUCTION_HELD_OUT_PERIODS,
    INDUCTION_TRAIN_PERIODS,
    CopyBackTask,
    InductionTask,
    PairRecallTask,
    TwoRelationTask,
    masked_accuracy,
    masked_cross_entropy,
    task_from_dict,
)

ALL_TASKS = [InductionTask(), InductionTask(scored="all"), TwoRelationTask(), CopyBackTask(distance=3),
             PairRecallTask(), PairRecallTask(typed=True), PairRecallTask(answer="second")]


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda task: task.name)
def test_same_seed_same_batch_and_global_rng_untouched(task):
    state = torch.get_rng_state()
    first, second = task.sample(16, 5), task.sample(16, torch.Generator().manual_seed(5))
    assert torch.equal(torch.get_rng_state(), state)
    for a, b in zip(first[:3], second[:3], strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(first.inputs, task.sample(16, 6).inputs)


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda task: task.name)
def test_shapes_masks_and_ignored_targets(task):
    batch = task.sample(8, 0)
    assert batch.inputs.shape == batch.targets.shape == batch.loss_mask.shape == (8, task.seq_len)
    assert batch.loss_mask.dtype == torch.bool and batch.loss_mask.any()
    assert torch.all((batch.targets == IGNORE_INDEX) == ~batch.loss_mask) or task.name == "induction"
    assert int(batch.inputs.min()) >= 0 and int(batch.inputs.max()) < task.vocab_size
    assert int(batch.targets[batch.loss_mask].max()) < task.vocab_size


def test_induction_second_copy_repeats_the_block_one_period_back():
    task = InductionTask()
    batch = task.sample(64, 1)
    tokens = torch.cat([batch.inputs, batch.targets[:, -1:]], dim=1)  # (batch, seq + 1)
    assert torch.equal(batch.targets[:, :-1], batch.inputs[:, 1:])  # next-token prediction
    for row in range(64):
        period = int(batch.details["period"][row])
        start = int(batch.details["repeat_start"][row])
        assert period in INDUCTION_TRAIN_PERIODS
        assert start == task.seq_len + 1 - period
        assert torch.equal(tokens[row, start:], tokens[row, start - period:start])
        assert len(set(tokens[row, :start].tolist())) == start  # distinct before the repeat
        assert int(batch.details["repeat_mask"][row].sum()) == period - 1


def test_induction_key_points_at_the_token_after_the_earlier_copy():
    batch = InductionTask().sample(32, 2)
    key = batch.details["induction_key"]
    rows, queries = torch.nonzero(key >= 0, as_tuple=True)
    keys = key[rows, queries]
    assert torch.all(keys <= queries)
    assert torch.equal(batch.inputs[rows, keys - 1], batch.inputs[rows, queries])  # earlier copy of the query token
    assert torch.equal(batch.inputs[rows, keys], batch.targets[rows, queries])  # what followed it is the answer
    assert torch.equal(key >= 0, batch.details["repeat_mask"])


def test_induction_loss_mask_choice():
    repeat_only = InductionTask().sample(8, 3)
    assert torch.equal(repeat_only.loss_mask, repeat_only.details["repeat_mask"])
    everything = InductionTask(scored="all").sample(8, 3)
    assert everything.loss_mask.all()


def test_held_out_periods_are_never_trained_on():
    task = InductionTask()
    assert not set(INDUCTION_TRAIN_PERIODS) & set(INDUCTION_HELD_OUT_PERIODS)
    held_out = task.held_out()
    periods = set(held_out.sample(256, 0).details["period"].tolist())
    assert periods <= set(INDUCTION_HELD_OUT_PERIODS) and len(periods) > 1
    trained = set(task.sample(256, 0).details["period"].tolist())
    assert trained <= set(INDUCTION_TRAIN_PERIODS) and not trained & periods


@pytest.mark.parametrize("settings, message", [
    (dict(periods=(4, 7)), "both trained on and held out"),
    (dict(periods=(30,)), "does not fit"),
    (dict(vocab_size=20), "distinct_tokens"),
    (dict(scored="some"), "scored"),
    (dict(periods=()), "empty"),
])
def test_induction_settings_are_checked(settings, message):
    with pytest.raises(ValueError, match=message):
        InductionTask(**settings)


def test_two_relation_answer_combines_looked_up_value_and_previous_token():
    task = TwoRelationTask()
    batch = task.sample(32, 4)
    rows, positions = torch.nonzero(batch.loss_mask, as_tuple=True)
    assert len(positions) == 32 * task.n_queries
    ask = batch.inputs[rows, positions] - task.first_ask
    modifier = batch.inputs[rows, positions - 1] - task.first_modifier
    assert torch.all((0 <= ask) & (ask < task.n_keys)) and torch.all((0 <= modifier) & (modifier < task.n_modifiers))
    fact = batch.inputs[rows, batch.details["fact_position"][rows, positions]]
    assert torch.equal(fact // task.n_values, ask)  # the fact found has the asked key
    answer = batch.targets[rows, positions] - task.first_answer
    assert torch.equal(answer // task.n_modifiers, fact % task.n_values)  # value from the fact
    assert torch.equal(answer % task.n_modifiers, modifier)  # modifier from the previous token
    facts = batch.inputs[:, :task.n_facts] // task.n_values
    assert all(len(set(row.tolist())) == task.n_facts for row in facts)  # keys are distinct


def test_copy_back_targets_are_the_inputs_shifted():
    task = CopyBackTask(vocab_size=10, seq_len=12, distance=3)
    batch = task.sample(4, 0)
    assert torch.equal(batch.targets[:, 3:], batch.inputs[:, :-3])
    assert not batch.loss_mask[:, :3].any() and batch.loss_mask[:, 3:].all()
    with pytest.raises(ValueError, match="distance"):
        CopyBackTask(seq_len=4, distance=4)


@pytest.mark.parametrize("task", ALL_TASKS, ids=lambda task: task.name)
def test_tasks_round_trip_through_dicts(task):
    assert task_from_dict(task.to_dict()) == task


def test_masked_losses_match_a_hand_computation():
    logits = torch.tensor([[[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]])  # (1, 3, 2)
    targets = torch.tensor([[0, 0, IGNORE_INDEX]])
    mask = torch.tensor([[True, True, False]])
    expected = (torch.log1p(torch.exp(torch.tensor(-2.0))) + torch.log1p(torch.exp(torch.tensor(3.0)))) / 2
    torch.testing.assert_close(masked_cross_entropy(logits, targets, mask), expected)
    assert masked_accuracy(logits, targets, mask) == 0.5


def test_bad_arguments_say_what_is_wrong():
    with pytest.raises(ValueError, match="batch_size"):
        InductionTask().sample(0, 0)
    with pytest.raises(ValueError, match="Generator"):
        InductionTask().sample(2, 1.5)
    with pytest.raises(ValueError, match="unknown task"):
        task_from_dict({"name": "sorting"})
    with pytest.raises(ValueError, match="distinct keys"):
        TwoRelationTask(n_facts=9, n_keys=8)


def test_existing_tasks_are_unchanged_bit_for_bit():
    """The stored checkpoints were trained on these streams: a change to a task would silently invalidate them."""
    batch = TwoRelationTask().sample(64, 123)
    assert (int(batch.inputs.sum()), int(batch.targets[batch.loss_mask].sum())) == (88389, 47140)


@pytest.mark.parametrize("typed", [False, True])
def test_pair_recall_targets_name_the_two_tokens_before_each_query(typed):
    task = PairRecallTask(typed=typed)
    batch = task.sample(32, 3)
    rows, queries = torch.nonzero(batch.loss_mask, as_tuple=True)
    assert torch.all(batch.inputs[rows, queries] == task.query_token)
    assert batch.loss_mask.sum(dim=1).eq(task.n_triples).all()
    first = batch.inputs[rows, batch.details["first_position"][rows, queries]]
    second = batch.inputs[rows, batch.details["second_position"][rows, queries]]
    assert torch.equal(batch.details["second_position"][rows, queries], queries - 1)
    assert torch.equal(batch.details["first_position"][rows, queries], queries - 2)
    second_symbol = second - task.n_symbols if typed else second
    assert int(first.max()) < task.n_symbols and int(second_symbol.min()) >= 0
    assert int(second_symbol.max()) < task.n_symbols
    assert torch.equal(batch.targets[rows, queries], task.first_answer + first * task.n_symbols + second_symbol)
    # the fillers move the triples around: the first query is not always at the same position
    assert len(set(torch.nonzero(batch.loss_mask)[:, 1][::task.n_triples].tolist())) > 1


def test_pair_recall_one_relation_names_only_the_previous_token_and_shares_the_vocabulary():
    pair, second = PairRecallTask(), PairRecallTask(answer="second")
    assert pair.vocab_size == second.vocab_size == PairRecallTask(typed=True).vocab_size
    batch = second.sample(16, 0)
    rows, queries = torch.nonzero(batch.loss_mask, as_tuple=True)
    assert torch.equal(batch.targets[rows, queries], second.first_answer + batch.inputs[rows, queries - 1])
    assert torch.equal(pair.sample(16, 0).inputs, batch.inputs)  # same stream, only the answer differs
    with pytest.raises(ValueError, match="answer must be"):
        PairRecallTask(answer="both")
    with pytest.raises(ValueError, match="typed must be"):
        PairRecallTask(typed="yes")
