"""How much of a position's vector in layer l still comes from its own input token (chapter 4, "Caveats").

A map of a layer-5 head says "position ``i`` attends to position ``j``", but
position ``j``'s vector at layer 5 has already been mixed with the other
positions by five layers of attention. Chapter 4 ("Attention is not
explanation") measures that mixing in two ways:

* :func:`attention_rollout` (Abnar and Zuidema 2020, "Quantifying attention
  flow in transformers") multiplies the layers' head-averaged maps, each with
  the residual connection added as an identity, ``0.5 * A + 0.5 * I``: an
  estimate from attention alone, which assumes that information moves only
  along attention and in proportion to the weights;
* :func:`masking_influence` measures it: replace input token ``j`` by
  ``[MASK]`` and record how far every position's hidden state moves in every
  layer. It sees everything the model does (values, MLPs, LayerNorm), but
  depends on the replacement chosen.

:func:`own_token_share` reads either of them as "the share of position ``i``
that is its own input token".
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from mha.core.argument_checks import check_whole_numbers
from mha.core.layouts import LAYERS_HEADS, QUERY_KEY, takes_attention
from mha.core.validation import as_real_array
from mha.pretrained.encoder import MiniLMEncoder, check_encoder

__all__ = ["attention_rollout", "masking_influence", "own_token_share"]


@takes_attention(attention=[LAYERS_HEADS, QUERY_KEY.with_leading(1)])
def attention_rollout(attention, residual_weight: float = 0.5) -> np.ndarray:
    """Attention rollout after Abnar and Zuidema (2020): (layers, heads, n, n) -> (layers, n, n) (chapter 4).

    For each layer the heads' maps are averaged (a (layers, n, n) input is
    taken as already averaged), the residual connection is added,
    ``Ã_l = (1 - residual_weight) * A_l + residual_weight * I``, and the
    layers are chained: ``R_0 = Ã_0``, ``R_l = Ã_l @ R_{l-1}``. Row ``i``
    of ``R_l`` (rows = query positions, sums to 1) estimates how much of
    position ``i``'s output of layer ``l`` comes from each INPUT token.
    """
    attention = as_real_array("attention", attention)
    if attention.ndim == 4:
        attention = attention.mean(axis=1)  # (layers, n, n): the heads averaged
    if attention.ndim != 3 or attention.shape[-1] != attention.shape[-2]:
        raise ValueError(f"attention has shape {attention.shape}; give (layers, heads, n, n) or (layers, n, n).")
    if not 0.0 <= residual_weight <= 1.0:
        raise ValueError(f"residual_weight must be between 0 and 1, got {residual_weight}.")
    n = attention.shape[-1]
    rollout = np.eye(n)
    layers = []
    for layer_map in attention:
        mixed = (1.0 - residual_weight) * layer_map + residual_weight * np.eye(n)  # (n, n), rows sum to 1
        rollout = mixed @ rollout  # (n, n): layer output positions <- input tokens
        layers.append(rollout)
    return np.stack(layers)


def masking_influence(encoder: MiniLMEncoder, sentence: str, *,
                      replacement: str = "[MASK]") -> tuple[list[str], np.ndarray]:
    """How far each position's hidden state moves when one input token is replaced: (layers + 1, n, n) (chapter 4).

    The sentence is tokenised (``n`` tokens with ``[CLS]`` and ``[SEP]``),
    then encoded ``n - 2`` more times, each time with one word piece
    (``[CLS]`` and ``[SEP]`` are never replaced) swapped for ``replacement``.
    Entry ``[l, i, j]`` is ``|| h_i^l - h_i^l(token j replaced) ||``, with
    ``h^0`` the embedding output and ``h^l`` the output of layer ``l``;
    columns of ``[CLS]`` and ``[SEP]`` are 0. Rows = positions whose state is
    read, columns = input tokens changed. Returns ``(tokens, influence)``.
    """
    encoder = check_encoder(encoder)
    inputs = encoder.tokenize(sentence)
    if len(inputs) != 1:
        raise ValueError("masking_influence takes one sentence (a string).")
    tokens = inputs.tokens[0]
    n = len(tokens)
    replacement_id = encoder.tokenize(replacement).input_ids[0, 1:-1]
    if replacement_id.numel() != 1:
        raise ValueError(f"replacement {replacement!r} is not one token of the vocabulary.")
    content = [j for j in range(n) if inputs.word_ids[0][j] is not None]
    ids = inputs.input_ids.repeat(1 + len(content), 1)  # (1 + changed, n): row 0 unchanged
    for row, j in enumerate(content, start=1):
        ids[row, j] = replacement_id
    batch = dataclasses.replace(
        inputs, input_ids=ids, token_type_ids=inputs.token_type_ids.repeat(len(ids), 1),
        real_tokens=inputs.real_tokens.repeat(len(ids), 1), tokens=[tokens] * len(ids),
        word_ids=[inputs.word_ids[0]] * len(ids), words=[inputs.words[0]] * len(ids))
    with torch.inference_mode():
        states = encoder(batch).hidden_states  # (layers + 1, 1 + changed, n, d_model)
    moved = (states[:, 1:] - states[:, :1]).norm(dim=-1).cpu().numpy()  # (layers + 1, changed, n)
    influence = np.zeros((states.shape[0], n, n))
    influence[:, :, content] = moved.transpose(0, 2, 1)  # (layers + 1, positions i, changed tokens j)
    return tokens, influence


def own_token_share(mixing, positions=None) -> np.ndarray:
    """Share of each row that falls on its own column: ``M[..., i, i] / sum_j M[..., i, j]`` -> (..., positions)
    (chapter 4).

    ``mixing`` (..., n, n) is a rollout or an influence map (rows = positions,
    columns = input tokens, non-negative). ``positions`` selects the rows
    (and the columns summed over), e.g. the word pieces only; by default all.
    """
    mixing = as_real_array("mixing", mixing)
    if mixing.ndim < 2 or mixing.shape[-1] != mixing.shape[-2]:
        raise ValueError(f"mixing has shape {mixing.shape}; give (..., n, n).")
    if (mixing < 0).any():
        raise ValueError("mixing must be non-negative (a rollout or an influence map).")
    n = mixing.shape[-1]
    positions = np.arange(n) if positions is None else np.asarray(
        check_whole_numbers("positions", positions, minimum=0, maximum=n - 1, meaning="token positions"), dtype=int)
    block = mixing[..., positions[:, None], positions[None, :]]  # (..., p, p)
    diagonal = np.diagonal(block, axis1=-2, axis2=-1)
    return diagonal / np.maximum(block.sum(axis=-1), 1e-12)
