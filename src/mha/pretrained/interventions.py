"""Interventions on the pretrained encoder: remove heads, remove keys, give heads other weights.

An intervention at layer ``l`` leaves layers ``0 .. l-1`` as they were, so
every function here starts from what a trace of the full model stored as the
input of layer ``l`` (``trace.hidden_states[l]``) and runs only layers
``l .. L-1``, through the encoder's one resume path,
:meth:`~mha.pretrained.encoder.MiniLMEncoder.run_from_layer`. The variants
run side by side as copies of the trace's batch, so one forward pass serves
many of them. Each result equals a full run of
:meth:`~mha.pretrained.encoder.MiniLMEncoder.trace` with the same
``head_mask`` or ``attention_override`` (the tests check this); head and key
removal skip the padding (``skip_padding``), which changes no real token.

* **Head removal** (a head's output ``z_h`` set to 0 before ``W_O``):
  :func:`final_states_under_masks` and :func:`embeddings_under_masks` for any
  (layers, heads) masks (chapter 4, "Redundancy and pruning"), and
  :func:`final_states_without_each_head` for one head at a time
  (chapter 3, "Coreference, honestly").
* **Key removal** (one key taken out of one head):
  :func:`key_removal_effects` (chapter 4, "Attention is not explanation").
* **Activation patching** (a head's output taken from another run):
  :mod:`mha.pretrained.patching`, on the same resume path
  (chapter 3, "Coreference, honestly").
* **Counterfactual attention** (a head's weights replaced):
  :func:`permuted_attention`, beside
  :meth:`~mha.pretrained.encoder.MiniLMEncoder.uniform_attention`; both are
  :func:`~mha.pretrained.overrides.override_heads`
  (chapter 4, "Attention is not explanation").

The analysis built on these (importance rankings, pruning curves) is in
:mod:`mha.analysis.caveats.ablation`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch
from torch import Tensor

from mha.core.argument_checks import check_head_pairs
from mha.core.validation import as_real_array, check_seed
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.overrides import AttentionOverride, HeadMask, HeadOutputOverride, override_heads
from mha.pretrained.sentence_embedding import sentence_embeddings
from mha.pretrained.traces import EncoderTrace, check_trace

__all__ = ["as_head_masks", "embeddings_under_masks", "final_states_under_masks", "final_states_without_each_head",
           "key_removal_effects", "permuted_attention"]


# ---------------------------------------------------------------- the one resume path, in copies


def _resume_copies(encoder: MiniLMEncoder, trace: EncoderTrace, layer: int, copies: int, *,
                   head_masks: Tensor | None = None, attention_override: AttentionOverride | None = None,
                   head_outputs_override: HeadOutputOverride | None = None, skip_padding: bool = False) -> Tensor:
    """Last-layer states of ``copies`` copies of ``trace``'s batch resumed at ``layer``: (copies, batch, seq, d_model).

    Row ``c * batch + b`` of the resumed batch is sentence ``b`` of copy ``c``:
    ``head_masks`` (copies, layers, heads) gives each copy its own mask, and
    ``attention_override`` and ``head_outputs_override`` see all ``copies * batch`` rows; ``skip_padding`` as in
    :meth:`~mha.pretrained.encoder.MiniLMEncoder.run_from_layer`.
    """
    device = encoder.word_embeddings.device
    real_tokens = trace.real_tokens.to(device)  # (batch, seq)
    batch, seq = real_tokens.shape
    x = trace.hidden_states[layer].to(device).repeat(copies, 1, 1)  # (copies * batch, seq, d_model): layer's input
    head_mask = None if head_masks is None else head_masks.repeat_interleave(batch, dim=0)  # (copies * batch, L, H)
    final = encoder.run_from_layer(x, layer, real_tokens=real_tokens.repeat(copies, 1), head_mask=head_mask,
                                   attention_override=attention_override,
                                   head_outputs_override=head_outputs_override,
                                   skip_padding=skip_padding)  # (copies * batch, seq, d_model)
    return final.view(copies, batch, seq, -1)  # (copies, batch, seq, d_model)


# ---------------------------------------------------------------- head removal


def as_head_masks(encoder: MiniLMEncoder, masks: HeadMask) -> Tensor:
    """``masks`` as (configs, layers, heads) in the encoder's dtype and device; one (layers, heads) mask is one config.

    1 keeps a head and 0 removes it (any scale works); raises a ValueError
    that gives the expected shape (chapter 4, "Redundancy and pruning").
    """
    layers, heads = check_encoder(encoder).config.n_layers, encoder.config.n_heads
    masks = torch.as_tensor(as_real_array("masks", masks, meaning="(configs, layers, heads): 1 keeps a head, 0 removes "
                                          "it").astype(np.float32))
    if masks.ndim == 2:
        masks = masks[None]  # (1, layers, heads)
    if masks.ndim != 3 or masks.shape[1:] != (layers, heads):
        raise ValueError(f"masks has shape {tuple(masks.shape)}; give (configs, {layers}, {heads}) = one "
                         "(layers, heads) mask per configuration, 1 to keep a head and 0 to remove it.")
    return masks.to(device=encoder.word_embeddings.device, dtype=encoder.word_embeddings.dtype)


@torch.inference_mode()
def final_states_under_masks(encoder: MiniLMEncoder, trace: EncoderTrace, masks: HeadMask, *,
                             max_sequences: int = 1024) -> Tensor:
    """Last-layer hidden states of ``trace``'s batch under each head mask: (configs, batch, seq, d_model).

    ``trace`` is a trace of the full model (no mask, no override); ``masks``
    is (configs, layers, heads), 1 = keep, 0 = remove. A mask whose first
    change is in layer ``l`` resumes from the stored input of layer ``l``;
    masks with the same first layer run side by side, at most
    ``max_sequences`` sentences per forward pass, and padding positions are
    not run (they hold 0). At every real token the result equals
    ``encoder.trace(..., head_mask=mask).hidden_states[-1]`` for each mask
    (chapter 4, "Redundancy and pruning").
    """
    masks = as_head_masks(encoder, masks)  # (configs, layers, heads)
    check_trace(trace)
    n_layers = encoder.config.n_layers
    batch = len(trace.inputs)
    changed = (masks != 1).any(-1)  # (configs, layers): does the mask touch this layer?
    first_layer = [int(row.nonzero()[0]) if row.any() else n_layers for row in changed]  # n_layers: nothing changes
    real = trace.real_tokens.to(masks.device)[..., None]  # (batch, seq, 1)
    unchanged = trace.hidden_states[-1].to(masks.device) * real  # (batch, seq, d_model), 0 at padding
    results = unchanged.unsqueeze(0).repeat(len(masks), 1, 1, 1)  # (configs, batch, seq, d_model)
    per_chunk = max(1, max_sequences // batch)
    for start_layer in sorted(set(first_layer) - {n_layers}):
        configs = [c for c, first in enumerate(first_layer) if first == start_layer]
        for begin in range(0, len(configs), per_chunk):
            chunk = configs[begin:begin + per_chunk]
            results[chunk] = _resume_copies(encoder, trace, start_layer, len(chunk), head_masks=masks[chunk],
                                            skip_padding=True)
    return results


def embeddings_under_masks(encoder: MiniLMEncoder, trace: EncoderTrace, masks: HeadMask, *,
                           max_sequences: int = 1024) -> np.ndarray:
    """Unit-length sentence vectors of ``trace``'s sentences under each mask: (configs, batch, d_model).

    :func:`final_states_under_masks` followed by the model's own pooling
    (:func:`mha.pretrained.sentence_embedding.sentence_embeddings`)
    (chapter 4, "Redundancy and pruning").
    """
    states = final_states_under_masks(encoder, trace, masks, max_sequences=max_sequences)
    real_tokens = trace.real_tokens.to(states.device)  # (batch, seq)
    return sentence_embeddings(states, real_tokens).float().cpu().numpy()  # (configs, batch, d_model)


def final_states_without_each_head(encoder: MiniLMEncoder, trace: EncoderTrace,
                                   heads: Iterable[tuple[int, int]] | None = None) -> dict[tuple[int, int], Tensor]:
    """Final hidden states (batch, seq, d_model) of ``trace``'s batch with one head removed, for each head.

    ``trace`` is a trace of the full model (no head mask or override);
    ``heads`` lists ``(layer, head)`` pairs, by default all of them. Returns
    a dict ``(layer, head) -> last layer's output``, in layer order, as
    ``encoder.trace(..., head_mask=encoder.head_mask([(layer, head)]))`` would
    give at every real token (padding positions hold 0); it is
    :func:`final_states_under_masks` with one mask per head
    (chapter 3, "Coreference, honestly").
    """
    encoder = check_encoder(encoder)
    check_trace(trace)
    config = encoder.config
    every_head = [(layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    chosen = sorted(every_head if heads is None else encoder.check_heads(heads), key=lambda pair: pair[0])
    masks = torch.stack([encoder.head_mask([pair]) for pair in chosen])  # (len(chosen), layers, heads)
    states = final_states_under_masks(encoder, trace, masks)  # (len(chosen), batch, seq, d_model)
    return {pair: final for pair, final in zip(chosen, states, strict=True)}


# ---------------------------------------------------------------- key removal


def _without_keys(layer: int, heads: Tensor, keys: Tensor) -> AttentionOverride:
    """In ``layer``, row ``r`` of the batch loses key ``keys[r]`` from head ``heads[r]``: that column of the head's
    weights is set to 0 for every query, without renormalising. ``heads``, ``keys``: (rows,)."""
    rows = torch.arange(len(heads), device=heads.device)  # (rows,)

    def override(at_layer: int, weights: Tensor, real_tokens: Tensor) -> Tensor:
        if at_layer != layer:
            return weights
        weights = weights.clone()  # (rows, heads, seq_q, seq_k)
        weights[rows, heads, :, keys] = 0.0
        return weights

    return override


@torch.inference_mode()
def key_removal_effects(encoder: MiniLMEncoder, trace: EncoderTrace, heads: Sequence[tuple[int, int]]) -> np.ndarray:
    """1 - cos(sentence vector, sentence vector with key ``j`` removed from one head): (batch, len(heads), seq).

    ``trace`` is a trace of the full model on a batch of sentences. For each
    sentence, each ``(layer, head)`` in ``heads`` and each key ``j`` (token
    ``j`` of the padded batch, ``[CLS]`` and ``[SEP]`` included), the head's
    weights on column ``j`` are set to 0 for every query, in that layer
    only, so ``A[i, j] v_j`` leaves every query's output of that one head;
    the model runs on from there and the sentence vector
    (:func:`mha.pretrained.sentence_embedding.sentence_embeddings`) is
    compared with the unchanged one. Every (head, real key, sentence) of a
    layer is one row of that layer's run. Padding positions are not run; they get NaN
    (chapter 4, "Attention is not explanation").
    """
    heads = check_encoder(encoder).check_heads(heads)
    check_trace(trace)
    if not heads:
        raise ValueError("heads is empty; give at least one (layer, head) pair, e.g. [(3, 1)].")
    device = encoder.word_embeddings.device
    real = trace.real_tokens.to(device)  # (batch, seq)
    batch, seq = real.shape
    full = sentence_embeddings(trace.hidden_states[-1].to(device), real)  # (batch, d_model)
    sentence_of, key_of = real.nonzero(as_tuple=True)  # (real tokens,): each real key and its sentence
    effects = np.full((batch, len(heads), seq), np.nan)
    for layer in sorted({layer for layer, _ in heads}):
        rows = [row for row, (at, _) in enumerate(heads) if at == layer]  # this layer's entries of ``heads``
        # run r takes key key_of[r % n] out of head rows[r // n] in sentence sentence_of[r % n], n = real tokens
        entry = torch.arange(len(rows), device=device).repeat_interleave(len(key_of))  # (runs,)
        sentence, key = sentence_of.repeat(len(rows)), key_of.repeat(len(rows))  # (runs,)
        removed_heads = torch.tensor([heads[row][1] for row in rows], device=device)[entry]  # (runs,)
        final = encoder.run_from_layer(trace.hidden_states[layer].to(device)[sentence], layer,
                                       real_tokens=real[sentence],
                                       attention_override=_without_keys(layer, removed_heads, key),
                                       skip_padding=True)  # (runs, seq, d_model)
        changed = sentence_embeddings(final, real[sentence])  # (runs, d_model)
        # 1 - cos(a, b) = |a - b|² / 2 for unit vectors. Taking the difference first keeps the small effects
        # exact: 1 - (a · b) in float32 cancels to noise below about 1e-6, which differs from CPU to CPU.
        difference = changed.double() - full[sentence].double()  # (runs, d_model)
        removal_effect = 0.5 * difference.pow(2).sum(dim=-1)  # (runs,)
        effects[sentence.cpu().numpy(), np.asarray(rows)[entry.cpu().numpy()], key.cpu().numpy()] = \
            removal_effect.cpu().numpy()
    return effects


# ---------------------------------------------------------------- counterfactual attention


def permuted_attention(heads: Iterable[tuple[int, int]], seed: int = 0) -> AttentionOverride:
    """An ``attention_override`` that shuffles each chosen head's weights within every row.

    Jain and Wallace (2019, "Attention is not explanation") asked whether a
    model's output changes when its attention weights are randomly
    permuted. For each ``(layer, head)`` in ``heads`` and each query row,
    the weights on the real keys are permuted among the real keys (padding
    keeps weight 0), so every row keeps exactly the same set of weights,
    and therefore the same entropy and maximum, but puts them on other
    tokens. Permutations come from ``torch.Generator().manual_seed(seed)``,
    drawn afresh at each run in layer order, so a run is reproducible
    (chapter 4, "Attention is not explanation").
    """
    heads = check_head_pairs("heads", heads)
    seed = check_seed("seed", seed)
    first_layer = min((layer for layer, _ in heads), default=0)
    generator = torch.Generator().manual_seed(seed)

    def permute(layer: int, chosen_weights: Tensor, real_tokens: Tensor) -> Tensor:
        if layer == first_layer:
            generator.manual_seed(seed)  # the same permutations every time the model runs
        batch, chosen, seq_q, seq_k = chosen_weights.shape
        weights, real_tokens = chosen_weights.cpu(), real_tokens.cpu()  # the generator draws on the CPU
        shuffled = torch.zeros(batch, chosen, seq_q, seq_k, dtype=weights.dtype)  # padding keeps weight 0
        for b in range(batch):
            keys = torch.nonzero(real_tokens[b]).flatten()  # real key positions, (n,)
            noise = torch.rand(chosen, seq_q, len(keys), generator=generator)
            order = keys[noise.argsort(dim=-1)]  # (chosen, seq_q, n): a permutation of the real keys per row
            shuffled[b].scatter_(-1, order, weights[b][:, :, keys])  # (chosen, seq_q, seq_k)
        return shuffled.to(chosen_weights.device)

    return override_heads(heads, permute)
