/* The typing part of a chapter-3 view: a box for a sentence of the reader's own, run through all-MiniLM-L6-v2 in
   the page (model_bridge.js), with a progress bar, a cancel, a note on how closely the page's model follows the
   package's, the head's scores (typed_maps.js) and a switch that runs the sentence again without the head on show:
   its output set to 0 (zero ablation) or to its mean over the sentence's tokens (mean ablation). Any text the model
   takes (up to its 512 tokens) runs; a long map is drawn a window at a time (map_window.js), and the panel behind
   a weight (weight_parts.js) shows the query, key and score of the cell in focus.

   Each run (a typed sentence, or one with heads switched off) becomes an entry after the view's stored sentences:
   a new option of the sentence menu, and of the compare menu. */

import { make, problem } from "./dom.js";
import { announceUpdate } from "./frame.js";
import { cancelModelLoad, openModel } from "./model_bridge.js";
import { headLabel, wordsOf } from "./scores.js";
import { runDrawn, runScores } from "./typed_maps.js";

function fidelityNote(model) {
  const fidelity = model.fidelity;
  const size = model.download_bytes ? ` (${(model.download_bytes / 1e6).toFixed(1)} MB, and the rows of the word ` +
    "table your sentence needs)" : "";
  return make("p", { class: "mha-fidelity" }, make("b", {}, "In your page: "),
    "the model runs here, in JavaScript, from its own weights stored as 16-bit floats and computed in 32-bit. " +
    (fidelity ? `On this view's ${fidelity.sentences} sentences, every attention weight is within ` +
      `${fidelity.max_difference.toFixed(4)} of the book's PyTorch encoder, and ` +
      `${(100 * fidelity.same_argmax).toFixed(2)}% of rows look hardest at the same token. ` : "") +
    `The weights${size} load the first time you press Enter; nothing leaves your computer.`);
}

/* The form, the loading bar with its cancel, and the note, under the view's controls; the switch, shown with the
   scores. */
function typingParts(view, model) {
  const box = make("input", { type: "text", id: `${view.id}-typed`, name: "typed", maxlength: 10000,
    autocomplete: "off", spellcheck: "false", placeholder: "type a sentence, then press Enter" });
  const form = make("form", { class: "mha-typed", role: "search", "aria-label": "run the model on your own sentence" },
    make("label", { for: box.id }, "Your own sentence"), box, make("button", { type: "submit", class: "mha-button" },
      "Run the model"));
  const bar = make("progress", { max: 100, value: 0, "aria-label": "model loaded" });
  const status = make("span", { class: "mha-loading-text", "aria-live": "polite" });
  const cancel = make("button", { type: "button", class: "mha-button" }, "Cancel");
  const loading = make("div", { class: "mha-loading", hidden: "" }, bar, status, cancel);
  const button = make("button", { type: "button", class: "mha-button mha-switch" }, "Switch this head off");
  const ablation = make("select", { name: "ablation", id: `${view.id}-ablation`,
    "aria-label": "how the head is switched off" },
  make("option", { value: "zero" }, "its output set to 0 (zero ablation)"),
  make("option", { value: "mean" }, "its output set to its mean over the tokens (mean ablation)"));
  const switchOff = make("div", { class: "mha-switch-off" }, button, ablation);
  view.controls.after(form, loading, fidelityNote(model));
  cancel.addEventListener("click", () => cancelModelLoad());
  return { box, form, bar, status, loading, switchOff, switchButton: button, ablation };
}

function labelOf(entry) {
  const text = entry.text.length > 60 ? `${entry.text.slice(0, 59)}…` : entry.text;
  return entry.removed.length ? `${text} (without ${entry.removed.map(([l, h]) => headLabel(l, h)).join(", ")}` +
    `${entry.ablation === "mean" ? ", mean ablation" : ""})` : `${text} (typed)`;
}

const ablationOf = (removed, ablation) => (removed.length && ablation === "mean" ? "mean" : "zero");

/* The page's model, loaded if need be, with the loading bar shown meanwhile. */
async function loadedModel(typed) {
  const { bar, status, loading } = typed.ui;
  const onProgress = ({ loaded, total }) => {
    bar.value = total ? Math.round((100 * loaded) / total) : 0;
    status.textContent = `Loading the model: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB ` +
      `(${bar.value}%)`;
  };
  const load = openModel(onProgress);
  loading.hidden = false;
  try {
    return await load.promise;
  } finally {
    load.listeners.delete(onProgress);
    loading.hidden = true;
  }
}

/* A run as an entry after the stored sentences: a new option of the sentence menu and of the compare menu; its
   sentence index. */
