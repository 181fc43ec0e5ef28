/* Behind one weight of a typed sentence's map: for the cell in focus (query i, key j of the head on show), the
   query and key vectors (d_head entries), their products, the scaled score q·k / √d_head, the softmax row the
   weight sits in, and the score's four parts in chapter 2's terms (the QK circuit and its biases,
   mha.core.geometry.score_terms). The page's model computes them (model.scoreParts, from the hidden states its run
   returned); the panel follows the focus cell, by pointer or keyboard. */

import { make } from "./dom.js";
import { entryAt, isWords, windowOf } from "./map_window.js";

/* The four parts of a head's scaled score, with the chapter's names and formulas. */
const PARTS = [
  ["bilinear", "x_i W_Q W_Kᵀ x_jᵀ / √d_head", "the QK circuit: what the query token and the key token make together"],
  ["query_only", "x_i W_Q b_Kᵀ / √d_head", "the same for every key of the row, so the softmax removes it"],
  ["key_only", "b_Q W_Kᵀ x_jᵀ / √d_head", "a bias for this key, shared by every query"],
  ["constant", "b_Q b_Kᵀ / √d_head", "the same for every cell"],
];

const number = (value, digits = 4) => (value < 0 ? "−" : "") + Math.abs(value).toFixed(digits);

function table(caption, header, rows) {
  return make("table", { class: "mha-weight-parts" }, make("caption", {}, caption),
    make("thead", {}, make("tr", {}, ...header.map((text) => make("th", { scope: "col" }, text)))),
    make("tbody", {}, ...rows.map((cells) => make("tr", {}, ...cells.map((text, index) => index === 0
      ? make("th", { scope: "row" }, text) : make("td", {}, text))))));
}

/* The panel's content for the cell (query, key) of head (layer, head) of a run. */
function partsPanel(typed, entry, layer, head, query, key) {
  const found = typed.model.scoreParts(entry.result, layer, head, query, key);
  const tokens = entry.tokens;
  const dHead = found.query.length;
  const sum = Object.values(found.parts).reduce((total, value) => total + value, 0);
  const summary = make("p", {}, make("b", {}, `Behind the weight of “${tokens[query]}” (query ${query}) on ` +
    `“${tokens[key]}” (key ${key}), L${layer}H${head}: `), `weight ${found.weights[key].toFixed(6)}, the softmax ` +
    `of the scaled score q·k / √${dHead} = ${number(found.score)} over the row's ${tokens.length} scores` +
    (entry.removed.length ? ` (in this run with ${entry.removed.length} head(s) switched off)` : "") + ".");
  const parts = table("The score in chapter 2's terms: the QK circuit and the biases' parts",
    ["part", "formula", "value", "what it is"],
    [...PARTS.map(([name, formula, meaning]) => [name, formula, number(found.parts[name]), meaning]),
      ["sum", "(x_i W_Q + b_Q)(x_j W_K + b_K)ᵀ / √d_head", number(sum), "the scaled score"]]);
  const vectors = table(`q (query ${query}) and k (key ${key}), dimension by dimension; q·k = ` +
    `${number(found.products.reduce((total, value) => total + value, 0))}`, ["dimension", "q", "k", "q × k"],
  Array.from(found.query, (value, t) => [String(t), number(value), number(found.key[t]), number(found.products[t])]));
  const row = table(`The softmax row of query ${query}: every key's scaled score and weight`,
    ["key", "token", "score", "weight"],
    Array.from(found.scores, (score, j) => [String(j), tokens[j], number(score), found.weights[j].toFixed(6)]));
  row.rows[key + 1].classList.add("mha-lit");
  return [make("h4", {}, "Behind this weight"), summary, parts,
    make("details", {}, make("summary", {}, `the query and key vectors (${dHead} entries each)`), vectors),
    make("details", {}, make("summary", {}, "the softmax row"), row)];
}

/* What the panel says when it cannot look behind the cell in focus, or null when it can. */
function notShown(typed, entry, state) {
  if (!entry) return "";
  if (typed.view.mode === "grid") return "";
  if (!entry.result || !typed.model) return "";
  if (isWords(typed, state)) return "Turn the word level off to look behind one token's weight.";
  const figure = typed.view.figures[0];
  if (!figure || !figure.focus) return "Point at a cell of the map (or move to one with the arrow keys) to see " +
    "the query and key behind its weight.";
  return null;
}

/* Show (or empty) the panel for the run and cell on show. */
export function showWeightParts(typed) {
  const view = typed.view;
  if (!view.panelParts.weight) {
    view.panelParts.weight = make("div", { class: "mha-panel mha-panel-weight", "aria-live": "polite" });
    view.panels.append(view.panelParts.weight);
    /* the readout changes with every focus move, by pointer or keyboard: the panel follows it */
    new MutationObserver(() => showWeightParts(typed)).observe(view.readout,
      { childList: true, characterData: true, subtree: true });
  }
  const panel = view.panelParts.weight;
  const state = view.state;
  const entry = entryAt(typed, state.sentence);
  const why = notShown(typed, entry, state);
  if (why !== null) {
    delete panel.dataset.cell;
    panel.replaceChildren(...(why ? [make("p", {}, why)] : []));
    return;
  }
  const [row, column] = view.figures[0].focus;
  const shown = windowOf(typed, entry.tokens.length);
  const [query, key] = shown ? [shown.row + row, shown.column + column] : [row, column];
  const cell = `${state.sentence}|${state.layer}|${state.head}|${query}|${key}`;
  if (panel.dataset.cell === cell && panel.childElementCount) return;
  panel.dataset.cell = cell;
  panel.replaceChildren(...partsPanel(typed, entry, state.layer, state.head, query, key));
}
