"""Activation patching: a head's output taken from another run (chapter 3, "Coreference, honestly").

An attention map says where a head reads; patching asks what its output
*carries*. Run the model on a **target** input, but let head ``h`` of layer
``l`` emit the output ``z_h`` (its per-head contribution before ``W_O``,
``trace.head_outputs[l, :, h]``) that it produced on a **source** input, and
let everything else, the layers above included, compute as usual. If the
target's output then moves toward the source's, that head carries the
difference between the two inputs (Vig et al. 2020; Meng et al. 2022; on
reading the results, Heimersheim and Nanda 2024).

The two runs must have the same number of tokens in every sentence, since
``z_h`` is copied position by position. Like every intervention of
:mod:`mha.pretrained.interventions`, a patch at layer ``l`` starts from the
target trace's stored input of layer ``l`` and resumes the encoder there
(:meth:`~mha.pretrained.encoder.MiniLMEncoder.run_from_layer`, with its
``head_outputs_override``), and the patches of one layer run side by side as
copies of the batch, so all 72 single-head patches take 6 forward passes of
at most 12 copies each.

* :func:`final_states_with_heads_patched`: one set of heads patched together (a whole layer, say);
* :func:`final_states_with_each_head_patched`: one head at a time;
* :func:`head_patching_effects`: for each of the 72 heads, how much patching it moves a readout of the output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt
import torch
from torch import Tensor

from mha.core.validation import check_type
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.interventions import _resume_copies
from mha.pretrained.overrides import HeadOutputOverride
from mha.pretrained.traces import EncoderTrace

__all__ = ["check_patchable", "final_states_with_heads_patched", "final_states_with_each_head_patched",
           "head_patching_effects"]

Readout = Callable[[Tensor], npt.ArrayLike]
"""``readout(final_states) -> values``: last-layer states (batch, seq, d_model) in, any array of numbers out,
the same shape for every run (one number per sentence, say)."""


def check_patchable(encoder: MiniLMEncoder, target: EncoderTrace, source: EncoderTrace) -> None:
    """Raise a ValueError that says how to fix it unless ``source``'s head outputs can be patched into ``target``.

    Both must be traces of ``encoder``'s architecture over the same number of
    sentences, sentence ``b`` having the same number of tokens in both
    (chapter 3, "Coreference, honestly").
    """
    check_type("encoder", encoder, MiniLMEncoder, "the pretrained encoder that traced both, MiniLMEncoder.load()")
    for name, trace in (("target", target), ("source", source)):
        if not isinstance(trace, EncoderTrace):
            raise ValueError(f"{name} is a {type(trace).__name__}; give an EncoderTrace, e.g. "
                             "encoder.trace(sentences).")
    config = encoder.config
    expected = (config.n_layers, config.n_heads, config.d_head)
    for name, trace in (("target", target), ("source", source)):
        layers, _, heads, _, d_head = trace.head_outputs.shape  # (layers, batch, heads, seq, d_head)
        if (layers, heads, d_head) != expected:
            raise ValueError(f"{name} holds head outputs of {layers} layers x {heads} heads x d_head {d_head}, but the "
                             f"encoder has {expected[0]} x {expected[1]} x {expected[2]}; trace both inputs with "
                             "this encoder.")
    if len(target.lengths) != len(source.lengths):
        raise ValueError(f"target has {len(target.lengths)} sentences and source {len(source.lengths)}; sentence b "
                         "of the source is patched into sentence b of the target, so give the same number of each.")
    for b, (n_target, n_source) in enumerate(zip(target.lengths, source.lengths, strict=True)):
        if n_target != n_source:
            raise ValueError(
                f"sentence {b} has {n_target} tokens in target but {n_source} in source; a head's output is copied "
                "position by position, so both runs need the same length. Pair sentences whose words split into "
                "the same number of word pieces (compare trace.lengths), or leave that pair out.")


def _patch_one_head_per_copy(source: EncoderTrace, layer: int, heads: Tensor) -> HeadOutputOverride:
    """In ``layer``, copy ``c`` of the batch takes head ``heads[c]``'s output from ``source``; ``heads``: (copies,)."""
    source_z = source.head_outputs[layer]  # (batch, heads, seq, d_head)
    batch = source_z.shape[0]
    copies = len(heads)
    rows = torch.arange(copies * batch)  # row c * batch + b: sentence b of copy c
    row_heads = heads.repeat_interleave(batch)  # (copies * batch,)
    row_sentences = torch.arange(batch).repeat(copies)  # (copies * batch,)

    def patch(at_layer: int, z: Tensor) -> Tensor:
        if at_layer != layer:
            return z
        z = z.clone()  # (copies * batch, heads, seq, d_head)
        z[rows, row_heads] = source_z[row_sentences, row_heads].to(z)  # (copies * batch, seq, d_head)
        return z

    return patch


