// The forward pass of the encoder on one sentence, in the model's float32 arena F (model.js): embeddings, then per
// layer self-attention (with heads switched off where asked: zero or mean ablation) and the MLP, each followed by the
// residual and a LayerNorm; then the sentence vector. Every matrix product, those of attention too, is the kernel's
// (kernel.js), on rows of F.

import { PANEL } from "./kernel.js";

// LayerNorm of each row of F[x .. x + n*d), in place; gain and bias are (d,) arrays.
function layerNorm(F, x, n, d, norm, eps) {
  var gain = norm[0], bias = norm[1];
  for (var i = 0; i < n; i++) {
    var row = x + i * d, mean = 0, variance = 0, j;
    for (j = 0; j < d; j++) mean += F[row + j];
    mean /= d;
    for (j = 0; j < d; j++) { var centred = F[row + j] - mean; variance += centred * centred; }
    var scale = 1 / Math.sqrt(variance / d + eps);
    for (j = 0; j < d; j++) F[row + j] = (F[row + j] - mean) * scale * gain[j] + bias[j];
  }
}

// erf to about 1e-7 (Abramowitz and Stegun 7.1.26); GELU(x) = x/2 (1 + erf(x / sqrt 2)).
function erf(x) {
  var sign = x < 0 ? -1 : 1, ax = Math.abs(x), t = 1 / (1 + 0.3275911 * ax);
  var poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign * (1 - poly * Math.exp(-ax * ax));
}

// 1. embeddings: word + segment + position, then LayerNorm, into the scratch rows s.x.
function embed(model, ids, chunkOf) {
  var c = model.config, d = c.d_model, F = model._F, s = model._scratch, rows = c.rows_per_chunk, n = ids.length;
  for (var i = 0; i < n; i++) {
    var word = chunkOf.get(Math.floor(ids[i] / rows)), wr = (ids[i] % rows) * d, x0 = s.x + i * d, pr = i * d;
    for (var j = 0; j < d; j++) F[x0 + j] = word[wr + j] + model._tokenType[j] + model._position[pr + j];
  }
  layerNorm(F, s.x, n, d, model._embeddingNorm, c.layer_norm_eps);
}

// 2.-4. Layer l's heads on the rows s.x: their weights into `attention` (layers, heads, n, n), their outputs z_h
// side by side into s.z (0 for a removed head, their mean over the tokens for a mean-ablated one). Per head, the
// scores Q K^T and the outputs A V are the kernel's products, on the head's rows copied into scratch (model.js).
function attend(model, l, n, keep, attention) {
  var c = model.config, d = c.d_model, H = c.n_heads, dh = c.d_head, F = model._F, s = model._scratch;
  var layer = model._layers[l], scale = 1 / Math.sqrt(dh), stride = 3 * d, wide = Math.ceil(n / PANEL) * PANEL;
  var i, j, k;
  // 2. queries, keys and values of every head at once: (n, 3 d_model), head h at columns h*d_head..
  model._matmul(s.x, layer.qkv, layer.bqkv, s.qkv, n, d, 3 * d);
  F.fill(0, s.headKT, s.headKT + wide * dh); // the keys past n stay 0
  for (var h = 0; h < H; h++) {
    var q0 = s.qkv + h * dh, a0 = (l * H + h) * n * n, kept = keep[l * H + h];
    // the head's queries as rows, its keys as K^T and its values, both packed in panels of PANEL columns
    for (i = 0; i < n; i++) {
      var at = q0 + i * stride;
      F.copyWithin(s.headQ + i * dh, at, at + dh);
      for (k = 0; k < dh; k++) {
        F[s.headKT + Math.floor(i / PANEL) * dh * PANEL + k * PANEL + (i % PANEL)] = F[at + d + k];
        F[s.headV + Math.floor(k / PANEL) * n * PANEL + i * PANEL + (k % PANEL)] = F[at + 2 * d + k];
      }
    }
    // 3. scores (n, wide) = Q K^T, scaled; softmax over the keys (row i = query i), into s.headWeights (n, n)
    model._matmul(s.headQ, s.headKT, s.zeros, s.headScores, n, dh, wide);
    for (i = 0; i < n; i++) {
      var row = s.headScores + i * wide, top = -Infinity, sum = 0, out = s.headWeights + i * n, best;
      for (j = 0; j < n; j++) if (F[row + j] > top) top = F[row + j];
      best = top * scale; // the largest scaled score, as the scale is positive
      for (j = 0; j < n; j++) { F[out + j] = Math.exp(F[row + j] * scale - best); sum += F[out + j]; }
      for (j = 0; j < n; j++) F[out + j] /= sum;
    }
    attention.set(F.subarray(s.headWeights, s.headWeights + n * n), a0);
    // 4. z_h = weights @ v_h, 0 for a removed head
    if (kept) model._matmul(s.headWeights, s.headV, s.zeros, s.headZ, n, n, dh);
    else F.fill(0, s.headZ, s.headZ + n * dh);
    for (i = 0; i < n; i++) F.copyWithin(s.z + i * d + h * dh, s.headZ + i * dh, s.headZ + (i + 1) * dh);
    if (kept === -1) meanOverTokens(F, s.z + h * dh, n, d, dh);
  }
}

