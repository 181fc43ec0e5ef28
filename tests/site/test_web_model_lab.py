"""What the chapter-3 lab asks of the page's model (model.js), under Node, against the package's PyTorch encoder.

- behind one weight: model.scoreParts gives the head's query and key (from the hidden states the run returns), their
  products, the scaled score and its softmax row, and the four parts of chapter 2's QK circuit as
  mha.core.geometry.score_terms splits the score, summing to it: as PyTorch computes them from the same hidden
  states with MiniLMEncoder's head weights stored as the page stores them (float16), within 1e-4; and against
  MiniLMEncoder's own run (its hidden states, float32 weights), the softmax row within 1e-3 and the query, key and
  score within 1e-2 (relative for values over 1, as everywhere here);
- mean ablation: a head's output z_h replaced at every token by its mean over the sentence's tokens, run through
  the PyTorch layers with a head-output override, gives the page's maps and sentence vector within 5e-4;
- the longest text the model takes, 512 tokens, runs; 513 are refused with a message that says so.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from mha.core.geometry import score_terms
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.web_export import export_web_model
from mha.views.widget import web_file

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="needs Node.js (apt install nodejs)")

SENTENCE = "The keys to the old cabinet that my grandmother left us are on the kitchen table."
CELLS = [(0, 0, 1, 1), (1, 4, 3, 0), (2, 7, 5, 9), (3, 1, 8, 2), (4, 11, 0, 17), (5, 5, 17, 6)]
MEAN_REMOVED = [[0, 3], [2, 5], [3, 0]]

# Runs model.js on request.json: each entry {text, removed, ablation, cells: [[layer, head, query, key]]} gives its
# ids, attention (layers, heads, n, n), sentence vector and the scoreParts of each cell, or the error it raised.
RUNNER = r"""
const fs = require("fs");
const [script, folder, requestPath, outPath] = process.argv.slice(2);
require(script);
(async () => {
  const readPart = async (name) => new Uint8Array(fs.readFileSync(folder + "/" + name + ".bin"));
  const model = await globalThis.mhaModel.open(readPart, {});
  const results = [];
  for (const entry of JSON.parse(fs.readFileSync(requestPath, "utf8"))) {
    try {
      const { ids } = model.tokenize(entry.text);
      const run = await model.run(ids, { removed: entry.removed || [], ablation: entry.ablation });
      const cells = (entry.cells || []).map(([l, h, i, j]) => {
        const p = model.scoreParts(run, l, h, i, j);
        return { query: Array.from(p.query), key: Array.from(p.key), products: Array.from(p.products),
          score: p.score, scores: Array.from(p.scores), weights: Array.from(p.weights), parts: p.parts };
      });
      const kept = entry.keep !== false;
      results.push({ ids, n: run.n, attention: kept ? Array.from(run.attention) : null,
        hidden: kept ? Array.from(run.hidden) : null, vector: Array.from(run.sentenceVector), cells });
    } catch (error) {
      results.push({ error: error.message });
    }
  }
  fs.writeFileSync(outPath, JSON.stringify(results));
})().catch((error) => { console.error(error); process.exit(1); });
"""


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("web_model")
    export_web_model(folder)
    return folder


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder.load()


def run_lab(folder: Path, entries: list[dict], tmp_path: Path) -> list[dict]:
    """model.js (joined as the site writes it) on ``entries`` under Node; one result per entry."""
    (tmp_path / "model.js").write_text(web_file("model.js"), encoding="utf-8")
    (tmp_path / "runner.js").write_text(RUNNER, encoding="utf-8")
    (tmp_path / "request.json").write_text(json.dumps(entries))
    subprocess.run([NODE, str(tmp_path / "runner.js"), str(tmp_path / "model.js"), str(folder),
                    str(tmp_path / "request.json"), str(tmp_path / "results.json")], check=True, timeout=300)
    return json.loads((tmp_path / "results.json").read_text())


def head_weights_as_stored(encoder: MiniLMEncoder, layer: int, head: int) -> tuple[torch.Tensor, ...]:
    """W_Q, W_K (d_model, d_head) rounded to float16 as the page's export stores matrices, b_Q, b_K (d_head,) in
    float32; all as float64."""
    w = encoder.head_weights(layer, head)
    return (w.W_Q.half().double(), w.W_K.half().double(), w.b_Q.double(), w.b_K.double())


def test_behind_a_weight_the_page_gives_the_encoders_query_key_score_and_qk_circuit_parts(model_folder, encoder,
                                                                                          tmp_path):
    [result] = run_lab(model_folder, [{"text": SENTENCE, "cells": CELLS}], tmp_path)
    trace = encoder.trace(SENTENCE)
    n, d_model, d_head = result["n"], encoder.config.d_model, encoder.config.d_head
    assert n == trace.inputs.input_ids.shape[1] == 19
    page_hidden = torch.tensor(result["hidden"], dtype=torch.float64).view(-1, n, d_model)  # (layers + 1, n, d)
    for (layer, head, query, key), found in zip(CELLS, result["cells"], strict=True):
        where = f"L{layer}H{head} ({query}, {key})"
        # the same inputs: the page's hidden states, the weights as the page stores them
        W_Q, W_K, b_Q, b_K = head_weights_as_stored(encoder, layer, head)
        x = page_hidden[layer]  # (n, d_model): the layer's input in the page's run
        q, k = x @ W_Q + b_Q, x @ W_K + b_K  # (n, d_head)
        scores = q @ k.T / math.sqrt(d_head)  # (n, n)
        terms = score_terms(x, x, W_Q, W_K, b_Q, b_K)
        for name, expected in (("query", q[query]), ("key", k[key]), ("products", q[query] * k[key]),
                               ("score", scores[query, key]), ("scores", scores[query]),
                               ("weights", torch.softmax(scores[query], -1))):
            assert_close(found[name], expected.numpy(), f"{where} {name}", 1e-4)
        for name in ("bilinear", "query_only", "key_only", "constant"):
            assert_close(found["parts"][name], float(getattr(terms, name)[query, key]), f"{where} {name}", 1e-4)
        assert abs(sum(found["parts"].values()) - found["score"]) < 1e-9, where
        assert abs(sum(found["products"]) / math.sqrt(d_head) - found["score"]) < 1e-9, where
        # the encoder's own run: its hidden states, its float32 weights, its softmax
        w = encoder.head_weights(layer, head)
        x = trace.hidden_states[layer][0].double()
        q, k = x @ w.W_Q.double() + w.b_Q.double(), x @ w.W_K.double() + w.b_K.double()
        assert_close(found["weights"], trace.attention_weights[layer, 0, head, query].numpy(), f"{where} row", 1e-3)
        assert_close(found["query"], q[query].numpy(), f"{where} query", 1e-2)
        assert_close(found["key"], k[key].numpy(), f"{where} key", 1e-2)
        assert_close(found["score"], float(q[query] @ k[key]) / math.sqrt(d_head), f"{where} score", 1e-2)


def assert_close(found, expected, where: str, tolerance: float) -> None:
    """Within ``tolerance``, relative for values over 1 in size."""
    found, expected = np.asarray(found, dtype=float), np.asarray(expected, dtype=float)
    worst = float((np.abs(found - expected) / np.maximum(1.0, np.abs(expected))).max())
    assert worst < tolerance, f"{where}: {worst:.2e}"


def mean_ablated(encoder: MiniLMEncoder, text: str, removed: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """The PyTorch layers with each removed head's output z_h replaced, at every token, by its mean over the
    sentence's tokens: attention (layers, heads, n, n) and the unit-length mean-pooled sentence vector."""
    heads_of = {}
    for layer, head in removed:
        heads_of.setdefault(layer, []).append(head)

    def override(layer: int, z: torch.Tensor) -> torch.Tensor:  # z (batch, heads, seq, d_head)
        z = z.clone()
        for head in heads_of.get(layer, []):
            z[:, head] = z[:, head].mean(dim=1, keepdim=True)
        return z

    x = encoder.trace(text).hidden_states[0]  # (1, n, d_model): the embeddings
    weights = []
    with torch.inference_mode():
        for index, layer in enumerate(encoder.layers):
            x, attended = layer(x, head_outputs_override=lambda z, index=index: override(index, z))
            weights.append(attended.weights[0])  # (heads, n, n)
    pooled = x[0].mean(dim=0)
    return torch.stack(weights).numpy(), (pooled / pooled.norm()).numpy()


