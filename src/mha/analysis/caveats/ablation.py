"""How much each head, and each token a head reads, matters for the model's output: importance and pruning.

Chapter 4 asks the question of Michel et al. (2019, "Are sixteen heads
really better than one?") and Voita et al. (2019, "Analyzing multi-head
self-attention: specialized heads do the heavy lifting, the rest can be
pruned") of all-MiniLM-L6-v2: how much worse does the model get when heads
are removed, one at a time or many at once (chapter 4, "Redundancy and pruning")?

A set of heads to keep is a **head mask** (layers, heads): 1 keeps a head,
0 removes it (its output ``z_h`` is set to 0 before ``W_O``; see
:meth:`mha.pretrained.encoder.MiniLMEncoder.head_mask`). The model runs under
masks in :mod:`mha.pretrained.interventions`
(:func:`~mha.pretrained.interventions.embeddings_under_masks`); this module
is the analysis on top:

* builds the masks the section uses (:func:`single_head_masks`,
  :func:`keep_one_head_masks`, :func:`pruning_masks`);
* estimates every head's importance from one backward pass, as Michel et
  al. do (:func:`head_mask_gradients`, :func:`michel_importance`);
* removes each head on its own from the paraphrase triples (:func:`single_removal_effects`;
  ``scripts/single_removals.py`` stores them, :func:`load_single_removals` reads them);
* prunes heads in several orders and scores each pruned model on held-out triples (:func:`pruning_curves`;
  ``scripts/triples_pruning.py`` stores them, :func:`load_triples_pruning` reads them);
* reads a pruning curve (:func:`heads_removable`), at several thresholds and over
  several selection/held-out splits (:func:`removable_at_thresholds`,
  :func:`held_out_pruning_curve`; ``scripts/pruning_spread.py`` stores them,
  :func:`load_pruning_spread` reads them), so the count comes with its spread;
* gives attention's own answer to "which token matters?", to set beside
  :func:`~mha.pretrained.interventions.key_removal_effects`:
  :func:`column_means` (chapter 4, "Attention is not explanation").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from mha.core.argument_checks import check_whole_numbers
from mha.core.layouts import QUERY_KEY, takes_attention
from mha.core.validation import (
    as_path,
    as_real_array,
    check_finite_number,
    check_flag,
    check_rank,
    check_same_shape,
    check_size,
    check_type,
    check_whole_number,
)
from mha.corpora.paraphrases import (
    PairSet,
    contrastive_loss,
    distractor_accuracy,
    pair_set,
    similarity_rank_correlation,
    similarity_scores,
    unrelated_accuracy,
)
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.interventions import as_head_masks, embeddings_under_masks
from mha.pretrained.overrides import HeadMask
from mha.pretrained.sentence_embedding import sentence_embeddings
from mha.pretrained.tokenizer import TokenizedBatch

__all__ = ["PRUNING_SPREAD_PATH", "REMOVAL_MEASURES", "SINGLE_REMOVALS_PATH", "column_means", "head_mask_gradients",
           "heads_removable", "held_out_pruning_curve", "keep_one_head_masks", "load_pruning_spread",
           "load_single_removals", "michel_importance", "pruning_masks", "removable_at_thresholds", "removal_effects",
           "single_head_masks", "single_removal_effects", "TRIPLES_PRUNING_PATH", "load_triples_pruning",
           "pruning_curves"]


def single_head_masks(n_layers: int, n_heads: int) -> np.ndarray:
    """One mask per head with only that head removed: (layers * heads, layers, heads), in order layer, head.

    Row ``layer * heads + head`` removes head ``head`` of layer ``layer``
    (chapter 4, "Redundancy and pruning").
    """
    n_layers = check_whole_number("n_layers", n_layers, minimum=1)
    n_heads = check_whole_number("n_heads", n_heads, minimum=1)
    check_size("one mask per head (layers * heads, layers, heads)", (n_layers * n_heads, n_layers, n_heads))
    masks = np.ones((n_layers * n_heads, n_layers, n_heads), dtype=np.float32)
    for index in range(n_layers * n_heads):
        masks[index].flat[index] = 0.0
    return masks


def keep_one_head_masks(n_layers: int, n_heads: int, layer: int, keep: Sequence[int]) -> np.ndarray:
    """Masks that remove every head of ``layer`` but one, one mask per head in ``keep``: (len(keep), layers, heads).

    The other layers keep all their heads. Michel et al. (2019) found that
    many layers of a trained model work almost as well with a single head
    at test time (chapter 4, "Redundancy and pruning").
    """
    n_layers = check_whole_number("n_layers", n_layers, minimum=1)
    n_heads = check_whole_number("n_heads", n_heads, minimum=1)
    layer = check_whole_number("layer", layer, meaning="the layer that keeps one head")
    keep = check_whole_numbers("keep", keep, meaning="the heads to keep, one per mask")
    if not 0 <= layer < n_layers:
        raise ValueError(f"layer must be in 0..{n_layers - 1}, got {layer}.")
    bad = [h for h in keep if not 0 <= h < n_heads]
    if bad:
        raise ValueError(f"heads to keep must be in 0..{n_heads - 1}, got {bad}.")
    masks = np.ones((len(keep), n_layers, n_heads), dtype=np.float32)
    for row, head in enumerate(keep):
        masks[row, layer] = 0.0
        masks[row, layer, head] = 1.0
    return masks


def pruning_masks(order: Sequence[int] | np.ndarray, counts: Sequence[int], n_layers: int, n_heads: int) -> np.ndarray:
    """Masks that remove the first ``k`` heads of ``order``, one per ``k`` in ``counts``: (len(counts), layers, heads).

    ``order`` lists heads as flat indices ``layer * n_heads + head``, the
    first to be pruned first (e.g. ``np.argsort(importance.ravel())``)
    (chapter 4, "Redundancy and pruning").
    """
    n_layers = check_whole_number("n_layers", n_layers, minimum=1)
    n_heads = check_whole_number("n_heads", n_heads, minimum=1, meaning="heads per layer")
    order = check_whole_numbers("order", order, meaning="the heads as flat indices, the first to prune first")
    counts = check_whole_numbers("counts", counts, minimum=0, meaning="heads to remove")
    total = n_layers * n_heads
    check_size("the masks (counts, layers, heads)", (len(counts), n_layers, n_heads))
    if sorted(order) != sorted(set(order)) or any(not 0 <= i < total for i in order):
        raise ValueError(f"order must list distinct flat head indices in 0..{total - 1}.")
    masks = np.ones((len(counts), total), dtype=np.float32)
    for row, k in enumerate(counts):
        if not 0 <= k <= len(order):
            raise ValueError(f"cannot remove {k} heads from an order of {len(order)}.")
        masks[row, order[:k]] = 0.0
    return masks.reshape(len(counts), n_layers, n_heads)


def head_mask_gradients(encoder: MiniLMEncoder, inputs: TokenizedBatch,
                        loss_of_embeddings: Callable[[Tensor], Tensor], mask: HeadMask | None = None) -> np.ndarray:
    """d loss / d (head mask), one mask per sentence: (batch, layers, heads), after Michel et al. (2019).

    Every sentence gets its own copy of the (layers, heads) mask (default
    all ones), the model runs with autograd, the sentence vectors
    (:func:`mha.pretrained.sentence_embedding.sentence_embeddings`, (batch, d_model))
    go into ``loss_of_embeddings`` (a scalar), and one backward pass gives
    the derivative of the loss with respect to every head's mask value in
    every sentence. ``-gradient`` is the first-order estimate of how the loss
    changes when that head's output is switched off in that sentence
    (chapter 4, "Redundancy and pruning").
    """
    encoder = check_encoder(encoder)
    check_type("inputs", inputs, TokenizedBatch, "a TokenizedBatch, e.g. encoder.tokenize(sentences)")
    check_type("loss_of_embeddings", loss_of_embeddings, Callable, "a function of the sentence vectors -> a 0-d loss")
    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads
    base = torch.ones(n_layers, n_heads) if mask is None else as_head_masks(encoder, mask)[0]  # (layers, heads)
    per_sentence = base.repeat(len(inputs), 1, 1).to(encoder.word_embeddings)  # (batch, layers, heads)
    per_sentence.requires_grad_(True)
    with torch.enable_grad():
        trace = encoder(inputs, head_mask=per_sentence)
        real = inputs.real_tokens.to(trace.hidden_states.device)
        loss = loss_of_embeddings(sentence_embeddings(trace.hidden_states[-1], real))
        if loss.ndim != 0:
            raise ValueError(f"loss_of_embeddings must return one number (a 0-d tensor), got shape "
                             f"{tuple(loss.shape)}.")
        (gradient,) = torch.autograd.grad(loss, per_sentence)
    return gradient.detach().cpu().numpy()


def michel_importance(gradients: npt.ArrayLike, *, normalize_layers: bool = True) -> np.ndarray:
    """Head importance of Michel et al. (2019): mean over examples of |d loss / d mask| -> (layers, heads).

    ``gradients`` (examples, layers, heads), e.g. from
    :func:`head_mask_gradients`. With ``normalize_layers`` each layer's
    scores are divided by their Euclidean norm, as Michel et al. do before
    comparing heads of different layers (chapter 4, "Redundancy and pruning").
    """
    gradients = as_real_array("gradients", gradients)
    if gradients.ndim != 3:
        raise ValueError(f"gradients has shape {gradients.shape}; give (examples, layers, heads).")
    importance = np.abs(gradients).mean(axis=0)  # (layers, heads)
    if check_flag("normalize_layers", normalize_layers):
        importance = importance / np.maximum(np.linalg.norm(importance, axis=1, keepdims=True), 1e-12)
    return importance


def heads_removable(counts: Sequence[int], quality: npt.ArrayLike, reference: float, max_drop: float) -> int:
    """The most heads a pruning curve removes before its quality first falls more than ``max_drop`` below ``reference``.

    ``counts`` (points,) are numbers of heads removed, increasing;
    ``quality`` (points,) the score at each (higher = better). The curve is
    read from the left and stops at the first point below ``reference -
    max_drop``: later recoveries do not count. Returns the last count
    before that point (the largest count if the curve never drops)
    (chapter 4, "Redundancy and pruning").
    """
    counts = check_whole_numbers("counts", counts, minimum=0, meaning="heads removed")
    quality = as_real_array("quality", quality, meaning="(points,): the score at each count")
    check_rank("quality", quality.shape, (1,), "(points,): the score at each count")
    reference = check_finite_number("reference", reference, meaning="the quality of the whole model")
    max_drop = check_finite_number("max_drop", max_drop, minimum=0, meaning="how far below the reference it may fall")
    if len(counts) != len(quality) or not counts:
        raise ValueError(f"counts and quality must be non-empty and of equal length, got {len(counts)} and "
                         f"{len(quality)}.")
    if any(b <= a for a, b in zip(counts, counts[1:], strict=False)):
        raise ValueError("counts must increase from left to right.")
    removable = None
    for count, value in zip(counts, quality, strict=True):
        if value < reference - max_drop:
            break
        removable = count
    if removable is None:
        raise ValueError(f"the first point ({quality[0]:.4g}) is already more than {max_drop} below the reference "
                         f"{reference:.4g}; start the curve at 0 heads removed.")
    return int(removable)


PRUNING_SPREAD_PATH = DATA_DIRECTORY / "pruning_spread.json"
"""Pruning curves over several held-out splits, written by ``scripts/pruning_spread.py`` (chapter 4)."""


def load_pruning_spread(path: str | Path = PRUNING_SPREAD_PATH) -> dict:
    """The stored pruning curves of ``scripts/pruning_spread.py``: ``counts``, and per split its ``ranking_kept`` by
    order.

    Read from ``path`` (default: the book's ``pruning_spread.json``), checked against ``data/SHA256SUMS`` and its
    shape checked: a missing, tampered or malformed file raises ``ValueError`` with the command that regenerates it
    (chapter 4).
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored pruning curves"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.pruning_spread", limit=10_000_000)
    counts = content.get("counts") if isinstance(content, dict) else None
    splits = content.get("splits") if isinstance(content, dict) else None
    if not (isinstance(counts, list) and counts and all(type(c) is int and c >= 0 for c in counts)
            and isinstance(splits, list) and splits and all(isinstance(split, dict) for split in splits)):
        raise ValueError(f"{what} {path} are malformed: they need 'counts' (a list of whole numbers of heads removed) "
                         f"and 'splits' (a list of objects, one per held-out split). {how}")
    return content


