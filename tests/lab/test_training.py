"""Tests for mha.lab.training: determinism, logging, checkpoint callbacks, threads, and that training learns."""

from __future__ import annotations

import math

import pytest
import torch

from mha.lab.tasks import CopyBackTask, InductionTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, TrainingLog, steepest_drop, train

torch.set_num_threads(1)

TASK = InductionTask(vocab_size=24, seq_len=16, periods=(3, 5, 6), held_out_periods=(4,))


def fresh_model(seed: int = 0, task=TASK) -> TinyTransformer:
    config = TinyTransformerConfig(
        vocab_size=task.vocab_size, max_seq_len=task.seq_len, d_model=16, n_layers=2, n_heads=2
    )
    return TinyTransformer(config, seed=seed)


def short_run(seed: int = 0, **changes) -> TrainingLog:
    settings = dict(steps=12, batch_size=8, log_every=3, eval_batch_size=16, seed=seed, learning_rate=3e-3)
    settings.update(changes)
    return train(fresh_model(seed), TASK, TrainingConfig(**settings), progress=False)


@pytest.mark.slow
def test_same_seed_gives_an_identical_loss_curve():
    first, second = short_run(seed=1), short_run(seed=1)
    for column in ("step", "train_loss", "loss", "repeat_loss", "repeat_accuracy"):
        assert first.column(column)[1:] == second.column(column)[1:], column  # row 0's train_loss is NaN
    assert short_run(seed=2).column("loss") != first.column("loss")


def test_log_has_one_row_per_log_step_with_task_metrics():
    log = short_run()
    assert log.column("step") == [0, 3, 6, 9, 12]
    assert math.isnan(log.rows[0]["train_loss"]) and not math.isnan(log.rows[-1]["train_loss"])
    assert {"seconds", "loss", "accuracy", "repeat_loss", "repeat_accuracy"} <= set(log.rows[0])
    assert log.seconds >= log.rows[-1]["seconds"] > 0
    frame = log.to_dataframe()
    assert list(frame["step"]) == [0, 3, 6, 9, 12]
    with pytest.raises(KeyError, match="columns"):
        log.column("perplexity")


def test_checkpoint_callback_runs_at_the_requested_steps():
    seen = []
    train(fresh_model(), TASK, TrainingConfig(steps=10, batch_size=4, log_every=5, eval_batch_size=8), progress=False,
          checkpoint_every=4, checkpoint_steps=(0, 5), on_checkpoint=lambda step, model, log: seen.append(step))
    assert seen == [0, 4, 5, 8]
    with pytest.raises(ValueError, match="outside"):
        train(fresh_model(), TASK, TrainingConfig(steps=10), checkpoint_steps=(11,), on_checkpoint=print)
    with pytest.raises(ValueError, match="on_checkpoint"):
        train(fresh_model(), TASK, TrainingConfig(steps=10), checkpoint_every=2)


def test_thread_count_is_set_during_training_and_restored():
    before = torch.get_num_threads()
    seen = []
    train(fresh_model(), TASK, TrainingConfig(steps=2, batch_size=2, eval_batch_size=2, threads=1), progress=False,
          checkpoint_steps=(1,), on_checkpoint=lambda step, model, log: seen.append(torch.get_num_threads()))
    assert seen == [1] and torch.get_num_threads() == before


@pytest.mark.slow
def test_training_learns_a_positional_task():
    task = CopyBackTask(vocab_size=8, seq_len=8, distance=2)
    model = TinyTransformer(
        TinyTransformerConfig(vocab_size=8, max_seq_len=8, d_model=16, n_layers=1, n_heads=2), seed=0
    )
    log = train(model, task, TrainingConfig(steps=150, batch_size=32, learning_rate=1e-2, log_every=50), progress=False)
    assert log.rows[0]["accuracy"] < 0.3 and log.rows[-1]["accuracy"] > 0.9


def test_steepest_drop_finds_the_cliff():
    rows = [
        {"step": step, "seconds": step / 10, "repeat_loss": 4.0 if step < 500 else 0.5} for step in range(0, 1000, 50)
    ]
    log = TrainingLog(rows=rows)
    found = steepest_drop(log, window_steps=100)
    assert found["step"] in (450, 500) and found["drop"] == pytest.approx(3.5)
    with pytest.raises(ValueError, match="rows"):
        steepest_drop(TrainingLog(rows=log.rows[:2]))


def test_bad_configs_say_what_is_wrong():
    with pytest.raises(ValueError, match="steps"):
        TrainingConfig(steps=0)
    with pytest.raises(ValueError, match="learning_rate"):
        TrainingConfig(learning_rate=0)
