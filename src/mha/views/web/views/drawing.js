/* Drawing an attention map: its colours, the SVG figure with its colour scale, labels, focus cell and rings, the
   table of its numbers for screen readers, and the one picture of a grid's maps (a bitmap). */

import { hundredthsText, make, makeSvg } from "./dom.js";

export const FONT = 12;  /* px: the smallest text a map draws, legible on a phone */

/* --- colours ------------------------------------------------------------------------------------------------ */

/* A difference of two maps: orange (the second setting higher) through white to purple (the first higher), the
   two ends of ColorBrewer's PuOr, safe for colour-blind readers. */
const DIVERGING = [[179, 88, 6], [247, 247, 247], [84, 39, 136]];

function divergingColour(fraction) {  /* fraction in [-1, 1] */
  const t = Math.max(-1, Math.min(1, fraction));
  const [from, to, u] = t < 0 ? [DIVERGING[1], DIVERGING[0], -t] : [DIVERGING[1], DIVERGING[2], t];
  const rgb = from.map((value, index) => Math.round(value + (to[index] - value) * u));
  const luminance = (0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]) / 255;
  return [`#${rgb.map((value) => value.toString(16).padStart(2, "0")).join("")}`, luminance < 0.45 ? "#fff" : "#000"];
}

/* The colour of a cell: [background, text]. A map's "scale" says how its hundredths are read: weights from 0 to 1
   on the payload's palette (viridis), or a signed difference from -limit to +limit. */
export function cellColour(palette, scale, hundredths) {
  if (scale.kind === "difference") return divergingColour(hundredths / scale.limit);
  return palette[Math.max(0, Math.min(255, Math.round((hundredths / 100) * 255)))];
}

/* Write a map's cells, a pixel per cell, into `pixels` (4 bytes a pixel, rows of `width` pixels) from pixel row
   `top`: map.hundredths is (rows × columns), row-major. `order` is where red, green and blue go in a pixel: [0, 1, 2]
   for a canvas (RGBA), [2, 1, 0] for a bitmap file (BGRA). Each distinct value's colour is worked out once. */
export function writeCells(pixels, width, top, palette, map, order = [0, 1, 2]) {
  const [nRows, nColumns] = [map.rows.length, map.columns.length];
  const [red, green, blue] = order;
  const rgbOf = new Map();
  for (let row = 0; row < nRows; row += 1) {
    let at = ((top + row) * width) * 4;
    for (let column = 0; column < nColumns; column += 1, at += 4) {
      const value = map.hundredths[row * nColumns + column];
      let rgb = rgbOf.get(value);
      if (rgb === undefined) {
        const hex = parseInt(cellColour(palette, map.scale, value)[0].slice(1), 16);
        rgb = [(hex >> 16) & 255, (hex >> 8) & 255, hex & 255];
        rgbOf.set(value, rgb);
      }
      pixels[at + red] = rgb[0];
      pixels[at + green] = rgb[1];
      pixels[at + blue] = rgb[2];
      pixels[at + 3] = 255;
    }
  }
}

/* Paint a map onto a canvas of one pixel per cell, sized to the map. */
export function paintCells(canvas, palette, map) {
  const [nRows, nColumns] = [map.rows.length, map.columns.length];
  if (canvas.width !== nColumns) canvas.width = nColumns;
  if (canvas.height !== nRows) canvas.height = nRows;
  const context = canvas.getContext("2d");
  const image = context.createImageData(nColumns, nRows);
  writeCells(image.data, nColumns, 0, palette, map);
  context.putImageData(image, 0, 0);
}

/* Maps painted one under the other, a pixel per cell, as the bytes of a bitmap (BMP) file: its pixels are written
   as they are, with nothing to encode here or to decompress where it is shown (a PNG of a grid of 72 maps costs a
   slow phone more to write and read than to draw). Returns {bytes, width, height}. */