def removable_at_thresholds(counts: Sequence[int], ranking_kept: npt.ArrayLike,
                            thresholds: Sequence[float]) -> np.ndarray:
    """Heads removable before each curve's similarity ranking first falls below each threshold: (curves, thresholds).

    ``ranking_kept`` (curves, points) or (points,): rank correlations with the
    full model (1 at 0 heads removed) at ``counts`` heads removed. Each entry is
    :func:`heads_removable` with reference 1 and ``max_drop = 1 - threshold``,
    so the whole table shows how the count moves with the threshold and the
    curve (e.g. the held-out split) (chapter 4, "Redundancy and pruning").
    """
    curves = np.atleast_2d(as_real_array("ranking_kept", ranking_kept, meaning="(curves, points) or (points,)"))
    thresholds = as_real_array("thresholds", thresholds, meaning="(thresholds,): rank correlations in (0, 1]")
    check_rank("thresholds", thresholds.shape, (1,), "(thresholds,): rank correlations in (0, 1]")
    bad = [t for t in thresholds if not 0.0 < float(t) <= 1.0]
    if bad or not len(thresholds):
        raise ValueError(f"thresholds must be rank correlations in (0, 1], got {list(thresholds)}.")
    return np.array([[heads_removable(counts, curve, 1.0, 1.0 - float(t)) for t in thresholds] for curve in curves],
                    dtype=int)  # (curves, thresholds)


