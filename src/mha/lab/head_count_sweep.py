"""Measuring the head-count sweep: one big head or many, at the same parameter count (chapter 3).

Chapter 3, section "One big head or many", trains 1-layer attention-only
:class:`~mha.lab.tiny_model.TinyTransformer` models with the same
``d_model`` (hence the same parameter count) and ``h`` heads of ``d_head =
d_model / h`` features on :class:`~mha.lab.tasks.TwoRelationTask`, where the answer
at each *ask* position needs two things from two places: the value stored in
the fact whose key is asked (a content relation) and the modifier just
before (the previous token). ``scripts/train_head_count_study.py`` trains
every ``(h, learning rate, seed)``, chooses each h's rate on a validation
batch, and writes ``data/lab/head_count_study.json`` plus the chosen runs'
weights; this module reads them and holds the measurements the chapter makes:

* :func:`relation_shares` - per head, the attention an ask position pays to
  the matching fact, to the previous token, and to everything else;
* :func:`fact_attention_by` - the attention to the fact, split by the key
  asked (very narrow heads each find only some keys) or by the value stored
  (one big head attends more to some values than to others);
* :func:`ask_attention_override` - force the ask positions' attention onto
  the fact, the previous token, or a mix of the two;
* :func:`head_role` - a one-word label from those shares;
* :func:`answer_parts` / :func:`answer_part_accuracy` - whether the predicted
  answer has the right value and the right modifier (which relation the model
  has learned);
* :func:`first_step_below` - when a loss curve first reaches a threshold;
* :class:`HeadCountStudy` / :func:`load_study` - every run's validation and
  held-out curves and role curve, each h's chosen learning rate and its saved
  models, and the mechanism controls; :func:`steps_to_solve`,
  :func:`accuracy_at`, :func:`median_interval` (bootstrap) and
  :func:`best_learning_rates` (chosen on the validation batch) read it;
* :func:`train_two_relation_model` - train one more model of the study's shape
  (used by the live retrain of :mod:`mha.views.head_count_explorer`).

Maps follow the book's convention: weights are (batch, heads, seq_q, seq_k),
row = query = the position attending FROM, column = key = the position
attended TO.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mha.lab.checkpoints import LAB_DIRECTORY, load_checkpoint, load_json
from mha.lab.circuit_scores import attention_to_key_positions
from mha.lab.tasks import TaskBatch, TwoRelationTask, task_from_dict
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, TrainingLog, train
from mha.core.resampling import bootstrap_indices
from mha.core.validation import (LARGEST_D_MODEL_LISTED, check_rank, check_whole_number, head_counts_that_divide,
                                 is_whole_number)

__all__ = [
    "STUDY_FILE",
    "ANALYSIS_BATCH_SEED",
    "ANALYSIS_BATCH_SIZE",
    "ROLE_SHARE_THRESHOLD",
    "SPLIT_THRESHOLD",
    "ROLES",
    "analysis_batch",
    "previous_positions",
    "relation_shares",
    "fact_attention_by",
    "ask_attention_override",
    "head_role",
    "answer_parts",
    "answer_part_accuracy",
    "first_step_below",
    "token_names",
    "train_two_relation_model",
    "HeadCountStudy",
    "load_study",
    "study_from_content",
    "steps_to_solve",
    "accuracy_at",
    "median_interval",
    "best_learning_rates",
    "equal_split_ceiling",
]

STUDY_FILE = "head_count_study.json"
"""The study (every h at every learning rate), its chosen models and the mechanism controls:
``scripts/train_head_count_study.py``."""
ANALYSIS_BATCH_SEED = 10_000
"""The analysis batch of seed ``s`` is ``task.sample(ANALYSIS_BATCH_SIZE, ANALYSIS_BATCH_SEED + s)``: never trained on."""
ANALYSIS_BATCH_SIZE = 256

ROLE_SHARE_THRESHOLD = 0.5
"""A head whose mean attention to one place is at least this is a "fact" or "previous" head."""
SPLIT_THRESHOLD = 0.2
"""A head paying at least this to both places (and 0.5 to neither) is "split"."""
ROLES = ("fact", "previous", "split", "other")


def analysis_batch(task: TwoRelationTask, seed: int, size: int = ANALYSIS_BATCH_SIZE) -> TaskBatch:
    """The fixed held-out batch on which the attention of the run with this ``seed`` is measured."""
    return task.sample(size, ANALYSIS_BATCH_SEED + seed)


def previous_positions(fact_position: Tensor) -> Tensor:
    """(batch, seq) -> (batch, seq): ``i - 1`` at the ask positions (where ``fact_position >= 0``), -1 elsewhere."""
    check_rank("fact_position", fact_position.shape, (2,), "(batch, seq), -1 where there is no ask")
    ask = fact_position >= 0  # (batch, seq)
    return torch.where(ask, torch.arange(fact_position.shape[1]) - 1, -1)  # (batch, seq)


def relation_shares(weights: Tensor, fact_position: Tensor) -> Tensor:
    """Per head, the mean attention an ask position pays to the fact, to the previous token, and elsewhere.

    ``weights`` (batch, heads, seq, seq) attention weights (rows = queries);
    ``fact_position`` (batch, seq) the position of the fact whose key is asked
    at each ask position, -1 at every other position (the task's
    ``details["fact_position"]``). Returns (heads, 3): columns ``fact``,
    ``previous`` and ``elsewhere``, each averaged over the batch and the ask
    positions; a row sums to 1. Chapter 3, "One big head or many".
    """
    weights = torch.as_tensor(weights)
    check_rank("weights", weights.shape, (4,), "(batch, heads, seq, seq) attention weights")
    fact_position = torch.as_tensor(fact_position)
    to_fact = attention_to_key_positions(weights, fact_position)  # (heads,)
    to_previous = attention_to_key_positions(weights, previous_positions(fact_position))  # (heads,)
    return torch.stack([to_fact, to_previous, 1 - to_fact - to_previous], dim=-1)  # (heads, 3)


def fact_attention_by(weights: Tensor, batch: TaskBatch, task: TwoRelationTask, by: str = "key") -> Tensor:
    """Per head, the mean attention an ask position pays to the matching fact, grouped by the asked key or the stored value.

    ``weights`` (batch, heads, seq, seq) for the sequences of ``batch`` (a
    :class:`~mha.lab.tasks.TwoRelationTask` batch); ``by`` is ``"key"`` (the key
    asked, giving (heads, n_keys)) or ``"value"`` (the value stored in the
    matching fact, giving (heads, n_values)). A head that looks up the fact
    for every key has a flat row near 1 when grouped by key; a very narrow
    head finds only some keys (a few bright entries). Grouped by value, it
    shows whether *how much* a head attends to the fact depends on what the
    fact holds. Groups never seen in the batch give NaN. Chapter 3.
    """
    if by not in ("key", "value"):
        raise ValueError(f"by must be 'key' (group by the key asked) or 'value' (by the value stored), got {by!r}.")
    weights = torch.as_tensor(weights)
    check_rank("weights", weights.shape, (4,), "(batch, heads, seq, seq) attention weights")
    fact_position = batch.details["fact_position"]  # (batch, seq)
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)  # (n_ask,) each
    facts = fact_position[rows, queries]  # (n_ask,)
    fact_tokens = batch.inputs[rows, facts]  # (n_ask,): fact (k, v) is k * n_values + v
    if by == "key":
        group, n_groups = fact_tokens // task.n_values, task.n_keys  # the stored key is the asked key
    else:
        group, n_groups = fact_tokens % task.n_values, task.n_values
    on_fact = weights[rows, :, queries, facts]  # (n_ask, heads)
    grouped = torch.full((weights.shape[1], n_groups), float("nan"))
    for index in range(n_groups):
        chosen = group == index
        if chosen.any():
            grouped[:, index] = on_fact[chosen].mean(0)
    return grouped  # (heads, n_groups)


def ask_attention_override(fact_position: Tensor, fact_weight: float | None) -> Callable[[Tensor], Tensor]:
    """An attention override that makes every head at every ask position attend only to the fact and the previous token.

    ``fact_position`` (batch, seq) as in :func:`relation_shares`. The returned
    function maps weights (batch, heads, seq, seq) to a copy in which each ask
    row puts ``fact_weight`` on the asked fact and ``1 - fact_weight`` on the
    previous token; with ``fact_weight=None`` each ask row keeps the head's
    own weights on those two positions, rescaled to sum to 1 (only the weight
    "elsewhere" is removed). Other rows are unchanged. Pass it to
    :class:`~mha.lab.tiny_model.TinyTransformer` as ``attention_overrides={0:
    ...}``: ``fact_weight = 1`` reads only the fact, 0 only the modifier.
    Chapter 3, "One big head or many".
    """
    if fact_weight is not None and not 0.0 <= fact_weight <= 1.0:
        raise ValueError(f"fact_weight must lie in [0, 1] (or be None to keep each head's own split), got {fact_weight}.")
    rows, queries = torch.nonzero(fact_position >= 0, as_tuple=True)  # (n_ask,) each
    facts = fact_position[rows, queries]  # (n_ask,)

    def override(weights: Tensor) -> Tensor:
        if weights.shape[0] != fact_position.shape[0]:
            raise ValueError(f"the override was built for a batch of {fact_position.shape[0]} sequences, "
                             f"but the weights are for {weights.shape[0]}.")
        if fact_weight is None:
            on_fact, on_previous = weights[rows, :, queries, facts], weights[rows, :, queries, queries - 1]
            to_fact = on_fact / (on_fact + on_previous)  # (n_ask, heads)
        else:
            to_fact = torch.full((len(rows), weights.shape[1]), float(fact_weight))
        new = weights.clone()  # (batch, heads, seq, seq)
        new[rows, :, queries, :] = 0.0
        new[rows, :, queries, facts] = to_fact
        new[rows, :, queries, queries - 1] += 1.0 - to_fact
        return new

    return override


def head_role(fact_share: float, previous_share: float, role_threshold: float = ROLE_SHARE_THRESHOLD,
              split_threshold: float = SPLIT_THRESHOLD) -> str:
    """One word for what a head does at the ask positions, from its two shares (see :func:`relation_shares`).

    ``"fact"`` if ``fact_share >= role_threshold`` (default 0.5), else ``"previous"``
    if ``previous_share >= role_threshold``, else ``"split"`` if both are at least
    ``split_threshold`` (default 0.2), else ``"other"``. Chapter 3 moves the thresholds to see
    which conclusions depend on them.
    """
    if not 0.0 < split_threshold <= role_threshold <= 1.0:
        raise ValueError(f"need 0 < split_threshold <= role_threshold <= 1, got {split_threshold!r} and "
                         f"{role_threshold!r}.")
    if fact_share >= role_threshold:
        return "fact"
    if previous_share >= role_threshold:
        return "previous"
    if fact_share >= split_threshold and previous_share >= split_threshold:
        return "split"
    return "other"


def answer_parts(predicted: Tensor, target: Tensor, task: TwoRelationTask) -> dict[str, float]:
    """How often predicted answer tokens have the right value, the right modifier, and both.

    ``predicted`` and ``target`` are token ids of the same shape (e.g. (n_ask,)
    at the ask positions). The answer token ``(v, m)`` is ``task.first_answer
    + v * n_modifiers + m``, so ``v = (token - first_answer) // n_modifiers``
    and ``m = (token - first_answer) % n_modifiers``. A prediction that is not
    an answer token counts as wrong for both parts. Returns ``value``,
    ``modifier`` and ``both``, fractions in [0, 1]. Chapter 3.
    """
    predicted, target = torch.as_tensor(predicted), torch.as_tensor(target)
    if predicted.shape != target.shape or predicted.numel() == 0:
        raise ValueError(f"predicted {tuple(predicted.shape)} and target {tuple(target.shape)} should be the same, "
                         f"non-empty shape: one predicted token per scored position.")
    predicted, target = predicted - task.first_answer, target - task.first_answer
    is_answer = (predicted >= 0) & (predicted < task.n_values * task.n_modifiers)
    value_right = is_answer & (predicted // task.n_modifiers == target // task.n_modifiers)
    modifier_right = is_answer & (predicted % task.n_modifiers == target % task.n_modifiers)
    return {"value": float(value_right.float().mean()), "modifier": float(modifier_right.float().mean()),
            "both": float((value_right & modifier_right).float().mean())}


def answer_part_accuracy(logits: Tensor, batch: TaskBatch, task: TwoRelationTask) -> dict[str, float]:
    """:func:`answer_parts` of the top prediction at the ask positions: which relation has the model learned?

    ``logits`` (batch, seq, vocab). A model that has only learned the
    previous-token relation gets the modifier right and the value right 1
    time in ``n_values``; one that only reads the fact, the reverse. Chapter 3.
    """
    check_rank("logits", logits.shape, (3,), "(batch, seq, vocab)")
    mask = batch.loss_mask  # (batch, seq)
    return answer_parts(logits.argmax(-1)[mask], batch.targets[mask], task)  # over the (n_ask,) scored positions


def first_step_below(steps: Sequence[int], losses: Sequence[float], threshold: float) -> int | None:
    """The first logged step whose loss is at or below ``threshold``, or None if the curve never gets there.

    ``steps`` and ``losses`` are the same length (a loss curve). Chapter 3.
    """
    if len(steps) != len(losses):
        raise ValueError(f"steps has {len(steps)} entries and losses {len(losses)}; give one loss per step.")
    return next((int(step) for step, loss in zip(steps, losses) if loss <= threshold), None)


def token_names(task: TwoRelationTask, tokens: Sequence[int]) -> list[str]:
    """Readable names for a two-relation sequence: ``k3=v5`` (a fact), ``m2``, ``ask k3``, ``v5·m2`` (an answer)."""
    names = []
    for token in (int(t) for t in tokens):
        if token < task.first_ask:
            names.append(f"k{token // task.n_values}=v{token % task.n_values}")
        elif token < task.first_modifier:
            names.append(f"ask k{token - task.first_ask}")
        elif token < task.first_answer:
            names.append(f"m{token - task.first_modifier}")
        elif token < task.vocab_size:
            answer = token - task.first_answer
            names.append(f"v{answer // task.n_modifiers}·m{answer % task.n_modifiers}")
        else:
            raise ValueError(f"token {token} is outside the task's vocabulary 0..{task.vocab_size - 1}.")
    return names


def _listing(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


def train_two_relation_model(
    config: TinyTransformerConfig,
    task: TwoRelationTask,
    training: TrainingConfig,
    *,
    seed: int = 0,
    on_log: Callable[[int, TinyTransformer, TrainingLog], None] | None = None,
    log_every: int | None = None,
) -> tuple[TinyTransformer, TrainingLog]:
    """Train one model of the study's kind from scratch and return it with its loss curve. Chapter 3.

    ``config`` fixes the shape (use :meth:`HeadCountStudy.config`), ``seed``
    the initialisation; ``training`` the optimiser and steps. ``on_log(step,
    model, log)`` is called every ``log_every`` steps (default: the training
    log interval), e.g. to move a progress bar.
    """
    model = TinyTransformer(config, seed=seed)
    every = (log_every or training.log_every) if on_log is not None else None
    log = train(model, task, training, progress=False, checkpoint_every=every, on_checkpoint=on_log)
    model.eval()
    return model, log


# The fair study: every head count at every learning rate (chapter 3, "One big head or many", "A fair comparison").


@dataclasses.dataclass(frozen=True)
class HeadCountStudy:
    """The head-count study of ``scripts/train_head_count_study.py`` and its mechanism controls (chapter 3).

    ``runs`` has one record per ``(h, learning rate, seed)``: its ``curve`` holds ``step``, the accuracy at the
    ask positions on the ``validation`` batch (used to choose a learning rate) and on the ``held_out`` batch (used to
    report) and the ``held_out_loss``, every ``log_every`` steps from ``log_every`` until the run stopped (solved
    after at least ``min_steps``, or censored at ``max_steps``); its ``role_curve`` what each head attends to, every
    250 steps and at the last; ``training`` holds the settings every run shares (batch size, optimiser).
    ``chosen_learning_rates`` maps each h to the rate chosen on the validation batch, whose runs' final weights were
    saved (:meth:`model`). ``controls`` holds the
    :class:`~mha.lab.tasks.PairRecallTask` runs; ``held_out_size`` is the number of held-out sequences.
    ``incomplete`` lists the arms that were not trained from every seed (with the reason), which
    :func:`best_learning_rates` leaves out of the choice. Build it with :func:`load_study`.
    """

    head_counts: tuple[int, ...]
    learning_rates: tuple[float, ...]
    seeds: tuple[int, ...]
    thresholds: tuple[float, ...]
    min_steps: int
    max_steps: int
    runs: tuple[dict, ...]
    controls: dict
    held_out_size: int = 256
    incomplete: tuple[dict, ...] = ()
    d_model: int = 32
    task: TwoRelationTask = TwoRelationTask()
    chosen_learning_rates: dict[int, float] = dataclasses.field(default_factory=dict)
    checkpoints: dict[str, str] = dataclasses.field(default_factory=dict)
    training: dict = dataclasses.field(default_factory=dict)
    directory: Any = LAB_DIRECTORY

    def run(self, n_heads: int, learning_rate: float, seed: int) -> dict:
        """The record of one run; ``ValueError`` naming what was trained if there is none."""
        for record in self.runs:
            if (record["n_heads"], record["seed"]) == (n_heads, seed) and math.isclose(record["learning_rate"],
                                                                                       learning_rate):
                return record
        raise ValueError(f"no run with h = {n_heads}, learning rate {learning_rate!r}, seed {seed!r}; the study "
                         f"trained h = {_listing(self.head_counts)}, learning rates "
                         f"{', '.join(f'{lr:g}' for lr in self.learning_rates)} and seeds {_listing(self.seeds)}"
                         f"{' (not every arm from every seed: see seeds_trained)' if self.incomplete else ''}.")

    def seeds_trained(self, n_heads: int, learning_rate: float) -> tuple[int, ...]:
        """The seeds trained for one arm: all of ``seeds``, unless the arm is listed in ``incomplete``."""
        return tuple(record["seed"] for record in self.runs if record["n_heads"] == n_heads
                     and math.isclose(record["learning_rate"], learning_rate))

    def check(self, n_heads: Any, seed: Any = None) -> None:
        """Raise ``ValueError`` saying what to pick instead if ``(n_heads, seed)`` has no saved model."""
        n_heads = check_whole_number("n_heads", n_heads,
                                     meaning=f"the head count; the study trained h = {_listing(self.head_counts)}")
        if n_heads not in self.head_counts:
            divides = n_heads >= 1 and self.d_model % n_heads == 0
            listing = (f" (the counts that do are {_listing(head_counts_that_divide(self.d_model))})"
                       if self.d_model <= LARGEST_D_MODEL_LISTED else "")
            why = ("it divides d_model but was not trained" if divides else
                   f"it does not divide d_model = {self.d_model}{listing}")
            raise ValueError(f"there is no run with h = {n_heads} heads: {why}. The study trained "
                             f"h = {_listing(self.head_counts)}.")
        if seed is not None and (not is_whole_number(seed) or seed not in self.seeds):
            raise ValueError(f"there is no run with seed {seed!r}; the study trained seeds {_listing(self.seeds)}.")

    def chosen_run(self, n_heads: int, seed: int) -> dict:
        """The record of the run whose weights were saved: ``n_heads`` at its chosen learning rate, from ``seed``."""
        self.check(n_heads, seed)
        return self.run(n_heads, self.chosen_learning_rates[int(n_heads)], seed)

    def model(self, n_heads: int, seed: int) -> TinyTransformer:
        """The saved model of ``(n_heads, seed)`` (at the chosen rate), checksum-verified by
        :func:`mha.lab.checkpoints.load_checkpoint`."""
        self.check(n_heads, seed)
        model, _ = load_checkpoint(self.checkpoints[f"{int(n_heads)}/{int(seed)}"], self.directory)
        return model

    def config(self, n_heads: int) -> TinyTransformerConfig:
        """The study's model shape with ``n_heads`` heads (any count that divides ``d_model``)."""
        return TinyTransformerConfig(vocab_size=self.task.vocab_size, max_seq_len=self.task.seq_len,
                                     d_model=self.d_model, n_layers=1, n_heads=n_heads)

    def curves(self, n_heads: int, learning_rate: float, column: str = "held_out") -> tuple[np.ndarray, np.ndarray]:
        """Steps (n,) and ``column`` (seeds, n) of one arm, every logged step up to ``max_steps``.

        A run that stopped early stopped because it had solved the task, so its last value is carried forward to
        the cap (and the plots say so). ``column``: ``"held_out"``, ``"validation"`` (accuracy) or
        ``"held_out_loss"``.
        """
        records = [self.run(n_heads, learning_rate, seed) for seed in self.seeds]
        step = records[0]["curve"]["step"][0]
        steps = np.arange(step, self.max_steps + 1, step)
        values = np.empty((len(records), len(steps)))
        for row, record in zip(values, records):
            measured = np.asarray(record["curve"][column], dtype=float)
            row[:len(measured)] = measured
            row[len(measured):] = measured[-1]
        return steps, values  # (n,), (seeds, n)

    def role_curves(self, n_heads: int, learning_rate: float, seed: int) -> dict[str, np.ndarray]:
        """Over one run: ``step`` (n,), per-head ``fact`` and ``previous`` shares (n, heads), answer-part accuracy."""
        record = self.run(n_heads, learning_rate, seed)["role_curve"]
        return {"step": np.array(record["step"]),
                "fact": np.array(record["attention_to_fact"]),  # (n, heads)
                "previous": np.array(record["attention_to_previous"]),  # (n, heads)
                "value_accuracy": np.array(record["value_accuracy"]),
                "modifier_accuracy": np.array(record["modifier_accuracy"])}


