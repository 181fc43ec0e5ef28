/* The window on a long run's map (chapter 3's typed sentences): a map of more than typed.maxTokens units is drawn
   maxTokens × maxTokens cells at a time, so that its labels stay legible and every cell still holds the exact
   weight of its own query and key. Two sliders under the map move the window over the queries (rows) and the keys
   (columns); typed.window = {row, column} is the first unit of each. */

import { make } from "./dom.js";
import { afterInput } from "./frame.js";

/* The run of a sentence index, or undefined for a stored sentence. */
export function entryAt(typed, sentence) {
  return typed.entries[sentence - typed.stored];
}

/* Whether the view shows words (its word_level control is on). */
export function isWords(typed, state) {
  const control = typed.byName.word_level;
  return Boolean(control) && control.control.values[state.word_level] === true;
}

/* The window of a map of m units: {row, column, size}, kept inside the map; null when the whole map fits. */
export function windowOf(typed, m) {
  const size = typed.maxTokens;
  if (m <= size) return null;
  const clamp = (value) => Math.max(0, Math.min(m - size, value));
  return { row: clamp(typed.window.row), column: clamp(typed.window.column), size };
}

/* What a map of labels (m) and weights (m × m) draws: the window's rows and columns, numbered on a long map, the
   window's weights (size × size), and a sentence for the message ("" when the whole map is drawn). */
export function drawnWindow(typed, labels, weights) {
  const m = labels.length;
  const shown = windowOf(typed, m);
  if (!shown) return { rows: labels, columns: labels, weights, note: "" };
  const { row, column, size } = shown;
  const cut = new Float64Array(size * size);
  for (let r = 0; r < size; r += 1) cut.set(weights.subarray(m * (row + r) + column, m * (row + r) + column + size), r * size);
  const numbered = (from) => labels.slice(from, from + size).map((label, index) => `${from + index} ${label}`);
  return { rows: numbered(row), columns: numbered(column), weights: cut,
    note: ` The map has ${m} rows and columns; shown: queries ${row} to ${row + size - 1} and keys ${column} to ` +
      `${column + size - 1}, each cell its exact weight. Move the window with the sliders under the map.` };
}

function windowSlider(typed, name, label) {
  const input = make("input", { type: "range", min: 0, max: 0, step: 1, value: 0, name: `window_${name}`,
    id: `${typed.view.id}-window-${name}` });
  const output = make("output", { for: input.id });
  input.addEventListener("input", afterInput(typed.view, () => {
    typed.window[name] = Number(input.value);
    typed.view.redraw();
  }));
  return { input, output, element: make("label", { class: "mha-control", for: input.id }, make("span", {}, label),
    input, output) };
}

/* The two sliders, made once per view and put under the map; shown only while a run's map is larger than the
   window. */
export function showWindowControls(typed, entry, state) {
  const view = typed.view;
  if (!typed.ui.window) {
    const row = windowSlider(typed, "row", "queries from");
    const column = windowSlider(typed, "column", "keys from");
    const element = make("div", { class: "mha-window", role: "group", "aria-label": "window on a long map", hidden: "" },
      row.element, column.element);
    view.readout.before(element);
    typed.ui.window = { element, row, column };
  }
  const parts = typed.ui.window;
  const m = entry ? (isWords(typed, state) ? entry.words.labels.length : entry.tokens.length) : 0;
  const shown = entry && view.mode !== "grid" ? windowOf(typed, m) : null;
  parts.element.hidden = !shown;
  if (!shown) return;
  for (const name of ["row", "column"]) {
    const { input, output } = parts[name];
    input.max = String(m - shown.size);
    input.value = String(shown[name]);
    output.textContent = `${shown[name]} to ${shown[name] + shown.size - 1} of ${m}`;
    input.setAttribute("aria-valuetext", output.textContent);
  }
}