export function sheetBitmap(palette, maps) {
  const width = Math.max(1, ...maps.map((map) => map.columns.length));
  const height = Math.max(1, maps.reduce((rows, map) => rows + map.rows.length, 0));
  const HEADER = 54;  /* the file header (14 bytes) and BITMAPINFOHEADER (40) */
  const bytes = new Uint8Array(HEADER + width * height * 4);
  const fields = new DataView(bytes.buffer);
  bytes[0] = 0x42;  /* "BM" */
  bytes[1] = 0x4d;
  fields.setUint32(2, bytes.length, true);
  fields.setUint32(10, HEADER, true);  /* where the pixels start */
  fields.setUint32(14, 40, true);
  fields.setInt32(18, width, true);
  fields.setInt32(22, -height, true);  /* negative: the first row is the top one */
  fields.setUint16(26, 1, true);  /* planes */
  fields.setUint16(28, 32, true);  /* bits a pixel: blue, green, red and one unused byte; no compression */
  fields.setUint32(34, width * height * 4, true);
  const pixels = bytes.subarray(HEADER);
  let top = 0;
  for (const map of maps) {
    writeCells(pixels, width, top, palette, map, [2, 1, 0]);
    top += map.rows.length;
  }
  return { bytes, width, height };
}

/* --- one map: SVG picture with colour scale, focus cell and readout ---------------------------------------- */

/* A figure draws maps into one SVG. A map with the same labels as the one on screen (another head of the same
   sentence) only recolours its cells; a new sentence draws the picture afresh. */
export function createFigure(view, options = {}) {
  const figure = { view, drawn: null, map: null, focus: null, onFocus: options.onFocus || (() => {}) };
  figure.element = make("div", { class: "mha-figure" });
  figure.draw = (map) => drawFigure(figure, map);
  figure.setFocus = (row, column) => focusFigure(figure, row, column);
  return figure;
}

export function labelLayout(map) {
  return [map.rows.length, ...map.rows, "\u0000", ...map.columns].join("\u0001");
}

function drawFigure(figure, map) {
  figure.map = map;
  const place = figureGeometry(map, figure.view.mapWidth || Infinity);
  const layout = [labelLayout(map), map.scale.kind === "difference" ? map.scale.limit : "weight", place.cell,
    place.scaleUnder].join("\u0002");
  if (!figure.drawn || figure.drawn.layout !== layout) buildFigure(figure, map, layout, place);
  paintFigure(figure, map);
}

const CHARACTER = 8;  /* px: the widest a label's character is drawn, at FONT */
const SCALE_BESIDE = 76;  /* px: the colour scale right of the map, with its labels */

/* Where a map's parts go, in the SVG's own units, which are CSS pixels: the figure is never scaled, so its text
   stays at FONT. The cells shrink (to 5 px at least) to fit the map into `available` px, the width the view gives
   it; where the colour scale does not fit beside the map, it goes under it, at the map's left edge. */
function figureGeometry(map, available) {
  const nRows = map.rows.length;
  const nColumns = map.columns.length;
  const longest = (labels) => Math.min(16, Math.max(1, ...labels.map((label) => [...label].length)));
  const left = 24 + CHARACTER * longest(map.rows);
  const top = 22;
  const bottom = 26 + CHARACTER * longest(map.columns);
  const widest = Math.max(9, Math.min(22, Math.floor(400 / Math.max(nRows, nColumns))));
  const beside = Math.floor((available - left - SCALE_BESIDE) / nColumns);
  const scaleUnder = beside < Math.min(widest, 9);
  const cell = scaleUnder ? Math.max(5, Math.min(widest, Math.floor((available - left - 4) / nColumns)))
    : Math.min(widest, beside);
  const mapBottom = Math.max(top + cell * nRows + bottom, scaleUnder ? 0 : 150);
  return { nRows, nColumns, cell, left, top, every: Math.max(nRows, nColumns) > 30 ? 5 : 1, scaleUnder, mapBottom,
    width: scaleUnder ? Math.max(left + cell * nColumns + 4, left + 150) : left + cell * nColumns + SCALE_BESIDE,
    height: mapBottom + (scaleUnder ? 48 : 0) };
}