def held_out_pruning_curve(encoder: MiniLMEncoder, selection: Sequence[int], held_out: Sequence[int],
                           counts: Sequence[int], *, order: str = "gradient", seed: int = 0,
                           max_sequences: int = 256) -> dict[str, np.ndarray]:
    """Prune heads in an order chosen on the ``selection`` triples; judge it on the ``held_out`` ones (chapter 4).

    ``selection`` and ``held_out`` are triple indices of
    :data:`mha.corpora.paraphrases.TRIPLES` (e.g. from
    :func:`~mha.corpora.paraphrases.split_triples`). ``order`` is
    ``"gradient"`` (Michel et al.'s importance of the contrastive loss on the
    selection sentences, least important pruned first) or ``"random"`` (a
    permutation drawn with ``seed``). At each of ``counts`` (increasing, from 0)
    heads removed, the held-out sentences are embedded and their similarities
    compared with the full model's. Returns ``counts``, ``order`` (flat head
    indices, pruned first first) and ``ranking_kept`` (points,): the Spearman
    correlation with the full model's held-out similarities. ``max_sequences``
    bounds how many sentences run at once (memory).
    """
    from mha.corpora.paraphrases import contrastive_loss, pair_set, similarity_rank_correlation, similarity_scores
    from mha.pretrained.interventions import embeddings_under_masks

    if not isinstance(order, str) or order not in ("gradient", "random"):
        raise ValueError(f"order must be 'gradient' (Michel et al.) or 'random', got {order!r}.")
    selection = check_whole_numbers("selection", selection, minimum=0, meaning="indices of TRIPLES")
    held_out = check_whole_numbers("held_out", held_out, minimum=0, meaning="indices of TRIPLES")
    if set(selection) & set(held_out):
        raise ValueError(f"selection and held_out share triples {sorted(set(selection) & set(held_out))}; "
                         "choose and judge on different sentences.")
    counts = [int(k) for k in counts]
    if not counts or counts[0] != 0:
        raise ValueError("counts must start at 0 heads removed (the full model, the curve's reference).")
    n_layers, n_heads = encoder.config.n_layers, encoder.config.n_heads
    if order == "gradient":
        chosen_on = pair_set(selection)
        gradients = head_mask_gradients(encoder, encoder.tokenize(chosen_on.sentences),
                                        lambda vectors: contrastive_loss(similarity_scores(vectors)))
        flat_order = np.argsort(michel_importance(gradients).ravel(), kind="stable")
    else:
        flat_order = np.random.default_rng(seed).permutation(n_layers * n_heads)
    judged_on = pair_set(held_out)
    trace = encoder.trace(judged_on.sentences)
    full = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()  # (3n, d_model)
    pruned = embeddings_under_masks(encoder, trace, pruning_masks(flat_order, counts, n_layers, n_heads),
                                    max_sequences=max_sequences)  # (points, 3n, d_model)
    kept = similarity_rank_correlation(similarity_scores(pruned), similarity_scores(full))  # (points,)
    return {"counts": np.array(counts), "order": flat_order, "ranking_kept": np.asarray(kept, dtype=float)}


