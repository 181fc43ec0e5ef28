// Causal multi-head attention over a batch, forward and backward, with every product on the engine's kernel
// (matmul.js), one head of one sequence at a time: the head's queries, keys and values are gathered into
// contiguous (rows, d_head) matrices, so each step is one small SIMD product. Only some queries may be asked for
// (the loss looks at the repeat only): every row of every product is computed on its own, so a query's numbers do
// not depend on which other queries are computed.
// Shapes: k, v (batch * seq, d_model), head h's features at columns h * d_head ...; `queries` is an Int32Array of
// rows b * seq + i, ascending (null: every row), and q, z, dz, dq hold one row per query. weights holds, for each
// sequence b and head h, a block (that sequence's queries, seq), row = query, column = key: with every row a query
// that is (batch, heads, seq, seq); with some, sequence b's block of head h starts at (before_b * heads + h * n_b) *
// seq, before_b the queries of the sequences before b, n_b those of b.

// Rows `from`..from + count of `source` (rows, d), columns of head h, into `into` (count, dHead); or back, `scatter`.
function gather(source, from, count, h, d, dHead, into) {
  for (var j = 0; j < count; j++) {
    var at = (from + j) * d + h * dHead;
    for (var c = 0; c < dHead; c++) into[j * dHead + c] = source[at + c];
  }
  return into;
}

function scatter(part, from, count, h, d, dHead, into) {
  for (var j = 0; j < count; j++) {
    var to = (from + j) * d + h * dHead;
    for (var c = 0; c < dHead; c++) into[to + c] = part[j * dHead + c];
  }
}

// [first query, end] of each sequence (Int32Array (batch + 1)) and each query's position: {starts, positions}.
function queriesBySequence(queries, batch, seq) {
  var starts = new Int32Array(batch + 1), count = queries ? queries.length : batch * seq, m;
  var positions = new Int32Array(count);
  for (m = 0; m < count; m++) {
    var r = queries ? queries[m] : m, b = Math.floor(r / seq);
    positions[m] = r - b * seq;
    starts[b + 1] = m + 1;
  }
  for (var b2 = 1; b2 <= batch; b2++) starts[b2] = Math.max(starts[b2], starts[b2 - 1]);
  return { starts: starts, positions: positions };
}

// Scratch space for one head of one sequence, reused across calls of the same shape.
export function attentionScratch(seq, heads, dHead) {
  function matrix() { return new Float32Array(seq * dHead); }
  return { q: matrix(), k: matrix(), v: matrix(), dz: matrix(), part: matrix(),
    square: new Float32Array(seq * seq), other: new Float32Array(seq * seq) };
}

// Forward: weights = softmax(q kᵀ / sqrt(d_head), causal) per head, z = weights @ v (heads side by side).
export function attend(engine, scratch, q, k, v, weights, z, queries, batch, seq, heads, dHead) {
  var d = heads * dHead, root = Math.sqrt(dHead), scores = scratch.square, split = queriesBySequence(queries, batch, seq);
  for (var b = 0; b < batch; b++) {
    var first = split.starts[b], n = split.starts[b + 1] - first;
    if (!n) continue;
    for (var h = 0; h < heads; h++) {
      engine.product(gather(q, first, n, h, d, dHead, scratch.q), n, dHead, gather(k, b * seq, seq, h, d, dHead,
        scratch.k), seq, true, null, scores); // (n, seq): [t, j] = q_h[t] . k_h[j]
      var wBase = (first * heads + h * n) * seq, head = weights.subarray(wBase, wBase + n * seq);
      for (var t = 0; t < n; t++) {
        var i = split.positions[first + t], at = t * seq, max = -Infinity, total = 0, j;
        for (j = 0; j <= i; j++) { scores[at + j] = scores[at + j] / root; if (scores[at + j] > max) max = scores[at + j]; }
        for (j = 0; j <= i; j++) { var e = Math.exp(scores[at + j] - max); scores[at + j] = e; total += e; }
        for (j = 0; j <= i; j++) head[at + j] = scores[at + j] / total;
        for (j = i + 1; j < seq; j++) head[at + j] = 0;
      }
      engine.product(head, n, seq, gather(v, b * seq, seq, h, d, dHead, scratch.v), dHead, false, null, scratch.part);
      scatter(scratch.part, first, n, h, d, dHead, z); // weights @ values, into head h's columns
    }
  }
}

// Backward: from dz (one row per query) to dq (one row per query) and dk, dv (batch * seq, d_model), all written.
// Through the softmax, dscore = weights * (dweights - sum_j weights * dweights), then the 1 / sqrt(d_head) scale.
export function attendBackward(engine, scratch, q, k, v, weights, dz, dq, dk, dv, queries, batch, seq, heads, dHead) {
  var d = heads * dHead, root = Math.sqrt(dHead), dWeights = scratch.square, dScores = scratch.other;
  var split = queriesBySequence(queries, batch, seq);
  for (var b = 0; b < batch; b++) {
    var first = split.starts[b], n = split.starts[b + 1] - first;
    for (var h = 0; h < heads; h++) {
      if (!n) { // no query of this sequence: its keys and values get no gradient
        scatter(scratch.part.fill(0), b * seq, seq, h, d, dHead, dk);
        scatter(scratch.part, b * seq, seq, h, d, dHead, dv);
        continue;
      }
      var wBase = (first * heads + h * n) * seq, head = weights.subarray(wBase, wBase + n * seq);
      gather(dz, first, n, h, d, dHead, scratch.dz);
      engine.product(scratch.dz, n, dHead, gather(v, b * seq, seq, h, d, dHead, scratch.v), seq, true, null, dWeights);
      for (var t = 0; t < n; t++) {
        var i = split.positions[first + t], at = t * seq, along = 0, j;
        for (j = 0; j <= i; j++) along += head[at + j] * dWeights[at + j];
        for (j = 0; j <= i; j++) dScores[at + j] = head[at + j] * (dWeights[at + j] - along) / root;
        for (j = i + 1; j < seq; j++) dScores[at + j] = 0;
      }
      // dq = dscores @ k; dk = dscoresᵀ @ q; dv = weightsᵀ @ dz
      engine.product(dScores, n, seq, gather(k, b * seq, seq, h, d, dHead, scratch.k), dHead, false, null, scratch.part);
      scatter(scratch.part, first, n, h, d, dHead, dq);
      engine.productTransposedLeft(dScores, n, seq, gather(q, first, n, h, d, dHead, scratch.q), dHead, scratch.part);
      scatter(scratch.part, b * seq, seq, h, d, dHead, dk);
      engine.productTransposedLeft(head, n, seq, scratch.dz, dHead, scratch.part);
      scatter(scratch.part, b * seq, seq, h, d, dHead, dv);
    }
  }
}