def _sorted_heads(encoder: MiniLMEncoder, heads: Iterable[tuple[int, int]] | None) -> list[tuple[int, int]]:
    config = encoder.config
    every_head = [(layer, head) for layer in range(config.n_layers) for head in range(config.n_heads)]
    return sorted(every_head if heads is None else set(encoder.check_heads(heads)))


@torch.inference_mode()
def final_states_with_heads_patched(encoder: MiniLMEncoder, target: EncoderTrace, source: EncoderTrace,
                                    heads: Iterable[tuple[int, int]]) -> Tensor:
    """Last-layer states (batch, seq, d_model) of ``target`` with every ``(layer, head)`` in ``heads`` patched at once.

    Each listed head emits the output it had in ``source`` (a trace of the
    same length, see :func:`check_patchable`); ``target`` must be a trace of
    the full model (no head mask, no override). Patching all heads of layer
    ``l`` from a source that agrees with the target below ``l`` gives the
    source's own output (chapter 3, "Coreference, honestly").
    """
    check_patchable(encoder, target, source)
    chosen = _sorted_heads(encoder, heads)
    if not chosen:
        raise ValueError("heads is empty; give at least one (layer, head) pair, e.g. [(2, 8)].")
    per_layer: dict[int, list[int]] = {}
    for layer, head in chosen:
        per_layer.setdefault(layer, []).append(head)
    source_z = {layer: source.head_outputs[layer] for layer in per_layer}  # each (batch, heads, seq, d_head)

    def patch(layer: int, z: Tensor) -> Tensor:
        if layer not in per_layer:
            return z
        z = z.clone()  # (batch, heads, seq, d_head)
        z[:, per_layer[layer]] = source_z[layer][:, per_layer[layer]].to(z)
        return z

    return _resume_copies(encoder, target, min(per_layer), 1, head_outputs_override=patch)[0]  # (batch, seq, d_model)


@torch.inference_mode()
def final_states_with_each_head_patched(
    encoder: MiniLMEncoder, target: EncoderTrace, source: EncoderTrace, heads: Iterable[tuple[int, int]] | None = None
) -> dict[tuple[int, int], Tensor]:
    """Last-layer states (batch, seq, d_model) of ``target`` with one head patched from ``source``, for each head.

    ``heads`` lists ``(layer, head)`` pairs, by default all of them; returns
    a dict ``(layer, head) -> states`` in layer order. The heads of one layer
    run as copies of the batch in one pass resumed at that layer
    (chapter 3, "Coreference, honestly").
    """
    check_patchable(encoder, target, source)
    chosen = _sorted_heads(encoder, heads)
    states: dict[tuple[int, int], Tensor] = {}
    for layer in sorted({layer for layer, _ in chosen}):
        layer_heads = [head for at, head in chosen if at == layer]
        patch = _patch_one_head_per_copy(source, layer, torch.tensor(layer_heads))
        final = _resume_copies(encoder, target, layer, len(layer_heads), head_outputs_override=patch)
        # each (batch, seq, d_model)
        states.update({(layer, head): copy for head, copy in zip(layer_heads, final, strict=True)})
    return states


def head_patching_effects(encoder: MiniLMEncoder, target: EncoderTrace, source: EncoderTrace,
                          readout: Readout, heads: Iterable[tuple[int, int]] | None = None) -> np.ndarray:
    """``readout`` of the patched run minus ``readout`` of the target run, for every head: (layers, heads, ...).

    ``readout`` maps last-layer states (batch, seq, d_model) to an array of
    any shape ``...`` (for 3.3: how much each pronoun's final vector leans to
    the first candidate, (batch,)). Entry ``[l, h]`` is what patching head
    ``h`` of layer ``l`` from ``source`` into ``target`` changes; 0 means the
    head's output carries none of the difference that the readout sees
    (chapter 3, "Coreference, honestly"). ``heads`` patches only the listed ``(layer, head)`` pairs (default all);
    the entries of the others are NaN (section 4.1 patches a few layers of long sentences).
    """
    check_type("readout", readout, Callable, "a function of the last-layer states (batch, seq, d_model)")
    clean = np.asarray(readout(target.hidden_states[-1]), dtype=float)  # (...)
    config = encoder.config
    effects = np.full((config.n_layers, config.n_heads) + clean.shape, 0.0 if heads is None else np.nan)
    for (layer, head), states in final_states_with_each_head_patched(encoder, target, source, heads).items():
        patched = np.asarray(readout(states), dtype=float)
        if patched.shape != clean.shape:
            raise ValueError(f"readout gave shape {patched.shape} for a patched run but {clean.shape} for the target "
                             "run; it must give the same shape for every run of the batch.")
        effects[layer, head] = patched - clean
    return effects
