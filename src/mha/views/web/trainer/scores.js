// What each head does, scored as mha.lab.circuit_scores.head_role_scores scores it (chapter 3, "Induction heads"):
// previous_token, the mean weight from position i to i - 1 (over the batch and queries i >= 1), and
// prefix_matching, the weight on the keys that follow an earlier copy of the query's token, summed per query and
// averaged over the queries that have one and lie in the query mask (the repeat).

// {previous_token, prefix_matching}: arrays (layers) of arrays (heads), from `attention` ([layers] of Float32Array
// (batch, heads, seq, seq)), `tokens` Int32Array (batch, seq) and `queryMask` Uint8Array (batch, seq).
export function headScores(attention, tokens, queryMask, batch, seq, heads) {
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
  var previous = [], prefix = [];
  attention.forEach(function (weights) {
    var layerPrevious = [], layerPrefix = [];
    for (var h = 0; h < heads; h++) {
      var onPrevious = 0, onFollowers = 0;
      for (b = 0; b < batch; b++) {
        var base = (b * heads + h) * seq * seq;
        for (i = 1; i < seq; i++) onPrevious += weights[base + i * seq + i - 1];
        for (i = 0; i < seq; i++) {
          if (!scored[b * seq + i]) continue;
          for (j = 1; j <= i; j++) if (follows[(b * seq + i) * seq + j]) onFollowers += weights[base + i * seq + j];
        }
      }
      layerPrevious.push(onPrevious / (batch * (seq - 1)));
      layerPrefix.push(onFollowers / counted);
    }
    previous.push(layerPrevious);
    prefix.push(layerPrefix);
  });
  return { previous_token: previous, prefix_matching: prefix };
}
