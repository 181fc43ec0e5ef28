// A batch in parts (chapter 3, "Induction heads"): the page's trainer splits each training batch into a fixed
// number of parts of whole sequences and adds their gradients in order, and scores a held-out batch piece by piece.
// The parts may run in this thread or on Web Workers (workers.js), one part per worker: each part's numbers come from
// the same functions on the same inputs either way, so a run's numbers do not depend on where its parts ran, or on
// how many workers there were.

import { lossAndGradient } from "./backward.js";
import { rowsOf, runModel } from "./forward.js";

// Sequences from..to of `batch` ({batchSize, seqLen, inputs, and any of targets, lossMask, repeatMask}), as views.
export function batchPart(batch, from, to) {
  var T = batch.seqLen, part = { batchSize: to - from, seqLen: T };
  ["inputs", "targets", "lossMask", "repeatMask"].forEach(function (name) {
    if (batch[name]) part[name] = batch[name].subarray(from * T, to * T);
  });
  return part;
}

// `batch` in `count` parts of whole sequences, as even as can be (the first parts the smaller), with the whole
// batch's scored positions: {parts, divisor}.
export function splitBatch(batch, count) {
  if (!Number.isInteger(count) || count < 1 || count > batch.batchSize) {
    throw new Error("a batch of " + batch.batchSize + " sequences splits into 1 to " + batch.batchSize +
      " parts, not " + count + ".");
  }
  var parts = [], divisor = rowsOf(batch.lossMask).length;
  for (var p = 0; p < count; p++) {
    parts.push(batchPart(batch, Math.floor(p * batch.batchSize / count), Math.floor((p + 1) * batch.batchSize / count)));
  }
  return { parts: parts, divisor: divisor };
}

// The loss of one part and its gradient with respect to every parameter (Float32Array in model.values' layout),
// both divided by `divisor`, the whole batch's scored positions: {loss, gradient}.
export function partGradient(model, engine, part, divisor) {
  var pass = runModel(model, engine, part.inputs, part.batchSize, part.seqLen, { outputRows: rowsOf(part.lossMask) });
  var gradient = new Float32Array(model.values.length);
  return { loss: lossAndGradient(model, engine, pass, part, gradient, { divisor: divisor }).loss, gradient: gradient };
}

// The batch's loss and gradient from its parts' ({loss, gradient} each, in the parts' order), added in that order:
// the gradient is written into `gradient`; returns the loss.
export function addParts(results, gradient) {
  var loss = 0;
  gradient.set(results[0].gradient);
  for (var p = 0; p < results.length; p++) {
    var from = results[p].gradient;
    if (p) for (var i = 0; i < gradient.length; i++) gradient[i] += from[i];
    loss += results[p].loss;
  }
  return loss;
}

// The scoring pass of one piece of a held-out batch: every layer's attention at every row, (piece, heads, seq, seq)
// each, and the logits at the rows of its repeat mask: {attention: [layers], logits (rows, vocab), outputRows}.
export function forwardPiece(model, engine, piece) {
  var outputRows = rowsOf(piece.repeatMask);
  var pass = runModel(model, engine, piece.inputs, piece.batchSize, piece.seqLen,
    { outputRows: outputRows, fullAttention: true });
  return { attention: pass.attention, logits: pass.logits, outputRows: outputRows };
}
