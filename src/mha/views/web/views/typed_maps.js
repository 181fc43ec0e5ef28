/* What a chapter-3 view shows of a sentence run in the page (typing.js keeps the runs): its map, token by token or
   word by word, shaped as a stored view is; its message; and the head's scores on it. `typed` is the typing part's
   state: {view, byName, stored, nLayers, nHeads, entries, spread, ui, maxTokens, window}.

   A map of more than typed.maxTokens units (a run may have up to the model's 512 tokens) is drawn a window of
   maxTokens × maxTokens cells at a time, each cell the exact weight of its query and key; two sliders under the map
   move the window over the queries and the keys (map_window.js). */

import { escapeHtml, make } from "./dom.js";
import { examplesBlock } from "./head_examples.js";
import { drawnWindow, entryAt, isWords, showWindowControls } from "./map_window.js";
import { headLabel, scoreTable, sentenceScores, wordWeights, wordsOf } from "./scores.js";
import { showWeightParts } from "./weight_parts.js";

/* One head's map of a run, token by token: (n, n) out of the run's (layers, heads, n, n). */
function headWeights(typed, entry, state) {
  const n = entry.tokens.length;
  const offset = (state.layer * typed.nHeads + state.head) * n * n;
  return entry.attention.subarray(offset, offset + n * n);
}

/* The strongest link between two different units, [CLS] and [SEP] left out: [query, key], or null. */
function strongestPair(weights, m) {
  let strongest = null;
  for (let query = 1; query < m - 1; query += 1) {
    for (let key = 1; key < m - 1; key += 1) {
      if (query !== key && (!strongest || weights[query * m + key] > weights[strongest[0] * m + strongest[1]])) {
        strongest = [query, key];
      }
    }
  }
  return strongest;
}

/* The message of a run's map (HTML, its labels escaped). */
function runMessage(state, labels, weights, unit) {
  const m = labels.length;
  const strongest = strongestPair(weights, m);
  const mean = (column) => labels.reduce((total, _, row) => total + weights[row * m + column], 0) / m;
  const percent = (value) => `${Math.round(100 * value)}%`;
  return `${headLabel(state.layer, state.head)}: ${m} ${unit}; attention to [CLS] ${percent(mean(0))}, to ` +
    `[SEP] ${percent(mean(m - 1))} (mean over rows). ` + (strongest
    ? `Strongest link between two different ${unit}: <code>${escapeHtml(labels[strongest[0]])}</code> → ` +
      `<code>${escapeHtml(labels[strongest[1]])}</code>.`
    : `There is only one ${unit.slice(0, -1)} between [CLS] and [SEP], so no link between two different ` +
      `${unit}; type a longer sentence to see one.`);
}

/* When the run on show, or the one it is compared with, has heads switched off: how far the sentence vector moved,
   and from which layer on the maps can change. Empty otherwise. */
function switchedNote(typed, entry) {
  const view = typed.view;
  const compared = view.compareWith === null ? null : entryAt(typed, view.compareWith);
  const switched = entry.removed.length ? entry
    : compared && compared.text === entry.text && compared.removed.length ? compared : null;
  if (!switched) return "";
  const whole = typed.entries.find((other) => other.text === entry.text && !other.removed.length);
  if (!whole || !whole.vector) return "";
  let dot = 0;
  for (let index = 0; index < whole.vector.length; index += 1) dot += whole.vector[index] * switched.vector[index];
  const [layer] = switched.removed[0];
  return ` With ${switched.removed.map(([l, h]) => headLabel(l, h)).join(", ")} switched off, the sentence ` +
    `vector moves by 1 − cos = ${(1 - dot).toFixed(4)}; every head of layers 0 to ${layer} attends as before` +
    (layer + 1 < typed.nLayers ? `, from layer ${layer + 1} on the maps can change.` : ".");
}

/* While a long run is still being computed: which of its layers are done. */
function computingNote(typed, entry) {
  const done = entry.layersDone;
  if (entry.failure) {  /* the run stopped part way: say so, rather than "still computing" for ever */
    return `The model stopped after layers 0 to ${done - 1} of ${typed.nLayers} on ${entry.tokens.length} tokens ` +
      `(${escapeHtml(String(entry.failure).replace(/\.$/, ""))}); press Enter in the box to run the text again.`;
  }
  return `Still computing the model on ${entry.tokens.length} tokens: layers 0 to ${done - 1} ` +
    `of ${typed.nLayers} done; the maps of layers ${done} to ${typed.nLayers - 1} follow as they come.`;
}

