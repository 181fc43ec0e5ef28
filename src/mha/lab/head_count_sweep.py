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
* :func:`train_two_relation_model` - train one more model of the study's shape
  (used by the live retrain of :mod:`mha.views.head_count_explorer`).

The stored study itself (every run's validation and held-out curves and role curve, each h's chosen learning rate
and its saved models, its report seeds, and the mechanism controls) is read by :mod:`mha.lab.head_count_study`:
:class:`~mha.lab.head_count_study.HeadCountStudy` and :func:`~mha.lab.head_count_study.load_study`, with the
functions that summarise it (steps to solve, median intervals, Kaplan-Meier curves, the chosen learning rates).
Import them from there.

Maps follow the book's convention: weights are (batch, heads, seq_q, seq_k),
row = query = the position attending FROM, column = key = the position
attended TO.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from mha.core.layouts import BATCH_HEADS, takes_attention
from mha.core.validation import (
    check_finite_number,
    check_items,
    check_rank,
    check_real_tensor,
    check_share,
    check_type,
    check_whole_number,
)
from mha.lab.circuit_scores import attention_to_key_positions
from mha.lab.tasks import TaskBatch, TwoRelationTask
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.lab.training import TrainingConfig, TrainingLog, train

__all__ = [
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
    "equal_split_ceiling",
]

ANALYSIS_BATCH_SEED = 10_000
"""The analysis batch of seed ``s`` is ``task.sample(ANALYSIS_BATCH_SIZE, ANALYSIS_BATCH_SEED + s)``: never trained
on."""
ANALYSIS_BATCH_SIZE = 256

ROLE_SHARE_THRESHOLD = 0.5
"""A head whose mean attention to one place is at least this is a "fact" or "previous" head."""
SPLIT_THRESHOLD = 0.2
"""A head paying at least this to both places (and 0.5 to neither) is "split"."""
ROLES = ("fact", "previous", "split", "other")


def analysis_batch(task: TwoRelationTask, seed: int, size: int = ANALYSIS_BATCH_SIZE) -> TaskBatch:
    """The fixed held-out batch on which the attention of the run with this ``seed`` is measured."""
    check_type("task", task, TwoRelationTask, "a TwoRelationTask, e.g. the study's own: load_study().task")
    return task.sample(size, ANALYSIS_BATCH_SEED + seed)


def previous_positions(fact_position: Tensor) -> Tensor:
    """(batch, seq) -> (batch, seq): ``i - 1`` at the ask positions (where ``fact_position >= 0``), -1 elsewhere."""
    fact_position = check_real_tensor("fact_position", fact_position, meaning="(batch, seq)")
    check_rank("fact_position", fact_position.shape, (2,), "(batch, seq), -1 where there is no ask")
    ask = fact_position >= 0  # (batch, seq)
    return torch.where(ask, torch.arange(fact_position.shape[1]) - 1, -1)  # (batch, seq)


@takes_attention(weights=BATCH_HEADS)
def relation_shares(weights: Tensor, fact_position: Tensor) -> Tensor:
    """Per head, the mean attention an ask position pays to the fact, to the previous token, and elsewhere.

    ``weights`` (batch, heads, seq, seq) attention weights (rows = queries);
    ``fact_position`` (batch, seq) the position of the fact whose key is asked
    at each ask position, -1 at every other position (the task's
    ``details["fact_position"]``). Returns (heads, 3): columns ``fact``,
    ``previous`` and ``elsewhere``, each averaged over the batch and the ask
    positions; a row sums to 1. Chapter 3, "One big head or many".
    """
    weights = check_real_tensor("weights", weights, meaning="(batch, heads, seq, seq) attention weights")
    check_rank("weights", weights.shape, (4,), "(batch, heads, seq, seq) attention weights")
    fact_position = check_real_tensor("fact_position", fact_position, meaning="(batch, seq)")
    to_fact = attention_to_key_positions(weights, fact_position)  # (heads,)
    to_previous = attention_to_key_positions(weights, previous_positions(fact_position))  # (heads,)
    return torch.stack([to_fact, to_previous, 1 - to_fact - to_previous], dim=-1)  # (heads, 3)


