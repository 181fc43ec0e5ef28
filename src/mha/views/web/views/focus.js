/* The focus cell and the readout: a cell chosen by pointer or touch (drawing.js hands it over) or moved with the
   keyboard is highlighted in every figure on screen, and read out as text. */

import { hundredthsText } from "./dom.js";

/* The readout: the focused cell of every figure on screen, as text. */
function readOut(view) {
  const shown = view.figures.filter((figure) => figure.map && figure.focus);
  if (!shown.length) return;
  const [row, column] = shown[0].focus;
  const map = shown[0].map;
  const parts = shown.map((figure) => {
    const value = figure.map.hundredths[row * figure.map.columns.length + column];
    const text = figure.map.scale.kind === "difference" && value > 0 ? `+${hundredthsText(value)}` : hundredthsText(value);
    return `${figure.map.short || figure.map.title}: ${text}`;
  });
  view.readout.textContent = `Row ${row} “${map.rows[row]}” (query) → column ${column} “${map.columns[column]}” ` +
    `(key): ${parts.join("; ")}.`;
}

/* Focus a cell in every figure; keep: leave the address as it is (while it is being read). */
export function focusCell(view, row, column, keep) {
  for (const figure of view.figures) figure.setFocus(row, column);
  readOut(view);
  if (!keep) view.writeAddress();
}

const MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

/* The arrow keys move the focus cell (the first press shows the cell at the top left); Home and End go to the
   row's first and last cell. */
export function moveFocus(view, event) {
  const figure = view.primaryFigure();
  if (!figure || !figure.map) return;
  const [nRows, nColumns] = [figure.map.rows.length, figure.map.columns.length];
  let [row, column] = figure.focus || [0, 0];
  if (MOVES[event.key] && figure.focus) {
    row = Math.max(0, Math.min(nRows - 1, row + MOVES[event.key][0]));
    column = Math.max(0, Math.min(nColumns - 1, column + MOVES[event.key][1]));
  } else if (event.key === "Home") {
    column = 0;
  } else if (event.key === "End") {
    column = nColumns - 1;
  } else if (!MOVES[event.key]) {
    return;
  }
  event.preventDefault();
  focusCell(view, row, column);
}
