/* Typed token ids in the website's view of the lab's induction models (chapter 3, "Heads are not preassigned";
   mha.views.induction_explorer.InductionLabExplorer): a box under the controls; a sequence the reader types is
   checked by the package's own rules and words (payload.typed_sequences.rules, TYPED_TOKEN_RULES), run through the
   chosen model in the page (trainer.js's modelFromWeights and forward, loaded on the first Enter by
   trainer_bridge.js, from the stored checkpoints' float32 weights in the payload), and the chosen head's map and
   scores drawn in place of the held-out sequence's, as the notebook's view draws them. Bad input gets a message
   under the box and the last good map stays. Moving the held-out-sequence slider, or Enter on an empty box, goes
   back to the held-out sequences. Typed text is only ever set as text. */

import { make, problem, pythonRepr } from "./dom.js";
import { announceUpdate } from "./frame.js";
import { canTrainInPage, loadTrainer } from "./trainer_bridge.js";

const fill = (template, values) => template.replace(/\{([a-z_]+)\}/g, (whole, name) => String(values[name]));

/* The token ids typed in `text`, as mha.views.induction_explorer.parse_token_ids reads them; throws its message. */
export function parseTokenIds(text, rules, vocabSize, maxLen) {
  const shortened = (piece) => ([...piece].length <= rules.shorten ? piece
    : `${[...piece].slice(0, rules.shorten).join("")}...`);
  const pieces = text.trim().split(new RegExp(rules.separators, "u")).filter((piece) => piece);
  const notId = pieces.find((piece) => !new RegExp(`^(?:${rules.token_id})$`, "u").test(piece));
  const last = vocabSize - 1;
  if (notId !== undefined) throw new Error(fill(rules.messages.not_id, { piece: pythonRepr(shortened(notId)), last }));
  const outside = pieces.find((piece) => piece.replace(/^0+/, "").length > String(vocabSize).length ||
    Number(piece) >= vocabSize);
  if (outside !== undefined) throw new Error(fill(rules.messages.outside, { piece: shortened(outside), last }));
  const ids = pieces.map(Number);
  if (ids.length < rules.min_tokens) {
    throw new Error(fill(rules.messages.too_few, { min_tokens: rules.min_tokens, count: ids.length }));
  }
  if (ids.length > maxLen) {
    throw new Error(fill(rules.messages.too_many, { count: ids.length, max_len: maxLen, extra: ids.length - maxLen }));
  }
  return ids;
}

/* (query, key) pairs where key j + 1 follows an earlier copy j < i of query i's token (prefix_matching_keys). */
export function prefixMatchingKeys(ids) {
  const pairs = [];
  ids.forEach((token, query) => ids.slice(0, query).forEach((earlier, key) => {
    if (earlier === token) pairs.push([query, key + 1]);
  }));
  return pairs;
}

/* One model of the payload as trainer.js builds it: {config, layout: [[name, shape, sent]], weights: base64 float32
   of the sent parameters}; a parameter no attention weight depends on is not sent, and is 0 here. */
function modelOf(trainer, stored) {
  const bytes = Uint8Array.from(atob(stored.weights), (character) => character.charCodeAt(0));
  const values = new Float32Array(bytes.buffer);
  const weights = {};
  let offset = 0;
  for (const [name, shape, sent] of stored.layout) {
    const size = shape.reduce((product, side) => product * side, 1);
    weights[name] = sent ? values.subarray(offset, offset + size) : new Float32Array(size);
    offset += sent ? size : 0;
  }
  return trainer.modelFromWeights(stored.config, weights);
}

/* Every layer's attention (layers) of Float32Array (heads, n, n) and scores {previous_token, prefix_matching (null
   where no token repeats)}: arrays (layers) of arrays (heads), as the package's view scores one sequence. */
function runModel(part, modelIndex, ids) {
  const key = `${modelIndex}:${ids.join(" ")}`;
  if (part.runs.has(key)) return part.runs.get(key);
  const trainer = part.trainer;
  if (!part.models[modelIndex]) part.models[modelIndex] = modelOf(trainer, part.stored.models[modelIndex]);
  const model = part.models[modelIndex];
  const n = ids.length;
  const heads = model.config.n_heads;
  const tokens = Int32Array.from(ids);
  const attention = trainer.forward(model, part.engine, tokens, 1, n).attention.map((layer) => Float32Array.from(layer));
  const scores = { previous_token: trainer.previousTokenScores(attention, 1, n, heads), prefix_matching: null };
  try {
    scores.prefix_matching = trainer.prefixMatchingScores(attention, tokens, null, 1, n, heads);
  } catch {  /* no query has an earlier copy of its token: prefix matching is undefined, previous-token is not */
  }
  if (part.runs.size > 32) part.runs.clear();
  part.runs.set(key, { attention, scores });
  return part.runs.get(key);
}

