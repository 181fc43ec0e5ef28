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
* :func:`heads_with_role` and :func:`role_table` - which heads score above a
  threshold, by score and never by index;
* :func:`head_ablation_losses` - the held-out loss with each head removed in
  turn, the causal check behind a role;
* :func:`attention_by_offset` - how much weight a head puts ``d`` positions
  back, which shows what a model that cannot form induction heads does instead.

Conventions are the book's: weights are ``(..., batch, heads, seq_q, seq_k)``
with row = query (attends from) and column = key (attended to).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from torch import Tensor

from mha.lab.circuit_scores import head_role_scores
from mha.lab.tasks import InductionTask, TaskBatch
from mha.core.validation import check_rank

__all__ = [
    "ROLE_SCORE_THRESHOLD",
    "ROLE_SCORES",
    "HELD_OUT_BATCH_SIZE",
    "HELD_OUT_BATCH_SEED",
    "held_out_batch",
    "uniform_causal_weights",
    "heads_with_role",
    "role_labels",
    "role_table",
    "head_ablation_losses",
    "attention_by_offset",
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
    task = InductionTask() if task is None else task
    return task.held_out().sample(size, seed)


def uniform_causal_weights(seq: int, batch: int = 1, heads: int = 1) -> Tensor:
    """(batch, heads, seq, seq): each query spreads its weight evenly over itself and every earlier position.

    The chance level of a causal head: score this map to see what a role
    score looks like when a head pays no attention to anything in particular.
    """
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ValueError(f"seq must be a whole number of positions, at least 1, got {seq!r}.")
    weights = torch.ones(seq, seq).tril()  # (seq, seq): 1 where the key is not after the query
    weights = weights / weights.sum(-1, keepdim=True)  # row i: 1 / (i + 1) on keys 0..i
    return weights.expand(batch, heads, seq, seq).clone()  # (batch, heads, seq, seq)


def heads_with_role(scores: Tensor, threshold: float = ROLE_SCORE_THRESHOLD) -> list[tuple[int, int]]:
    """Every ``(layer, head)`` whose score is above ``threshold``, in (layer, head) order (chapter 3).

    ``scores`` (layers, heads), e.g. ``head_role_scores(...)["prefix_matching"]``.
    Several heads may pass, or none: a role is found by its score, and
    nothing says it belongs to one head or to a given index.
    """
    scores = scores if isinstance(scores, Tensor) else torch.tensor(np.asarray(scores, dtype=np.float64))  # a copy
    check_rank("scores", scores.shape, (2,), "(layers, heads): one score per head")
    passing = (scores > threshold).nonzero().tolist()  # [[layer, head], ...] in row-major order
    return [(int(layer), int(head)) for layer, head in passing]


def role_labels(scores: Mapping[str, Tensor], threshold: float = ROLE_SCORE_THRESHOLD) -> list[list[str]]:
    """(layers x heads) nested lists naming each head's roles ("previous-token", "induction", both, or "-").

    ``scores`` holds at least the :data:`ROLE_SCORES` keys as (layers, heads)
    tensors, as returned by :func:`mha.lab.circuit_scores.head_role_scores`.
    """
    missing = [key for key in ROLE_SCORES.values() if key not in scores]
    if missing:
        raise ValueError(f"scores lacks {missing}; pass the dict of mha.lab.circuit_scores.head_role_scores.")
    n_layers, n_heads = torch.as_tensor(scores["previous_token"]).shape
    labels = [[[] for _ in range(n_heads)] for _ in range(n_layers)]
    for role, key in ROLE_SCORES.items():
        for layer, head in heads_with_role(scores[key], threshold):
            labels[layer][head].append(role)
    return [[" + ".join(roles) or "-" for roles in layer] for layer in labels]


def role_table(models: Mapping[str, object], batch: TaskBatch, threshold: float = ROLE_SCORE_THRESHOLD):
    """One row per (model, layer, head): its scores on ``batch`` and its role by ``threshold`` (chapter 3).

    ``models`` maps a label (e.g. ``"seed 0"``) to a
    :class:`~mha.lab.tiny_model.TinyTransformer`; ``batch`` is an induction
    batch, best :func:`held_out_batch`. Prefix matching is scored on the
    repeat (``details["repeat_mask"]``). Returns a pandas DataFrame with
    columns ``model, layer, head, previous_token, prefix_matching, copying, role``.
    """
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
    n_layers, n_heads = model.config.n_layers, model.config.n_heads
    losses = torch.empty(n_layers, n_heads)
    for layer in range(n_layers):
        for head in range(n_heads):
            head_mask = torch.ones(n_layers, n_heads)
            head_mask[layer, head] = 0.0  # remove this one head
            losses[layer, head] = task.metrics(model(batch.inputs, head_mask=head_mask).logits, batch)[metric]
    return losses


def attention_by_offset(weights: Tensor, query_mask: Tensor | None = None) -> Tensor:
    """(..., heads, seq): the mean weight a head puts ``d`` positions back, for d = 0 .. seq-1 (chapter 3).

    ``weights`` (..., batch, heads, seq, seq); entry ``d`` averages
    ``weights[..., i, i - d]`` over the batch and the queries ``i >= d``
    (inside ``query_mask`` (batch, seq), if given). A previous-token head
    peaks at ``d = 1``; a head that copies from a fixed distance back peaks at
    that distance. Offsets no scored query can reach are NaN.
    """
    check_rank("weights", weights.shape, range(4, 9), "(..., batch, heads, seq, seq) attention weights")
    batch, seq = weights.shape[-4], weights.shape[-2]
    if weights.shape[-1] != seq:
        raise ValueError(f"weights has shape {tuple(weights.shape)}; offsets need self-attention maps (seq, seq).")
    if query_mask is None:
        query_mask = torch.ones(batch, seq, dtype=torch.bool)
    if tuple(query_mask.shape) != (batch, seq):
        raise ValueError(f"query_mask has shape {tuple(query_mask.shape)}; it should be (batch, seq) = ({batch}, {seq}).")
    offsets = []
    for d in range(seq):
        on_offset = weights.diagonal(offset=-d, dim1=-2, dim2=-1)  # (..., batch, heads, seq - d): queries d..seq-1
        scored = query_mask[:, d:].to(weights.dtype)[:, None, :]  # (batch, 1, seq - d)
        count = float(scored.sum())  # scored (batch, query) pairs at this offset
        offsets.append((on_offset * scored).sum(dim=(-3, -1)) / count if count > 0
                       else torch.full(weights.shape[:-4] + weights.shape[-3:-2], float("nan")))  # (..., heads)
    return torch.stack(offsets, dim=-1)  # (..., heads, seq)

