// The forward pass of the encoder on one sentence, in the model's float32 arena F (model.js): embeddings, then per
// layer self-attention (with heads switched off where asked) and the MLP, each followed by the residual and a
// LayerNorm; then the sentence vector.

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
// side by side into s.z (0 for a removed head). `scores` is a Float64Array (n) to work in.
function attend(model, l, n, keep, attention, scores) {
  var c = model.config, d = c.d_model, H = c.n_heads, dh = c.d_head, F = model._F, s = model._scratch;
  var layer = model._layers[l], scale = 1 / Math.sqrt(dh), i, j, k;
  // 2. queries, keys and values of every head at once: (n, 3 d_model), head h at columns h*d_head..
  model._matmul(s.x, layer.qkv, layer.bqkv, s.qkv, n, d, 3 * d);
  for (var h = 0; h < H; h++) {
    var q0 = s.qkv + h * dh, k0 = q0 + d, v0 = q0 + 2 * d, stride = 3 * d, a0 = (l * H + h) * n * n;
    for (i = 0; i < n; i++) {
      // 3. scaled scores and softmax over the keys (row i = query i)
      var qi = q0 + i * stride, best = -Infinity;
      for (j = 0; j < n; j++) {
        var kj = k0 + j * stride, dot = 0;
        for (k = 0; k < dh; k++) dot += F[qi + k] * F[kj + k];
        scores[j] = Math.fround(dot) * scale;
        if (scores[j] > best) best = scores[j];
      }
      var sum = 0;
      for (j = 0; j < n; j++) { scores[j] = Math.exp(scores[j] - best); sum += scores[j]; }
      var row = a0 + i * n;
      for (j = 0; j < n; j++) attention[row + j] = scores[j] / sum;
      // 4. z_h = weights @ v_h, 0 for a removed head
      var zi = s.z + i * d + h * dh;
      for (k = 0; k < dh; k++) {
        var z = 0;
        if (keep[l * H + h]) for (j = 0; j < n; j++) z += attention[row + j] * F[v0 + j * stride + k];
        F[zi + k] = z;
      }
    }
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

// The whole pass: ids (n), keep (layers * heads: 1 or 0), chunkOf (word-table chunk index -> its rows).
export function forward(model, ids, keep, chunkOf) {
  var c = model.config, d = c.d_model, H = c.n_heads, L = c.n_layers, n = ids.length, F = model._F, s = model._scratch;
  var attention = new Float32Array(L * H * n * n), hidden = new Float32Array((L + 1) * n * d);
  embed(model, ids, chunkOf);
  hidden.set(F.subarray(s.x, s.x + n * d), 0);
  var scores = new Float64Array(n);
  for (var l = 0; l < L; l++) {
    attend(model, l, n, keep, attention, scores);
    mixAndMlp(model, l, n);
    hidden.set(F.subarray(s.x, s.x + n * d), (l + 1) * n * d);
  }
  return { n: n, attention: attention, hidden: hidden, sentenceVector: sentenceVectorOf(F, s.x, n, d) };
}
