/* The typing part of a chapter-3 view: a box for a sentence of the reader's own, run through all-MiniLM-L6-v2 in
   the page (model_bridge.js), with a progress bar, a cancel, a note on how closely the page's model follows the
   package's, the head's scores (typed_maps.js) and a switch that runs the sentence again without the head on show.

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
  const switchOff = make("button", { type: "button", class: "mha-button mha-switch" }, "Switch this head off");
  view.controls.after(form, loading, fidelityNote(model));
  cancel.addEventListener("click", () => cancelModelLoad());
  return { box, form, bar, status, loading, switchOff };
}

function labelOf(entry) {
  const text = entry.text.length > 60 ? `${entry.text.slice(0, 59)}…` : entry.text;
  return entry.removed.length ? `${text} (without ${entry.removed.map(([l, h]) => headLabel(l, h)).join(", ")})`
    : `${text} (typed)`;
}

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

/* Run `text` with the heads `removed` switched off, unless that run is an entry already; its sentence index. */
async function runOnce(typed, text, removed) {
  const known = typed.entries.findIndex((entry) => entry.text === text &&
    JSON.stringify(entry.removed) === JSON.stringify(removed));
  if (known >= 0) return typed.stored + known;
  const opened = await loadedModel(typed);
  const { ids, tokens } = opened.tokenize(text);
  if (tokens.length > typed.maxTokens) {
    throw new Error(`the sentence has ${tokens.length} tokens with [CLS] and [SEP]; a map of more than ` +
      `${typed.maxTokens} cannot be read. Shorten it (the model itself accepts up to 512 tokens).`);
  }
  const result = await opened.run(ids, { removed });
  const entry = { text, removed, tokens, attention: result.attention, vector: result.sentenceVector,
    words: wordsOf(tokens) };
  entry.label = labelOf(entry);
  typed.entries.push(entry);
  const index = typed.stored + typed.entries.length - 1;
  typed.sentence.input.append(make("option", { value: index }, entry.label));
  if (typed.view.compareInput) typed.view.compareInput.append(make("option", { value: index }, entry.label));
  return index;
}

/* runOnce, shared by a run asked for again before it ends (a second Enter while the model loads). */
function run(typed, text, removed) {
  const key = JSON.stringify([text, removed]);
  if (!typed.running.has(key)) {
    typed.running.set(key, runOnce(typed, text, removed).finally(() => typed.running.delete(key)));
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
  try {
    const index = await run(typed, text, []);
    view.compareWith = null;
    if (view.compareInput) view.compareInput.value = "";
    view.apply({ ...view.state, sentence: index });  /* the grid stays a grid: every head on the new sentence */
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
    const without = await run(typed, text, [[layer, head]]);
    view.compareWith = without;
    if (view.compareInput) view.compareInput.value = String(without);
    view.mode = "single";
    view.apply({ ...view.state, sentence: whole, layer: Math.min(typed.nLayers - 1, layer + 1) });
  } catch (error) {
    failed(typed, error);
  }
}

const headsText = (removed) => removed.map(([l, h]) => `${l}.${h}`).join(",");

/* The address of a run: its text, and the heads switched off. */
function addressParts(typed, state, parts) {
  const entry = typed.entries[state.sentence - typed.stored];
  if (entry) {
    parts.delete("sentence");
    parts.set("text", entry.text);
    if (entry.removed.length) parts.set("off", headsText(entry.removed));
  }
  const compared = typed.view.compareWith === null ? null : typed.entries[typed.view.compareWith - typed.stored];
  if (compared) {
    parts.delete("compare");
    if (compared.text !== (entry && entry.text)) parts.set("compare_text", compared.text);
    parts.set("compare_off", headsText(compared.removed));
  }
}

/* Heads named in an address, "layer.head,layer.head", as [[layer, head], ...]. */
function headsNamed(typed, text, what) {
  if (!text) return [];
  return text.split(",").map((pair) => {
    const match = /^([0-9]{1,2})\.([0-9]{1,2})$/.exec(pair);
    if (!match || Number(match[1]) >= typed.nLayers || Number(match[2]) >= typed.nHeads) {
      throw new Error(`${what} should name heads as layer.head, from 0.0 to ${typed.nLayers - 1}.${typed.nHeads - 1}, ` +
        `not “${pair.slice(0, 40)}”`);
    }
    return [Number(match[1]), Number(match[2])];
  });
}

/* Runs named in an address: {text, off, compare_text, compare_off}. Loads the model, as typing does. */
async function readRuns(typed, found) {
  const removed = headsNamed(typed, found.off, "off");
  const index = await run(typed, found.text, removed);
  let compared = null;
  if (found.compare_off !== undefined || found.compare_text !== undefined) {
    compared = await run(typed, found.compare_text || found.text, headsNamed(typed, found.compare_off, "compare_off"));
  }
  return { index, compared };
}

/* The typing part of a table view with a "page_model" (its controls by name: sentence, layer, head, and maybe
   word_level). Returns what the table view asks of it. */
export function typing(view, payload, byName) {
  const model = payload.page_model;
  const typed = { view, byName, sentence: byName.sentence, stored: byName.sentence.control.values.length,
    nLayers: byName.layer.control.values.length, nHeads: byName.head.control.values.length,
    maxTokens: model.max_tokens, spread: model.spread, entries: [], running: new Map(),
    ui: typingParts(view, model) };
  /* typed: {text, removed, tokens, attention, vector, words, label} per run */
  typed.ui.form.addEventListener("submit", (event) => {
    event.preventDefault();
    typeSentence(typed, typed.ui.box.value).then(() => announceUpdate(view, "typed"));
  });
  typed.ui.switchOff.addEventListener("click",
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