@takes_attention(weights=BATCH_HEADS)
def fact_attention_by(weights: Tensor, batch: TaskBatch, task: TwoRelationTask, by: str = "key") -> Tensor:
    """Per head, the mean attention an ask position pays to the matching fact, grouped by the asked key or the stored
    value.

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
    weights = check_real_tensor("weights", weights, meaning="(batch, heads, seq, seq) attention weights")
    check_rank("weights", weights.shape, (4,), "(batch, heads, seq, seq) attention weights")
    check_type("batch", batch, TaskBatch, "a batch of the two-relation task, e.g. analysis_batch(task, seed)")
    check_type("task", task, TwoRelationTask, "the TwoRelationTask that made the batch")
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
    fact_position = check_real_tensor("fact_position", fact_position, meaning="(batch, seq)")
    check_rank("fact_position", fact_position.shape, (2,), "(batch, seq): the fact's position at each ask, else -1")
    if fact_weight is not None:
        fact_weight = check_share("fact_weight", fact_weight, meaning="or None to keep each head's own split")
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


def head_role(fact_share: float, prev_token_share: float, role_threshold: float = ROLE_SHARE_THRESHOLD,
              split_threshold: float = SPLIT_THRESHOLD) -> str:
    """One word for what a head does at the ask positions, from its two shares (see :func:`relation_shares`).

    ``"fact"`` if ``fact_share >= role_threshold`` (default 0.5), else ``"previous"``
    if ``prev_token_share >= role_threshold``, else ``"split"`` if both are at least
    ``split_threshold`` (default 0.2), else ``"other"``. Chapter 3 moves the thresholds to see
    which conclusions depend on them.
    """
    split_threshold, role_threshold = (check_share(name, value) for name, value in
                                       (("split_threshold", split_threshold), ("role_threshold", role_threshold)))
    if not 0.0 < split_threshold <= role_threshold:
        raise ValueError(f"need 0 < split_threshold <= role_threshold <= 1, got {split_threshold!r} and "
                         f"{role_threshold!r}.")
    meaning = "a head's share of attention at the ask positions, from relation_shares"
    fact_share = check_share("fact_share", fact_share, meaning=meaning)
    prev_token_share = check_share("prev_token_share", prev_token_share, meaning=meaning)
    if fact_share >= role_threshold:
        return "fact"
    if prev_token_share >= role_threshold:
        return "previous"
    if fact_share >= split_threshold and prev_token_share >= split_threshold:
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
    logits = check_real_tensor("logits", logits, meaning="(batch, seq, vocab)")
    check_rank("logits", logits.shape, (3,), "(batch, seq, vocab)")
    mask = batch.loss_mask  # (batch, seq)
    return answer_parts(logits.argmax(-1)[mask], batch.targets[mask], task)  # over the (n_ask,) scored positions


def first_step_below(steps: Sequence[int], losses: Sequence[float], threshold: float) -> int | None:
    """The first logged step whose loss is at or below ``threshold``, or None if the curve never gets there.

    ``steps`` and ``losses`` are the same length (a loss curve). Chapter 3.
    """
    steps = check_items("steps", steps, "a list of logged steps")
    threshold = check_finite_number("threshold", threshold, meaning="a loss to reach")
    if len(steps) != len(losses):
        raise ValueError(f"steps has {len(steps)} entries and losses {len(losses)}; give one loss per step.")
    return next((int(step) for step, loss in zip(steps, losses, strict=True) if loss <= threshold), None)


def token_names(task: TwoRelationTask, tokens: Sequence[int]) -> list[str]:
    """Readable names for a two-relation sequence: ``k3=v5`` (a fact), ``m2``, ``ask k3``, ``v5·m2`` (an answer)."""
    check_type("task", task, TwoRelationTask, "a TwoRelationTask, e.g. the study's own: load_study().task")
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

    ``config`` fixes the shape (use :meth:`~mha.lab.head_count_study.HeadCountStudy.config`), ``seed``
    the initialisation; ``training`` the optimiser and steps. ``on_log(step,
    model, log)`` is called every ``log_every`` steps (default: the training
    log interval), e.g. to move a progress bar.
    """
    model = TinyTransformer(config, seed=seed)
    every = (log_every or training.log_every) if on_log is not None else None
    log = train(model, task, training, progress=False, checkpoint_every=every, on_checkpoint=on_log)
    model.eval()
    return model, log


def equal_split_ceiling(n_symbols: int) -> float:
    """The most a readout can get right after one head splits evenly between two sources of the same ``n_symbols``.

    ``a b ?`` and ``b a ?`` then give the head the same output, so the best guess is right whenever ``a = b`` (a
    fraction ``1 / n_symbols`` of the pairs) and half the time otherwise. Chapter 3, "One big head or many".
    """
    n_symbols = check_whole_number("n_symbols", n_symbols, minimum=1)
    return 1 / n_symbols + (1 - 1 / n_symbols) / 2
