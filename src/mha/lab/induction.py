"""Which head of a lab induction model plays which role, found by score and tested by removal (chapter 3).

Chapter 3, sections "Induction heads" and "Heads are not preassigned", trains
tiny attention-only transformers on :class:`mha.lab.tasks.InductionTask` and asks
which heads became previous-token heads and which became induction heads.
The scores themselves live in :mod:`mha.lab.circuit_scores`; this module turns
them into role assignments and the checks around them:

* :func:`held_out_batch` - the batch of held-out repeat periods every claim is
  measured on (the same one ``scripts/train_checkpoints.py`` logs with);
* :func:`uniform_causal_weights` - the chance level: a head that spreads its
  weight evenly over every position it may see;
* :func:`heads_with_role` and :func:`induction_role_table` - which heads score above a
  threshold, by score and never by index;
* :func:`head_ablation_losses` - the held-out loss with each head removed in
  turn, the causal check behind a role;
* :func:`attention_by_offset` - how much weight a head puts ``d`` positions
  back, which shows what a model that cannot form induction heads does instead.
* :func:`train_until_induction` - train until the phase change has passed,
  scoring the heads on the way (the live demo of "Induction heads" and
  ``scripts/induction_phase_spread.py``, with :data:`FAST_INDUCTION_MODEL` and
  :data:`FAST_LEARNING_RATE`), and :func:`first_step_above`, the step a score
  first passes a threshold;
* :func:`repeated_block_batch` - sequences with more copies of the block than
  training ever shows, to test whether the heads generalise;
* :func:`train_fast_model`, :data:`INDUCTION_CHECKPOINTS` and :func:`phase_spread_curves` - what the exercises
  of "Induction heads" train, load and read.

Conventions are the book's: weights are ``(..., batch, heads, seq_q, seq_k)``
with row = query (attends from) and column = key (attended to).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import torch
from torch import Tensor

from mha.core.argument_checks import check_items_of
from mha.core.layouts import BATCH_HEADS, takes_attention
from mha.core.validation import (
    InputError,
    check_finite_number,
    check_items,
    check_rank,
    check_real_tensor,
    check_seed,
    check_size,
    check_type,
    check_whole_number,
)
from mha.lab.checkpoints import load_json
from mha.lab.circuit_scores import head_role_scores
from mha.lab.tasks import InductionTask, TaskBatch
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig, check_tiny_model
from mha.lab.training import TrainingConfig, train

__all__ = [
    "ROLE_SCORE_THRESHOLD",
    "ROLE_SCORES",
    "HELD_OUT_BATCH_SIZE",
    "HELD_OUT_BATCH_SEED",
    "held_out_batch",
    "uniform_causal_weights",
    "heads_with_role",
    "role_labels",
    "induction_role_table",
    "head_ablation_losses",
    "attention_by_offset",
    "FAST_INDUCTION_MODEL",
    "FAST_LEARNING_RATE",
    "SETTLED_REPEAT_LOSS",
    "PREVIOUS_TOKEN_HEAD_STEPS",
    "INDUCTION_CHECKPOINTS",
    "train_fast_model",
    "phase_spread_curves",
    "train_until_induction",
    "first_step_above",
    "repeated_block_batch",
]

ROLE_SCORE_THRESHOLD = 0.5
"""A head has a role when more than half of its attention (averaged over queries) lands where the role says."""

ROLE_SCORES = {"previous-token": "previous_token", "induction": "prefix_matching"}
"""Each role and the score (a key of :func:`mha.lab.circuit_scores.head_role_scores`) that defines it."""

HELD_OUT_BATCH_SIZE, HELD_OUT_BATCH_SEED = 512, 2024
"""The held-out batch of ``scripts/train_checkpoints.py`` (recorded in ``data/lab/induction_roles.json``)."""


def held_out_batch(task: InductionTask | None = None, size: int = HELD_OUT_BATCH_SIZE,
                   seed: int = HELD_OUT_BATCH_SEED) -> TaskBatch:
    """A batch of ``task``'s held-out periods, never seen in training (chapter 3).

    With the defaults this is exactly the batch the lab's logs and
    ``induction_roles.json`` were measured on, so numbers computed here can be
    compared with the stored ones. ``task`` defaults to :class:`~mha.lab.tasks.InductionTask`.
    """
    check_type("task", task, (InductionTask, type(None)), "an InductionTask, or None for the book's own")
    task = InductionTask() if task is None else task
    return task.held_out().sample(size, seed)


def uniform_causal_weights(seq: int, batch: int = 1, heads: int = 1) -> Tensor:
    """(batch, heads, seq, seq): each query spreads its weight evenly over itself and every earlier position.

    The chance level of a causal head: score this map to see what a role
    score looks like when a head pays no attention to anything in particular.
    """
    seq = check_whole_number("seq", seq, minimum=1, meaning="positions in the sequence")
    batch = check_whole_number("batch", batch, minimum=1, meaning="sequences in the batch")
    heads = check_whole_number("heads", heads, minimum=1, meaning="heads of the layer")
    check_size("the weights (batch, heads, seq, seq)", (batch, heads, seq, seq))
    weights = torch.ones(seq, seq).tril()  # (seq, seq): 1 where the key is not after the query
    weights = weights / weights.sum(-1, keepdim=True)  # row i: 1 / (i + 1) on keys 0..i
    return weights.expand(batch, heads, seq, seq).clone()  # (batch, heads, seq, seq)


def heads_with_role(scores: Tensor, threshold: float = ROLE_SCORE_THRESHOLD) -> list[tuple[int, int]]:
    """Every ``(layer, head)`` whose score is above ``threshold``, in (layer, head) order (chapter 3).

    ``scores`` (layers, heads), e.g. ``head_role_scores(...)["prefix_matching"]``.
    Several heads may pass, or none: a role is found by its score, and
    nothing says it belongs to one head or to a given index.
    """
    scores = check_real_tensor("scores", scores, meaning="(layers, heads): one score per head")
    check_rank("scores", scores.shape, (2,), "(layers, heads): one score per head")
    threshold = check_finite_number("threshold", threshold, meaning="the score a head must pass")
    passing = (scores > threshold).nonzero().tolist()  # [[layer, head], ...] in row-major order
    return [(int(layer), int(head)) for layer, head in passing]


def role_labels(scores: Mapping[str, Tensor], threshold: float = ROLE_SCORE_THRESHOLD) -> list[list[str]]:
    """(layers x heads) nested lists naming each head's roles ("previous-token", "induction", both, or "-").

    ``scores`` holds at least the :data:`ROLE_SCORES` keys as (layers, heads)
    tensors, as returned by :func:`mha.lab.circuit_scores.head_role_scores`.
    """
    check_type("scores", scores, Mapping, "the dict of mha.lab.circuit_scores.head_role_scores")
    missing = [key for key in ROLE_SCORES.values() if key not in scores]
    if missing:
        raise ValueError(f"scores lacks {missing}; pass the dict of mha.lab.circuit_scores.head_role_scores.")
    n_layers, n_heads = torch.as_tensor(scores["previous_token"]).shape
    labels = [[[] for _ in range(n_heads)] for _ in range(n_layers)]
    for role, key in ROLE_SCORES.items():
        for layer, head in heads_with_role(scores[key], threshold):
            labels[layer][head].append(role)
    return [[" + ".join(roles) or "-" for roles in layer] for layer in labels]


def induction_role_table(models: Mapping[str, object], batch: TaskBatch, threshold: float = ROLE_SCORE_THRESHOLD):
    """One row per (model, layer, head): its scores on ``batch`` and its role by ``threshold`` (chapter 3).

    ``models`` maps a label (e.g. ``"seed 0"``) to a
    :class:`~mha.lab.tiny_model.TinyTransformer`; ``batch`` is an induction
    batch, best :func:`held_out_batch`. Prefix matching is scored on the
    repeat (``details["repeat_mask"]``). Returns a pandas DataFrame with
    columns ``model, layer, head, previous_token, prefix_matching, copying, role``.
    """
    check_type("models", models, Mapping, 'a dict of TinyTransformers by label, e.g. {"seed 0": model}')
    import pandas

    rows = []
    for label, model in models.items():
        scores = head_role_scores(model, batch.inputs, batch.details["repeat_mask"])  # each (layers, heads)
        labels = role_labels(scores, threshold)
        n_layers, n_heads = scores["previous_token"].shape
        for layer in range(n_layers):
            for head in range(n_heads):
                rows.append({"model": label, "layer": layer, "head": head,
                             **{key: float(value[layer, head]) for key, value in scores.items()},
                             "role": labels[layer][head]})
    return pandas.DataFrame(rows)


@torch.no_grad()
def head_ablation_losses(model, task: InductionTask, batch: TaskBatch, metric: str = "repeat_loss") -> Tensor:
    """(layers, heads): ``task``'s ``metric`` on ``batch`` with that one head's output set to zero (chapter 3).

    A head whose removal sends the held-out loss up is one the model relies
    on; one whose removal changes little is redundant or unused. ``model`` is
    a :class:`~mha.lab.tiny_model.TinyTransformer` (its ``head_mask``
    argument does the removal).
    """
    model = check_tiny_model(model)
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    losses = torch.empty(n_layers, n_heads)
    for layer in range(n_layers):
        for head in range(n_heads):
            head_mask = torch.ones(n_layers, n_heads)
            head_mask[layer, head] = 0.0  # remove this one head
            losses[layer, head] = task.metrics(model(batch.inputs, head_mask=head_mask).logits, batch)[metric]
    return losses


@takes_attention(weights=BATCH_HEADS.with_leading(4))
def attention_by_offset(weights: Tensor, query_mask: Tensor | None = None) -> Tensor:
    """(..., heads, seq): the mean weight a head puts ``d`` positions back, for d = 0 .. seq-1 (chapter 3).

    ``weights`` (..., batch, heads, seq, seq); entry ``d`` averages
    ``weights[..., i, i - d]`` over the batch and the queries ``i >= d``
    (inside ``query_mask`` (batch, seq), if given). A previous-token head
    peaks at ``d = 1``; a head that copies from a fixed distance back peaks at
    that distance. Offsets no scored query can reach are NaN.
    """
    weights = check_real_tensor("weights", weights, meaning="(..., heads, seq, seq) attention weights")
    check_rank("weights", weights.shape, range(4, 9), "(..., batch, heads, seq, seq) attention weights")
    batch, seq = weights.shape[-4], weights.shape[-2]
    if weights.shape[-1] != seq:
        raise ValueError(f"weights has shape {tuple(weights.shape)}; offsets need self-attention maps (seq, seq).")
    if query_mask is None:
        query_mask = torch.ones(batch, seq, dtype=torch.bool)
    if tuple(query_mask.shape) != (batch, seq):
        raise ValueError(f"query_mask has shape {tuple(query_mask.shape)}; it should be (batch, seq) = ({batch}, "
                         f"{seq}).")
    offsets = []
    for d in range(seq):
        on_offset = weights.diagonal(offset=-d, dim1=-2, dim2=-1)  # (..., batch, heads, seq - d): queries d..seq-1
        scored = query_mask[:, d:].to(weights.dtype)[:, None, :]  # (batch, 1, seq - d)
        count = float(scored.sum())  # scored (batch, query) pairs at this offset
        offsets.append((on_offset * scored).sum(dim=(-3, -1)) / count if count > 0
                       else torch.full(weights.shape[:-4] + weights.shape[-3:-2], float("nan")))  # (..., heads)
    return torch.stack(offsets, dim=-1)  # (..., heads, seq)



# ---------------------------------------------------------------------------------------------------------------
# How fast the phase change comes, and whether the heads generalise (chapter 3, "Induction heads")
# ---------------------------------------------------------------------------------------------------------------

FAST_INDUCTION_MODEL = dict(d_model=64, n_layers=2, n_heads=4)
"""The live demo's model: twice the stored checkpoints' width (d_head 16), still attention only."""

FAST_LEARNING_RATE = 3e-3
"""The live demo's learning rate: with :data:`FAST_INDUCTION_MODEL` its phase change comes within a few hundred
steps."""

SETTLED_REPEAT_LOSS = 0.5
"""A run has passed its phase change once its repeat loss on training periods is below this (nats; log 64 = 4.16)."""

PREVIOUS_TOKEN_HEAD_STEPS = 500
"""Steps after which :func:`train_fast_model`'s model has a previous-token head (every one of eight seeds tried)."""

