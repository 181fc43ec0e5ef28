"""A tiny transformer built from :class:`mha.core.attention.MultiHeadAttention`, for training from scratch.

Chapter 3, sections 3.5 to 3.7, trains models small enough to learn
on a laptop CPU in seconds, so that the reader can watch heads take on roles
(previous-token head, induction head, ...) that nobody assigned to them. This
module is the model and nothing else: token embedding plus learned positional
embedding, ``n_layers`` blocks of multi-head attention (each optionally
preceded by LayerNorm and followed by an MLP), and an unembedding. The default,
attention-only with no LayerNorm, is the clearest to take apart, because every
path from input to logits is then a product of matrices.

Conventions are those of :mod:`mha.core.attention`: vectors are rows (``x @ W``),
attention weights are ``(batch, heads, seq_q, seq_k)`` with row = query and
column = key, and masks are boolean with True = may attend.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping
from typing import NamedTuple

import torch
from torch import Tensor, nn

from mha.core.attention import HeadWeights, MultiHeadAttention
from mha.core.masks import causal_mask
from mha.core.validation import (
    check_flag,
    check_head_count,
    check_rank,
    check_seed,
    check_size,
    check_type,
    check_whole_number,
)
from mha.data_files import parse_json

__all__ = ["TinyTransformerConfig", "TinyTransformerOutput", "TinyTransformer"]


@dataclasses.dataclass(frozen=True)
class TinyTransformerConfig:
    """Everything that fixes a :class:`TinyTransformer`'s shape (chapter 3, "Induction heads").

    ``vocab_size`` tokens, sequences of at most ``max_seq_len`` positions,
    ``n_layers`` attention layers of ``n_heads`` heads over a ``d_model``-wide
    residual stream (``d_head = d_model // n_heads``). ``causal`` lets each
    position see only itself and earlier positions; ``use_mlp`` adds an MLP of
    width ``d_mlp`` (default ``4 * d_model``) after each attention layer;
    ``layer_norm`` puts a LayerNorm before each sublayer and before the
    unembedding (pre-LN). ``attention_bias`` gives the attention projections
    biases. The config round-trips through :meth:`to_json` / :meth:`from_json`.
    """

    vocab_size: int
    max_seq_len: int
    d_model: int = 32
    n_layers: int = 2
    n_heads: int = 4
    causal: bool = True
    use_mlp: bool = False
    d_mlp: int | None = None
    layer_norm: bool = False
    attention_bias: bool = True

    def __post_init__(self) -> None:
        for name in ("vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads"):
            object.__setattr__(self, name, check_whole_number(name, getattr(self, name), minimum=1))
        check_head_count(self.d_model, self.n_heads)
        for name in ("layer_norm", "attention_bias", "use_mlp"):
            object.__setattr__(self, name, check_flag(name, getattr(self, name)))
        if self.d_mlp is not None:
            object.__setattr__(self, "d_mlp", check_whole_number("d_mlp", self.d_mlp, minimum=1,
                                                                 meaning="or None, meaning 4 * d_model"))
        check_size("this TinyTransformerConfig's model", (self.n_layers,), limit="layers")
        check_size("this TinyTransformerConfig's parameters", (self.parameter_count,))

    @property
    def parameter_count(self) -> int:
        """How many numbers the model's weights hold, counted from the config before anything is built."""
        d_model, layer_norm = self.d_model, 2 * self.d_model if self.layer_norm else 0
        attention = 4 * d_model * d_model + (4 * d_model if self.attention_bias else 0) + layer_norm
        mlp = 2 * d_model * self.mlp_width + self.mlp_width + d_model + layer_norm if self.use_mlp else 0
        embeddings = 2 * self.vocab_size * d_model + self.max_seq_len * d_model + layer_norm
        return embeddings + self.n_layers * (attention + mlp)

    @property
    def d_head(self) -> int:
        """Features per head, ``d_model // n_heads``."""
        return self.d_model // self.n_heads

    @property
    def mlp_width(self) -> int:
        """The MLP's hidden width: ``d_mlp``, or ``4 * d_model`` when that is None."""
        return 4 * self.d_model if self.d_mlp is None else self.d_mlp

    def to_dict(self) -> dict:
        """A plain dict of the fields, ready for JSON."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, fields: Mapping) -> TinyTransformerConfig:
        """The config with these fields; unknown keys are an error that lists the known ones."""
        known = {field.name for field in dataclasses.fields(cls)}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise ValueError(f"unknown TinyTransformerConfig fields {unknown}; the known fields are {sorted(known)}.")
        return cls(**fields)

    def to_json(self) -> str:
        """The config as a JSON string (keys sorted, so equal configs give equal strings)."""
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> TinyTransformerConfig:
        """Inverse of :meth:`to_json`; ``ValueError`` for text that is not a JSON object of the fields."""
        if not isinstance(text, (str, bytes)):
            raise ValueError(f"a TinyTransformerConfig is read from JSON text, got {type(text).__name__}.")
        fields = parse_json(text, what="the config", path="(TinyTransformerConfig JSON)", how="")
        if not isinstance(fields, dict):
            raise ValueError(f"the config JSON holds {type(fields).__name__}, not an object of fields.")
        return cls.from_dict(fields)


class TinyTransformerOutput(NamedTuple):
    """What :class:`TinyTransformer` returns."""

    logits: Tensor  # (batch, seq, vocab)
    attention_weights: Tensor  # (layers, batch, heads, seq_q, seq_k)


class _MLP(nn.Module):
    """Two seeded linear maps with a GELU between them, vectors-as-rows."""

    def __init__(self, d_model: int, d_mlp: int, generator: torch.Generator) -> None:
        super().__init__()
        bound_in, bound_out = 1 / math.sqrt(d_model), 1 / math.sqrt(d_mlp)
        self.W_in = nn.Parameter(torch.empty(d_model, d_mlp).uniform_(-bound_in, bound_in, generator=generator))
        self.b_in = nn.Parameter(torch.zeros(d_mlp))
        self.W_out = nn.Parameter(torch.empty(d_mlp, d_model).uniform_(-bound_out, bound_out, generator=generator))
        self.b_out = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        hidden = nn.functional.gelu(x @ self.W_in + self.b_in)  # (batch, seq, d_mlp)
        return hidden @ self.W_out + self.b_out  # (batch, seq, d_model)


class _Block(nn.Module):
    """One layer: residual += attention(LN(residual)); then, optionally, residual += MLP(LN(residual))."""

    def __init__(self, config: TinyTransformerConfig, seed: int, generator: torch.Generator) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(config.d_model, config.n_heads, bias=config.attention_bias, seed=seed)
        self.norm_attention = nn.LayerNorm(config.d_model) if config.layer_norm else nn.Identity()
        if config.use_mlp:
            self.norm_mlp = nn.LayerNorm(config.d_model) if config.layer_norm else nn.Identity()
            self.mlp = _MLP(config.d_model, config.mlp_width, generator)
        else:
            self.norm_mlp, self.mlp = None, None

    def forward(self, residual: Tensor, mask: Tensor | None, head_mask: Tensor | None,
                attention_override: Callable[[Tensor], Tensor] | None) -> tuple[Tensor, Tensor]:
        attended = self.attention(self.norm_attention(residual), mask=mask, head_mask=head_mask,
                                  attention_override=attention_override)
        residual = residual + attended.output  # (batch, seq, d_model)
        if self.mlp is not None:
            residual = residual + self.mlp(self.norm_mlp(residual))  # (batch, seq, d_model)
        return residual, attended.weights  # weights: (batch, heads, seq, seq)


class TinyTransformer(nn.Module):
    """A small transformer language model whose every head's weights are returned (chapter 3, "Induction heads").

    ``forward(tokens)`` takes token ids ``(batch, seq)`` with ``seq <=
    config.max_seq_len`` and returns :class:`TinyTransformerOutput`: ``logits``
    ``(batch, seq, vocab)`` (position ``i`` predicts what comes at ``i + 1``)
    and ``attention_weights`` ``(layers, batch, heads, seq, seq)``. The
    residual stream starts as ``W_E[token] + W_pos[position]`` and ends as
    ``logits = residual @ W_U``. ``seed`` fixes the initialisation through
    explicit generators, so building the model never touches torch's global RNG.
    """

    def __init__(self, config: TinyTransformerConfig, seed: int = 0) -> None:
        super().__init__()
        self.config = check_type("config", config, TinyTransformerConfig, "a TinyTransformerConfig, e.g. "
                                 "TinyTransformerConfig(vocab_size=16, max_seq_len=32, d_model=32)")
        generator = torch.Generator().manual_seed(check_seed("seed", seed))
        d_model = config.d_model
        # embeddings start with entries of size ~1/sqrt(d_model): unit-length rows, like the attention inputs of chapter
        # 1
        scale = 1 / math.sqrt(d_model)
        # (vocab, d_model)
        self.W_E = nn.Parameter(torch.randn(config.vocab_size, d_model, generator=generator) * scale)
        positions = torch.randn(config.max_seq_len, d_model, generator=generator) * scale
        self.W_pos = nn.Parameter(positions)  # (max_seq, d_model)
        layer_seeds = torch.randint(0, 2**62, (config.n_layers,), generator=generator).tolist()
        self.blocks = nn.ModuleList(_Block(config, layer_seed, generator) for layer_seed in layer_seeds)
        self.norm_final = nn.LayerNorm(d_model) if config.layer_norm else nn.Identity()
        # (d_model, vocab)
        self.W_U = nn.Parameter(torch.randn(d_model, config.vocab_size, generator=generator) * scale)

    def forward(
        self,
        tokens: Tensor,
        *,
        head_mask: Tensor | None = None,
        attention_overrides: Mapping[int, Callable[[Tensor], Tensor]] | None = None,
    ) -> TinyTransformerOutput:
        """Logits (batch, seq, vocab) and attention weights (layers, batch, heads, seq, seq) for ``tokens`` (batch,
        seq).

        ``head_mask`` ``(layers, heads)`` scales each head's output (1 keeps a
        head, 0 ablates it). ``attention_overrides`` maps a layer index to a
        function that replaces that layer's weights ``(batch, heads, seq, seq)``,
        as in :class:`mha.core.attention.MultiHeadAttention`.
        """
        config = self.config
        check_rank("tokens", tokens.shape, (2,), "(batch, seq) integer token ids")
        if tokens.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"tokens has dtype {tokens.dtype}; pass integer token ids (torch.long).")
        batch, seq = tokens.shape
        if seq > config.max_seq_len:
            raise ValueError(f"tokens has {seq} positions but the model has positional embeddings for "
                             f"max_seq_len = {config.max_seq_len}; cut the sequence or build a model with a "
                             f"larger max_seq_len.")
        if tokens.numel() and (tokens.min() < 0 or tokens.max() >= config.vocab_size):
            raise ValueError(f"token ids must lie in 0..{config.vocab_size - 1}, got ids from "
                             f"{int(tokens.min())} to {int(tokens.max())}.")
        if head_mask is not None:
            head_mask = torch.as_tensor(head_mask)
            if tuple(head_mask.shape) != (config.n_layers, config.n_heads):
                raise ValueError(f"head_mask has shape {tuple(head_mask.shape)}; give one number per head, shape "
                                 f"(layers, heads) = ({config.n_layers}, {config.n_heads}), 1 to keep and 0 to remove.")
        overrides = dict(attention_overrides or {})
        unknown_layers = sorted(set(overrides) - set(range(config.n_layers)))
        if unknown_layers:
            raise ValueError(f"attention_overrides names layers {unknown_layers}, "
                             f"but the layers are 0..{config.n_layers - 1}.")
        mask = causal_mask(seq, device=tokens.device) if config.causal else None  # (seq_q, seq_k)

        residual = self.W_E[tokens] + self.W_pos[:seq]  # (batch, seq, d_model)
        all_weights = []
        for layer, block in enumerate(self.blocks):
            layer_head_mask = None if head_mask is None else head_mask[layer]  # (heads,)
            residual, weights = block(residual, mask, layer_head_mask, overrides.get(layer))
            all_weights.append(weights)  # (batch, heads, seq, seq)
        logits = self.norm_final(residual) @ self.W_U  # (batch, seq, vocab)
        # (one layer: a view, not a copy of the largest tensor in the model)
        weights = torch.stack(all_weights) if len(all_weights) > 1 else all_weights[0].unsqueeze(0)
        return TinyTransformerOutput(logits, weights)  # (layers, batch, heads, seq, seq)

    def head_weights(self, layer: int, head: int) -> HeadWeights:
        """Head ``head`` of layer ``layer``: W_Q, W_K, W_V (d_model, d_head), W_O (d_head, d_model), biases."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be in 0..{self.config.n_layers - 1}, got {layer}.")
        return self.blocks[layer].attention.head_weights(head)

    def attention(self, layer: int) -> MultiHeadAttention:
        """The :class:`~mha.core.attention.MultiHeadAttention` module of layer ``layer``."""
        if not 0 <= layer < self.config.n_layers:
            raise ValueError(f"layer must be in 0..{self.config.n_layers - 1}, got {layer}.")
        return self.blocks[layer].attention

    def parameter_count(self) -> int:
        """How many numbers the model learns."""
        return sum(parameter.numel() for parameter in self.parameters())

    def extra_repr(self) -> str:
        return self.config.to_json()


def check_tiny_model(model) -> TinyTransformer:
    """``model`` if it is a :class:`TinyTransformer`; else an ``InputError`` that says where one comes from. The first
    check of every function that reads or runs a lab model."""
    return check_type("model", model, TinyTransformer, "a TinyTransformer: one you trained, or one loaded with "
                      "mha.lab.checkpoints.load_checkpoint(name)")
