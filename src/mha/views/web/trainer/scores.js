// What each head does, scored as mha.lab.circuit_scores.head_role_scores scores it (chapter 3, "Induction heads"):
// previous_token, the mean weight from position i to i - 1 (over the batch and queries i >= 1), and
// prefix_matching, the weight on the keys that follow an earlier copy of the query's token, summed per query and
// averaged over the queries that have one and lie in the query mask (the repeat).
// Shapes: `attention` [layers] of Float32Array (batch, heads, seq, seq); `tokens` Int32Array (batch, seq);
// `queryMask` Uint8Array (batch, seq) or null (every query). Scores are arrays (layers) of arrays (heads).

// previous_token of every head: defined for any sequence of two tokens or more.
export function previousTokenScores(attention, batch, seq, heads) {
  return attention.map(function (weights) {
    var layer = [];
    for (var h = 0; h < heads; h++) {
      var onPrevious = 0;
      for (var b = 0; b < batch; b++) {
        var base = (b * heads + h) * seq * seq;
        for (var i = 1; i < seq; i++) onPrevious += weights[base + i * seq + i - 1];
      }
      layer.push(onPrevious / (batch * (seq - 1)));
    }
    return layer;
  });
}

// prefix_matching of every head; throws, as the package does, where no query in the mask has an earlier copy of its
// token (a sequence with no repeat), since the score is then undefined.
export function prefixMatchingScores(attention, tokens, queryMask, batch, seq, heads) {
  var follows = new Uint8Array(batch * seq * seq), scored = new Uint8Array(batch * seq), counted = 0, b, i, j;
  for (b = 0; b < batch; b++) {
    for (i = 0; i < seq; i++) {
      var any = 0;
      for (j = 1; j <= i; j++) { // key j follows an earlier copy (j - 1 < i) of the query's token
        if (tokens[b * seq + j - 1] === tokens[b * seq + i]) { follows[(b * seq + i) * seq + j] = 1; any = 1; }
      }
      scored[b * seq + i] = any && (!queryMask || queryMask[b * seq + i]) ? 1 : 0;
      counted += scored[b * seq + i];
    }
  }
  if (!counted) throw new Error("no query has an earlier copy of its token in the mask, so prefix matching is undefined.");
  return attention.map(function (weights) {
    var layer = [];
    for (var h = 0; h < heads; h++) {
      var onFollowers = 0;
      for (b = 0; b < batch; b++) {
        var base = (b * heads + h) * seq * seq;
        for (i = 0; i < seq; i++) {
          if (!scored[b * seq + i]) continue;
          for (j = 1; j <= i; j++) if (follows[(b * seq + i) * seq + j]) onFollowers += weights[base + i * seq + j];
        }
      }
      layer.push(onFollowers / counted);
    }
    return layer;
  });
}

// {previous_token, prefix_matching}, both as above (so it throws where prefix matching is undefined).
export function headScores(attention, tokens, queryMask, batch, seq, heads) {
  var prefix = prefixMatchingScores(attention, tokens, queryMask, batch, seq, heads);
  return { previous_token: previousTokenScores(attention, batch, seq, heads), prefix_matching: prefix };
}
