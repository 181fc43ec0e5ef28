/* Downloads of the map on screen: SVG (its cells written out as rectangles), PNG (that SVG drawn at twice the size)
   and CSV (its numbers as they are held: a map computed in the page, at full precision; a stored map, its stored
   hundredths). */

import { SVG, make } from "./dom.js";
import { FONT, cellColour } from "./drawing.js";

function download(view, name, blob) {
  const link = make("a", { href: URL.createObjectURL(blob), download: name });
  link.style.display = "none";
  view.root.append(link);
  link.click();
  setTimeout(() => { URL.revokeObjectURL(link.href); link.remove(); }, 1000);
}

function fileStem(map) {
  return (map.title || "attention-map").replace(/[^\p{L}\p{N}]+/gu, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "map";
}

/* A map's numbers as the CSV holds them, row-major: map.values where the page computed them (every digit JavaScript
   keeps, so that a reader's own analysis starts from the same numbers), else the stored hundredths as decimals. */
function exactNumbers(map) {
  if (map.values) return Array.from(map.values, (value) => String(value));
  return Array.from(map.hundredths, (value) => String(value / 100));
}

export function csvOf(map) {
  const quote = (text) => `"${String(text).replace(/"/g, '""')}"`;
  const lines = [["query \\ key", ...map.columns].map(quote).join(",")];
  const numbers = exactNumbers(map);
  const width = map.columns.length;
  map.rows.forEach((row, index) => {
    lines.push([quote(row), ...numbers.slice(index * width, (index + 1) * width)].join(","));
  });
  return lines.join("\n") + "\n";
}

/* The cells as SVG rectangles: the canvas on screen cannot travel in an SVG file. */
function cellRectangles(figure) {
  const { left, top, cell } = figure.drawn;
  const map = figure.map;
  const rects = [];
  for (let row = 0; row < map.rows.length; row += 1) {
    for (let column = 0; column < map.columns.length; column += 1) {
      const fill = cellColour(figure.view.payload.palette, map.scale, map.hundredths[row * map.columns.length + column])[0];
      rects.push(`<rect x="${left + column * cell}" y="${top + row * cell}" width="${cell}" height="${cell}" fill="${fill}"/>`);
    }
  }
  const cells = document.createElementNS(SVG, "g");
  cells.innerHTML = rects.join("");  /* numbers and colours only, written here */
  return cells;
}

function svgText(figure) {
  const copy = figure.drawn.svg.cloneNode(true);
  copy.setAttribute("xmlns", SVG);
  const colour = getComputedStyle(figure.view.root).color || "#000";
  copy.setAttribute("style", `font: ${FONT}px sans-serif; color: ${colour}; background: ${
    getComputedStyle(document.body).backgroundColor || "#fff"}`);
  copy.querySelectorAll("text").forEach((text) => text.setAttribute("fill", colour));
  copy.querySelector(".mha-bands").remove();
  copy.querySelector(".mha-cells").replaceWith(cellRectangles(figure));
  return new XMLSerializer().serializeToString(copy);
}

function downloadPng(view, figure, stem) {
  const { width, height } = figure.drawn.svg.viewBox.baseVal;
  const image = new Image();
  image.onload = () => {
    const canvas = make("canvas", { width: width * 2, height: height * 2 });
    const context = canvas.getContext("2d");
    context.fillStyle = getComputedStyle(document.body).backgroundColor || "#fff";
    context.fillRect(0, 0, canvas.width, canvas.height);
    context.drawImage(image, 0, 0, canvas.width, canvas.height);
    canvas.toBlob((blob) => download(view, `${stem}.png`, blob), "image/png");
  };
  image.src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(svgText(figure))}`;
}

export function exportMap(view, format) {
  const figure = view.primaryFigure();
  if (!figure || !figure.map) return;
  const stem = fileStem(figure.map);
  if (format === "csv") download(view, `${stem}.csv`, new Blob([csvOf(figure.map)], { type: "text/csv" }));
  if (format === "svg") download(view, `${stem}.svg`, new Blob([svgText(figure)], { type: "image/svg+xml" }));
  if (format === "png") downloadPng(view, figure, stem);
}
