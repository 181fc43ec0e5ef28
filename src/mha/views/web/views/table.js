/* The "table" view: every view the controls can reach, computed by the package and stored in the payload. A control
   moves, and the view stored for the new setting is looked up and drawn. A chapter-3 view with a "page_model" part
   also runs sentences the reader types (typing.js). */

import { make, problem, setHtml } from "./dom.js";
import { afterInput, frame, menu, slider } from "./frame.js";
import { wholeNumber } from "./address.js";
import { finish, showState } from "./tools.js";
import { typing } from "./typing.js";

/* One input per control of the payload: {control, input, output (a slider's label, or null)}. */
function controlInputs(view, payload) {
  return payload.controls.map((control) => {
    let input;
    let output = null;
    if (control.kind === "slider") {
      ({ input, output } = slider(view, control.name, control.label, control.values.length - 1, control.start));
    } else if (control.kind === "menu") {
      input = menu(view, control.name, control.label, control.labels, control.start);
    } else {
      input = make("input", { type: "checkbox", id: `${view.id}-${control.name}`, name: control.name,
        "aria-describedby": `${view.id}-message` });
      input.checked = control.values[control.start] === true;
      view.controls.append(make("label", { class: "mha-control mha-checkbox", for: input.id }, input,
        make("span", {}, control.label)));
    }
    return { control, input, output };
  });
}

const readInput = ({ control, input }) => (control.kind === "checkbox"
  ? control.values.indexOf(input.checked) : Number(input.value));

/* A stored view's map, its numbers a window on the payload's weights; a run's map as it is. */
function mapOfDrawn(payload, drawn) {
  if (drawn && drawn.computed) return drawn.computed;
  if (!drawn || !drawn.map) return null;
  const stored = drawn.map;
  const strings = payload.strings;
  const size = stored.shape[0] * stored.shape[1];
  if (stored.offset + size > payload.weights.length) throw new Error("a map's numbers are missing from the data");
  return { title: strings[stored.title], rows: strings[stored.rows], columns: strings[stored.columns],
    hundredths: payload.weights.subarray(stored.offset, stored.offset + size), marked: stored.marked,
    scale: { kind: "weight" } };
}

/* The message and the panels of a stored view (or a run) into the frame. */
function showDrawnText(view, payload, drawn) {
  const strings = payload.strings;
  setHtml(view.message, drawn.messageHtml !== undefined ? drawn.messageHtml : strings[drawn.message]);
  for (const [name, index] of Object.entries(drawn.panels)) {
    if (!view.panelParts[name]) {
      view.panelParts[name] = make("div", { class: `mha-panel mha-panel-${name}` });
      view.panels.append(view.panelParts[name]);
    }
    /* A panel is often the same from one setting to the next (a run's training curves for each of its heads):
       parsed, cleaned and laid out again, a large one costs more than the map. */
    if (view.panelParts[name].dataset.shown !== String(index)) {
      setHtml(view.panelParts[name], strings[index]);
      view.panelParts[name].dataset.shown = String(index);
    }
  }
}

/* What the grid, the comparison and the address need to know of a table view. */
function describe(view, payload, byName, drawnAt) {
  view.stateNames = payload.controls.map((control) => control.name);
  view.addressValue = (name) => view.state[name];
  view.valueOf = (name, text) => wholeNumber(text, 0, byName[name].control.values.length - 1, name);
  const sliders = payload.controls.filter((control) => control.kind === "slider").map((control) => control.name);
  view.gridNames = ["layer", "head"].filter((name) => sliders.includes(name));
  if (!view.gridNames.includes("head")) view.gridNames = [];
  view.range = (name, state) => {
    const drawn = drawnAt(state);
    const top = drawn && drawn.top[name] !== undefined ? drawn.top[name] : byName[name].control.values.length - 1;
    return Array.from({ length: top + 1 }, (_, index) => index);
  };
  const menus = payload.controls.filter((control) => control.kind === "menu" && control.labels.length > 1);
  if (menus.length) {
    view.compareName = menus[0].name;
    view.compareControl = menus[0];
  }
}

export function mountTable(root, payload, options) {
  const view = frame(root, payload, options);
  const inputs = controlInputs(view, payload);
  const byName = Object.fromEntries(inputs.map((part) => [part.control.name, part]));
  const keyOf = (state) => payload.controls.map((control) => state[control.name]).join("|");
  const stateOfInputs = () => Object.fromEntries(inputs.map((part) => [part.control.name, readInput(part)]));
  const typed = payload.page_model && !view.hosted && byName.sentence && byName.layer && byName.head
    ? typing(view, payload, byName) : null;
  const drawnAt = (state) => {
    if (typed && typed.isRun(state)) return typed.drawnAt(state);
    const index = payload.views[keyOf(state)];
    return index === undefined ? null : payload.drawn[index];
  };
  const mapOf = (drawn) => mapOfDrawn(payload, drawn);

  view.state = stateOfInputs();
  view.mapAt = (state) => mapOf(drawnAt(state));
  describe(view, payload, byName, drawnAt);

  view.apply = (state) => {
    for (const part of inputs) {
      const value = state[part.control.name];
      if (part.control.kind === "checkbox") part.input.checked = part.control.values[value] === true;
      else part.input.value = String(value);
    }
    view.redraw();
  };

  view.redraw = () => {
    let drawn = drawnAt(stateOfInputs());
    if (!drawn) {
      view.message.replaceChildren(...problem("no view is stored for this setting."));
      return;
    }
    for (const part of inputs) {  /* a stored view may cap a slider (a shorter sentence) or move it */
      const name = part.control.name;
      if (drawn.top[name] !== undefined) part.input.max = String(drawn.top[name]);
      if (drawn.shown[name] !== undefined) part.input.value = String(drawn.shown[name]);
    }
    const state = stateOfInputs();
    drawn = drawnAt(state) || drawn;
    view.state = state;
    for (const part of inputs) {
      const label = part.control.labels[readInput(part)];
      if (part.output) part.output.textContent = label;
      if (part.control.kind === "slider") part.input.setAttribute("aria-valuetext", label);
    }
    view.root.dataset.key = keyOf(state);
    showDrawnText(view, payload, drawn);
    showState(view, mapOf(drawn));
    if (typed) {
      const tokenLevel = byName.word_level ? { ...state, word_level: byName.word_level.control.values.indexOf(false) }
        : state;
      typed.showScores(state, typed.isRun(state) ? null : mapOf(drawnAt(tokenLevel)));
    }
  };
  if (typed) {
    view.addressParts = typed.addressParts;
    view.runNames = ["text", "off", "compare_text", "compare_off"];
    view.readRuns = typed.readRuns;
    view.typeSentence = typed.typeSentence;
    view.runFailed = typed.failed;
  }

  for (const part of inputs) {
    part.input.addEventListener(part.control.kind === "slider" ? "input" : "change", afterInput(view, () => view.redraw()));
  }
  return finish(view);
}
