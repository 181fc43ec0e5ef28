/* The "head-explorer" view (chapter 1.2): the random layer's query and key projections come in the payload, and the
   page computes every head's map for any sentence the reader types, with the same tokens, word vectors and
   attention as the package (the toy twin of src/mha/core/toy_sentences.py and mha.views.random_layer_explorer). */

import { make, problem, setHtml } from "./dom.js";
import { afterInput, frame, slider } from "./frame.js";
import { wholeNumber } from "./address.js";
import { finish, showState } from "./tools.js";

/* --- the toy layer, as the package computes it ----------------------------------------------------------------

   The same steps as src/mha/core/toy_sentences.py: words and punctuation; a 32-bit FNV-1a hash of the lower-cased
   word seeds Marsaglia's xorshift generator, whose uniform numbers become normal ones (Box-Muller); sinusoidal
   position codes; the sum rounded to float32 once, as the package does. */
const TOKEN = /[\p{L}\p{N}_]+(?:'[\p{L}\p{N}_]+)?|[^\p{L}\p{N}_\s]/gu;

function xorshift32(state) {
  state ^= state << 13;
  state ^= state >>> 17;
  state ^= state << 5;
  return state >>> 0;
}

function wordVector(word, dModel, seed) {
  let state = (0x811c9dc5 ^ Math.imul(seed, 0x9e3779b1)) >>> 0;
  for (const byte of new TextEncoder().encode(word.toLowerCase())) state = Math.imul(state ^ byte, 0x01000193) >>> 0;
  state = state || 1;
  for (let step = 0; step < 4; step += 1) state = xorshift32(state);
  const normals = [];
  while (normals.length < dModel) {
    state = xorshift32(state);
    const u1 = (state + 0.5) / 4294967296;
    state = xorshift32(state);
    const u2 = (state + 0.5) / 4294967296;
    const radius = Math.sqrt(-2 * Math.log(u1));
    normals.push(radius * Math.cos(2 * Math.PI * u2), radius * Math.sin(2 * Math.PI * u2));
  }
  return normals.slice(0, dModel);
}

function embed(tokens, dModel, seed) {
  return tokens.map((token, position) => {
    const word = wordVector(token, dModel, seed);
    return word.map((value, feature) => {
      const pair = feature - (feature % 2);
      const angle = position / Math.pow(10000, pair / dModel);
      const code = feature % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
      return Math.fround(value + code / Math.SQRT2);
    });
  });
}

function project(vectors, W, b) {  /* vectors (seq, d) @ W (d, d) + b: vectors-as-rows, as the package */
  return vectors.map((x) => b.map((bias, out) => {
    let total = bias;
    for (let feature = 0; feature < x.length; feature += 1) total += x[feature] * W[feature][out];
    return total;
  }));
}

/* One head's weights (seq, seq): softmax(q_h k_hᵀ / sqrt(d_head)) row by row, over the features from..from+dHead. */
function headMap(q, k, from, dHead) {
  const scale = Math.sqrt(dHead);
  return q.map((query) => {
    const scores = k.map((key) => {
      let dot = 0;
      for (let feature = from; feature < from + dHead; feature += 1) dot += query[feature] * key[feature];
      return dot / scale;
    });
    const top = Math.max(...scores);
    const exps = scores.map((score) => Math.exp(score - top));
    const total = exps.reduce((sum, value) => sum + value, 0);
    return exps.map((value) => value / total);
  });
}

/* Every head's weights (heads, seq, seq) for the tokens. */
export function headMaps(payload, tokens, heads) {
  const dModel = payload.d_model;
  const dHead = dModel / heads;
  const x = embed(tokens, dModel, payload.seed);
  const q = project(x, payload.W_Q, payload.b_Q);
  const k = project(x, payload.W_K, payload.b_K);
  const maps = [];
  for (let head = 0; head < heads; head += 1) maps.push(headMap(q, k, head * dHead, dHead));
  return maps;
}

export function sentenceProblem(sentence, maxTokens) {
  const broken = sentence.search(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?:^|[^\uD800-\uDBFF])[\uDC00-\uDFFF]/);
  if (broken >= 0) {
    return "the sentence holds a broken character (half of a UTF-16 pair, as left behind when an emoji is cut in " +
      "half); delete it or type it again.";
  }
  const tokens = sentence.match(TOKEN) || [];
  if (tokens.length === 0) return "the sentence is empty: type a few words, e.g. 'The cat sat on the mat.'";
  if (tokens.length > maxTokens) {
    return `the sentence has ${tokens.length} tokens, more than the ${maxTokens} these maps can show legibly; ` +
      `shorten it to at most ${maxTokens} words and punctuation marks.`;
  }
  return null;
}