def load_study(directory=LAB_DIRECTORY) -> HeadCountStudy:
    """Read ``head_count_study.json`` (checked against the manifest) into a :class:`HeadCountStudy`. Chapter 3."""
    return study_from_content(load_json(STUDY_FILE, directory), directory)


def study_from_content(content: dict, directory=LAB_DIRECTORY) -> HeadCountStudy:
    """A :class:`HeadCountStudy` from the parsed contents of ``head_count_study.json`` (or the dict about to be written).

    The fields are checked first: a missing one, or a list given as anything else (``"1248"`` for ``[1, 2, 4, 8]``),
    raises ``ValueError`` naming it and the command that regenerates the file.
    """
    _check_study_fields(content)
    models = content.get("models", {})
    return HeadCountStudy(head_counts=tuple(content["head_counts"]), learning_rates=tuple(content["learning_rates"]),
                          seeds=tuple(content["seeds"]), thresholds=tuple(content["thresholds"]),
                          min_steps=content["min_steps"], max_steps=content["max_steps"], runs=tuple(content["runs"]),
                          controls=content["controls"], held_out_size=content["held_out"]["size"],
                          incomplete=tuple(content.get("incomplete", ())), d_model=content["d_model"],
                          task=task_from_dict(content["task"]),
                          chosen_learning_rates={int(h): rate for h, rate in models.get("learning_rates", {}).items()},
                          checkpoints=dict(models.get("checkpoints", {})), training=dict(content.get("training", {})),
                          directory=directory)


