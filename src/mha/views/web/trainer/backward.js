// The backward pass of forward.js, written out by hand: the gradient of the masked cross-entropy with respect to
// every parameter, in the layout of model.values (so the optimiser reads one flat array). Each step is the chain
// rule of one forward step, last layer first.

import { attendBackward } from "./attention.js";
import { maskedCrossEntropy } from "./forward.js";

function slot(gradient, offsets, name, size) { return gradient.subarray(offsets[name], offsets[name] + size); }

function sumRows(y, rows, width, out, at) {
  for (var c = 0; c < width; c++) {
    var total = 0;
    for (var r = 0; r < rows; r++) total += y[r * width + c];
    out[at + c] = total;
  }
}

// The loss of `batch` ({inputs, targets, lossMask, batchSize, seqLen}) and its gradient with respect to every
// parameter, written into `gradient` (Float32Array in model.values' layout). Returns {loss, pass} (pass: the
// forward pass, whose attention weights a caller may read).
export function lossAndGradient(model, engine, pass, batch, gradient) {
  var config = model.config, D = config.d_model, V = config.vocab_size, H = config.n_heads;
  var rows = batch.batchSize * batch.seqLen, seq = batch.seqLen, offsets = {};
  model.layout.forEach(function (entry) { offsets[entry.name] = entry.offset; });
  var dLogits = new Float32Array(rows * V);
  var loss = maskedCrossEntropy(pass.logits, batch.targets, batch.lossMask, V, dLogits);
  gradient.fill(0);
  // logits = final @ W_U
  engine.productTransposedLeft(pass.final, rows, D, dLogits, V, gradient.subarray(offsets.W_U, offsets.W_U + D * V));
  var dx = engine.product(dLogits, rows, V, model.W_U, D, true, null, new Float32Array(rows * D));
  var dq = new Float32Array(rows * D), dk = new Float32Array(rows * D), dv = new Float32Array(rows * D);
  var dz = new Float32Array(rows * D), back = new Float32Array(rows * D);
  for (var l = config.n_layers - 1; l >= 0; l--) {
    var layer = model.layers[l], saved = pass.layers[l], prefix = "blocks." + l + ".attention.";
    // x_next = x + z @ W_O + b_O: dx flows on unchanged, and into the layer
    engine.productTransposedLeft(saved.z, rows, D, dx, D, slot(gradient, offsets, prefix + "W_O", D * D));
    sumRows(dx, rows, D, gradient, offsets[prefix + "b_O"]);
    engine.product(dx, rows, D, layer.W_O, D, true, null, dz);
    attendBackward(engine, pass.scratch, saved.q, saved.k, saved.v, pass.attention[l], dz, dq, dk, dv, batch.batchSize, seq, H,
      config.d_head);
    [["W_Q", "b_Q", dq], ["W_K", "b_K", dk], ["W_V", "b_V", dv]].forEach(function (triple) {
      engine.productTransposedLeft(saved.x, rows, D, triple[2], D, slot(gradient, offsets, prefix + triple[0], D * D));
      sumRows(triple[2], rows, D, gradient, offsets[prefix + triple[1]]);
      engine.product(triple[2], rows, D, layer[triple[0]], D, true, null, back);
      for (var i = 0; i < dx.length; i++) dx[i] += back[i];
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