/* --- the view ------------------------------------------------------------------------------------------------ */

/* The box and the two sliders: how many heads, and which one is shown. */
function explorerControls(view, payload) {
  const box = make("input", { type: "text", id: `${view.id}-sentence`, name: "sentence", spellcheck: "false",
    autocomplete: "off", "aria-describedby": `${view.id}-message` });
  box.value = payload.sentence;
  view.controls.append(make("label", { class: "mha-control mha-wide", for: box.id }, make("span", {}, "sentence"), box,
    make("small", {}, " (press Enter to redraw)")));
  const heads = slider(view, "heads", "heads", payload.max_heads - 1, payload.heads - 1);
  const head = slider(view, "head", "head shown", payload.heads - 1, payload.head);
  return { box, heads, head };
}

/* What the address holds of the view, and how it reads it back. */
function describe(view, payload) {
  view.stateNames = ["sentence", "heads", "head"];
  view.addressValue = (name) => (name === "heads" ? view.state.heads + 1 : view.state[name]);
  view.valueOf = (name, text) => {
    if (name === "sentence") {
      if ([...text].length > 400) throw new Error("the sentence in the address is over 400 characters");
      return text;
    }
    if (name === "heads") return wholeNumber(text, 1, payload.max_heads, "heads") - 1;
    return wholeNumber(text, 0, payload.max_heads - 1, "head");
  };
  view.gridNames = ["head"];
  view.range = (name, state) => Array.from({ length: state.heads + 1 }, (_, index) => index);
}

export function mountHeadExplorer(root, payload, options) {
  const view = frame(root, payload, options);
  const { box, heads, head } = explorerControls(view, payload);
  const cache = new Map();

  function compute(sentence, nHeads) {
    const key = `${nHeads}\u0000${sentence}`;
    if (!cache.has(key)) {
      const tokens = sentence.match(TOKEN) || [];
      if (cache.size > 64) cache.clear();
      cache.set(key, { tokens, weights: headMaps(payload, tokens, nHeads) });
    }
    return cache.get(key);
  }
  view.compute = compute;

  const mapFor = (state) => {
    const nHeads = state.heads + 1;
    if (payload.refusals[String(nHeads)] || sentenceProblem(state.sentence, payload.max_tokens)) return null;
    const { tokens, weights } = compute(state.sentence, nHeads);
    const shown = Math.min(state.head, nHeads - 1);
    const values = Float64Array.from(weights[shown].flat());  /* (seq × seq), row-major, as computed */
    return { title: `head ${shown} of ${nHeads} (d_head = ${payload.d_model / nHeads})`, rows: tokens,
      columns: tokens, marked: [], scale: { kind: "weight" }, values,
      hundredths: Uint8Array.from(values, (weight) => Math.round(weight * 100)) };
  };
  view.state = { sentence: box.value, heads: payload.heads - 1, head: payload.head };
  view.mapAt = mapFor;
  describe(view, payload);

  view.apply = (state) => {
    box.value = state.sentence;
    heads.input.value = String(state.heads);
    head.input.max = String(state.heads);
    head.input.value = String(Math.min(state.head, state.heads));
    view.redraw();
  };

  view.redraw = () => {
    const nHeads = Number(heads.input.value) + 1;
    heads.output.textContent = String(nHeads);
    heads.input.setAttribute("aria-valuetext", `${nHeads} heads`);
    const refusal = payload.refusals[String(nHeads)];
    if (refusal) {
      setHtml(view.message, refusal);
      return;
    }
    const wrong = sentenceProblem(box.value, payload.max_tokens);
    if (wrong) {
      view.message.replaceChildren(...problem(wrong));
      return;
    }
    head.input.max = String(nHeads - 1);
    const shown = Math.min(Number(head.input.value), nHeads - 1);
    head.input.value = String(shown);
    head.output.textContent = String(shown);
    view.state = { sentence: box.value, heads: nHeads - 1, head: shown };
    const { tokens, weights } = compute(box.value, nHeads);
    view.last = { sentence: box.value, heads: nHeads, head: shown, tokens, weights };
    view.message.replaceChildren(
      `${nHeads} head${nHeads > 1 ? "s" : ""} × d_head = ${payload.d_model / nHeads} features each (d_model = ` +
      `${payload.d_model}); showing head ${shown}. Tokens: `, make("code", {}, tokens.join(" | ")));
    showState(view, mapFor(view.state));
  };

  box.addEventListener("change", afterInput(view, () => view.redraw()));
  heads.input.addEventListener("input", afterInput(view, () => view.redraw()));
  head.input.addEventListener("input", afterInput(view, () => view.redraw()));
  return finish(view);
}