/* The map and message of a typed or switched-off run, shaped as a stored view is; null for a stored sentence. */
export function runDrawn(typed, state) {
  const entry = entryAt(typed, state.sentence);
  if (!entry) return null;
  if (state.layer >= entry.layersDone) {  /* no map yet: never a layer's zeros, nor another run's numbers */
    return { message: null, messageHtml: `${headLabel(state.layer, state.head)}: ${computingNote(typed, entry)}`,
      panels: {}, top: {}, shown: {}, computed: null };
  }
  const n = entry.tokens.length;
  const tokenWeights = headWeights(typed, entry, state);
  const words = isWords(typed, state);
  const labels = words ? entry.words.labels : entry.tokens;
  const weights = words ? wordWeights(tokenWeights, n, entry.words.units) : tokenWeights;
  const shown = drawnWindow(typed, labels, weights);
  const hundredths = Uint8Array.from(shown.weights, (weight) => Math.max(0, Math.min(100, Math.round(weight * 100))));
  return { message: null, panels: {}, top: {}, shown: {},
    get messageHtml() {  /* read for the map on show only, not for each map of a grid */
      return runMessage(state, labels, weights, words ? "words" : "tokens") + shown.note + switchedNote(typed, entry) +
        (entry.layersDone < typed.nLayers ? ` ${computingNote(typed, entry)}` : "");
    },
    computed: { title: headLabel(state.layer, state.head), rows: shown.rows, columns: shown.columns, hundredths,
      values: shown.weights, marked: [], scale: { kind: "weight" } } };
}

/* A comparison of a run with the same sentence with heads switched off: its maps are "with head" and "without
   head" (tools.js names the two settings "first" and "second"). */
function nameComparison(typed, entry) {
  const view = typed.view;
  const compared = view.compareWith === null ? null : entryAt(typed, view.compareWith);
  if (view.mode === "grid" || !compared || compared.text !== entry.text || entry.removed.length ||
      !compared.removed.length || view.figures.length < 2) return;
  const names = ["with head", "without head", "with − without"];
  view.figures.forEach((figure, index) => {
    if (!figure.map || !names[index]) return;
    const title = index < 2 ? `${names[index]}: ${figure.map.title.replace(/^(first|second): /, "")}` : names[index];
    figure.map = { ...figure.map, title, short: names[index] };
    if (figure.drawn) figure.drawn.title.textContent = title;
  });
}

/* The scores of the head on show for the sentence on show, from its token map: a run's own weights, or a stored
   sentence's two-decimal map. */
export function runScores(typed, state, storedTokenMap) {
  const view = typed.view;
  let weights;
  let tokens;
  let where;
  const entry = entryAt(typed, state.sentence);
  if (entry) {
    weights = headWeights(typed, entry, state);
    tokens = entry.tokens;
    where = "run in your page";
  } else if (storedTokenMap) {
    weights = Float64Array.from(storedTokenMap.hundredths, (value) => value / 100);
    tokens = storedTokenMap.rows;
    where = "its stored map, to two decimals";
  }
  if (!view.panelParts.scores) {
    view.panelParts.scores = make("div", { class: "mha-panel mha-panel-scores" });
    view.panels.prepend(view.panelParts.scores);
  }
  if (entry && state.layer >= entry.layersDone) {  /* a layer still being computed: no map, no numbers */
    weights = null;
    if (view.mode !== "grid") {
      view.figures = [];
      view.tableMap = null;
      view.picture.replaceChildren();
      view.table.replaceChildren();
    }
  }
  if (entry) nameComparison(typed, entry);
  showWindowControls(typed, entry, state);
  showWeightParts(typed);
  if (!weights || tokens.length < 3 || view.mode === "grid") {
    view.panelParts.scores.replaceChildren();
    return;
  }
  const scores = sentenceScores(weights, tokens.length, wordsOf(tokens).ids);
  const examples = examplesBlock(typed, state.layer, state.head);
  view.panelParts.scores.replaceChildren(scoreTable(typed.spread, scores, state.layer, state.head, where),
    typed.ui.switchOff, ...(examples ? [examples] : []));
}
