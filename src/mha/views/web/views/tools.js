/* The tools every attention view shares: the grid of every head, the comparison of two settings with their
   difference, the downloads and the link; and what every view does once its state is set.

   A view tells the tools what it can do:
   view.state: {name: value}; view.mapAt(state) -> map or null; view.apply(state) redraws for a state;
   view.gridNames: the controls a grid runs over (["head"] or ["layer", "head"]), with view.range(name, state);
   view.compareName: the control whose other values can be compared with the one shown;
   view.stateNames: what the address holds, and view.valueOf(name, text) -> value or throws. */

import { contentWidth, make } from "./dom.js";
import { colourLegend, createFigure, sheetBitmap } from "./drawing.js";
import { exportMap } from "./exports.js";
import { focusCell } from "./focus.js";
import { READOUT_HELP, afterInput, button, holdHeight, showNumbers } from "./frame.js";
import { readAddress, writeAddress } from "./address.js";
import { typedSequences } from "./typed_sequences.js";
import { addLiveTraining } from "./head_count_live.js";

function addGridButtons(view, tools) {
  view.gridButton = button(tools, "All heads", "All heads: show every head of this layer at once", afterInput(view, () => {
    view.mode = view.mode === "grid" && !view.gridAll ? "single" : "grid";
    view.gridAll = false;
    view.redraw();
  }));
  if (view.gridNames.length > 1) {
    view.gridAllButton = button(tools, "All layers", "All layers: show every head of every layer at once", afterInput(view, () => {
      view.mode = view.mode === "grid" && view.gridAll ? "single" : "grid";
      view.gridAll = view.mode === "grid";
      view.redraw();
    }));
  }
}

function addCompareMenu(view, tools) {
  const control = view.compareControl;
  const input = make("select", { id: `${view.id}-compare`, name: "compare" });
  input.append(make("option", { value: "" }, "(nothing)"));
  control.labels.forEach((text, index) => input.append(make("option", { value: index }, text)));
  input.addEventListener("change", afterInput(view, () => {
    view.compareWith = input.value === "" ? null : Number(input.value);
    if (view.mode === "grid") view.mode = "single";
    view.redraw();
  }));
  view.compareInput = input;
  tools.append(make("label", { class: "mha-control mha-menu", for: input.id },
    make("span", {}, `compare with ${control.label}`), input));
}

function addTools(view) {
  const tools = view.tools;
  if (view.gridNames && view.gridNames.length) addGridButtons(view, tools);
  if (view.compareName) addCompareMenu(view, tools);
  const exports = make("span", { class: "mha-export", role: "group", "aria-label": "download the map" },
    make("span", {}, "Download the map: "));
  view.exportButtons = ["svg", "png", "csv"].map((format) => button(exports, format.toUpperCase(),
    `download the map as ${format.toUpperCase()}`, () => exportMap(view, format)));
  tools.append(exports);
  const link = make("a", { class: "mha-link", href: `#${view.id}` }, "Link to this view");
  if (!view.hosted) tools.append(link);  /* in Jupyter the notebook's address is not the view's */
  view.linkNode = link;
}

/* One small map of a grid: a button showing its map, which opens it. Every map of a grid is painted into one
   picture, a column of maps one under the other (drawGrid), and a tile shows its own part of it: one picture to
   encode and decode rather than 72, which is what a slow phone spends its time on. A tile's side is views.css's
   --mha-tile, which fits a layer's heads to the view's width. */
function gridTile(view, map, top, sheetRows, label, open) {
  const picture = make("span", { class: "mha-tile-map" });
  placeTile(view, picture, map, top, sheetRows);
  const tile = make("button", { type: "button", class: "mha-tile", "aria-label": `${label}: open this map` },
    picture, make("span", {}, label));
  tile.addEventListener("click", afterInput(view, open));
  return tile;
}

/* Where a tile's picture shows its map: the part of the grid's picture from pixel row `top`. Set on the picture
   itself (not inherited from the grid), so that a new picture restyles the tiles' pictures and nothing else. */
function placeTile(view, picture, map, top, sheetRows) {
  const [nRows, nColumns] = [map.rows.length, map.columns.length];
  const tiles = (count) => `calc(var(--mha-tile) * ${count})`;  /* a length in tiles: cells / cells per tile */
  picture.style.cssText = `background-image: url("${view.sheetAddress}"); background-size: ` +
    `${tiles(view.sheetColumns / nColumns)} ${tiles(sheetRows / nRows)}; background-position: 0 ${tiles(-top / nRows)}`;
}

/* Every state of the grid (each head of the layer, or of every layer) with its map. */
function gridMaps(view) {
  const names = view.gridAll ? view.gridNames : view.gridNames.slice(-1);
  const states = [{}];
  for (const name of names) {
    const next = [];
    for (const partial of states) {
      for (const value of view.range(name, { ...view.state, ...partial })) next.push({ ...partial, [name]: value });
    }
    states.splice(0, states.length, ...next);
  }
  const shown = [];
  for (const partial of states) {
    const state = { ...view.state, ...partial };
    const map = view.mapAt(state);
    if (map) shown.push({ state, map });
  }
  return shown;
}