/* The row labels (queries) left of the map and the column labels (keys) under it, every 5th on a long sentence. */
function addLabels(svg, map, { nRows, nColumns, cell, left, top, every }) {
  const cut = (label) => ([...label].length > 16 ? [...label].slice(0, 15).join("") + "…" : label);
  const rowLabels = [];
  for (let row = 0; row < nRows; row += every) {
    const text = makeSvg("text", { x: left - 4, y: top + (row + 0.5) * cell + 4, "text-anchor": "end" }, cut(map.rows[row]));
    rowLabels[row] = text;
    svg.append(text);
  }
  const columnLabels = [];
  for (let column = 0; column < nColumns; column += every) {
    const x = left + (column + 0.5) * cell + 4;
    const y = top + nRows * cell + 4;
    const text = makeSvg("text", { x, y, "text-anchor": "end", transform: `rotate(-90 ${x} ${y})` },
      cut(map.columns[column]));
    columnLabels[column] = text;
    svg.append(text);
  }
  return { rowLabels, columnLabels };
}

function buildFigure(figure, map, layout, place) {
  const { nRows, nColumns, cell, left, top, width, height } = place;
  const svg = makeSvg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "mha-map" });
  /* centred over the cells; on a narrow screen from the left edge, where a long title has the whole width */
  const title = makeSvg("text", place.scaleUnder ? { x: 2, y: 14, "text-anchor": "start", class: "mha-map-title" }
    : { x: left + (cell * nColumns) / 2, y: 14, "text-anchor": "middle", class: "mha-map-title" });
  svg.append(title);
  /* The cells are one canvas, a pixel per cell, scaled up without smoothing: one paint per map instead of a node
     per cell. The export writes them out as rectangles. */
  const cells = makeSvg("foreignObject", { x: left, y: top, width: cell * nColumns, height: cell * nRows,
    class: "mha-cells" });
  const canvas = make("canvas", { width: nColumns, height: nRows, "aria-hidden": "true" });
  cells.append(canvas);
  svg.append(cells);
  const rings = makeSvg("g", { class: "mha-rings" });
  const bands = makeSvg("g", { class: "mha-bands" });
  const rowBand = makeSvg("rect", { x: left, width: cell * nColumns, height: cell, class: "mha-band" });
  const columnBand = makeSvg("rect", { y: top, width: cell, height: cell * nRows, class: "mha-band" });
  const focusRing = makeSvg("rect", { width: cell, height: cell, class: "mha-focus-cell" });
  bands.append(rowBand, columnBand, focusRing);
  bands.style.display = "none";
  svg.append(rings, bands);
  const { rowLabels, columnLabels } = addLabels(svg, map, place);
  const axes = figure.view.payload.axes;
  svg.append(makeSvg("text", { x: left + (cell * nColumns) / 2, y: place.mapBottom - 4, "text-anchor": "middle",
    class: "mha-axis" }, axes.key));
  const middle = top + (cell * nRows) / 2;
  svg.append(makeSvg("text", { x: 11, y: middle, "text-anchor": "middle", class: "mha-axis",
    transform: `rotate(-90 11 ${middle})` }, axes.query));
  svg.append(place.scaleUnder
    ? colourScale(figure.view.payload.palette, map.scale, left, place.mapBottom + 6, 140, true)
    : colourScale(figure.view.payload.palette, map.scale, left + cell * nColumns + 14, top,
      Math.max(90, Math.min(cell * nRows, 220)), false));
  figure.drawn = { layout, svg, title, canvas, rings, bands, rowBand, columnBand, focusRing, left, top, cell,
    rowLabels, columnLabels };
  figure.focus = null;
  svg.addEventListener("pointerdown", (event) => pointAt(figure, event));
  svg.addEventListener("pointermove", (event) => { if (event.pointerType === "mouse") pointAt(figure, event); });
  figure.element.replaceChildren(svg);
}

/* The colour scale, drawn into the map's SVG: a bar of `length` px, upright beside the map (the highest value at
   the top) or lying under it (the highest at the right), with its ends and middle labelled. */