INDUCTION_CHECKPOINTS = ("induction_2layer_seed0", "induction_2layer_seed0_step03100", "induction_2layer_seed1",
                         "induction_2layer_seed2", "induction_2layer_seed3", "induction_2layer_seed4",
                         "induction_2layer_seed0_step02900", "induction_2layer_seed0_step03500")
"""The stored 2-layer models (3.5, 3.6) whose induction heads are formed or forming (held-out prefix matching of the
best head 0.22 to 0.98)."""


def train_fast_model(seed: int, steps: int) -> TinyTransformer:
    """The live demo's model (:data:`FAST_INDUCTION_MODEL`, built from ``seed``) trained for ``steps`` steps on
    :class:`~mha.lab.tasks.InductionTask` at :data:`FAST_LEARNING_RATE`, data seeded with ``seed``, on one thread.

    Returns the trained :class:`~mha.lab.tiny_model.TinyTransformer`, in eval mode. By step 500 every one of the
    eight seeds we tried had a layer-0 head with a previous-token score above 0.5 (chapter 3, "Induction heads").
    """
    seed = check_seed("seed", seed)
    steps = check_whole_number("steps", steps, minimum=1, maximum=100_000, meaning="optimiser steps")
    task = InductionTask()
    model = TinyTransformer(TinyTransformerConfig(vocab_size=task.vocab_size, max_seq_len=task.seq_len,
                                                  **FAST_INDUCTION_MODEL), seed=seed)
    train(model, task, TrainingConfig(steps=steps, learning_rate=FAST_LEARNING_RATE, seed=seed, log_every=steps,
                                      eval_batch_size=64), progress=False)
    return model.eval()