/* The grid's maps painted one under the other into one picture (a bitmap, drawing.js), kept at a blob: address. */
function paintSheet(view, shown) {
  const { bytes, width, height } = sheetBitmap(view.payload.palette, shown.map(({ map }) => map));
  view.sheetColumns = width;
  /* The picture goes to the tiles by a short blob: address: a data: address would be read again for every tile's
     style, the costliest step of drawing the grid. */
  if (view.sheetAddress) URL.revokeObjectURL(view.sheetAddress);
  view.sheetAddress = URL.createObjectURL(new Blob([bytes], { type: "image/bmp" }));
  return height;
}

/* The grid: one row per layer, labelled, with a tile per head (one row, without a label, where the view has no
   layers), scrolling sideways when a layer's heads are wider than the screen; and under it the colour scale that
   every tile shares. */
function drawGrid(view) {
  const shown = gridMaps(view);
  const sheetRows = paintSheet(view, shown);
  const columns = view.range(view.gridNames[view.gridNames.length - 1], view.state).length;
  /* The same tiles (another sentence or step, on a grid of the same titles) are kept, and only the picture they show
     changes: building 72 tiles again costs a phone more than painting them. */
  const layout = [view.gridAll, columns, ...shown.map(({ map }) => map.tile || map.title)].join("\u0002");
  const kept = view.gridTiles && view.gridTiles.layout === layout && view.picture.contains(view.gridTiles.grid);
  if (kept) {
    view.gridTiles.states = shown.map(({ state }) => state);
    let top = 0;
    view.gridTiles.grid.querySelectorAll(".mha-tile-map").forEach((picture, index) => {
      placeTile(view, picture, shown[index].map, top, sheetRows);
      top += shown[index].map.rows.length;
    });
  } else {
    const grid = make("div", { class: "mha-grid", role: "group", "aria-label": "every head; choose one to open it" });
    view.gridTiles = { layout, grid, states: shown.map(({ state }) => state) };
    const byLayer = view.gridNames.includes("layer");
    let top = 0;
    let layer = null;
    shown.forEach(({ state, map }, index) => {
      if (byLayer && state.layer !== layer) {
        layer = state.layer;
        grid.append(make("span", { class: "mha-grid-layer" }, `layer ${layer}`));
      }
      grid.append(gridTile(view, map, top, sheetRows, map.tile || map.title, () => {
        view.mode = "single";
        view.apply(view.gridTiles.states[index]);
      }));
      top += map.rows.length;
    });
    grid.classList.toggle("mha-grid-layers", byLayer);
    grid.style.setProperty("--mha-columns", String(columns));
    view.legend = view.legend || colourLegend(view.payload.palette);
    view.picture.replaceChildren(make("div", { class: "mha-grid-scroll", tabindex: "0", role: "region",
      "aria-label": "the grid of heads (scrolls sideways)" }, grid), view.legend);
  }
  /* The map figures wait off the page while the grid is shown: a map opened from it with the same labels (any head of
     the same sentence) then only recolours its cells. Where there is none yet, one is built for the first tile: with
     the view itself, for a view that opens on its grid (so that opening the first map is not the slowest input of
     the view, however soon it comes), and otherwise once the page is idle. */
  if (view.figures.length) view.spareFigures = view.figures;
  view.figures = [];
  if (!(view.spareFigures || []).length) prepareFigure(view, view.gridTiles.states[0], view.started ? whenIdle : now);
  view.readout.textContent = `${shown.length} maps, one per head, on the same colour scale (0 to 1). ` +
    "Click a map, or focus it and press Enter, to open it.";
  view.readout.dataset.grid = "true";
  view.tableMap = null;
  view.table.replaceChildren(make("p", {}, "Open one map to read its numbers."));
}

const whenIdle = typeof requestIdleCallback === "function" ? (work) => requestIdleCallback(work)
  : (work) => setTimeout(work, 200);
const now = (work) => work();

function prepareFigure(view, state, when) {
  if (view.preparing) return;
  view.preparing = true;
  when(() => {
    view.preparing = false;
    if (view.mode !== "grid" || (view.spareFigures || []).length) return;
    const map = state && view.mapAt(state);
    if (!map) return;
    const figure = figureFor(view);
    figure.draw(map);
    view.spareFigures = [figure];
  });
}

/* A figure for a map: one waiting off the page (unfocused), or a new one. */
function figureFor(view) {
  const spare = (view.spareFigures || []).shift();
  if (!spare) return createFigure(view, { onFocus: (row, column) => focusCell(view, row, column) });
  spare.setFocus(null);
  return spare;
}

/* The maps of a comparison: the first setting's, the second's and, when their shapes agree, their difference;
   with a note when they cannot be compared cell by cell. */
