/* Deep links: a view's whole state in the page's address, #view-N?name=value&..., written as the reader moves
   and read when the page opens or the address changes. A problem with an address is shown as text; the view then
   shows the rest of what it asked for. */

import { make } from "./dom.js";
import { focusCell } from "./focus.js";

const MAX_ADDRESS = 2000;  /* characters of a view's state in the address: more is refused */

function stateText(view) {
  const parts = new URLSearchParams();
  for (const name of view.stateNames) parts.set(name, String(view.addressValue(name)));
  if (view.mode === "grid") parts.set("grid", view.gridAll ? "layers" : "heads");
  if (view.compareWith !== null) parts.set("compare", String(view.compareWith));
  const focus = view.figures[0] && view.figures[0].focus;
  if (focus && view.mode !== "grid") parts.set("cell", `${focus[0]}.${focus[1]}`);
  if (view.addressParts) view.addressParts(view.state, parts);
  return `${view.id}?${parts.toString()}`;
}

export function writeAddress(view) {
  const text = stateText(view);
  view.linkNode.setAttribute("href", `#${text}`);
  if (view.restoring || view.hosted || !view.started) return;  /* the address is read before it is written */
  if (location.hash.slice(1) === text) return;
  if (location.hash.startsWith(`#${view.id}?`) || location.hash === "" || location.hash.startsWith("#view-")) {
    /* The address changes once the new frame is on screen: the browser's history is another process, and a reader
       waits for the map, not for the address. Several changes before then write the last one. */
    const queued = view.pendingAddress !== undefined;
    view.pendingAddress = text;
    if (!queued) requestAnimationFrame(() => setTimeout(() => setTimeout(() => flushAddress(view), 0), 0));
  }
}

function flushAddress(view) {
  const text = view.pendingAddress;
  delete view.pendingAddress;
  if (location.hash.slice(1) === text) return;
  try {
    history.replaceState(history.state, "", `#${text}`);
  } catch { /* some hosts (a sandboxed frame) refuse; the link still carries the state */ }
}

export function wholeNumber(text, low, high, what) {
  if (!/^[0-9]{1,6}$/.test(text)) throw new Error(`${what} should be a whole number, not “${text.slice(0, 40)}”`);
  const value = Number(text);
  if (value < low || value > high) throw new Error(`${what} goes from ${low} to ${high}, not ${value}`);
  return value;
}

/* One name=value of the address, read into `asked` ({state, mode, gridAll, compare, cell, runs}); throws what is
   wrong with it. */
function readPart(view, asked, name, text) {
  if (view.stateNames.includes(name)) {
    asked.state[name] = view.valueOf(name, text);
  } else if (view.runNames && view.runNames.includes(name)) {
    asked.runs[name] = text;
  } else if (name === "grid" && view.gridNames && view.gridNames.length) {
    if (!["heads", "layers"].includes(text)) throw new Error(`grid should be “heads” or “layers”, not “${text.slice(0, 40)}”`);
    asked.mode = "grid";
    asked.gridAll = text === "layers" && view.gridNames.length > 1;
  } else if (name === "compare" && view.compareName) {
    asked.compare = wholeNumber(text, 0, view.compareControl.labels.length - 1, "compare");
  } else if (name === "cell") {
    const match = /^([0-9]{1,4})\.([0-9]{1,4})$/.exec(text);
    if (!match) throw new Error(`cell should be row.column, e.g. 2.3, not “${text.slice(0, 40)}”`);
    asked.cell = [Number(match[1]), Number(match[2])];
  } else {
    throw new Error(`this view has no setting “${name.slice(0, 40)}” (it has ${[...view.stateNames, "grid",
      "compare", "cell", ...(view.runNames || [])].join(", ")})`);
  }
}

/* What the address asks of the view, and what is wrong with it. */
function askedOf(view) {
  const asked = { state: { ...view.state }, mode: "single", gridAll: false, compare: null, cell: null, runs: {},
    problems: [] };
  if (location.hash.length > MAX_ADDRESS) {
    asked.problems.push(`the address is ${location.hash.length} characters long, more than the ${MAX_ADDRESS} a view reads`);
    return asked;
  }
  for (const [name, text] of new URLSearchParams(location.hash.slice(1 + view.id.length + 1))) {
    try {
      readPart(view, asked, name, text);
    } catch (error) {
      asked.problems.push(error.message);
    }
  }
  return asked;
}