@functools.lru_cache(maxsize=1)
def phase_spread_curves() -> tuple:
    """(d_model, learning rate, seed, steps, held-out repeat losses) of each run of section 3.5's phase-change spread
    (``induction_phase_spread.json``), read once."""
    study = load_json("induction_phase_spread.json")
    return tuple((run["d_model"], run["learning_rate"], run["seed"], [row["step"] for row in run["head_scores"]],
                  [row["repeat_loss"] for row in run["head_scores"]]) for run in study["runs"])


class _PhaseChangePassed(Exception):
    """Raised inside :func:`train_until_induction`'s callback to end training early."""


def train_until_induction(model, task: InductionTask, training, held_out: TaskBatch | None = None, *,
                          score_every: int = 100, settled_loss: float = SETTLED_REPEAT_LOSS,
                          settle_steps: int = 200, stop_when_formed: float | None = None,
                          progress: bool = False) -> dict:
    """Train ``model`` in place until its phase change has passed, scoring its heads on held-out periods (chapter 3).

    ``training`` is a :class:`~mha.lab.training.TrainingConfig`; its ``steps``
    is the most the run may take. Every ``score_every`` steps the heads are
    scored on ``held_out`` (default :func:`held_out_batch`); training stops
    ``settle_steps`` steps after the repeat loss on the training periods first
    falls below ``settled_loss``, so that :func:`~mha.lab.training.steepest_drop`
    (window 200 steps) sees the whole fall. With ``stop_when_formed`` set, it
    stops instead at the first scoring step where a last-layer head's held-out
    prefix matching exceeds that score (the live demo of section 3.5, which only
    needs the heads to exist). Returns a dict with ``log`` (the
    :class:`~mha.lab.training.TrainingLog`), ``phase_step`` and
    ``phase_seconds`` (the steepest 200-step fall of the repeat loss, None if
    the loss never settled), ``settled_step``, ``steps`` (trained),
    ``head_scores`` (per scoring step: ``step``, held-out ``repeat_loss``,
    ``best_previous_token`` of the first layer, ``best_prefix_matching`` of the
    last layer) and ``formed`` (whether the loss settled within ``steps``).
    """
    from mha.lab.training import steepest_drop, train

    if not 0 < settled_loss:
        raise ValueError(f"settled_loss must be a positive loss in nats, got {settled_loss!r}.")
    if stop_when_formed is not None and not -1.0 <= stop_when_formed < 1.0:
        raise ValueError(f"stop_when_formed is a prefix-matching score below 1 (such as ROLE_SCORE_THRESHOLD), got "
                         f"{stop_when_formed!r}; pass None to stop after the phase change instead.")
    held_out = held_out_batch(task) if held_out is None else held_out
    head_scores: list[dict] = []
    settled: dict[str, int] = {}

    def on_checkpoint(step: int, current, log) -> None:
        if step % score_every == 0:
            with torch.no_grad():
                output = current(held_out.inputs)
            repeat_loss = task.metrics(output.logits, held_out)["repeat_loss"]
            scores = head_role_scores(current, held_out.inputs, held_out.details["repeat_mask"],
                                      attention_weights=output.attention_weights)
            head_scores.append({"step": step, "repeat_loss": repeat_loss,
                                "best_previous_token": float(scores["previous_token"][0].max()),
                                "best_prefix_matching": float(scores["prefix_matching"][-1].max())})
            if stop_when_formed is not None and head_scores[-1]["best_prefix_matching"] > stop_when_formed:
                raise _PhaseChangePassed
        if "step" not in settled and log.rows[-1]["step"] == step and log.rows[-1]["repeat_loss"] < settled_loss:
            settled["step"] = step
        if "step" in settled and step >= settled["step"] + settle_steps and step % score_every == 0:
            raise _PhaseChangePassed

    every = math.gcd(score_every, training.log_every)
    log_holder: list = []
    try:
        log = train(model, task, training, progress=progress, checkpoint_steps=(0,), checkpoint_every=every,
                    on_checkpoint=lambda step, current, log: (log_holder.append(log) if not log_holder else None,
                                                              on_checkpoint(step, current, log)))
    except _PhaseChangePassed:
        log = log_holder[0]
    model.eval()
    formed = "step" in settled
    phase = steepest_drop(log, "repeat_loss", window_steps=200) if formed else None
    return {"log": log, "formed": formed, "settled_step": settled.get("step"), "steps": int(log.rows[-1]["step"]),
            "phase_step": int(phase["step"]) if phase else None, "phase_seconds": phase["seconds"] if phase else None,
            "seconds": log.seconds, "head_scores": head_scores}


