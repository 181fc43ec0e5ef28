"""What one run of the encoder computed: :class:`EncoderTrace` for a padded batch, :class:`SentenceTrace` for one
sentence (chapter 3, "A tour of all 72 heads").

:meth:`MiniLMEncoder.forward <mha.pretrained.encoder.MiniLMEncoder.forward>` returns an :class:`EncoderTrace`: every
layer's hidden states, every head's attention weights (layers, batch, heads, seq_q, seq_k) and outputs, with the
batch axis and the padding; queries, keys and values are recomputed from the stored layer inputs when first read.
:meth:`EncoderTrace.sentence` gives one sentence as numpy, padding removed. Row = query (attends from), column =
key (attended to).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Protocol

import numpy as np
import torch
from torch import Tensor, nn

from mha.core.attention import HeadWeights, split_heads
from mha.core.validation import check_type, check_whole_number
from mha.pretrained.tokenizer import TokenizedBatch

__all__ = ["EncoderTrace", "SentenceTrace", "TracedEncoder", "check_trace"]


class TracedEncoder(Protocol):
    """What a trace reads of the encoder that made it: its layers, each with its ``attention``
    (:class:`~mha.core.attention.MultiHeadAttention`), and one head's weights. A
    :class:`~mha.pretrained.encoder.MiniLMEncoder` is one; this module names the shape, not the class, so that it
    stands below the encoder that imports it (chapter 3, "A tour of all 72 heads")."""

    layers: nn.ModuleList

    def head_weights(self, layer: int, head: int) -> HeadWeights: ...


@dataclass(frozen=True)
class SentenceTrace:
    """Everything the encoder computed for one sentence, as numpy, with padding removed.

    (chapter 3, "A tour of all 72 heads")

    ``n`` is the sentence's length in tokens, ``[CLS]`` and ``[SEP]``
    included. ``attention[layer, head]`` is that head's (n, n) weight matrix,
    row = query (attends from), column = key (attended to).
    """

    tokens: list[str]  # (n,)
    word_ids: list[int | None]  # (n,), None for [CLS] and [SEP]
    words: list[str]
    hidden_states: np.ndarray  # (layers + 1, n, d_model): embeddings, then the output of each layer
    attention: np.ndarray  # (layers, heads, n, n)
    queries: np.ndarray  # (layers, heads, n, d_head)
    keys: np.ndarray  # (layers, heads, n, d_head)
    values: np.ndarray  # (layers, heads, n, d_head)
    head_outputs: np.ndarray  # (layers, heads, n, d_head), z_h before W_O


@dataclass
class EncoderTrace:
    """What one forward pass of :class:`~mha.pretrained.encoder.MiniLMEncoder` computed, for a padded batch.

    (chapter 3, "A tour of all 72 heads")

    Tensors keep the batch axis and the padding; :meth:`sentence` gives one
    sentence without either, as numpy. ``hidden_states[0]`` is the embedding
    output and ``hidden_states[l + 1]`` the output of layer ``l``, which is
    also the input of layer ``l + 1``. ``head_outputs`` are each head's
    ``z_h = weights_h @ v_h`` after any head mask (a removed head's are 0).
    ``queries``, ``keys`` and ``values`` are recomputed from the stored
    layer inputs the first time they are read (with the encoder's weights as
    they are then), so the forward pass does not pay for them when nobody looks.
    """

    inputs: TokenizedBatch
    hidden_states: Tensor  # (layers + 1, batch, seq, d_model)
    attention_weights: Tensor  # (layers, batch, heads, seq_q, seq_k)
    head_outputs: Tensor  # (layers, batch, heads, seq, d_head)
    encoder: TracedEncoder = field(repr=False)

    @property
    def tokens(self) -> list[list[str]]:
        """Wordpieces of each sentence, ``[PAD]`` included: (batch, seq)."""
        return self.inputs.tokens

    @property
    def word_ids(self) -> list[list[int | None]]:
        """For each token, the index of its word in ``words[b]``; None for [CLS], [SEP], [PAD]: (batch, seq)."""
        return self.inputs.word_ids

    @property
    def words(self) -> list[list[str]]:
        """The words of each sentence, as the tokenizer split them (or as given, for pre-split input)."""
        return self.inputs.words

    @property
    def real_tokens(self) -> Tensor:
        """(batch, seq) bool, False at padding; the key mask every layer used."""
        return self.inputs.real_tokens

    @property
    def lengths(self) -> list[int]:
        return self.inputs.lengths

    @cached_property
    def _projections(self) -> tuple[Tensor, Tensor, Tensor]:
        per_layer = []
        # each layer's input: the embeddings, then each layer's output but the last's
        for layer_input, layer in zip(self.hidden_states[:-1], self.encoder.layers, strict=True):
            attention = layer.attention
            per_layer.append([
                split_heads(layer_input @ W + b, attention.n_heads)  # (batch, heads, seq, d_head)
                for W, b in ((attention.W_Q, attention.b_Q), (attention.W_K, attention.b_K),
                             (attention.W_V, attention.b_V))
            ])
        queries, keys, values = (torch.stack(per_kind) for per_kind in zip(*per_layer, strict=True))
        return queries, keys, values  # each (layers, batch, heads, seq, d_head)

    @property
    def queries(self) -> Tensor:
        """Every head's queries, (layers, batch, heads, seq, d_head)."""
        return self._projections[0]

    @property
    def keys(self) -> Tensor:
        """Every head's keys, (layers, batch, heads, seq, d_head)."""
        return self._projections[1]

    @property
    def values(self) -> Tensor:
        """Every head's values, (layers, batch, heads, seq, d_head)."""
        return self._projections[2]

    def head_weights(self, layer: int, head: int) -> HeadWeights:
        """The W_Q, W_K, W_V (d_model, d_head) and W_O rows (d_head, d_model) of one head of the encoder."""
        return self.encoder.head_weights(layer, head)

    def attention_maps(self, sentence: int = 0) -> np.ndarray:
        """Sentence ``sentence``'s attention weights without padding, (layers, heads, n, n) as numpy."""
        n = self._length_of(sentence)
        return self.attention_weights[:, sentence, :, :n, :n].detach().cpu().numpy()  # (layers, heads, n, n)

    def sentence(self, index: int = 0) -> SentenceTrace:
        """Sentence ``index`` of the batch as a :class:`SentenceTrace`: numpy arrays, padding removed."""
        n = self._length_of(index)

        def per_head(t: Tensor) -> np.ndarray:
            return t[:, index, :, :n].detach().cpu().numpy()  # (layers, heads, n, d_head)

        return SentenceTrace(
            tokens=self.tokens[index][:n],
            word_ids=self.word_ids[index][:n],
            words=list(self.words[index]),
            hidden_states=self.hidden_states[:, index, :n].detach().cpu().numpy(),  # (layers + 1, n, d_model)
            attention=self.attention_maps(index),
            queries=per_head(self.queries),
            keys=per_head(self.keys),
            values=per_head(self.values),
            head_outputs=per_head(self.head_outputs),
        )

    def _length_of(self, index: int) -> int:
        batch = len(self.inputs)
        index = check_whole_number("sentence index", index, -batch, batch - 1,
                                   meaning=f"this batch has {batch}; negative counts from the end")
        return self.lengths[index]


def check_trace(trace) -> EncoderTrace:
    """``trace`` if it is an :class:`EncoderTrace`; else an ``InputError`` that says how to make one."""
    return check_type("trace", trace, EncoderTrace, "an EncoderTrace, e.g. encoder.trace(sentences)")