_STUDY_LISTS = ("head_counts", "learning_rates", "seeds", "thresholds", "runs")
_STUDY_FIELDS = {"min_steps": int, "max_steps": int, "d_model": int, "controls": dict, "held_out": dict,
                 "task": dict}


def _check_study_fields(content: object) -> None:
    """Raise ``ValueError`` naming the first field of ``head_count_study.json`` that is missing or of the wrong type."""
    how = "Regenerate it with:\n    python scripts/train_head_count_study.py"
    if not isinstance(content, dict):
        raise ValueError(f"the head-count study holds {type(content).__name__}, not a JSON object. {how}")
    for name in _STUDY_LISTS:
        if not isinstance(content.get(name), list):
            raise ValueError(f"the head-count study's {name!r} is {content.get(name)!r:.60}, but it must be a list. "
                             f"{how}")
    for name, kind in _STUDY_FIELDS.items():
        value = content.get(name)
        if not (is_whole_number(value) if kind is int else isinstance(value, kind)):
            raise ValueError(f"the head-count study's {name!r} is {value!r:.60}, but it must be "
                             f"{'a whole number' if kind is int else 'a JSON object'}. {how}")
    if not all(is_whole_number(h) and h >= 1 for h in content["head_counts"]):
        raise ValueError(f"the head-count study's 'head_counts' must be whole numbers >= 1. {how}")