@takes_attention(attention=QUERY_KEY.with_leading(6))
def column_means(attention: npt.ArrayLike) -> np.ndarray:
    """Attention each key receives, averaged over the queries: (..., seq_q, seq_k) -> (..., seq_k).

    For a head whose output were mean-pooled directly, this is exactly the
    weight with which each key's value enters the pooled vector: attention's
    answer to "which token matters?", to set beside
    :func:`mha.pretrained.interventions.key_removal_effects`
    (chapter 4, "Attention is not explanation").
    """
    attention = as_real_array("attention", attention, meaning="(..., seq_q, seq_k)")
    if attention.ndim < 2:
        raise ValueError(f"attention has shape {attention.shape}; give (..., seq_q, seq_k), e.g. one head's map.")
    return attention.mean(axis=-2)  # (..., seq_k)


REMOVAL_MEASURES = ("vector change (1 - cos)", "similarity ranking kept", "paraphrase vs unrelated",
                    "paraphrase vs distractor", "loss change")
"""What :func:`removal_effects` measures of each changed model, against the full one (chapter 4)."""


def removal_effects(vectors: npt.ArrayLike, full: npt.ArrayLike, rows: Sequence[int] | None = None) -> dict:
    """Each of :data:`REMOVAL_MEASURES` for changed models' sentence vectors: name -> (configs,) (chapter 4).

    ``vectors`` (configs, sentences, d_model) and ``full`` (sentences, d_model) are unit-length vectors of a
    :class:`~mha.corpora.paraphrases.PairSet`'s sentences; ``rows`` (``pairs.rows_of(positions)``) keeps some of its
    triples. The loss change is the contrastive loss of the changed model minus the full model's.
    """
    vectors_shape = as_real_array("vectors", vectors, meaning="(configs, sentences, d_model)").shape
    full_shape = as_real_array("full", full, meaning="(sentences, d_model)").shape
    check_rank("vectors", vectors_shape, (3,), "(configs, sentences, d_model)")
    check_rank("full", full_shape, (2,), "(sentences, d_model)")
    check_same_shape("each of vectors' configs", vectors_shape[1:], "full", full_shape,
                     "both hold the vectors of the same sentences")
    vectors, full = np.asarray(vectors), np.asarray(full)  # in their own precision: the stored results are float32's
    if rows is not None:
        vectors, full = vectors[:, rows], full[rows]
    similarity = similarity_scores(vectors)  # (configs, n, 2n)
    reference = similarity_scores(full)  # (n, 2n)
    return {"vector change (1 - cos)": 1 - (vectors * full).sum(-1).mean(-1),
            "similarity ranking kept": similarity_rank_correlation(similarity, reference),
            "paraphrase vs unrelated": unrelated_accuracy(similarity),
            "paraphrase vs distractor": distractor_accuracy(similarity),
            "loss change": np.asarray(contrastive_loss(similarity)) - float(contrastive_loss(reference))}