/* The typed sequence's map for a state of the view, shaped as a stored one; its title is the stored map's. */
function typedMap(part, state, storedMap) {
  if (!part.ids || !storedMap) return null;
  const n = part.ids.length;
  const { attention } = runModel(part, state.model, part.ids);
  const values = attention[state.layer].subarray(state.head * n * n, (state.head + 1) * n * n);
  const positions = part.ids.map((_, position) => String(position));
  return { title: storedMap.title, rows: positions, columns: positions, values,
    hundredths: Uint8Array.from(values, (weight) => Math.max(0, Math.min(100, Math.round(weight * 100)))),
    marked: prefixMatchingKeys(part.ids), scale: { kind: "weight" } };
}

/* The stored message, its line on the held-out sequence replaced by the typed one's scores and its tokens by the
   typed ids (the package's message for typed ids, InductionLabExplorer.view_data). */
function showTypedMessage(part, view) {
  const { scores } = runModel(part, view.state.model, part.ids);
  const { layer, head } = view.state;
  const prefix = scores.prefix_matching ? scores.prefix_matching[layer][head].toFixed(2)
    : "undefined (no token repeats)";
  const breaks = view.message.querySelectorAll("br");
  if (breaks.length >= 2) {
    while (breaks[0].nextSibling && breaks[0].nextSibling !== breaks[1]) breaks[0].nextSibling.remove();
    breaks[0].after(`On your ${part.ids.length} tokens: previous-token ` +
      `${scores.previous_token[layer][head].toFixed(2)}, prefix-matching ${prefix}.`);
  }
  const codes = view.message.querySelectorAll("code");
  if (codes.length) codes[codes.length - 1].textContent = part.ids.join(" ");
}

/* The box, its button, its message line and the note on what runs, under the view's controls. */
function typedParts(view) {
  const box = make("input", { type: "text", id: `${view.id}-typed`, name: "typed", maxlength: 2000,
    autocomplete: "off", spellcheck: "false", inputmode: "numeric", "aria-describedby": `${view.id}-tokens-problem`,
    placeholder: "or type token ids, e.g. 5 17 42 8 5 17 42, then press Enter" });
  const form = make("form", { class: "mha-typed", "aria-label": "run the model on your own token ids" },
    make("label", { for: box.id }, "Your own token ids"), box,
    make("button", { type: "submit", class: "mha-button" }, "Run the model"));
  const said = make("p", { class: "mha-typed-problem", id: `${view.id}-tokens-problem`, "aria-live": "polite" });
  view.controls.after(form, said);
  return { box, form, said };
}

/* Check, load trainer.js if need be, run and draw `text`; an empty box goes back to the held-out sequences. */
async function runTyped(part, view, text) {
  if (!text.trim()) {
    part.ids = null;
    part.said.replaceChildren();
    view.redraw();
    return;
  }
  const config = part.stored.models[view.state.model].config;
  try {
    const ids = parseTokenIds(text, part.stored.rules, config.vocab_size, config.max_seq_len);
    if (!part.trainer) {
      part.said.textContent = "loading trainer.js…";
      part.trainer = await loadTrainer();
      part.engine = part.trainer.createEngine();
    }
    runModel(part, view.state.model, ids);  /* a failure leaves the last good map */
    part.ids = ids;
    part.said.replaceChildren();
    view.redraw();
  } catch (error) {
    part.said.replaceChildren(...problem(error.message));
  }
}

/* Hook typed token ids into a table view whose payload has "typed_sequences" (called by tools.js's finish, before
   the first drawing). showState: tools.js's, which draws a map and writes the address. */
export function typedSequences(view, showState) {
  if (!canTrainInPage() || !view.controls.querySelector("input[name=layer]")) return;
  const part = { stored: view.payload.typed_sequences, ids: null, trainer: null, engine: null, models: [],
    runs: new Map(), ...typedParts(view) };
  view.typedSequences = part;
  const storedMapAt = view.mapAt;
  view.mapAt = (state) => (part.ids ? typedMap(part, state, storedMapAt(state)) : storedMapAt(state));
  const storedRedraw = view.redraw;
  view.redraw = () => {
    storedRedraw();
    if (!part.ids) return;
    showTypedMessage(part, view);
    showState(view, view.mapAt(view.state));
  };
  /* the held-out-sequence slider goes back to the held-out sequences (before the view hears of the move) */
  view.controls.addEventListener("input", (event) => {
    if (event.target.name === "sequence") part.ids = null;
  }, true);
  part.form.addEventListener("submit", (event) => {
    event.preventDefault();
    runTyped(part, view, part.box.value).then(() => announceUpdate(view, "typed"));
  });
  /* the address: text=ids, checked as typed ones are (address.js reads it as a run, with view.readRuns) */
  view.runNames = ["text"];
  view.addressParts = (state, parts) => { if (part.ids) parts.set("text", part.ids.join(" ")); };
  view.readRuns = async (found) => {
    const config = part.stored.models[view.state.model].config;
    parseTokenIds(found.text, part.stored.rules, config.vocab_size, config.max_seq_len);
    part.box.value = found.text;
    await runTyped(part, view, found.text);
    if (!part.ids) throw new Error(part.said.textContent);
    return { index: undefined, compared: view.compareWith };
  };
  view.runFailed = (error) => part.said.replaceChildren(...problem(error.message));
}