function addEntry(typed, entry) {
  typed.entries.push(entry);
  const index = typed.stored + typed.entries.length - 1;
  typed.sentence.input.append(make("option", { value: index }, entry.label));
  if (typed.view.compareInput) typed.view.compareInput.append(make("option", { value: index }, entry.label));
  return index;
}

/* A promise of the next painted frame. */
const painted = () => new Promise((done) => requestAnimationFrame(() => setTimeout(done, 0)));

/* Run `text` with the heads `removed` switched off (by `ablation`), unless that run is an entry already; its
   sentence index once every layer is computed. A long text (more than typed.maxTokens tokens) runs a layer at a
   time: once the layers the view shows are done (the first for the grid), it becomes an entry and onShown(index)
   is called (and awaited) to show it; the view is drawn again as each further layer comes, its message saying
   which are still being computed (entry.layersDone). */
async function runOnce(typed, text, removed, ablation, onShown) {
  const known = typed.entries.findIndex((entry) => !entry.failure && entry.text === text &&
    JSON.stringify(entry.removed) === JSON.stringify(removed) && entry.ablation === ablation);
  if (known >= 0) return typed.stored + known;
  const opened = await loadedModel(typed);
  typed.model = opened;
  const { ids, tokens } = opened.tokenize(text);  /* refuses more than the model's 512 tokens, and says so */
  const entry = { text, removed, ablation, ids, tokens, attention: null, vector: null, words: wordsOf(tokens),
    result: null, layersDone: 0 };
  entry.label = labelOf(entry);
  let index = null;
  let onLayer;
  if (ids.length > typed.maxTokens) {  /* a long run takes a while: say so, and let the page paint it first */
    typed.view.message.replaceChildren(`Running the model on ${ids.length} tokens…`);
    await painted();
    onLayer = (partial) => {
      Object.assign(entry, { result: partial, attention: partial.attention, layersDone: partial.layersDone });
      if (index !== null) {
        if (typed.view.state.sentence === index) typed.view.redraw();
        return null;
      }
      const needed = typed.view.mode === "grid" ? 1 : typed.view.state.layer + 1;
      if (partial.layersDone < Math.min(needed, typed.nLayers) || !onShown) return null;
      index = addEntry(typed, entry);
      return onShown(index);
    };
  }
  let result;
  try {
    result = await opened.run(ids, { removed, ablation, onLayer });
  } catch (error) {  /* shown part way: the entry says where it stopped, and the same text runs afresh next time */
    if (index !== null) {
      entry.failure = error.message;
      if (typed.view.state.sentence === index) typed.view.redraw();
    }
    throw error;
  }
  Object.assign(entry, { result, attention: result.attention, vector: result.sentenceVector,
    layersDone: result.layersDone });
  if (index === null) return addEntry(typed, entry);
  if (typed.view.state.sentence === index) typed.view.redraw();  /* the last layer's maps, and no "computing" */
  return index;
}

/* runOnce, shared by a run asked for again before it ends (a second Enter while the model loads). */
function run(typed, text, removed, ablation, onShown) {
  ablation = ablationOf(removed, ablation);
  const key = JSON.stringify([text, removed, ablation]);
  if (!typed.running.has(key)) {
    typed.running.set(key, runOnce(typed, text, removed, ablation, onShown).finally(() => typed.running.delete(key)));
  }
  return typed.running.get(key);
}

function failed(typed, error) {
  typed.view.message.replaceChildren(...problem(`${String(error.message).replace(/\.$/, "")}. The stored sentences ` +
    "still work."));
}

async function typeSentence(typed, text) {
  const view = typed.view;
  if (typeof text !== "string" || !text.trim()) {
    view.message.replaceChildren(...problem("the box is empty: type a few words, e.g. “The keys to the cabinet are " +
      "on the table.”"));
    return null;
  }
  const show = (index) => {
    typed.window = { row: 0, column: 0 };
    view.compareWith = null;
    if (view.compareInput) view.compareInput.value = "";
    view.apply({ ...view.state, sentence: index });  /* the grid stays a grid: every head on the new sentence */
  };
  let shown = false;
  const onShown = (index) => {  /* a long text's first layers: shown, announced, painted, then the rest */
    shown = true;
    show(index);
    announceUpdate(view, "typed-shown");
    return painted();
  };
  try {
    const index = await run(typed, text, [], undefined, onShown);
    if (!shown) show(index);
    return index;
  } catch (error) {
    failed(typed, error);
    return null;
  }
}