function colourScale(palette, scale, x, y, length, lying) {
  const group = makeSvg("g", { class: "mha-scale" });
  const steps = 32;
  const low = scale.kind === "difference" ? -scale.limit : 0;
  const high = scale.kind === "difference" ? scale.limit : 100;
  const along = (value) => ((value - low) / (high - low)) * length;  /* px from the bar's low end */
  for (let step = 0; step < steps; step += 1) {
    const hundredths = Math.round(low + ((step + 0.5) / steps) * (high - low));
    const [from, size] = [(step * length) / steps, length / steps + 0.5];
    const fill = cellColour(palette, scale, hundredths)[0];
    group.append(makeSvg("rect", lying ? { x: x + from, y, width: size, height: 12, fill }
      : { x, y: y + length - from - size + 0.5, width: 12, height: size, fill }));
  }
  const frame = { fill: "none", class: "mha-scale-frame" };
  group.append(makeSvg("rect", lying ? { x, y, width: length, height: 12, ...frame }
    : { x, y, width: 12, height: length, ...frame }));
  const ticks = scale.kind === "difference"
    ? [[scale.limit, `+${hundredthsText(scale.limit)}`], [0, "0"], [-scale.limit, hundredthsText(-scale.limit)]]
    : [[100, "1"], [50, "0.5"], [0, "0"]];
  ticks.forEach(([value, text]) => {
    if (lying) {
      const at = x + along(value);
      group.append(makeSvg("line", { x1: at, x2: at, y1: y + 12, y2: y + 16, class: "mha-tick" }));
      group.append(makeSvg("text", { x: at, y: y + 29, "text-anchor": "middle", class: "mha-tick-label" }, text));
    } else {
      const at = y + length - along(value);
      group.append(makeSvg("line", { x1: x + 12, x2: x + 16, y1: at, y2: at, class: "mha-tick" }));
      group.append(makeSvg("text", { x: x + 18, y: at + 4, class: "mha-tick-label" }, text));
    }
  });
  const name = scale.kind === "difference" ? "difference" : "weight";
  group.append(makeSvg("text", lying ? { x: x + length + 10, y: y + 11, class: "mha-scale-name" }
    : { x, y: y + length + 16, class: "mha-scale-name" }, name));
  return group;
}

/* The colour scale a grid's maps share, on its own under the grid: a horizontal bar from 0 to 1, named. */
export function colourLegend(palette) {
  const [x, width, barTop] = [10, 160, 6];
  const svg = makeSvg("svg", { viewBox: `0 0 ${x + width + 125} 42`, width: x + width + 125, height: 42, role: "img",
    class: "mha-legend", "aria-label": "colour scale of every map of the grid: attention weight from 0 to 1" });
  const steps = 32;
  for (let step = 0; step < steps; step += 1) {
    svg.append(makeSvg("rect", { x: x + (step * width) / steps, y: barTop, width: width / steps + 0.5, height: 12,
      fill: cellColour(palette, { kind: "weight" }, Math.round(((step + 0.5) / steps) * 100))[0] }));
  }
  svg.append(makeSvg("rect", { x, y: barTop, width, height: 12, fill: "none", class: "mha-scale-frame" }));
  [[0, "0"], [50, "0.5"], [100, "1"]].forEach(([value, text]) => {
    const at = x + (width * value) / 100;
    svg.append(makeSvg("line", { x1: at, x2: at, y1: barTop + 12, y2: barTop + 16, class: "mha-tick" }));
    svg.append(makeSvg("text", { x: at, y: barTop + 30, "text-anchor": "middle" }, text));
  });
  svg.append(makeSvg("text", { x: x + width + 12, y: barTop + 11, class: "mha-scale-name" }, "weight, every map"));
  return svg;
}