// Mean ablation: each of the n rows (stride d) of a head's output z_h (d_head columns at z0) becomes their mean.
function meanOverTokens(F, z0, n, d, dh) {
  for (var k = 0; k < dh; k++) {
    var sum = 0, i;
    for (i = 0; i < n; i++) sum += F[z0 + i * d + k];
    for (i = 0; i < n; i++) F[z0 + i * d + k] = sum / n;
  }
}

// 5.-6. The rest of layer l: W_O mixes the heads, then the MLP, each added to the residual and normalised.
function mixAndMlp(model, l, n) {
  var c = model.config, d = c.d_model, dm = c.d_mlp, F = model._F, s = model._scratch, eps = c.layer_norm_eps;
  var layer = model._layers[l], i;
  // 5. W_O mixes the heads; add the residual, then normalise
  model._matmul(s.z, layer.o, layer.bo, s.tmp, n, d, d);
  for (i = 0; i < n * d; i++) F[s.x + i] += F[s.tmp + i];
  layerNorm(F, s.x, n, d, layer.norm1, eps);
  // 6. MLP: widen, GELU, narrow; add the residual, then normalise
  model._matmul(s.x, layer.in, layer.bin, s.h, n, d, dm);
  for (i = s.h; i < s.h + n * dm; i++) F[i] = 0.5 * F[i] * (1 + erf(F[i] * Math.SQRT1_2));
  model._matmul(s.h, layer.out, layer.bout, s.tmp, n, dm, d);
  for (i = 0; i < n * d; i++) F[s.x + i] += F[s.tmp + i];
  layerNorm(F, s.x, n, d, layer.norm2, eps);
}

// 7. the sentence vector: mean over the tokens of the rows at x, then unit length.
function sentenceVectorOf(F, x, n, d) {
  var pooled = new Float64Array(d), norm = 0, sentenceVector = new Float32Array(d), i, j;
  for (i = 0; i < n; i++) for (j = 0; j < d; j++) pooled[j] += F[x + i * d + j];
  for (j = 0; j < d; j++) { pooled[j] /= n; norm += pooled[j] * pooled[j]; }
  norm = Math.max(Math.sqrt(norm), 1e-12);
  for (j = 0; j < d; j++) sentenceVector[j] = pooled[j] / norm;
  return sentenceVector;
}

// The pass, a layer at a time (a page may show each layer as it comes): ids (n), keep (layers * heads: 1, 0
// or -1), chunkOf (word-table chunk index -> its rows). Returns {result, next}: result is {n, attention, hidden,
// sentenceVector, layersDone}, its arrays filled layer by layer (sentenceVector null until the last); next() computes
// the next layer and says whether one is left. The passes share the arena's scratch rows: one at a time (model.js).
export function forwardByLayer(model, ids, keep, chunkOf) {
  var c = model.config, d = c.d_model, H = c.n_heads, L = c.n_layers, n = ids.length, F = model._F, s = model._scratch;
  var result = { n: n, attention: new Float32Array(L * H * n * n), hidden: new Float32Array((L + 1) * n * d),
    sentenceVector: null, layersDone: 0 };
  embed(model, ids, chunkOf);
  result.hidden.set(F.subarray(s.x, s.x + n * d), 0);
  function next() {
    var l = result.layersDone;
    attend(model, l, n, keep, result.attention);
    mixAndMlp(model, l, n);
    result.hidden.set(F.subarray(s.x, s.x + n * d), (l + 1) * n * d);
    if (l + 1 === L) result.sentenceVector = sentenceVectorOf(F, s.x, n, d);
    result.layersDone = l + 1;
    return result.layersDone < L;
  }
  return { result: result, next: next };
}