function comparedMaps(view, map) {
  const other = view.mapAt({ ...view.state, [view.compareName]: view.compareWith });
  if (!other) return { maps: [map], note: null };
  const maps = [{ ...map, title: `first: ${map.title}`, short: "first" },
    { ...other, title: `second: ${other.title}`, short: "second" }];
  if (other.rows.length !== map.rows.length || other.columns.length !== map.columns.length) {
    return { maps, note: `The two have different lengths (${map.rows.length} and ${other.rows.length} positions), ` +
      "so there is no cell-by-cell difference; they are shown side by side." };
  }
  const difference = Int16Array.from(map.hundredths, (value, index) => value - other.hundredths[index]);
  const largest = Math.max(10, ...Array.from(difference, Math.abs));
  const limit = Math.min(100, Math.ceil(largest / 10) * 10);
  const values = map.values && other.values ? Float64Array.from(map.values, (value, index) => value - other.values[index])
    : undefined;
  maps.push({ title: "first − second", short: "first − second", rows: map.rows, columns: map.columns,
    hundredths: difference, values, marked: [], scale: { kind: "difference", limit } });
  const same = map.rows.every((label, index) => label === other.rows[index]);
  return { maps, note: same ? null : "The two have different tokens; rows and columns are compared position by position." };
}

/* The single map, or a comparison: the map, the compared setting's map, and their difference. */
function drawMaps(view, map) {
  if (view.readout.dataset.grid) {
    delete view.readout.dataset.grid;
    view.readout.textContent = READOUT_HELP;
  }
  const { maps, note } = view.compareWith !== null && view.compareName ? comparedMaps(view, map)
    : { maps: [map], note: null };
  while (view.figures.length > maps.length) view.figures.pop();
  while (view.figures.length < maps.length) view.figures.push(figureFor(view));
  const nodes = [];
  maps.forEach((shown, index) => {
    view.figures[index].draw(shown);
    nodes.push(view.figures[index].element);
  });
  if (note) nodes.push(make("p", { class: "mha-compare-note" }, note));
  if (view.picture.children.length !== nodes.length || nodes.some((node, index) => view.picture.children[index] !== node)) {
    view.picture.replaceChildren(...nodes);
  }
  view.picture.classList.toggle("mha-compare", maps.length > 1);
  const focused = view.figures[0].focus;
  if (focused) focusCell(view, ...focused, true);
  view.tableMap = map;
  showNumbers(view);
}

/* Mark the grid and comparison buttons as pressed or not. */
function markTools(view) {
  for (const node of view.exportButtons || []) node.disabled = view.mode === "grid";  /* open one map to download it */
  if (view.gridButton) view.gridButton.setAttribute("aria-pressed", String(view.mode === "grid" && !view.gridAll));
  if (view.gridAllButton) view.gridAllButton.setAttribute("aria-pressed", String(view.mode === "grid" && view.gridAll));
}

/* What every view does once its state is set: draw the grid or the map (with its comparison), mark the tools,
   and write the state into the address. */
export function showState(view, map) {
  holdHeight(view);
  if (view.mode === "grid") drawGrid(view);
  else if (map) drawMaps(view, map);
  markTools(view);
  view.writeAddress();
}

/* The width a map may take (view.mapWidth, px): the view's own content width, followed as the window changes; a
   view is drawn afresh to fit a new width (its maps, drawing.js; a timeline's loss curve), and the grid's tiles
   size themselves to it (views.css's --mha-view-width). Unknown (Infinity) while the view is hidden. */
function followWidth(view) {
  const setWidth = (width) => {
    view.mapWidth = width;
    if (width !== Infinity) view.root.style.setProperty("--mha-view-width", `${width}px`);
  };
  setWidth(contentWidth(view.root));
  if (typeof ResizeObserver === "undefined") return;
  new ResizeObserver((entries) => {
    const width = Math.floor(entries[entries.length - 1].contentRect.width) || Infinity;
    if (width === view.mapWidth) return;
    setWidth(width);
    if (view.started) view.redraw();
  }).observe(view.root);
}

/* A view's last step: its tools, its opening (one map or the grid), its first drawing, and the address read. */
export function finish(view) {
  view.writeAddress = () => writeAddress(view);
  followWidth(view);
  addTools(view);
  if (view.payload.typed_sequences && !view.hosted) typedSequences(view, showState);  /* chapter 3.6's typed ids */
  if (view.payload.live_training) addLiveTraining(view, showState);  /* section 3.7: train a model in the page */
  if (view.gridNames && view.gridNames.length && ["heads", "layers"].includes(view.payload.opening)) {
    view.mode = "grid";  /* the view opens on every head of its layer, or of the model */
    view.gridAll = view.payload.opening === "layers" && view.gridNames.length > 1;
  }
  view.redraw();
  if (!view.hosted) {
    readAddress(view);
    window.addEventListener("hashchange", () => readAddress(view));
  }
  view.started = true;
  return view;
}
