// The forward pass of the tiny transformer (model.js), keeping what the backward pass needs. Shapes: tokens
// (batch, seq) row-major; residual, q, k, v, z (batch * seq, d_model); attention weights (batch, heads, seq, seq)
// per layer, row = query (attends from), column = key (attended to), causal (a key after its query gets weight 0);
// logits (batch * seq, vocab). Chapter 1's steps, per layer: q, k, v = x @ W + b; scores q kᵀ / sqrt(d_head),
// masked, softmax over the keys; z = weights @ v, heads side by side; x += z @ W_O + b_O.

import { attend, attentionScratch } from "./attention.js";

// Logits (batch * seq, vocab) and every layer's attention weights for `tokens` (Int32Array (batch, seq)), with
// the activations the backward pass reads: {logits, attention: [layers], layers: [{x, q, k, v, z}], final}.
export function forward(model, engine, tokens, batch, seq) {
  var config = model.config, D = config.d_model, V = config.vocab_size, H = config.n_heads, rows = batch * seq;
  if (seq > config.max_seq_len) {
    throw new Error("the sequences have " + seq + " positions but the model has max_seq_len = " + config.max_seq_len + ".");
  }
  if (tokens.length !== rows) throw new Error("tokens has " + tokens.length + " ids, not batch * seq = " + rows + ".");
  var x = new Float32Array(rows * D);
  for (var b = 0; b < batch; b++) {
    for (var t = 0; t < seq; t++) {
      var id = tokens[b * seq + t], at = (b * seq + t) * D;
      if (!(id >= 0 && id < V)) throw new Error("token ids must lie in 0.." + (V - 1) + ", got " + id + ".");
      for (var c = 0; c < D; c++) x[at + c] = model.W_E[id * D + c] + model.W_pos[t * D + c];
    }
  }
  var layers = [], attention = [], scratch = attentionScratch(seq, H, config.d_head);
  model.layers.forEach(function (layer) {
    var q = engine.product(x, rows, D, layer.W_Q, D, false, layer.b_Q, new Float32Array(rows * D));
    var k = engine.product(x, rows, D, layer.W_K, D, false, layer.b_K, new Float32Array(rows * D));
    var v = engine.product(x, rows, D, layer.W_V, D, false, layer.b_V, new Float32Array(rows * D));
    var weights = new Float32Array(batch * H * seq * seq), z = new Float32Array(rows * D);
    attend(engine, scratch, q, k, v, weights, z, batch, seq, H, config.d_head);
    var out = engine.product(z, rows, D, layer.W_O, D, false, layer.b_O, new Float32Array(rows * D));
    var next = new Float32Array(rows * D);
    for (var i = 0; i < next.length; i++) next[i] = x[i] + out[i];
    layers.push({ x: x, q: q, k: k, v: v, z: z });
    attention.push(weights);
    x = next;
  });
  var logits = engine.product(x, rows, D, model.W_U, V, false, null, new Float32Array(rows * V));
  return { logits: logits, attention: attention, layers: layers, final: x, batch: batch, seq: seq, scratch: scratch };
}

// Mean cross-entropy (nats) over the positions where `mask` (Uint8Array (batch * seq)) is 1, and, when `gradient`
// is given (Float32Array (batch * seq, vocab)), its gradient with respect to the logits written there.
export function maskedCrossEntropy(logits, targets, mask, vocab, gradient) {
  var rows = mask.length, scored = 0, total = 0, r, c;
  for (r = 0; r < rows; r++) if (mask[r]) scored++;
  if (!scored) throw new Error("the loss mask scores no position; score at least one.");
  if (gradient) gradient.fill(0);
  for (r = 0; r < rows; r++) {
    if (!mask[r]) continue;
    var at = r * vocab, max = -Infinity, sum = 0;
    for (c = 0; c < vocab; c++) if (logits[at + c] > max) max = logits[at + c];
    for (c = 0; c < vocab; c++) sum += Math.exp(logits[at + c] - max);
    total += max + Math.log(sum) - logits[at + targets[r]];
    if (gradient) {
      for (c = 0; c < vocab; c++) gradient[at + c] = Math.exp(logits[at + c] - max) / sum / scored;
      gradient[at + targets[r]] -= 1 / scored;
    }
  }
  return total / scored;
}