def steps_to_solve(record: dict, threshold: float, split: str = "held_out") -> float:
    """The first logged step at which a run's accuracy on ``split`` reaches ``threshold``; ``inf`` if it never did.

    ``split`` is ``"validation"`` or ``"held_out"``. ``inf`` marks a censored run: not solved within the steps it
    trained (runs stop early only after solving at the strictest threshold, so a looser one is never censored by
    the early stop). Chapter 3.
    """
    if split not in ("validation", "held_out"):
        raise ValueError(f"split must be 'validation' (to choose) or 'held_out' (to report), got {split!r}.")
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold is an accuracy in (0, 1], got {threshold!r}.")
    curve = record["curve"]
    return float(next((step for step, accuracy in zip(curve["step"], curve[split]) if accuracy >= threshold),
                      math.inf))


def accuracy_at(record: dict, step: int, split: str = "held_out") -> float:
    """A run's accuracy on ``split`` at logged ``step``; ``ValueError`` if the run did not log that step."""
    curve = record["curve"]
    if step not in curve["step"]:
        raise ValueError(f"step {step} was not logged by this run (it logged every {curve['step'][0]} steps up to "
                         f"{curve['step'][-1]}).")
    return float(curve[split][curve["step"].index(step)])


def median_interval(values: Sequence[float], n_resamples: int = 2000, seed: int = 0,
                    level: float = 0.95) -> tuple[float, float, float]:
    """The median of ``values`` and a percentile-bootstrap interval for it: ``(median, low, high)``. Chapter 3.

    ``inf`` (a censored run) is allowed and sorts last, so a median or bound that lands on a censored run is
    ``inf``: "not solved within the cap". With 5 seeds the interval can only run between observed values.
    """
    values = np.asarray(values, dtype=float)
    if values.ndim != 1 or len(values) == 0 or np.isnan(values).any():
        raise ValueError(f"give a non-empty 1-d list of numbers (inf for censored runs), got {values!r}.")
    resamples = values[bootstrap_indices(len(values), n_resamples, seed)]  # (n_resamples, n)
    medians = np.sort(resamples, axis=1)[:, (len(values) - 1) // 2]  # the lower median: inf-safe
    tail = (1.0 - level) / 2
    low, high = np.quantile(medians, [tail, 1.0 - tail], method="inverted_cdf")
    return float(np.sort(values)[(len(values) - 1) // 2]), float(low), float(high)


def best_learning_rates(study: HeadCountStudy, threshold: float) -> dict[int, float]:
    """Per head count, the learning rate chosen on the validation batch: the fewest median steps to ``threshold``.

    Ties (for example a censored median at every rate) go to the rate with more seeds solved, then to the higher
    median validation accuracy at ``study.min_steps``, then to the smaller rate. The held-out batch plays no part in the choice, and a rate not trained from every seed
    is left out of it. Chapter 3.
    """
    chosen = {}
    for n_heads in study.head_counts:
        complete = [rate for rate in study.learning_rates
                    if set(study.seeds_trained(n_heads, rate)) == set(study.seeds)]
        if not complete:
            raise ValueError(f"h = {n_heads} has no learning rate trained from every seed; nothing to choose from.")

        def score(learning_rate: float) -> tuple[float, int, float, float]:
            records = [study.run(n_heads, learning_rate, seed) for seed in study.seeds]
            steps = [steps_to_solve(r, threshold, "validation") for r in records]
            accuracy = float(np.median([accuracy_at(r, study.min_steps, "validation") for r in records]))
            solved = int(np.isfinite(steps).sum())
            return median_interval(steps, n_resamples=1)[0], -solved, -accuracy, learning_rate

        chosen[n_heads] = min(complete, key=score)
    return chosen


def equal_split_ceiling(n_symbols: int) -> float:
    """The most a readout can get right after one head splits evenly between two sources of the same ``n_symbols``.

    ``a b ?`` and ``b a ?`` then give the head the same output, so the best guess is right whenever ``a = b`` (a
    fraction ``1 / n_symbols`` of the pairs) and half the time otherwise. Chapter 3, "One big head or many".
    """
    n_symbols = check_whole_number("n_symbols", n_symbols, minimum=1)
    return 1 / n_symbols + (1 - 1 / n_symbols) / 2
