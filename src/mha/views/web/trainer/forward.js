// The forward pass of the tiny transformer (model.js), keeping what the backward pass needs. Shapes: tokens
// (batch, seq) row-major; residual, q, k, v, z (batch * seq, d_model); attention weights (batch, heads, seq, seq)
// per layer, row = query (attends from), column = key (attended to), causal (a key after its query gets weight 0);
// logits (batch * seq, vocab). Chapter 1's steps, per layer: q, k, v = x @ W + b; scores q kᵀ / sqrt(d_head),
// masked, softmax over the keys; z = weights @ v, heads side by side; x += z @ W_O + b_O. Training asks for the
// logits where the loss looks only (runModel's outputRows): the last layer then needs its keys and values at every
// row, but its queries, output projection and unembedding at those rows alone. Every row of every product is
// computed on its own, so those rows' numbers are the full pass's.

import { attend, attentionScratch } from "./attention.js";

// The rows of x (rows, width) listed in `at` (Int32Array), stacked: (at.length, width).
export function pickRows(x, at, width) {
  var out = new Float32Array(at.length * width);
  for (var m = 0; m < at.length; m++) out.set(x.subarray(at[m] * width, at[m] * width + width), m * width);
  return out;
}

// The rows r (ascending) where mask[r] is 1.
export function rowsOf(mask) {
  var count = 0, r;
  for (r = 0; r < mask.length; r++) if (mask[r]) count++;
  var rows = new Int32Array(count);
  for (r = 0, count = 0; r < mask.length; r++) if (mask[r]) rows[count++] = r;
  return rows;
}

// The pass for `tokens` (Int32Array (batch, seq)). options.outputRows (Int32Array of rows, or null: every row): the
// rows whose logits are wanted; the last layer's queries, output projection and unembedding run at those rows only
// (keys and values still at every row), unless options.fullAttention keeps the last layer's attention at every row.
// options.keep false keeps no activations. Returns {logits (outputRows, vocab), attention: [layers], layers:
// [{x, xq, q, k, v, z, queries}] (x (batch * seq, d_model); xq, q, z one row per query, queries as for attend),
// final (outputRows, d_model), outputRows}.
export function runModel(model, engine, tokens, batch, seq, options) {
  var config = model.config, D = config.d_model, V = config.vocab_size, H = config.n_heads, rows = batch * seq;
  // a pass with the last layer's attention at every row but its outputs at some is for scoring: nothing is kept
  var outputRows = options.outputRows || null, keep = options.keep !== false && !options.fullAttention;
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
  var layers = [], attention = [], last = config.n_layers - 1, scratch = attentionScratch(seq, H, config.d_head);
  model.layers.forEach(function (layer, l) {
    var queries = l === last && !options.fullAttention ? outputRows : null;
    var xq = queries ? pickRows(x, queries, D) : x, count = queries ? queries.length : rows;
    var q = engine.product(xq, count, D, layer.W_Q, D, false, layer.b_Q, new Float32Array(count * D));
    var k = engine.product(x, rows, D, layer.W_K, D, false, layer.b_K, new Float32Array(rows * D));
    var v = engine.product(x, rows, D, layer.W_V, D, false, layer.b_V, new Float32Array(rows * D));
    var weights = new Float32Array((queries ? count : batch * seq) * H * seq), z = new Float32Array(count * D);
    attend(engine, scratch, q, k, v, weights, z, queries, batch, seq, H, config.d_head);
    if (l === last && outputRows && !queries) { // every query was attended; carry on at the output rows only
      xq = pickRows(x, outputRows, D); z = pickRows(z, outputRows, D); count = outputRows.length;
    }
    var next = engine.product(z, count, D, layer.W_O, D, false, layer.b_O, new Float32Array(count * D));
    for (var i = 0; i < next.length; i++) next[i] = xq[i] + next[i];
    if (keep) layers.push({ x: x, xq: xq, q: q, k: k, v: v, z: z, queries: queries });
    attention.push(weights);
    x = next;
  });
  var count = outputRows ? outputRows.length : rows;
  var logits = engine.product(x, count, D, model.W_U, V, false, null, new Float32Array(count * V));
  return { logits: logits, attention: attention, layers: layers, final: x, outputRows: outputRows, batch: batch,
    seq: seq, scratch: scratch };
}

// Logits (batch * seq, vocab) and every layer's attention weights (batch, heads, seq, seq) for `tokens`
// (Int32Array (batch, seq)), with the activations the backward pass reads (see runModel).
export function forward(model, engine, tokens, batch, seq) {
  return runModel(model, engine, tokens, batch, seq, {});
}

// Mean cross-entropy (nats) over the positions where `mask` (Uint8Array (batch * seq)) is 1, and, when `gradient`
// is given (Float32Array (batch * seq, vocab)), its gradient with respect to the logits written there. `divisor`
// (default: the positions scored here) is the count the sum is divided by: a part of a batch passes the whole
// batch's, so the parts' losses and gradients add up to the batch's mean.
export function maskedCrossEntropy(logits, targets, mask, vocab, gradient, divisor) {
  var rows = mask.length, scored = 0, total = 0, r, c;
  for (r = 0; r < rows; r++) if (mask[r]) scored++;
  if (divisor === undefined) {
    if (!scored) throw new Error("the loss mask scores no position; score at least one.");
  } else if (!(Number.isInteger(divisor) && divisor >= scored && divisor > 0)) {
    throw new Error("divisor must be a whole number >= the " + scored + " positions scored here, got " + divisor + ".");
  }
  if (divisor !== undefined) scored = divisor;
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