def single_removal_effects(encoder: MiniLMEncoder, pairs: PairSet, halves: dict[str, Sequence[int]]) -> dict:
    """Every head removed on its own from ``pairs``' sentences: part -> :func:`removal_effects`, each (heads,).

    Parts: ``"all"`` the triples, and each of ``halves`` (name -> positions of triples in ``pairs``), measured on
    those triples alone. Heads in flat order ``layer * n_heads + head`` (chapter 4, "Redundancy and pruning").
    """
    trace = encoder.trace(pairs.sentences)
    full = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()  # (sentences, d_model)
    masks = single_head_masks(encoder.config.n_layers, encoder.config.n_heads)
    single = embeddings_under_masks(encoder, trace, masks, max_sequences=256)  # (heads, sentences, d_model)
    parts = {"all": None} | {name: pairs.rows_of(positions) for name, positions in halves.items()}
    return {part: removal_effects(single, full, rows) for part, rows in parts.items()}


SINGLE_REMOVALS_PATH = DATA_DIRECTORY / "single_removals.json"
"""Every head removed on its own from the paraphrase triples, written by ``scripts/single_removals.py`` (chapter 4)."""


def load_single_removals(path: str | Path = SINGLE_REMOVALS_PATH) -> dict:
    """The stored :func:`single_removal_effects` of ``scripts/single_removals.py``: part -> measure -> (heads,).

    Read from ``path`` (default: the book's file), checked against ``data/SHA256SUMS`` and its shape checked: a
    missing, tampered or malformed file raises ``ValueError`` with the command that regenerates it (chapter 4).
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored single-head removals"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.single_removals", limit=1_000_000)
    parts = content.get("parts") if isinstance(content, dict) else None
    try:
        effects = {part: {name: np.asarray(measures[name], dtype=float) for name in REMOVAL_MEASURES}
                   for part, measures in parts.items()}
    except (AttributeError, KeyError, TypeError, ValueError):
        effects = None
    if not effects or "all" not in effects or any(
            values.ndim != 1 or values.shape != effects["all"][REMOVAL_MEASURES[0]].shape
            or not np.isfinite(values).all() for measures in effects.values() for values in measures.values()):
        raise ValueError(f"{what} {path} are malformed: they need 'parts', with 'all', each part giving "
                         f"{', '.join(REMOVAL_MEASURES)} as lists of one number per head. {how}")
    return effects


def pruning_curves(encoder: MiniLMEncoder, held_out: Sequence[int], orders: dict[str, Sequence[int]],
                   counts: Sequence[int]) -> dict[str, dict[str, np.ndarray]]:
    """Heads pruned in each of ``orders``, scored on the ``held_out`` triples: order -> measure -> (points,).

    ``orders`` maps a name to flat head indices (``layer * n_heads + head``, pruned first first); ``counts`` are the
    numbers of heads removed, from 0 (the full model) to all of them. Every measure of :data:`REMOVAL_MEASURES`
    except the loss, against the full model on the same triples (chapter 4, "Redundancy and pruning").
    """
    counts = check_whole_numbers("counts", counts, minimum=0, meaning="heads removed")
    n_layers, n_heads = check_encoder(encoder).config.n_layers, encoder.config.n_heads
    if len(counts) < 3 or counts[0] != 0 or counts[-1] != n_layers * n_heads:
        raise ValueError(f"counts must run from 0 to all {n_layers * n_heads} heads removed, got {counts}.")
    judged_on = pair_set(held_out)
    trace = encoder.trace(judged_on.sentences)
    full = sentence_embeddings(trace.hidden_states[-1], trace.real_tokens).numpy()  # (3n, d_model)
    # the counts between the two ends, order by order, then every head removed once: the same model in every order
    masks = np.concatenate([pruning_masks(order, counts[1:-1], n_layers, n_heads) for order in orders.values()]
                           + [np.zeros((1, n_layers, n_heads), dtype=np.float32)])
    scores = removal_effects(embeddings_under_masks(encoder, trace, masks, max_sequences=256), full)
    start = removal_effects(full[None], full)
    inner = len(counts) - 2
    return {name: {measure: np.concatenate([start[measure], values[k * inner:(k + 1) * inner], values[-1:]])
                   for measure, values in scores.items() if measure != "loss change"}
            for k, name in enumerate(orders)}


TRIPLES_PRUNING_PATH = DATA_DIRECTORY / "triples_pruning.json"
"""Pruning curves on the held-out triples, written by ``scripts/triples_pruning.py`` (chapter 4)."""


def load_triples_pruning(path: str | Path = TRIPLES_PRUNING_PATH) -> dict:
    """The stored pruning of ``scripts/triples_pruning.py``: ``importance`` (layers, heads), ``counts``, ``orders``
    (name -> flat heads) and ``curves`` (name -> measure -> (points,)), checked (chapter 4).

    Read from ``path`` (default: the book's file), checked against ``data/SHA256SUMS`` and its shape checked: a
    missing, tampered or malformed file raises ``ValueError`` with the command that regenerates it.
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored pruning curves on the held-out triples"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.triples_pruning", limit=1_000_000)
    try:
        counts = [int(k) for k in content["counts"]]
        result = {"importance": np.asarray(content["importance"], dtype=float), "counts": counts,
                  "orders": {name: np.asarray(order, dtype=int) for name, order in content["orders"].items()},
                  "curves": {name: {measure: np.asarray(values, dtype=float) for measure, values in curve.items()}
                             for name, curve in content["curves"].items()}}
    except (AttributeError, KeyError, TypeError, ValueError):
        result = None
    if result is None or result["importance"].ndim != 2 or set(result["orders"]) != set(result["curves"]) or any(
            values.shape != (len(counts),) for curve in result["curves"].values() for values in curve.values()):
        raise ValueError(f"{what} {path} are malformed: they need 'importance' (layers, heads), 'counts', and "
                         f"'orders' and 'curves' with the same names, each curve one value per count. {how}")
    return result
