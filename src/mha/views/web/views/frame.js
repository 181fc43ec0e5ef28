/* Every view's frame (guidance, controls, tools, message, picture, readout, numbers, panels), its controls, and what
   happens around each input: the view announces each update with an event, and keeps its height steady. */

import { make } from "./dom.js";
import { numbersTable } from "./drawing.js";
import { moveFocus } from "./focus.js";

const NUMBERS_TITLE = "The numbers behind the map, as a table";
export const READOUT_HELP = "Point at a cell, tap it, or focus the map and use the arrow keys, to read its weight.";

/* The event a view's root dispatches once it has drawn what an input asked for (detail.cause: "input" for a control,
   the grid, a tile or a key; "typed" once a sentence typed into a chapter-3 view has been answered). The page's
   tests and benchmark time an input from their own event to this one and the frame painted after it. */
export const UPDATED = "mha-view-updated";

let counter = 0;

export function announceUpdate(view, cause) {
  view.root.dispatchEvent(new CustomEvent(UPDATED, { bubbles: true, detail: { cause } }));
}

export function frame(root, payload, options) {
  const number = (counter += 1);
  const id = `view-${number}`;
  if (!options.hosted) root.id = root.id || id;
  const guide = make("p", { class: "mha-guide" }, make("b", {}, "Try: "), payload.guidance.try, make("br"),
    make("b", {}, "Notice: "), payload.guidance.notice);
  const controls = make("div", { class: "mha-controls", role: "group", "aria-label": "controls of the view" });
  const tools = make("div", { class: "mha-tools", role: "group", "aria-label": "what else the view can show" });
  const message = make("div", { class: "mha-message", "aria-live": "polite", id: `${id}-message` });
  const address = make("p", { class: "mha-address", "aria-live": "polite" });
  const readout = make("p", { class: "mha-readout", id: `${id}-readout`, "aria-live": "polite" }, READOUT_HELP);
  const picture = make("div", { class: "mha-picture", tabindex: "0", role: "group", "aria-describedby": `${id}-readout`,
    "aria-label": "attention map: use the arrow keys to move between cells" });
  const table = make("div", { class: "mha-table" });
  const numbers = make("details", { class: "mha-details" }, make("summary", {}, NUMBERS_TITLE), table);
  const panels = make("div", { class: "mha-panels", tabindex: "0", role: "region", "aria-label": "more about this view" });
  const parts = [guide, controls, tools, address, message,
    make("div", { class: "mha-body" }, make("div", { class: "mha-main" }, picture, readout, numbers), panels)];
  if (payload.note) parts.push(make("p", { class: "mha-note" }, payload.note));
  root.replaceChildren(...parts);
  root.setAttribute("data-ready", "true");
  root.classList.add("mha-view-live");
  const view = { root, id: options.hosted ? id : root.id, hosted: Boolean(options.hosted), payload, controls, tools,
    message, address, readout, picture, table, details: numbers, tableMap: null, panels, panelParts: {}, figures: [],
    mode: "single", compareWith: null };
  numbers.addEventListener("toggle", () => { showNumbers(view); holdHeight(view); });
  view.primaryFigure = () => view.figures[view.figures.length - 1] || null;
  picture.addEventListener("keydown", afterInput(view, (event) => moveFocus(view, event)));
  return view;
}

/* An input's handler: the update, then the event that says it is drawn; after the next paint, the view's size as
   the reader sees it, for holdHeight (read then, when nothing is left to lay out). */
export function afterInput(view, update) {
  return (event) => {
    update(event);
    announceUpdate(view, "input");
    requestAnimationFrame(() => setTimeout(() => {
      [view.shownHeight, view.shownWidth] = [view.root.offsetHeight, view.root.clientWidth];
    }, 0));
  };
}

export function slider(view, name, label, max, value) {
  const input = make("input", { type: "range", min: 0, max, step: 1, value, id: `${view.id}-${name}`, name,
    "aria-describedby": `${view.id}-message` });
  const output = make("output", { for: input.id });
  view.controls.append(make("label", { class: "mha-control", for: input.id }, make("span", {}, label), input, output));
  return { input, output };
}

export function menu(view, name, label, labels, value) {
  const input = make("select", { id: `${view.id}-${name}`, name, "aria-describedby": `${view.id}-message` });
  labels.forEach((text, index) => input.append(make("option", { value: index }, text)));
  input.value = String(value);
  view.controls.append(make("label", { class: "mha-control mha-menu", for: input.id }, make("span", {}, label), input));
  return input;
}

export function button(parent, text, label, action) {
  const node = make("button", { type: "button", class: "mha-button", "aria-label": label || text }, text);
  node.addEventListener("click", action);
  parent.append(node);
  return node;
}

/* The table of numbers is written when it is open: a closed one would cost every redraw a cell per number. */
export function showNumbers(view) {
  if (!view.details.open || !view.tableMap) return;
  const table = numbersTable(view, view.tableMap);
  if (view.table.firstChild !== table) view.table.replaceChildren(table);
}

/* A view keeps the tallest height it has had in its present layout (one map, a comparison, one layer's grid, the
   whole model's grid; its table of numbers open or closed) at its present width: another sentence, head or step
   then leaves the page under the view where it was, instead of moving it up and down by the difference between two
   maps' heights (on a phone, where each map is as wide as the screen, a hundred pixels and more). Called before the
   view draws its new state, with the height and width afterInput() read after the last painted input, so it forces
   no layout. A new layout or width starts afresh. */
export function holdHeight(view) {
  const root = view.root;
  if (view.shownHeight === undefined) return;  /* no input painted yet */
  const layout = [view.mode === "grid" ? `grid ${view.gridAll}` : `compare ${view.compareWith !== null}`,
    view.details.open].join(" ");
  if (view.heldLayout !== layout || view.heldWidth !== view.shownWidth) {
    [view.heldLayout, view.heldWidth] = [layout, view.shownWidth];
    if (root.style.minHeight) root.style.minHeight = "";
    return;
  }
  const held = `${view.shownHeight}px`;
  if (root.style.minHeight !== held) root.style.minHeight = held;
}
