// Causal multi-head attention over a batch, forward and backward, with every product on the engine's kernel
// (matmul.js), one head of one sequence at a time: the head's queries, keys and values are gathered into
// contiguous (seq, d_head) matrices, so each step is one small SIMD product. Shapes: q, k, v, z (batch * seq,
// d_model), head h's features at columns h * d_head ...; weights (batch, heads, seq, seq), row = query.

// Head h of sequence b of `source` (batch * seq, d_model) into `into` (seq, d_head), or back with `scatter`.
function gather(source, b, h, seq, d, dHead, into) {
  for (var j = 0; j < seq; j++) {
    var from = (b * seq + j) * d + h * dHead;
    for (var c = 0; c < dHead; c++) into[j * dHead + c] = source[from + c];
  }
  return into;
}

function scatter(part, b, h, seq, d, dHead, into) {
  for (var j = 0; j < seq; j++) {
    var to = (b * seq + j) * d + h * dHead;
    for (var c = 0; c < dHead; c++) into[to + c] = part[j * dHead + c];
  }
}

function transpose(square, seq, into) {
  for (var i = 0; i < seq; i++) for (var j = 0; j < seq; j++) into[j * seq + i] = square[i * seq + j];
  return into;
}

// Scratch space for one head of one sequence, reused across calls of the same shape.
export function attentionScratch(seq, heads, dHead) {
  function matrix() { return new Float32Array(seq * dHead); }
  return { q: matrix(), k: matrix(), v: matrix(), dz: matrix(), part: matrix(),
    square: new Float32Array(seq * seq), other: new Float32Array(seq * seq) };
}

// Forward: weights = softmax(q kᵀ / sqrt(d_head), causal) per head, z = weights @ v (heads side by side).
export function attend(engine, scratch, q, k, v, weights, z, batch, seq, heads, dHead) {
  var d = heads * dHead, root = Math.sqrt(dHead), scores = scratch.square;
  for (var b = 0; b < batch; b++) {
    for (var h = 0; h < heads; h++) {
      engine.product(gather(q, b, h, seq, d, dHead, scratch.q), seq, dHead, gather(k, b, h, seq, d, dHead, scratch.k),
        seq, true, null, scores); // (seq, seq): [i, j] = q_h[i] . k_h[j]
      var wBase = (b * heads + h) * seq * seq, head = weights.subarray(wBase, wBase + seq * seq);
      for (var i = 0; i < seq; i++) {
        var at = i * seq, max = -Infinity, total = 0, j;
        for (j = 0; j <= i; j++) { scores[at + j] = scores[at + j] / root; if (scores[at + j] > max) max = scores[at + j]; }
        for (j = 0; j <= i; j++) { var e = Math.exp(scores[at + j] - max); scores[at + j] = e; total += e; }
        for (j = 0; j <= i; j++) head[at + j] = scores[at + j] / total;
        for (j = i + 1; j < seq; j++) head[at + j] = 0;
      }
      engine.product(head, seq, seq, gather(v, b, h, seq, d, dHead, scratch.v), dHead, false, null, scratch.part);
      scatter(scratch.part, b, h, seq, d, dHead, z); // weights @ values, into head h's columns
    }
  }
}

// Backward: from dz (batch * seq, d_model) to dq, dk, dv (written). Through the softmax,
// dscore = weights * (dweights - sum_j weights * dweights), then the 1 / sqrt(d_head) scale.
export function attendBackward(engine, scratch, q, k, v, weights, dz, dq, dk, dv, batch, seq, heads, dHead) {
  var d = heads * dHead, root = Math.sqrt(dHead), dWeights = scratch.square, dScores = scratch.other;
  for (var b = 0; b < batch; b++) {
    for (var h = 0; h < heads; h++) {
      var wBase = (b * heads + h) * seq * seq, head = weights.subarray(wBase, wBase + seq * seq);
      gather(dz, b, h, seq, d, dHead, scratch.dz);
      engine.product(scratch.dz, seq, dHead, gather(v, b, h, seq, d, dHead, scratch.v), seq, true, null, dWeights);
      for (var i = 0; i < seq; i++) {
        var at = i * seq, along = 0, j;
        for (j = 0; j <= i; j++) along += head[at + j] * dWeights[at + j];
        for (j = 0; j <= i; j++) dScores[at + j] = head[at + j] * (dWeights[at + j] - along) / root;
        for (j = i + 1; j < seq; j++) dScores[at + j] = 0;
      }
      // dq = dscores @ k; dk = dscoresᵀ @ q; dv = weightsᵀ @ dz
      engine.product(dScores, seq, seq, gather(k, b, h, seq, d, dHead, scratch.k), dHead, false, null, scratch.part);
      scatter(scratch.part, b, h, seq, d, dHead, dq);
      engine.product(transpose(dScores, seq, dWeights), seq, seq, gather(q, b, h, seq, d, dHead, scratch.q), dHead,
        false, null, scratch.part);
      scatter(scratch.part, b, h, seq, d, dHead, dk);
      engine.product(transpose(head, seq, dWeights), seq, seq, scratch.dz, dHead, false, null, scratch.part);
      scatter(scratch.part, b, h, seq, d, dHead, dv);
    }
  }
}