function paintFigure(figure, map) {
  const palette = figure.view.payload.palette;
  const { svg, title, canvas, rings, left, top, cell } = figure.drawn;
  title.textContent = map.title;
  svg.setAttribute("aria-label", `${map.title}: attention ${map.scale.kind === "difference" ? "difference " : ""}map, ` +
    `${map.rows.length} queries by ${map.columns.length} keys, colour scale ${map.scale.kind === "difference"
      ? `from ${hundredthsText(-map.scale.limit)} to +${hundredthsText(map.scale.limit)}` : "from 0 to 1"}`);
  paintCells(canvas, palette, map);
  const circles = [];
  for (const [query, key] of map.marked) {
    for (const [colour, strokeWidth] of [["black", 2.2], ["white", 0.9]]) {
      circles.push(makeSvg("circle", { cx: left + (key + 0.5) * cell, cy: top + (query + 0.5) * cell,
        r: Math.max(cell * 0.3, 3), fill: "none", stroke: colour, "stroke-width": strokeWidth }));
    }
  }
  rings.replaceChildren(...circles);
  if (figure.focus) focusFigure(figure, ...figure.focus);
}

/* A pointer (mouse, pen or touch) on the map focuses the cell under it. */
function pointAt(figure, event) {
  const { svg, left, top, cell } = figure.drawn;
  const box = svg.getBoundingClientRect();
  const viewBox = svg.viewBox.baseVal;
  const x = ((event.clientX - box.left) * viewBox.width) / box.width;
  const y = ((event.clientY - box.top) * viewBox.height) / box.height;
  const row = Math.floor((y - top) / cell);
  const column = Math.floor((x - left) / cell);
  if (row >= 0 && row < figure.map.rows.length && column >= 0 && column < figure.map.columns.length) {
    figure.onFocus(row, column);
  }
}

/* Highlight a cell's row and column and ring the cell itself. */
function focusFigure(figure, row, column) {
  if (!figure.drawn || !figure.map) return;
  const { bands, rowBand, columnBand, focusRing, left, top, cell, rowLabels, columnLabels } = figure.drawn;
  if (row === null || row >= figure.map.rows.length || column >= figure.map.columns.length) {
    figure.focus = null;
    bands.style.display = "none";
    return;
  }
  figure.focus = [row, column];
  bands.style.display = "";
  rowBand.setAttribute("y", top + row * cell);
  columnBand.setAttribute("x", left + column * cell);
  focusRing.setAttribute("x", left + column * cell);
  focusRing.setAttribute("y", top + row * cell);
  rowLabels.forEach((label, index) => label && label.classList.toggle("mha-lit", index === row));
  columnLabels.forEach((label, index) => label && label.classList.toggle("mha-lit", index === column));
}

/* The table of a map's numbers, for screen readers: built once per layout, its numbers rewritten for each map. */
function emptyNumbersTable(map) {
  const title = make("b", {}, map.title);
  const caption = make("caption", {}, title, make("br"),
    "rows: query, the position attending FROM · columns: key, the position attended TO");
  const header = make("tr", {}, make("th", { scope: "col" }, "query \\ key"));
  for (const key of map.columns) header.append(make("th", { scope: "col", class: "mha-key" }, key));
  const element = make("table", { class: "mha-numbers" }, caption, make("thead", {}, header));
  const body = make("tbody");
  const cells = [];
  map.rows.forEach((query) => {
    const line = make("tr", {}, make("th", { scope: "row" }, query));
    for (let column = 0; column < map.columns.length; column += 1) {
      const td = make("td");
      cells.push(td);
      line.append(td);
    }
    body.append(line);
  });
  element.append(body);
  return { layout: labelLayout(map), element, title, cells };
}

export function numbersTable(view, map) {
  if (!view.numbers || view.numbers.layout !== labelLayout(map)) view.numbers = emptyNumbersTable(map);
  const { element, title, cells } = view.numbers;
  title.textContent = map.title;
  cells.forEach((td, index) => {
    const [background, text] = cellColour(view.payload.palette, map.scale, map.hundredths[index]);
    td.textContent = hundredthsText(map.hundredths[index]);
    td.style.background = background;
    td.style.color = text;
  });
  return element;
}
