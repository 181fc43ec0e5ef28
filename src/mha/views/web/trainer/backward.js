// The backward pass of forward.js, written out by hand: the gradient of the masked cross-entropy with respect to
// every parameter, in the layout of model.values (so the optimiser reads one flat array). Each step is the chain
// rule of one forward step, last layer first.

import { attendBackward } from "./attention.js";
import { maskedCrossEntropy, rowsOf } from "./forward.js";

function slot(gradient, offsets, name, size) { return gradient.subarray(offsets[name], offsets[name] + size); }

function sumRows(y, rows, width, out, at) { // each column's sum, in float64, rows in order
  var totals = new Float64Array(width), r, c;
  for (r = 0; r < rows; r++) for (c = 0; c < width; c++) totals[c] += y[r * width + c];
  for (c = 0; c < width; c++) out[at + c] = totals[c];
}

function addInto(into, from) { for (var i = 0; i < into.length; i++) into[i] += from[i]; }

// The loss of `batch` ({inputs, targets, lossMask, batchSize, seqLen}) and its gradient with respect to every
// parameter, written into `gradient` (Float32Array in model.values' layout). `pass` is forward's (logits at every
// row) or runModel's with outputRows = the loss mask's rows (the same gradient: rows outside the mask add zeros).
// options.divisor: as maskedCrossEntropy's (a part of a batch passes the whole batch's scored positions).
// Returns {loss, pass} (pass: the forward pass, whose attention weights a caller may read).
export function lossAndGradient(model, engine, pass, batch, gradient, options) {
  var config = model.config, D = config.d_model, V = config.vocab_size, H = config.n_heads;
  var rows = batch.batchSize * batch.seqLen, seq = batch.seqLen, offsets = {};
  model.layout.forEach(function (entry) { offsets[entry.name] = entry.offset; });
  if (pass.layers.length !== config.n_layers) throw new Error("the pass kept no activations; run forward(...) for one.");
  var outputRows = pass.outputRows, count = outputRows ? outputRows.length : rows;
  var targets = batch.targets, mask = batch.lossMask;
  if (outputRows) { // the logits are those rows' only: the loss mask must be exactly them
    var maskRows = rowsOf(mask);
    if (maskRows.length !== count || maskRows.some(function (r, m) { return r !== outputRows[m]; })) {
      throw new Error("the pass has logits at other rows than the batch's lossMask; run it with outputRows = the mask's rows.");
    }
    targets = Int32Array.from(outputRows, function (r) { return batch.targets[r]; });
    mask = new Uint8Array(count).fill(1);
  }
  var dLogits = new Float32Array(count * V);
  var loss = maskedCrossEntropy(pass.logits, targets, mask, V, dLogits, options ? options.divisor : undefined);
  gradient.fill(0);
  // logits = final @ W_U
  engine.productTransposedLeft(pass.final, count, D, dLogits, V, gradient.subarray(offsets.W_U, offsets.W_U + D * V));
  var dx = engine.product(dLogits, count, V, model.W_U, D, true, null, new Float32Array(count * D));
  var dk = new Float32Array(rows * D), dv = new Float32Array(rows * D), back = new Float32Array(rows * D);
  for (var l = config.n_layers - 1; l >= 0; l--) {
    var layer = model.layers[l], saved = pass.layers[l], prefix = "blocks." + l + ".attention.";
    var queries = saved.queries, n = queries ? queries.length : rows;
    // x_next = x + z @ W_O + b_O: dx flows on unchanged, and into the layer (dx: one row per query)
    engine.productTransposedLeft(saved.z, n, D, dx, D, slot(gradient, offsets, prefix + "W_O", D * D));
    sumRows(dx, n, D, gradient, offsets[prefix + "b_O"]);
    var dz = engine.product(dx, n, D, layer.W_O, D, true, null, new Float32Array(n * D)), dq = new Float32Array(n * D);
    attendBackward(engine, pass.scratch, saved.q, saved.k, saved.v, pass.attention[l], dz, dq, dk, dv, queries,
      batch.batchSize, seq, H, config.d_head);
    engine.productTransposedLeft(saved.xq, n, D, dq, D, slot(gradient, offsets, prefix + "W_Q", D * D));
    sumRows(dq, n, D, gradient, offsets[prefix + "b_Q"]);
    addInto(dx, engine.product(dq, n, D, layer.W_Q, D, true, null, back));
    if (queries) { // back to every row: the other rows reach the loss through the keys and values only
      var spread = new Float32Array(rows * D);
      for (var m = 0; m < n; m++) spread.set(dx.subarray(m * D, m * D + D), queries[m] * D);
      dx = spread;
    }
    [["W_K", "b_K", dk], ["W_V", "b_V", dv]].forEach(function (triple) {
      engine.productTransposedLeft(saved.x, rows, D, triple[2], D, slot(gradient, offsets, prefix + triple[0], D * D));
      sumRows(triple[2], rows, D, gradient, offsets[prefix + triple[1]]);
      addInto(dx, engine.product(triple[2], rows, D, layer[triple[0]], D, true, null, back));
    });
  }
  // x0 = W_E[token] + W_pos[position]
  var gE = offsets.W_E, gPos = offsets.W_pos;
  for (var r = 0; r < rows; r++) {
    var id = batch.inputs[r], t = r % seq;
    for (var c = 0; c < D; c++) { gradient[gE + id * D + c] += dx[r * D + c]; gradient[gPos + t * D + c] += dx[r * D + c]; }
  }
  return { loss: loss, pass: pass };
}
