/* A head's scores on one sentence, computed in the page as the package computes them, and their table against
   the treebank's spread: word units (mha.pretrained.word_maps), word-level maps, and the four scores of
   mha.analysis.head_roles.role_table.sentence_head_scores. */

import { make } from "./dom.js";

export function headLabel(layer, head) {
  return `L${layer}H${head}`;
}

/* Word-level units of a tokenised sentence, as mha.pretrained.word_maps does with [CLS] and [SEP] kept: a piece
   starting with ## continues the word before it. Returns {ids: word id per token (-1 for [CLS] and [SEP]),
   units: token positions per unit, labels: one per unit}. */
export function wordsOf(tokens) {
  const ids = [];
  const units = [];
  const labels = [];
  let word = -1;
  tokens.forEach((token, position) => {
    const special = position === 0 || position === tokens.length - 1;
    if (special) {
      ids.push(-1);
      units.push([position]);
      labels.push(token);
    } else if (token.startsWith("##") && word >= 0) {
      ids.push(word);
      units[units.length - 1].push(position);
      labels[labels.length - 1] += token.slice(2);
    } else {
      word += 1;
      ids.push(word);
      units.push([position]);
      labels.push(token);
    }
  });
  return { ids, units, labels };
}

/* One head's map (n, n) merged into word units: the weight a unit receives is the sum over its tokens' columns,
   the weight it sends the mean over its tokens' rows (mha.pretrained.word_maps.word_attention). */
export function wordWeights(weights, n, units) {
  const m = units.length;
  const merged = new Float64Array(m * m);
  units.forEach((rows, u) => {
    units.forEach((columns, v) => {
      let total = 0;
      for (const row of rows) for (const column of columns) total += weights[row * n + column];
      merged[u * m + v] = total / rows.length;
    });
  });
  return merged;
}

/* Four scores of one head on one sentence (mha.analysis.head_roles.role_table.sentence_head_scores): weights (n, n)
   with [CLS] first and [SEP] last, wordIds from wordsOf. The shares of the token before and of the token itself are
   over the content rows (every row but [CLS] and [SEP]); the share of [CLS] over every row. */
export function sentenceScores(weights, n, wordIds) {
  const content = [];
  for (let position = 1; position < n - 1; position += 1) content.push(position);
  const mean = (values) => values.reduce((total, value) => total + value, 0) / values.length;
  let link = 0;
  for (const query of content) {
    for (const key of content) {
      if (wordIds[query] !== wordIds[key]) link = Math.max(link, weights[query * n + key]);
    }
  }
  const rows = Array.from({ length: n }, (_, row) => row);
  return {
    content_prev_token_share: mean(content.map((row) => weights[row * n + row - 1])),
    cls_share: mean(rows.map((row) => weights[row * n])),
    content_same_token_share: mean(content.map((row) => weights[row * n + row])),
    strongest_link: link,
  };
}

const SCORE_NAMES = { content_prev_token_share: "on the previous token", cls_share: "on [CLS]",
  content_same_token_share: "on the token itself", strongest_link: "strongest link between two words" };

/* Where value falls among the treebank's sentences: the share below it, read off the stored quantiles. */
export function shareBelow(value, levels, quantiles) {
  if (value <= quantiles[0]) return 0;
  if (value >= quantiles[quantiles.length - 1]) return 1;
  let index = 0;
  while (quantiles[index + 1] < value) index += 1;
  const width = quantiles[index + 1] - quantiles[index];
  return levels[index] + (width > 0 ? (value - quantiles[index]) / width : 0) * (levels[index + 1] - levels[index]);
}

/* Where value stands among the treebank's sentences, at the two decimals the table shows, as the table's last
   column says it: the share that score lower; and, where two or more of the stored quantiles round to the same
   two decimals as value (many sentences score exactly that), the share that score the same, "tied". */
export function standingText(value, levels, quantiles) {
  const shown = Math.round(100 * value);
  const percent = (share) => `${Math.round(100 * share)}%`;
  if (quantiles.filter((quantile) => Math.round(100 * quantile) === shown).length < 2) {
    return percent(shareBelow(value, levels, quantiles));
  }
  const lower = shareBelow((shown - 0.5) / 100, levels, quantiles);
  const tied = shareBelow((shown + 0.5) / 100, levels, quantiles) - lower;
  if (Math.round(100 * lower) === 0 && Math.round(100 * tied) === 100) return "all tied";
  return `${percent(lower)} lower, ${percent(tied)} tied`;
}

/* The table of a head's four scores on this sentence, each beside the treebank's median, 5-95% range and the
   share of its sentences below it. */
export function scoreTable(spread, scores, layer, head, where) {
  const levels = spread.quantiles;
  const at = (level) => levels.findIndex((value) => Math.abs(value - level) < 1e-9);
  const header = make("tr", {}, ...["weight", "this sentence", "treebank median", "treebank 5–95%", "sentences lower"]
    .map((text) => make("th", { scope: "col" }, text)));
  const lines = Object.keys(SCORE_NAMES).map((name) => {
    const quantiles = spread.scores[name][layer][head];
    const value = scores[name];
    return make("tr", {}, make("th", { scope: "row" }, SCORE_NAMES[name]), make("td", {}, value.toFixed(2)),
      make("td", {}, quantiles[at(0.5)].toFixed(2)),
      make("td", {}, `${quantiles[at(0.05)].toFixed(2)}–${quantiles[at(0.95)].toFixed(2)}`),
      make("td", {}, standingText(value, levels, quantiles)));
  });
  const table = make("table", { class: "mha-scores" },
    make("caption", {}, `${headLabel(layer, head)} on this sentence (${where}), against ${spread.source}; the last ` +
      "column is the share of those sentences that score lower, and of those that score the same to two decimals " +
      "(tied), where many do."),
    make("thead", {}, header), make("tbody", {}, ...lines));
  return make("div", { class: "mha-scores-box", tabindex: "0", role: "region",
    "aria-label": `scores of ${headLabel(layer, head)} on this sentence` }, table);
}