def first_step_above(head_scores: list[dict], key: str, threshold: float) -> int | None:
    """The first scoring step at which ``key`` (e.g. ``"best_prefix_matching"``) exceeds ``threshold``; None if
    never."""
    check_items_of("head_scores", head_scores, dict, "one step's head scores, a dict with 'step' and the scores")
    check_type("key", key, str, "the name of a score, e.g. 'best_prefix_matching'")
    threshold = check_finite_number("threshold", threshold, meaning="the score to pass")
    missing = [index for index, row in enumerate(head_scores) if "step" not in row or key not in row]
    if missing:
        raise InputError(f"head_scores[{missing[0]}] has no 'step' or no {key!r}; pass a timeline's head scores and "
                         f"one of their keys, e.g. 'best_prefix_matching'.")
    return next((int(row["step"]) for row in head_scores if row[key] > threshold), None)


def repeated_block_batch(task: InductionTask, copies: int, size: int, seed: int,
                         periods: tuple[int, ...] | None = None) -> TaskBatch:
    """Sequences ``[noise][A][A]...[A]`` with ``copies`` copies of the block: a layout training never shows (chapter 3).

    Training sequences hold exactly two copies; here tokens of the third and
    later copies have several earlier occurrences. ``periods`` (default: the
    task's held-out periods that fit ``copies`` times into ``seq_len + 1``
    tokens) is drawn per sequence. The batch has the same ``details`` as
    :meth:`~mha.lab.tasks.InductionTask.sample` (``repeat_start`` is where the
    second copy starts; ``induction_key`` points after the most recent earlier
    copy), plus ``copy_index`` (batch, seq): which copy each input position
    is in (0 for noise, 1 for the first copy, ...), so losses can be read per copy.
    """
    check_type("task", task, InductionTask, "an InductionTask, e.g. InductionTask()")
    copies = check_whole_number("copies", copies, minimum=2, meaning="a repeat needs two copies")
    size = check_whole_number("size", size, minimum=1, meaning="sequences in the batch")
    check_size("the batch's token draws (size, vocab_size)", (size, task.vocab_size))
    seed = check_seed("seed", seed)
    n_tokens = task.seq_len + 1
    if periods is None:
        periods = tuple(p for p in task.held_out_periods if copies * p <= n_tokens)
    periods = tuple(check_whole_number(f"periods[{i}]", p, meaning="a block's length in tokens")
                    for i, p in enumerate(check_items("periods", periods, "a tuple of block lengths, e.g. (4, 6)")))
    too_long = [p for p in periods if copies * p > n_tokens or p < 2]
    if not periods or too_long:
        raise ValueError(f"{copies} copies of periods {list(periods) or 'none'} do not fit into seq_len + 1 = "
                         f"{n_tokens} tokens; choose periods 2 <= p <= {n_tokens // copies}.")
    generator = torch.Generator().manual_seed(seed)
    choices = torch.tensor(periods)
    period = choices[torch.randint(0, len(choices), (size,), generator=generator)]  # (batch,)
    tokens = torch.rand(size, task.vocab_size, generator=generator).argsort(-1)  # (batch, vocab): distinct tokens
    if task.vocab_size < n_tokens:
        raise ValueError(f"distinct tokens need vocab_size >= seq_len + 1 = {n_tokens}, got {task.vocab_size}.")
    tokens = tokens[:, :n_tokens]  # (batch, n_tokens)
    positions = torch.arange(n_tokens)  # (n_tokens,)
    first_copy = n_tokens - copies * period  # (batch,): token index where the first copy begins
    offset = positions[None, :] - first_copy[:, None]  # (batch, n_tokens): distance into the copies
    source = torch.where(offset >= 0, first_copy[:, None] + offset % period[:, None], positions[None, :])
    tokens = tokens.gather(1, source)  # every later copy := the first copy
    inputs, targets = tokens[:, :-1], tokens[:, 1:]  # (batch, seq) each
    input_offset = offset[:, :-1]  # (batch, seq)
    copy_index = torch.where(input_offset >= 0, input_offset // period[:, None] + 1, torch.zeros_like(input_offset))
    repeat_start = first_copy + period  # (batch,): input position where the second copy begins
    repeat_mask = copy_index >= 2  # (batch, seq): the next token is known from an earlier copy
    induction_key = torch.where(repeat_mask, torch.arange(task.seq_len)[None, :] - period[:, None] + 1,
                                torch.full_like(copy_index, -1))  # (batch, seq)
    details = {"period": period, "repeat_start": repeat_start, "repeat_mask": repeat_mask,
               "induction_key": induction_key, "copy_index": copy_index}
    return TaskBatch(inputs, targets, repeat_mask.clone(), details)
