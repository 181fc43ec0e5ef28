// Behind one attention weight: a head's queries and keys, read again from the hidden states a run returns (the input
// of layer l is hidden[l]: the embeddings, or the previous layer's output), and its scaled score split into the
// four parts of chapter 2's QK circuit (mha.core.geometry.score_terms): bilinear x_i W_Q W_K^T x_j^T, query_only
// x_i W_Q b_K^T, key_only b_Q W_K^T x_j^T and constant b_Q b_K^T, each divided by sqrt(d_head).

import { PANEL } from "./kernel.js";

// Column `column` of a layer's packed [W_Q W_K W_V] (d_model, 3 d_model) at row `row`, as pack() laid it out.
function packedAt(F, at, dIn, row, column) {
  return F[at + Math.floor(column / PANEL) * dIn * PANEL + row * PANEL + (column % PANEL)];
}

// The rows x (n, d_model) projected by one head's W_Q or W_K (no bias): (n, d_head) in float64.
function project(model, x, n, layer, first) {
  var d = model.config.d_model, dh = model.config.d_head, F = model._F, at = model._layers[layer].qkv;
  var out = new Float64Array(n * dh);
  for (var t = 0; t < dh; t++) {
    var column = first + t, weights = new Float64Array(d);
    for (var k = 0; k < d; k++) weights[k] = packedAt(F, at, d, k, column);
    for (var i = 0; i < n; i++) {
      var sum = 0, row = i * d;
      for (k = 0; k < d; k++) sum += x[row + k] * weights[k];
      out[i * dh + t] = sum;
    }
  }
  return out;
}

function check(model, result, layer, head) {
  var c = model.config;
  if (!result || !result.hidden || !Number.isInteger(result.n)) throw new Error("give a result of model.run(ids).");
  if (!Number.isInteger(layer) || layer < 0 || layer >= c.n_layers) throw new Error("layer must be a whole number in 0.." + (c.n_layers - 1) + ", got " + layer + ".");
  if (!Number.isInteger(head) || head < 0 || head >= c.n_heads) throw new Error("head must be a whole number in 0.." + (c.n_heads - 1) + ", got " + head + ".");
}

// One head's queries and keys on a run: {q, k (n, d_head): with biases; qx, kx (n, d_head): x W_Q and x W_K alone;
// bQ, bK (d_head)}, all Float64Array; kept per run, layer and head, so that a reader moving cell to cell pays once.
export function headVectors(model, result, layer, head) {
  check(model, result, layer, head);
  var c = model.config, n = result.n, d = c.d_model, dh = c.d_head, key = layer + "." + head;
  result._heads = result._heads || new Map();
  if (result._heads.has(key)) return result._heads.get(key);
  var x = result.hidden.subarray(layer * n * d, (layer + 1) * n * d), bias = model._layers[layer].bqkv;
  var qx = project(model, x, n, layer, head * dh), kx = project(model, x, n, layer, d + head * dh);
  var bQ = Float64Array.from(model._F.subarray(bias + head * dh, bias + (head + 1) * dh));
  var bK = Float64Array.from(model._F.subarray(bias + d + head * dh, bias + d + (head + 1) * dh));
  var q = qx.map(function (v, index) { return v + bQ[index % dh]; });
  var k = kx.map(function (v, index) { return v + bK[index % dh]; });
  var vectors = { q: q, k: k, qx: qx, kx: kx, bQ: bQ, bK: bK };
  result._heads.set(key, vectors);
  return vectors;
}

function dot(a, aAt, b, bAt, length) {
  var sum = 0;
  for (var t = 0; t < length; t++) sum += a[aAt + t] * b[bAt + t];
  return sum;
}

// Everything behind the weight of query i on key j in one head: {query, key, products (d_head), score (scaled),
// scores and weights (n): the softmax row it sits in, parts: {bilinear, query_only, key_only, constant}}.
export function scoreParts(model, result, layer, head, query, key) {
  var vectors = headVectors(model, result, layer, head), n = result.n, dh = model.config.d_head;
  [["query", query], ["key", key]].forEach(function (pair) {
    if (!Number.isInteger(pair[1]) || pair[1] < 0 || pair[1] >= n) throw new Error(pair[0] + " must be a position in 0.." + (n - 1) + ", got " + pair[1] + ".");
  });
  var scale = 1 / Math.sqrt(dh), qi = query * dh, kj = key * dh, j, t;
  var q = vectors.q.slice(qi, qi + dh), k = vectors.k.slice(kj, kj + dh);
  var products = q.map(function (v, index) { return v * k[index]; });
  var scores = new Float64Array(n), best = -Infinity, total = 0;
  for (j = 0; j < n; j++) { scores[j] = dot(vectors.q, qi, vectors.k, j * dh, dh) * scale; best = Math.max(best, scores[j]); }
  var weights = scores.map(function (s) { var e = Math.exp(s - best); total += e; return e; }).map(function (e) { return e / total; });
  var parts = {
    bilinear: dot(vectors.qx, qi, vectors.kx, kj, dh) * scale,
    query_only: dot(vectors.qx, qi, vectors.bK, 0, dh) * scale,
    key_only: dot(vectors.bQ, 0, vectors.kx, kj, dh) * scale,
    constant: dot(vectors.bQ, 0, vectors.bK, 0, dh) * scale,
  };
  for (t = 0, total = 0; t < dh; t++) total += products[t];
  return { query: q, key: k, products: products, score: total * scale, scores: scores, weights: weights, parts: parts };
}