/* Switch the head on show off: run the sentence with and without it, and compare the two. */
async function switchHeadOff(typed, layer, head, sentenceIndex) {
  const view = typed.view;
  const text = sentenceIndex < typed.stored ? String(typed.sentence.control.values[sentenceIndex])
    : typed.entries[sentenceIndex - typed.stored].text;
  try {
    const whole = await run(typed, text, []);
    const without = await run(typed, text, [[layer, head]], typed.ui.ablation.value);
    view.compareWith = without;
    if (view.compareInput) view.compareInput.value = String(without);
    view.mode = "single";
    view.apply({ ...view.state, sentence: whole, layer: Math.min(typed.nLayers - 1, layer + 1) });
  } catch (error) {
    failed(typed, error);
  }
}

/* Heads switched off, as an address names them: "layer.head,layer.head", after "mean:" for mean ablation. */
const headsText = (entry) => (entry.ablation === "mean" ? "mean:" : "") +
  entry.removed.map(([l, h]) => `${l}.${h}`).join(",");

/* The address of a run: its text, and the heads switched off. */
function addressParts(typed, state, parts) {
  const entry = typed.entries[state.sentence - typed.stored];
  if (entry) {
    parts.delete("sentence");
    parts.set("text", entry.text);
    if (entry.removed.length) parts.set("off", headsText(entry));
  }
  const compared = typed.view.compareWith === null ? null : typed.entries[typed.view.compareWith - typed.stored];
  if (compared) {
    parts.delete("compare");
    if (compared.text !== (entry && entry.text)) parts.set("compare_text", compared.text);
    parts.set("compare_off", headsText(compared));
  }
}

/* Heads named in an address, "layer.head,layer.head" after an optional "mean:", as {removed: [[layer, head], ...],
   ablation}. */
function headsNamed(typed, text, what) {
  if (!text) return { removed: [], ablation: "zero" };
  const ablation = text.startsWith("mean:") ? "mean" : "zero";
  const removed = text.replace(/^mean:/, "").split(",").map((pair) => {
    const match = /^([0-9]{1,2})\.([0-9]{1,2})$/.exec(pair);
    if (!match || Number(match[1]) >= typed.nLayers || Number(match[2]) >= typed.nHeads) {
      throw new Error(`${what} should name heads as layer.head, from 0.0 to ${typed.nLayers - 1}.${typed.nHeads - 1}, ` +
        `after “mean:” for mean ablation, not “${pair.slice(0, 40)}”`);
    }
    return [Number(match[1]), Number(match[2])];
  });
  return { removed, ablation };
}

/* Runs named in an address: {text, off, compare_text, compare_off}. Loads the model, as typing does. */
async function readRuns(typed, found) {
  const off = headsNamed(typed, found.off, "off");
  const index = await run(typed, found.text, off.removed, off.ablation);
  let compared = null;
  if (found.compare_off !== undefined || found.compare_text !== undefined) {
    const comparedOff = headsNamed(typed, found.compare_off, "compare_off");
    compared = await run(typed, found.compare_text || found.text, comparedOff.removed, comparedOff.ablation);
  }
  return { index, compared };
}

/* The typing part of a table view with a "page_model" (its controls by name: sentence, layer, head, and maybe
   word_level). Returns what the table view asks of it. */
export function typing(view, payload, byName) {
  const model = payload.page_model;
  const typed = { view, byName, sentence: byName.sentence, stored: byName.sentence.control.values.length,
    nLayers: byName.layer.control.values.length, nHeads: byName.head.control.values.length,
    maxTokens: model.max_tokens, spread: model.spread, entries: [], running: new Map(), model: null,
    window: { row: 0, column: 0 }, examples: model.examples || null, ui: typingParts(view, model) };
  view.runs = typed.entries;  /* read by the book's tests, as is the model that runs them: */
  view.typedModel = () => typed.model;
  typed.openText = (text) => typeSentence(typed, text).then(() => announceUpdate(view, "typed"));
  /* typed.entries: {text, removed, ablation, ids, tokens, attention, vector, words, result, label, layersDone} per
     run (a long run is an entry from its first layers on, announced as "typed-shown"); maxTokens:
     the most units a map draws at once (map_window.js); examples: each head's treebank sentences (head_examples.js) */
  typed.ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    typed.openText(typed.ui.box.value);
  });
  typed.ui.switchButton.addEventListener("click",
    () => switchHeadOff(typed, view.state.layer, view.state.head, view.state.sentence));
  return {
    stored: typed.stored,
    drawnAt: (state) => runDrawn(typed, state),
    showScores: (state, storedTokenMap) => runScores(typed, state, storedTokenMap),
    addressParts: (state, parts) => addressParts(typed, state, parts),
    readRuns: (found) => readRuns(typed, found),
    typeSentence: (text) => typeSentence(typed, text),
    isRun: (state) => state.sentence >= typed.stored,
    failed: (error) => failed(typed, error),
  };
}