function showProblems(view, problems) {
  if (problems.length) {
    view.address.replaceChildren(make("b", { class: "mha-problem" }, "The address asked for something this view " +
      "cannot show:"), ` ${problems.join("; ")}. The rest of it is shown.`);
  } else {
    view.address.replaceChildren();
  }
}

function setCompared(view, compared) {
  view.compareWith = compared;
  if (view.compareInput) view.compareInput.value = compared === null ? "" : String(compared);
}

/* The cell the address names, focused if the map on show has it; whether it does. */
function focusAsked(view, cell) {
  const map = view.figures[0] && view.figures[0].map;
  if (!cell || !map) return true;
  if (cell[0] >= map.rows.length || cell[1] >= map.columns.length) return false;
  focusCell(view, cell[0], cell[1], true);
  return true;
}

/* A sentence run in the page (text=...): load the model, then show it. */
function showRuns(view, asked) {
  view.started = true;
  showProblems(view, asked.problems);
  view.readRuns(asked.runs).then(({ index, compared }) => {
    setCompared(view, compared);
    view.apply({ ...asked.state, sentence: index });
    focusAsked(view, asked.cell);
  }).catch((error) => {
    asked.problems.push(error.message);
    view.runFailed(error);
  }).finally(() => {
    view.restoring = false;
    showProblems(view, asked.problems);
    view.writeAddress();
  });
}

const VIEW_ADDRESS = /^view-([0-9]+)(?:\?|$)/;

/* What is wrong with an address after # that is meant for a view (it starts with "view") but that no view of the
   page can read, said by the page's first view; null when the address is fine, or is another kind of link (a
   heading's), or another view's. */
function addressMistake(view, raw) {
  if (!/^view-?[0-9?]/i.test(raw)) return null;
  /* the page's views are view-1 to view-N, numbered as they open (some may not have opened yet) */
  const count = document.querySelectorAll(".mha-view").length;
  const named = VIEW_ADDRESS.exec(raw);
  if (named && Number(named[1]) >= 1 && Number(named[1]) <= count) {
    if (`view-${named[1]}` !== view.id) return null;
    try {
      decodeURIComponent(raw);
      return null;
    } catch {
      return "its text is not valid percent-encoding (a % must be followed by two hexadecimal digits, as in %20)";
    }
  }
  if (view.id !== "view-1") return null;
  const shown = `“#${raw.slice(0, 60)}${raw.length > 60 ? "…" : ""}”`;
  if (named) {
    return `${shown} names view-${named[1]}, but this page has ${count === 1 ? "one view, view-1"
      : `views view-1 to view-${count}`}`;
  }
  return `${shown} is not a view's address, which reads #view-N?name=value&name=value (for example #${view.id}?` +
    `${view.stateNames[0]}=${encodeURIComponent(String(view.addressValue(view.stateNames[0])))})`;
}

function showMistake(view, mistake) {
  view.address.replaceChildren(make("b", { class: "mha-problem" }, "This view cannot read the address:"),
    ` ${mistake}. The view's default setting is shown.`);
  view.addressMistake = true;
}

/* Read a view's state from the address; a problem is shown as text and the view keeps its own state. */
export function readAddress(view) {
  const raw = location.hash.slice(1);
  const mistake = addressMistake(view, raw);
  if (mistake) {
    showMistake(view, mistake);
    return;
  }
  if (view.addressMistake) {  /* an address read since, or a heading's: the earlier complaint no longer applies */
    view.addressMistake = false;
    view.address.replaceChildren();
  }
  let hash;
  try {
    hash = decodeURIComponent(raw);
  } catch {
    return;
  }
  if (!hash.startsWith(`${view.id}?`) && hash !== view.id) return;
  view.root.scrollIntoView({ block: "start" });
  const asked = askedOf(view);
  view.restoring = true;
  view.mode = asked.mode;
  view.gridAll = asked.gridAll;
  setCompared(view, asked.compare);
  view.apply(asked.state);
  const { cell, runs, problems } = asked;
  if (cell && runs.text === undefined && !focusAsked(view, cell)) {
    const map = view.figures[0].map;
    problems.push(`cell ${cell[0]}.${cell[1]} is outside this ${map.rows.length} × ${map.columns.length} map`);
  }
  if (Object.keys(runs).length && runs.text === undefined) {
    problems.push(`${Object.keys(runs).join(" and ")} need a text= to run the model on`);
  } else if (runs.text !== undefined) {
    showRuns(view, asked);
    return;
  }
  view.restoring = false;
  view.started = true;
  showProblems(view, problems);
  view.writeAddress();
}