def test_mean_ablation_in_the_page_matches_pytorch_and_differs_from_zero_ablation(model_folder, encoder, tmp_path):
    entries = [{"text": SENTENCE, "removed": MEAN_REMOVED, "ablation": "mean"},
               {"text": SENTENCE, "removed": MEAN_REMOVED, "ablation": "zero"},
               {"text": SENTENCE},
               {"text": SENTENCE, "removed": MEAN_REMOVED, "ablation": "average"}]
    mean, zero, full, wrong = run_lab(model_folder, entries, tmp_path)
    attention, vector = mean_ablated(encoder, SENTENCE, MEAN_REMOVED)
    full_attention, full_vector = mean_ablated(encoder, SENTENCE, [])  # nothing removed: the encoder's own run
    found = np.array(mean["attention"]).reshape(attention.shape)
    found_full = np.array(full["attention"]).reshape(attention.shape)
    # what the ablation changes, in the page and in PyTorch
    effect_gap = np.abs((found - found_full) - (attention - full_attention)).max()
    vector_gap = np.abs((np.array(mean["vector"]) - np.array(full["vector"])) - (vector - full_vector)).max()
    print(f"mean ablation: maps within {np.abs(found - attention).max():.2e} of PyTorch's, their change within "
          f"{effect_gap:.2e}; the sentence vector within {np.abs(np.array(mean['vector']) - vector).max():.2e}, "
          f"its change within {vector_gap:.2e}")
    assert np.abs(found - attention).max() < 1e-3  # as close as the page's model is to the package's anyway
    assert effect_gap < 5e-4 and vector_gap < 5e-4
    assert np.abs(np.array(mean["vector"]) - vector).max() < 5e-4
    # the two ablations are different interventions: from layer 1 on, their maps differ
    zero_attention = np.array(zero["attention"]).reshape(attention.shape)
    assert np.abs(zero_attention[1:] - found[1:]).max() > 1e-2
    assert np.array_equal(zero_attention[0], found[0])
    assert "ablation is \"zero\" or \"mean\"" in wrong["error"]


def test_the_model_takes_512_tokens_and_refuses_513_with_a_message(model_folder, tmp_path):
    words_512 = " ".join(["word"] * 510)  # [CLS] + 510 + [SEP]
    longest, too_long = run_lab(model_folder, [{"text": words_512, "keep": False},
                                               {"text": words_512 + " word", "keep": False}], tmp_path)
    assert longest["n"] == 512 and len(longest["vector"]) == 384
    assert "513 tokens long" in too_long["error"] and "only 512 positions" in too_long["error"]
