"""A small deterministic CPU trainer for the tiny transformers of chapter 3 ("Induction heads").

:func:`train` runs AdamW on fresh batches from a task in :mod:`mha.lab.tasks` and
logs a loss curve: every ``log_every`` steps, the training loss and the task's
metrics on a fixed evaluation batch (for the induction task that includes
``repeat_loss``, the loss on the repeated half, where the phase change shows).

Determinism: the model is seeded at construction, training batches come from
a ``torch.Generator`` seeded with ``config.seed`` and the evaluation batch
from another one, and ``torch.manual_seed(config.seed)`` is set as well for
anything that might still reach for the global RNG. Same seed, same machine,
same thread count -> the same loss curve, number for number.

Threads: :func:`train` sets ``torch.set_num_threads(config.threads)`` (1 by
default) for its duration and restores the previous value afterwards. These
models are far too small to gain from several threads, and on a 2-core laptop
or CI runner two busy torch processes that each ask for both cores slow each
other down by an order of magnitude (the threads spin waiting for each
other). One thread per process is both the fastest and the polite choice. The
thread count also fixes the order of floating-point reductions, so it is part
of what makes a run reproducible.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from mha.core.validation import (
    InputError,
    check_finite_number,
    check_seed,
    check_type,
    check_whole_number,
    is_finite_number,
)
from mha.lab.tasks import Task, TaskBatch, masked_cross_entropy

__all__ = ["TrainingConfig", "TrainingLog", "train", "evaluate", "steepest_drop", "torch_threads"]


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """How to train (chapter 3, "Induction heads"): AdamW with linear warm-up, then a constant rate.

    ``steps`` optimiser steps on batches of ``batch_size`` fresh sequences;
    ``learning_rate`` after ``warmup_steps`` of linear warm-up; AdamW's
    ``weight_decay`` and ``betas``; gradients clipped to norm ``grad_clip``
    (None: no clipping). Every ``log_every`` steps the task's metrics are
    measured on one fixed batch of ``eval_batch_size`` sequences. ``seed``
    drives the data and the global RNG; ``threads`` is the torch thread count
    during training (see the module docstring for why 1).
    """

    steps: int = 1000
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_steps: int = 0
    weight_decay: float = 0.01
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float | None = 1.0
    log_every: int = 10
    eval_batch_size: int = 256
    seed: int = 0
    threads: int = 1

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "log_every", "eval_batch_size", "threads"):
            object.__setattr__(self, name, check_whole_number(name, getattr(self, name), minimum=1))
        object.__setattr__(self, "warmup_steps", check_whole_number("warmup_steps", self.warmup_steps, minimum=0))
        object.__setattr__(self, "seed", check_seed("seed", self.seed))
        object.__setattr__(self, "learning_rate", check_finite_number("learning_rate", self.learning_rate,
                                                                      positive=True, meaning="e.g. 1e-3"))
        object.__setattr__(self, "weight_decay", check_finite_number("weight_decay", self.weight_decay, minimum=0,
                                                                     meaning="0 for none, e.g. 0.01"))
        if self.grad_clip is not None:
            object.__setattr__(self, "grad_clip", check_finite_number("grad_clip", self.grad_clip, positive=True,
                                                                      meaning="a gradient norm; None for no clipping"))
        betas = tuple(self.betas) if isinstance(self.betas, (tuple, list)) else ()
        if len(betas) != 2 or not all(is_finite_number(beta) and 0 <= beta < 1 for beta in betas):
            raise InputError(f"betas must be two numbers in [0, 1), AdamW's decay rates (e.g. (0.9, 0.999)), "
                             f"got {self.betas!r}.")
        object.__setattr__(self, "betas", betas)

    def to_dict(self) -> dict:
        """A plain dict of the fields, ready for JSON."""
        fields = dataclasses.asdict(self)
        fields["betas"] = list(self.betas)
        return fields


@dataclasses.dataclass
class TrainingLog:
    """The loss curve of one run: one dict per logged step, plus how long training took.

    Each row has ``step`` (optimiser steps taken), ``seconds`` (training time
    so far, evaluation excluded), ``train_loss`` (the mean training loss since
    the previous row) and the task's metrics on the evaluation batch (``loss``,
    ``accuracy``, and for induction ``repeat_loss`` and ``repeat_accuracy``).
    """

    rows: list[dict[str, float]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    def column(self, name: str) -> list[float]:
        """One metric over training, e.g. ``log.column("repeat_loss")``."""
        if self.rows and name not in self.rows[0]:
            raise KeyError(f"no column {name!r}; the columns are {sorted(self.rows[0])}.")
        return [row[name] for row in self.rows]

    def to_dataframe(self) -> Any:
        """The rows as a pandas DataFrame (pandas is imported only when this is called)."""
        import pandas

        return pandas.DataFrame(self.rows)


def steepest_drop(log: TrainingLog, column: str = "repeat_loss", window_steps: int = 200) -> dict[str, float]:
    """Where a logged metric falls fastest: the phase change of an induction run (chapter 3).

    Over every pair of logged rows ``window_steps`` apart, finds the pair
    whose ``column`` drops the most and returns the row midway between them
    (its ``step``, ``seconds`` of training so far and metrics), plus ``drop``,
    the size of that fall. Using a window rather than neighbouring rows keeps
    one noisy evaluation from being mistaken for the phase change.
    """
    check_type("log", log, TrainingLog, "the TrainingLog that train returned")
    rows = log.rows
    if len(rows) < 3:
        raise ValueError(f"the log has {len(rows)} rows; a drop needs at least 3 (log more often or train longer).")
    steps = [row["step"] for row in rows]
    values = log.column(column)
    best_drop, best_middle = float("-inf"), 0
    end = 0
    for start in range(len(rows)):
        while end < len(rows) - 1 and steps[end] - steps[start] < window_steps:
            end += 1
        if end <= start:
            break
        drop = values[start] - values[end]
        if drop > best_drop:
            middle_step = (steps[start] + steps[end]) / 2
            best_drop, best_middle = drop, min(range(start, end + 1), key=lambda i: abs(steps[i] - middle_step))
    return {**rows[best_middle], "drop": best_drop}


@contextmanager
def torch_threads(n_threads: int):
    """Run a block with ``torch.set_num_threads(n_threads)``, restoring the previous count afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(n_threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@torch.no_grad()
def evaluate(model: nn.Module, task: Task, batch) -> dict[str, float]:
    """The task's metrics for ``model`` on ``batch`` (a :class:`~mha.lab.tasks.TaskBatch`), without gradients."""
    check_type("model", model, nn.Module, "a model to evaluate, e.g. a TinyTransformer")
    if not callable(getattr(task, "metrics", None)):
        raise InputError(f"task should be a task with a metrics method, e.g. InductionTask(), got {task!r:.60}.")
    check_type("batch", batch, TaskBatch, "a TaskBatch, e.g. task.sample(64, seed)")
    was_training = model.training
    model.eval()
    logits = model(batch.inputs).logits  # (batch, seq, vocab)
    model.train(was_training)
    return task.metrics(logits, batch)


def train(
    model: nn.Module,
    task: Task,
    config: TrainingConfig = TrainingConfig(),
    *,
    progress: bool = True,
    checkpoint_every: int | None = None,
    checkpoint_steps: Sequence[int] = (),
    on_checkpoint: Callable[[int, nn.Module, TrainingLog], None] | None = None,
) -> TrainingLog:
    """Train ``model`` in place on ``task`` and return its :class:`TrainingLog` (chapter 3, "Induction heads").

    ``model`` maps token ids (batch, seq) to an object whose ``logits`` are
    (batch, seq, vocab) (a :class:`mha.lab.tiny_model.TinyTransformer`).
    ``progress`` shows a tqdm bar. ``on_checkpoint(step, model, log)`` is
    called after every ``checkpoint_every`` steps and after each step listed in
    ``checkpoint_steps`` (step 0 = before any update); use it to save weights
    along the way, e.g. with :func:`mha.lab.checkpoints.save_checkpoint`.
    """
    if checkpoint_every is not None and checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be a whole number >= 1 or None, got {checkpoint_every}.")
    bad_steps = [s for s in checkpoint_steps if not 0 <= s <= config.steps]
    if bad_steps:
        raise ValueError(f"checkpoint_steps {bad_steps} lie outside 0..{config.steps} (the steps of this run).")
    if (checkpoint_every is not None or checkpoint_steps) and on_checkpoint is None:
        raise ValueError("checkpoint steps were given but no on_checkpoint callback to call at them.")
    from tqdm.auto import tqdm

    save_at = set(checkpoint_steps)
    if checkpoint_every is not None:
        save_at.update(range(checkpoint_every, config.steps + 1, checkpoint_every))

    with torch_threads(config.threads):
        torch.manual_seed(config.seed)
        data_generator = torch.Generator().manual_seed(config.seed)
        eval_batch = task.sample(config.eval_batch_size, torch.Generator().manual_seed(config.seed + 1_000_003))
        optimiser = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, betas=config.betas,
                                      weight_decay=config.weight_decay)
        warmup = max(config.warmup_steps, 1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: min(1.0, (step + 1) / warmup))
        log = TrainingLog()
        log.rows.append({"step": 0, "seconds": 0.0, "train_loss": float("nan"), **evaluate(model, task, eval_batch)})
        if 0 in save_at:
            on_checkpoint(0, model, log)

        model.train()
        losses_since_log: list[float] = []
        bar = tqdm(range(1, config.steps + 1), disable=not progress, desc=f"training on {task.name}", leave=False)
        for step in bar:
            started = time.perf_counter()
            batch = task.sample(config.batch_size, data_generator)
            logits = model(batch.inputs).logits  # (batch, seq, vocab)
            loss = masked_cross_entropy(logits, batch.targets, batch.loss_mask)
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            if config.grad_clip is not None:
                nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimiser.step()
            scheduler.step()
            log.seconds += time.perf_counter() - started
            losses_since_log.append(float(loss.detach()))

            if step % config.log_every == 0 or step == config.steps:
                metrics = evaluate(model, task, eval_batch)
                row = {"step": step, "seconds": log.seconds,
                       "train_loss": sum(losses_since_log) / len(losses_since_log)}
                log.rows.append({**row, **metrics})
                losses_since_log = []
                bar.set_postfix(loss=f"{metrics['loss']:.3f}")
            if step in save_at:
                on_checkpoint(step, model, log)
        bar.close()
    return log
