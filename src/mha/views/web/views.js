/* The book's interactive views: one module draws every view, in Jupyter and on the website.

   A view is a plain description sent by the package (src/mha/views/payloads.py): its controls, its data, and what
   it draws. This file draws it, wherever it runs:
   - on the website, the book's build (site/view_payloads.py) embeds each view's payload in its placeholder,
     <div class="mha-view">, as base64 text of gzip-compressed bytes, inflated here with the browser's own
     DecompressionStream; nothing is fetched, so a page works opened from disk (file://);
   - in Jupyter (JupyterLab, Notebook 7, VS Code, Colab), anywidget loads this same file as an ES module
     (mha.views.widget.ViewWidget adds `export default {render}` to it) and hands it the same encoded payload.

   Payload kinds:
   - "table": every view the controls can reach, computed by the package. A control moves, and the view for the
     new setting is looked up and drawn.
   - "head-explorer" (chapter 1.2): the random layer's query and key projections; the page computes the maps for any
     sentence the reader types, with the same tokens, word vectors and attention as the package.
   - "timeline" (chapters 3.5 and 3.6): attention maps of every head of a tiny model recorded during training,
     with the loss; a scrubber walks through the steps.

   Every attention map has a labelled colour scale; a readout of any cell by mouse, touch and keyboard (arrow keys
   move a focus cell), with its row and column highlighted; a table of its numbers for screen readers; export as
   SVG, PNG and CSV; a grid of every head at once; a comparison of two settings with their difference; and the
   whole state in the page's address (#view-N?name=value&...), which restores it. Text that came from the reader
   or from the address is only ever set as text (textContent), never parsed as HTML; the HTML messages of a table
   payload were written, and escaped, by the package. Each update's time is kept on the view (data-update-ms:
   computing and drawing; data-paint-ms: until the next frame is painted), for the book's tests and benchmark. */
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const NUMBERS_TITLE = "The numbers behind the map, as a table";
  const PAYLOAD_VERSION = 2;
  const MAX_ADDRESS = 2000;  /* characters of a view's state in the address: more is refused */
  let counter = 0;

  /* The payload's schema, written once: the package reads this block (mha.views.payloads.PAYLOAD_SCHEMA) and checks
     every payload against it before sending; checkPayload() below checks it again here. */
  const PAYLOAD_SCHEMA = /* schema-begin */ {
    "type": "object",
    "required": ["version", "kind", "guidance", "axes", "palette"],
    "properties": {
      "version": {"enum": [2]},
      "kind": {"enum": ["table", "head-explorer", "timeline"]},
      "guidance": {"type": "object", "required": ["try", "notice"],
                   "properties": {"try": {"type": "string"}, "notice": {"type": "string"}}},
      "note": {"type": "string"},
      "opening": {"enum": ["map", "heads", "layers"]},
      "axes": {"type": "object", "required": ["key", "query"],
               "properties": {"key": {"type": "string"}, "query": {"type": "string"}, "colormap": {"type": "string"}}},
      "palette": {"type": "array", "minItems": 256, "maxItems": 256,
                  "items": {"type": "array", "minItems": 2, "maxItems": 2,
                            "items": {"type": "string", "pattern": "^#[0-9a-f]{3,6}(?![\\s\\S])"}}},
      "controls": {"type": "array", "items": {
        "type": "object", "required": ["name", "label", "kind", "values", "labels", "start"],
        "properties": {"name": {"type": "string", "pattern": "^[a-z_]+(?![\\s\\S])"}, "label": {"type": "string"},
                       "kind": {"enum": ["slider", "menu", "checkbox"]}, "values": {"type": "array", "minItems": 1},
                       "labels": {"type": "array", "items": {"type": "string"}},
                       "start": {"type": "integer", "minimum": 0}}}},
      "views": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
      "drawn": {"type": "array", "items": {
        "type": "object", "required": ["message", "panels", "top", "shown"],
        "properties": {"message": {"type": "integer", "minimum": 0}, "panels": {"type": "object"},
                       "top": {"type": "object"}, "shown": {"type": "object"},
                       "map": {"type": "object", "required": ["title", "rows", "columns", "shape", "offset", "marked"],
                               "properties": {"shape": {"type": "array", "minItems": 2, "maxItems": 2,
                                                        "items": {"type": "integer", "minimum": 1}},
                                              "offset": {"type": "integer", "minimum": 0},
                                              "marked": {"type": "array", "items": {"type": "array", "minItems": 2,
                                                                                      "maxItems": 2}}}}}}},
      "strings": {"type": "array"},
      "d_model": {"type": "integer", "minimum": 1},
      "max_heads": {"type": "integer", "minimum": 1},
      "max_tokens": {"type": "integer", "minimum": 1},
      "sentence": {"type": "string"},
      "W_Q": {"type": "array"}, "W_K": {"type": "array"}, "b_Q": {"type": "array"}, "b_K": {"type": "array"},
      "refusals": {"type": "object", "additionalProperties": {"type": "string"}},
      "steps": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 0}},
      "loss": {"type": "array", "items": {"type": ["number", "null"]}},
      "sequences": {"type": "array", "minItems": 1, "items": {
        "type": "object", "required": ["labels", "marked", "title"],
        "properties": {"labels": {"type": "array", "items": {"type": "string"}}, "title": {"type": "string"}}}},
      "page_model": {"type": "object", "required": ["max_tokens", "spread"], "properties": {
        "max_tokens": {"type": "integer", "minimum": 3},
        "spread": {"type": "object", "required": ["quantiles", "sentences", "scores", "source"], "properties": {
          "quantiles": {"type": "array", "minItems": 2, "items": {"type": "number"}},
          "sentences": {"type": "integer", "minimum": 1}, "scores": {"type": "object"}, "source": {"type": "string"}}},
        "fidelity": {"type": "object"}, "download_bytes": {"type": "integer", "minimum": 1}}},
      "n_layers": {"type": "integer", "minimum": 1},
      "n_heads": {"type": "integer", "minimum": 1},
      "seq_len": {"type": "integer", "minimum": 1}
    },
    "allOf": [
      {"if": {"properties": {"kind": {"enum": ["table"]}}},
       "then": {"required": ["controls", "views", "drawn", "strings"]}},
      {"if": {"properties": {"kind": {"enum": ["head-explorer"]}}},
       "then": {"required": ["d_model", "seed", "max_heads", "max_tokens", "sentence", "heads", "head", "W_Q", "b_Q",
                             "W_K", "b_K", "refusals"]}},
      {"if": {"properties": {"kind": {"enum": ["timeline"]}}},
       "then": {"required": ["steps", "loss", "curve", "phase_change", "chance_loss", "previous_token",
                            "prefix_matching", "threshold", "sequences", "head_labels", "n_layers", "n_heads",
                            "seq_len"]}}
    ]
  } /* schema-end */;

  /* The part of JSON Schema the payload's schema uses: type, enum, required, properties, additionalProperties,
     items, minItems, maxItems, minimum, pattern, allOf and if/then. Returns the first problem found, or null. */
  function schemaProblem(value, schema, where) {
    const typeOf = (item) => (Array.isArray(item) ? "array" : item === null ? "null" : typeof item);
    if (schema.enum && !schema.enum.some((option) => option === value)) {
      return `${where} is ${JSON.stringify(value)}, not one of ${JSON.stringify(schema.enum)}`;
    }
    if (schema.type) {
      const kind = typeOf(value);
      const fits = (type) => (type === "integer" ? Number.isInteger(value)
        : type === "number" ? kind === "number" && Number.isFinite(value) : kind === type);
      const types = [].concat(schema.type);
      if (!types.some(fits)) return `${where} should be ${types.join(" or ")}, not ${kind}`;
    }
    if (schema.minimum !== undefined && value < schema.minimum) return `${where} is below ${schema.minimum}`;
    if (schema.pattern && !new RegExp(schema.pattern).test(value)) return `${where} does not match ${schema.pattern}`;
    if (Array.isArray(value)) {
      if (schema.minItems !== undefined && value.length < schema.minItems) return `${where} has too few items`;
      if (schema.maxItems !== undefined && value.length > schema.maxItems) return `${where} has too many items`;
      if (schema.items) {
        for (let index = 0; index < value.length; index += 1) {
          const found = schemaProblem(value[index], schema.items, `${where}[${index}]`);
          if (found) return found;
        }
      }
    } else if (value && typeof value === "object") {
      for (const name of schema.required || []) if (!(name in value)) return `${where} lacks "${name}"`;
      for (const [name, item] of Object.entries(value)) {
        const inner = (schema.properties || {})[name] || schema.additionalProperties;
        const found = inner && typeof inner === "object" ? schemaProblem(item, inner, `${where}.${name}`) : null;
        if (found) return found;
      }
    }
    for (const part of schema.allOf || []) {
      if (part.if && schemaProblem(value, part.if, where) === null) {
        const found = schemaProblem(value, part.then, where);
        if (found) return found;
      }
    }
    return null;
  }

  function checkPayload(payload) {
    const found = schemaProblem(payload, PAYLOAD_SCHEMA, "the payload");
    if (found) throw new Error(`${found} (this file draws payload version ${PAYLOAD_VERSION})`);
    return payload;
  }

  /* --- small DOM helpers: strings become text nodes, never HTML ------------------------------------------------ */

  function make(tag, attributes, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    for (const child of children) node.append(child);
    return node;
  }

  function makeSvg(tag, attributes, text) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes || {})) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function hundredthsText(hundredths) {
    const sign = hundredths < 0 ? "−" : "";
    const size = Math.abs(hundredths);
    return `${sign}${Math.floor(size / 100)}.${String(size % 100).padStart(2, "0")}`;
  }

  function problem(text) {  /* the package's "Cannot draw this:" message, for a problem found here */
    return [make("b", { class: "mha-problem" }, "Cannot draw this:"), " " + text];
  }

  /* What a payload's HTML may hold: the package writes messages and panels with these elements and attributes
     only. Anything else is unwrapped (its text kept as text) or dropped, so a payload edited to carry a script, an
     event handler or a link runs nothing and fetches nothing. */
  const SAFE_ELEMENTS = new Set(["b", "i", "em", "strong", "small", "code", "br", "span", "div", "p", "sub", "sup",
    "ul", "ol", "li", "table", "caption", "thead", "tbody", "tr", "th", "td", "svg", "g", "text", "line", "polyline",
    "rect", "circle", "title"]);
  const SAFE_ATTRIBUTES = new Set(["class", "style", "title", "role", "aria-label", "colspan", "rowspan", "scope",
    "xmlns", "viewbox", "width", "height", "x", "y", "x1", "x2", "y1", "y2", "cx", "cy", "r", "points", "fill",
    "stroke", "stroke-width", "text-anchor", "transform", "font-size", "font-family", "font-weight", "opacity"]);
  const UNSAFE_STYLE = /url\s*\(|image\s*\(|image-set|@import|expression|\\/i;
  const DROPPED = new Set(["script", "style", "template", "iframe", "object", "embed", "noscript"]);

  function cleaned(parent) {
    for (const child of Array.from(parent.childNodes)) {
      if (child.nodeType === 3) continue;  /* text */
      if (child.nodeType !== 1) {
        child.remove();  /* comments and the like */
        continue;
      }
      const name = child.localName.toLowerCase();
      cleaned(child);
      if (DROPPED.has(name)) {
        child.remove();
      } else if (!SAFE_ELEMENTS.has(name)) {
        child.replaceWith(...Array.from(child.childNodes));  /* unwrapped: its text stays, as text */
      } else {
        for (const attribute of Array.from(child.attributes)) {
          const allowed = SAFE_ATTRIBUTES.has(attribute.name.toLowerCase()) &&
            !(attribute.name.toLowerCase() === "style" && UNSAFE_STYLE.test(attribute.value));
          if (!allowed) child.removeAttribute(attribute.name);
        }
      }
    }
    return parent;
  }

  function setHtml(node, written) {  /* HTML the package wrote and escaped, kept to SAFE_ELEMENTS */
    const template = document.createElement("template");
    template.innerHTML = String(written);  /* a template's content is inert: nothing in it runs or loads */
    node.replaceChildren(cleaned(template.content));
  }

  /* --- the payload ---------------------------------------------------------------------------------------------- */

  async function readPayload(encoded) {
    if (typeof encoded !== "string" || !/^[A-Za-z0-9+/=\s]+$/.test(encoded)) {
      throw new Error("the view's data is not base64 text");
    }
    const bytes = Uint8Array.from(atob(encoded.trim()), (character) => character.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const raw = new Uint8Array(await new Response(stream).arrayBuffer());
    if (raw.length < 4) throw new Error("the view's data is cut short");
    const length = new DataView(raw.buffer, raw.byteOffset, 4).getUint32(0, true);
    if (4 + length > raw.length) throw new Error("the view's data is cut short");
    const payload = checkPayload(JSON.parse(new TextDecoder().decode(raw.subarray(4, 4 + length))));
    payload.weights = raw.subarray(4 + length);
    return payload;
  }

  /* --- colours -------------------------------------------------------------------------------------------------- */

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
  function cellColour(palette, scale, hundredths) {
    if (scale.kind === "difference") return divergingColour(hundredths / scale.limit);
    return palette[Math.max(0, Math.min(255, Math.round((hundredths / 100) * 255)))];
  }

  /* Paint a map onto a canvas of one pixel per cell: map.hundredths is (rows × columns), row-major. The canvas is
     sized to the map, unless a top row is given: then the map goes at that row of a canvas already sized for it. */
  function paintCells(canvas, palette, map, top) {
    const [nRows, nColumns] = [map.rows.length, map.columns.length];
    if (top === undefined) {
      if (canvas.width !== nColumns) canvas.width = nColumns;
      if (canvas.height !== nRows) canvas.height = nRows;
    }
    const context = canvas.getContext("2d");
    const image = context.createImageData(nColumns, nRows);
    const rgbOf = new Map();
    for (let index = 0; index < nRows * nColumns; index += 1) {
      const value = map.hundredths[index];
      let rgb = rgbOf.get(value);
      if (rgb === undefined) {
        const hex = parseInt(cellColour(palette, map.scale, value)[0].slice(1), 16);
        rgb = [(hex >> 16) & 255, (hex >> 8) & 255, hex & 255];
        rgbOf.set(value, rgb);
      }
      image.data[index * 4] = rgb[0];
      image.data[index * 4 + 1] = rgb[1];
      image.data[index * 4 + 2] = rgb[2];
      image.data[index * 4 + 3] = 255;
    }
    context.putImageData(image, 0, top || 0);
  }

  /* --- one map: SVG picture with colour scale, focus cell and readout ------------------------------------------ */

  const FONT = 11;  /* px: the smallest text a map draws, legible on a phone */

  /* A figure draws maps into one SVG. A map with the same labels as the one on screen (another head of the same
     sentence) only recolours its cells; a new sentence draws the picture afresh. */
  function createFigure(view, options = {}) {
    const figure = { view, drawn: null, map: null, focus: null, onFocus: options.onFocus || (() => {}) };
    figure.element = make("div", { class: "mha-figure" });
    figure.draw = (map) => drawFigure(figure, map);
    figure.setFocus = (row, column) => focusFigure(figure, row, column);
    return figure;
  }

  function labelLayout(map) {
    return [map.rows.length, ...map.rows, "\u0000", ...map.columns].join("\u0001");
  }

  function drawFigure(figure, map) {
    figure.map = map;
    const layout = labelLayout(map) + "\u0002" + (map.scale.kind === "difference" ? map.scale.limit : "weight");
    if (!figure.drawn || figure.drawn.layout !== layout) buildFigure(figure, map, layout);
    paintFigure(figure, map);
  }

  function buildFigure(figure, map, layout) {
    const nRows = map.rows.length;
    const nColumns = map.columns.length;
    const cell = Math.max(9, Math.min(22, Math.floor(400 / Math.max(nRows, nColumns))));
    const every = Math.max(nRows, nColumns) > 30 ? 5 : 1;
    const longest = (labels) => Math.min(16, Math.max(1, ...labels.map((label) => [...label].length)));
    const left = 24 + 7 * longest(map.rows);
    const top = 22;
    const bottom = 26 + 7 * longest(map.columns);
    const scaleWidth = 62;
    const width = left + cell * nColumns + 14 + scaleWidth;
    const height = Math.max(top + cell * nRows + bottom, 150);
    const cut = (label) => ([...label].length > 16 ? [...label].slice(0, 15).join("") + "…" : label);
    const svg = makeSvg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "mha-map" });
    const title = makeSvg("text", { x: left + (cell * nColumns) / 2, y: 14, "text-anchor": "middle",
      class: "mha-map-title" });
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
    const axes = figure.view.payload.axes;
    svg.append(makeSvg("text", { x: left + (cell * nColumns) / 2, y: height - 4, "text-anchor": "middle",
      class: "mha-axis" }, axes.key));
    const middle = top + (cell * nRows) / 2;
    svg.append(makeSvg("text", { x: 11, y: middle, "text-anchor": "middle", class: "mha-axis",
      transform: `rotate(-90 11 ${middle})` }, axes.query));
    svg.append(colourScale(figure.view.payload.palette, map.scale, left + cell * nColumns + 14, top,
      Math.max(90, Math.min(cell * nRows, 220))));
    figure.drawn = { layout, svg, title, canvas, rings, bands, rowBand, columnBand, focusRing, left, top, cell,
      rowLabels, columnLabels };
    figure.focus = null;
    svg.addEventListener("pointerdown", (event) => pointAt(figure, event));
    svg.addEventListener("pointermove", (event) => { if (event.pointerType === "mouse") pointAt(figure, event); });
    figure.element.replaceChildren(svg);
  }

  /* The colour scale, drawn into the map's SVG: a bar with its ends and middle labelled. */
  function colourScale(palette, scale, x, y, height) {
    const group = makeSvg("g", { class: "mha-scale" });
    const steps = 32;
    for (let step = 0; step < steps; step += 1) {
      const fraction = 1 - (step + 0.5) / steps;  /* the top is the highest value */
      const hundredths = scale.kind === "difference" ? (2 * fraction - 1) * scale.limit : fraction * 100;
      group.append(makeSvg("rect", { x, y: y + (step * height) / steps, width: 12, height: height / steps + 0.5,
        fill: cellColour(palette, scale, Math.round(hundredths))[0] }));
    }
    group.append(makeSvg("rect", { x, y, width: 12, height, fill: "none", class: "mha-scale-frame" }));
    const ticks = scale.kind === "difference"
      ? [[scale.limit, `+${hundredthsText(scale.limit)}`], [0, "0"], [-scale.limit, hundredthsText(-scale.limit)]]
      : [[100, "1"], [50, "0.5"], [0, "0"]];
    ticks.forEach(([value, text]) => {
      const at = scale.kind === "difference" ? y + height * (1 - (value / scale.limit + 1) / 2) : y + height * (1 - value / 100);
      group.append(makeSvg("line", { x1: x + 12, x2: x + 16, y1: at, y2: at, class: "mha-tick" }));
      group.append(makeSvg("text", { x: x + 18, y: at + 4, class: "mha-tick-label" }, text));
    });
    const name = scale.kind === "difference" ? "difference" : "weight";
    group.append(makeSvg("text", { x, y: y + height + 16, class: "mha-scale-name" }, name));
    return group;
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
  function numbersTable(view, map) {
    const layout = labelLayout(map);
    if (!view.numbers || view.numbers.layout !== layout) {
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
      view.numbers = { layout, element, title, cells };
    }
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

  /* --- export: the map on screen as SVG, PNG or CSV ---------------------------------------------------------- */

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

  function csvOf(map) {
    const quote = (text) => `"${String(text).replace(/"/g, '""')}"`;
    const lines = [["query \\ key", ...map.columns].map(quote).join(",")];
    map.rows.forEach((row, index) => {
      const values = map.hundredths.slice(index * map.columns.length, (index + 1) * map.columns.length);
      lines.push([quote(row), ...Array.from(values, (value) => hundredthsText(value).replace("−", "-"))].join(","));
    });
    return lines.join("\n") + "\n";
  }

  function svgText(figure) {
    const copy = figure.drawn.svg.cloneNode(true);
    copy.setAttribute("xmlns", SVG);
    const colour = getComputedStyle(figure.view.root).color || "#000";
    copy.setAttribute("style", `font: ${FONT}px sans-serif; color: ${colour}; background: ${
      getComputedStyle(document.body).backgroundColor || "#fff"}`);
    copy.querySelectorAll("text").forEach((text) => text.setAttribute("fill", colour));
    copy.querySelector(".mha-bands").remove();
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
    copy.querySelector(".mha-cells").replaceWith(cells);
    return new XMLSerializer().serializeToString(copy);
  }

  function exportMap(view, format) {
    const figure = view.primaryFigure();
    if (!figure || !figure.map) return;
    const stem = fileStem(figure.map);
    if (format === "csv") download(view, `${stem}.csv`, new Blob([csvOf(figure.map)], { type: "text/csv" }));
    if (format === "svg") download(view, `${stem}.svg`, new Blob([svgText(figure)], { type: "image/svg+xml" }));
    if (format === "png") {
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
  }

  /* --- every view's frame: guidance, controls, message, picture, readout, numbers, panels, tools -------------- */

  function frame(root, payload, options) {
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
    picture.addEventListener("keydown", timed(view, (event) => moveFocus(view, event)));
    return view;
  }

  function timed(view, update) {
    return (event) => {
      const start = performance.now();
      update(event);
      view.root.dataset.updateMs = (performance.now() - start).toFixed(2);
      requestAnimationFrame(() => setTimeout(() => {
        /* the view as the reader now sees it, for holdHeight: read just after a paint, when nothing is to lay out */
        [view.shownHeight, view.shownWidth] = [view.root.offsetHeight, view.root.clientWidth];
        view.root.dataset.paintMs = (performance.now() - start).toFixed(2);
        view.root.dataset.updates = String(Number(view.root.dataset.updates || 0) + 1);
      }, 0));
    };
  }

  function slider(view, name, label, max, value) {
    const input = make("input", { type: "range", min: 0, max, step: 1, value, id: `${view.id}-${name}`, name,
      "aria-describedby": `${view.id}-message` });
    const output = make("output", { for: input.id });
    view.controls.append(make("label", { class: "mha-control", for: input.id }, make("span", {}, label), input, output));
    return { input, output };
  }

  function menu(view, name, label, labels, value) {
    const input = make("select", { id: `${view.id}-${name}`, name, "aria-describedby": `${view.id}-message` });
    labels.forEach((text, index) => input.append(make("option", { value: index }, text)));
    input.value = String(value);
    view.controls.append(make("label", { class: "mha-control mha-menu", for: input.id }, make("span", {}, label), input));
    return input;
  }

  function button(parent, text, label, action) {
    const node = make("button", { type: "button", class: "mha-button", "aria-label": label || text }, text);
    node.addEventListener("click", action);
    parent.append(node);
    return node;
  }

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

  function focusCell(view, row, column, keep) {
    for (const figure of view.figures) figure.setFocus(row, column);
    readOut(view);
    if (!keep) view.writeAddress();
  }

  function moveFocus(view, event) {
    const figure = view.primaryFigure();
    if (!figure || !figure.map) return;
    const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
    const [nRows, nColumns] = [figure.map.rows.length, figure.map.columns.length];
    let [row, column] = figure.focus || [0, 0];
    if (moves[event.key] && figure.focus) {
      row = Math.max(0, Math.min(nRows - 1, row + moves[event.key][0]));
      column = Math.max(0, Math.min(nColumns - 1, column + moves[event.key][1]));
    } else if (event.key === "Home") {
      column = 0;
    } else if (event.key === "End") {
      column = nColumns - 1;
    } else if (!moves[event.key]) {
      return;
    }
    event.preventDefault();
    focusCell(view, row, column);
  }

  /* --- the tools every attention view shares: grid, comparison, export, address -------------------------------- */

  /* A view tells the tools what it can do:
     view.state: {name: value}; view.mapAt(state) -> map or null; view.apply(state) redraws for a state;
     view.gridNames: the controls a grid runs over (["head"] or ["layer", "head"]), with view.range(name, state);
     view.compareName: the control whose other values can be compared with the one shown;
     view.stateNames: what the address holds, and view.valueOf(name, text) -> value or throws. */
  function addTools(view) {
    const tools = view.tools;
    if (view.gridNames && view.gridNames.length) {
      view.gridButton = button(tools, "All heads", "All heads: show every head of this layer at once", timed(view, () => {
        view.mode = view.mode === "grid" && !view.gridAll ? "single" : "grid";
        view.gridAll = false;
        view.redraw();
      }));
      if (view.gridNames.length > 1) {
        view.gridAllButton = button(tools, "All layers", "All layers: show every head of every layer at once", timed(view, () => {
          view.mode = view.mode === "grid" && view.gridAll ? "single" : "grid";
          view.gridAll = view.mode === "grid";
          view.redraw();
        }));
      }
    }
    if (view.compareName) {
      const control = view.compareControl;
      const input = make("select", { id: `${view.id}-compare`, name: "compare" });
      input.append(make("option", { value: "" }, "(nothing)"));
      control.labels.forEach((text, index) => input.append(make("option", { value: index }, text)));
      input.addEventListener("change", timed(view, () => {
        view.compareWith = input.value === "" ? null : Number(input.value);
        if (view.mode === "grid") view.mode = "single";
        view.redraw();
      }));
      view.compareInput = input;
      tools.append(make("label", { class: "mha-control mha-menu", for: input.id },
        make("span", {}, `compare with ${control.label}`), input));
    }
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
     encode and decode rather than 72, which is what a slow phone spends its time on. */
  function gridTile(view, map, top, sheetRows, label, open) {
    const [nRows, nColumns] = [map.rows.length, map.columns.length];
    const picture = make("span", { class: "mha-tile-map" });
    const [scaleX, scaleY] = [TILE / nColumns, TILE / nRows];  /* CSS px per cell */
    picture.style.setProperty("background-size", `${view.sheetColumns * scaleX}px ${sheetRows * scaleY}px`);
    picture.style.setProperty("background-position", `0 ${-top * scaleY}px`);
    const tile = make("button", { type: "button", class: "mha-tile", "aria-label": `${label}: open this map` },
      picture, make("span", {}, label));
    tile.addEventListener("click", timed(view, open));
    return tile;
  }

  const TILE = 64;  /* px: a grid map's side, as views.css draws .mha-tile-map */
  let sheet = null;

  function drawGrid(view) {
    const names = view.gridAll ? view.gridNames : view.gridNames.slice(-1);
    const grid = make("div", { class: "mha-grid", role: "group", "aria-label": "every head; choose one to open it" });
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
    sheet = sheet || make("canvas");
    sheet.width = Math.max(1, ...shown.map(({ map }) => map.columns.length));
    sheet.height = Math.max(1, shown.reduce((rows, { map }) => rows + map.rows.length, 0));
    view.sheetColumns = sheet.width;
    let top = 0;
    for (const { map } of shown) {
      paintCells(sheet, view.payload.palette, map, top);
      top += map.rows.length;
    }
    /* The picture goes to the tiles by a short blob: address: a data: address in the custom property would be
       read again for every tile's style, the costliest step of drawing the grid. */
    const png = sheet.toDataURL("image/png");
    const bytes = Uint8Array.from(atob(png.slice(png.indexOf(",") + 1)), (character) => character.charCodeAt(0));
    if (view.sheetAddress) URL.revokeObjectURL(view.sheetAddress);
    view.sheetAddress = URL.createObjectURL(new Blob([bytes], { type: "image/png" }));
    grid.style.setProperty("--mha-sheet", `url("${view.sheetAddress}")`);
    top = 0;
    for (const { state, map } of shown) {
      grid.append(gridTile(view, map, top, sheet.height, map.tile || map.title, () => {
        view.mode = "single";
        view.apply(state);
      }));
      top += map.rows.length;
    }
    grid.style.setProperty("--mha-columns", String(view.range(view.gridNames[view.gridNames.length - 1], view.state).length));
    view.figures = [];
    view.picture.replaceChildren(grid);
    view.readout.textContent = `${grid.children.length} maps, one per head, on the same colour scale (0 to 1). ` +
      "Click a map, or focus it and press Enter, to open it.";
    view.readout.dataset.grid = "true";
    view.tableMap = null;
    view.table.replaceChildren(make("p", {}, "Open one map to read its numbers."));
  }

  /* The single map, or a comparison: the map, the compared setting's map, and their difference. */
  const READOUT_HELP = "Point at a cell, tap it, or focus the map and use the arrow keys, to read its weight.";

  function drawMaps(view, map) {
    if (view.readout.dataset.grid) {
      delete view.readout.dataset.grid;
      view.readout.textContent = READOUT_HELP;
    }
    const maps = [map];
    let note = null;
    if (view.compareWith !== null && view.compareName) {
      const other = view.mapAt({ ...view.state, [view.compareName]: view.compareWith });
      if (other) {
        maps[0] = { ...map, title: `first: ${map.title}`, short: "first" };
        maps.push({ ...other, title: `second: ${other.title}`, short: "second" });
        if (other.rows.length === map.rows.length && other.columns.length === map.columns.length) {
          const difference = Int16Array.from(map.hundredths, (value, index) => value - other.hundredths[index]);
          const largest = Math.max(10, ...Array.from(difference, Math.abs));
          const limit = Math.min(100, Math.ceil(largest / 10) * 10);
          maps.push({ title: "first − second", short: "first − second", rows: map.rows, columns: map.columns,
            hundredths: difference, marked: [], scale: { kind: "difference", limit } });
          const same = map.rows.every((label, index) => label === other.rows[index]);
          note = same ? null : "The two have different tokens; rows and columns are compared position by position.";
        } else {
          note = `The two have different lengths (${map.rows.length} and ${other.rows.length} positions), so there is ` +
            "no cell-by-cell difference; they are shown side by side.";
        }
      }
    }
    while (view.figures.length > maps.length) view.figures.pop();
    while (view.figures.length < maps.length) {
      view.figures.push(createFigure(view, { onFocus: (row, column) => focusCell(view, row, column) }));
    }
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

  /* The table of numbers is written when it is open: a closed one would cost every redraw a cell per number. */
  function showNumbers(view) {
    if (!view.details.open || !view.tableMap) return;
    const table = numbersTable(view, view.tableMap);
    if (view.table.firstChild !== table) view.table.replaceChildren(table);
  }

  /* --- the address: #view-N?name=value&... ------------------------------------------------------------------- */

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

  function writeAddress(view) {
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
    } catch (error) { /* some hosts (a sandboxed frame) refuse; the link still carries the state */ }
  }

  function wholeNumber(text, low, high, what) {
    if (!/^[0-9]{1,6}$/.test(text)) throw new Error(`${what} should be a whole number, not “${text.slice(0, 40)}”`);
    const value = Number(text);
    if (value < low || value > high) throw new Error(`${what} goes from ${low} to ${high}, not ${value}`);
    return value;
  }

  /* Read a view's state from the address; a problem is shown as text and the view keeps its own state. */
  function readAddress(view) {
    let hash;
    try {
      hash = decodeURIComponent(location.hash.slice(1));
    } catch (error) {
      return;
    }
    if (!hash.startsWith(`${view.id}?`) && hash !== view.id) return;
    view.root.scrollIntoView({ block: "start" });
    const problems = [];
    const state = { ...view.state };
    let mode = "single";
    let gridAll = false;
    let compare = null;
    let cell = null;
    const runs = {};
    if (location.hash.length > MAX_ADDRESS) {
      problems.push(`the address is ${location.hash.length} characters long, more than the ${MAX_ADDRESS} a view reads`);
    } else {
      const parts = new URLSearchParams(location.hash.slice(1 + view.id.length + 1));
      for (const [name, text] of parts) {
        try {
          if (view.stateNames.includes(name)) {
            state[name] = view.valueOf(name, text);
          } else if (view.runNames && view.runNames.includes(name)) {
            runs[name] = text;
          } else if (name === "grid" && view.gridNames && view.gridNames.length) {
            if (!["heads", "layers"].includes(text)) throw new Error(`grid should be “heads” or “layers”, not “${text.slice(0, 40)}”`);
            mode = "grid";
            gridAll = text === "layers" && view.gridNames.length > 1;
          } else if (name === "compare" && view.compareName) {
            compare = wholeNumber(text, 0, view.compareControl.labels.length - 1, "compare");
          } else if (name === "cell") {
            const match = /^([0-9]{1,4})\.([0-9]{1,4})$/.exec(text);
            if (!match) throw new Error(`cell should be row.column, e.g. 2.3, not “${text.slice(0, 40)}”`);
            cell = [Number(match[1]), Number(match[2])];
          } else {
            throw new Error(`this view has no setting “${name.slice(0, 40)}” (it has ${[...view.stateNames, "grid",
              "compare", "cell", ...(view.runNames || [])].join(", ")})`);
          }
        } catch (error) {
          problems.push(error.message);
        }
      }
    }
    view.restoring = true;
    view.mode = mode;
    view.gridAll = gridAll;
    view.compareWith = compare;
    if (view.compareInput) view.compareInput.value = compare === null ? "" : String(compare);
    view.apply(state);
    if (cell && runs.text === undefined && view.figures[0] && view.figures[0].map) {
      const map = view.figures[0].map;
      if (cell[0] < map.rows.length && cell[1] < map.columns.length) focusCell(view, cell[0], cell[1], true);
      else problems.push(`cell ${cell[0]}.${cell[1]} is outside this ${map.rows.length} × ${map.columns.length} map`);
    }
    const report = () => {
      if (problems.length) {
        view.address.replaceChildren(make("b", { class: "mha-problem" }, "The address asked for something this view " +
          "cannot show:"), ` ${problems.join("; ")}. The rest of it is shown.`);
      } else {
        view.address.replaceChildren();
      }
    };
    if (Object.keys(runs).length && runs.text === undefined) {
      problems.push(`${Object.keys(runs).join(" and ")} need a text= to run the model on`);
    } else if (runs.text !== undefined) {  /* a sentence run in the page: load the model, then show it */
      view.started = true;
      report();
      view.readRuns(runs).then(({ index, compared }) => {
        view.compareWith = compared;
        if (view.compareInput) view.compareInput.value = compared === null ? "" : String(compared);
        view.apply({ ...state, sentence: index });
        if (cell && view.figures[0] && view.figures[0].map) {
          const map = view.figures[0].map;
          if (cell[0] < map.rows.length && cell[1] < map.columns.length) focusCell(view, cell[0], cell[1], true);
        }
      }).catch((error) => {
        problems.push(error.message);
        view.runFailed(error);
      }).finally(() => {
        view.restoring = false;
        report();
        view.writeAddress();
      });
      return;
    }
    view.restoring = false;
    view.started = true;
    report();
    view.writeAddress();
  }

  function finish(view) {
    view.writeAddress = () => writeAddress(view);
    addTools(view);
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

  /* What every view does once its state is set: draw the grid or the map (with its comparison), mark the tools,
     and write the state into the address. */
  function showState(view, map) {
    holdHeight(view);
    if (view.mode === "grid") drawGrid(view);
    else if (map) drawMaps(view, map);
    markTools(view);
    view.writeAddress();
  }

  /* A view keeps the tallest height it has had in its present layout (one map, a comparison, one layer's grid, the
     whole model's grid; its table of numbers open or closed) at its present width: another sentence, head or step
     then leaves the page under the view where it was, instead of moving it up and down by the difference between two
     maps' heights (on a phone, where each map is as wide as the screen, a hundred pixels and more). Called before the
     view draws its new state, with the height and width timed() read after the last painted input, so it forces no
     layout. A new layout or width starts afresh. */
  function holdHeight(view) {
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

  /* Mark the grid and comparison buttons as pressed or not. */
  function markTools(view) {
    for (const node of view.exportButtons || []) node.disabled = view.mode === "grid";  /* open one map to download it */
    if (view.gridButton) view.gridButton.setAttribute("aria-pressed", String(view.mode === "grid" && !view.gridAll));
    if (view.gridAllButton) view.gridAllButton.setAttribute("aria-pressed", String(view.mode === "grid" && view.gridAll));
  }

  /* --- typed sentences: all-MiniLM-L6-v2 run in the reader's page --------------------------------------------------

     A chapter-3 view whose payload has a "page_model" part takes any sentence the reader types. model.js (beside this
     file) and the model's weights (its model/ folder) load only when the reader first asks, with a progress bar and
     a cancel; the stored sentences keep working whatever happens. model.js's API: mhaModel.open(readPart, {onProgress,
     signal}) -> model; model.tokenize(text) -> {ids, tokens}; model.run(ids, {removed: [[layer, head]]}) ->
     {attention: Float32Array (layers, heads, n, n), sentenceVector: Float32Array (d_model)}. */

  const SCRIPT_URL = typeof document !== "undefined" && document.currentScript ? document.currentScript.src : null;
  let modelLoad = null;  /* {promise, controller, listeners}: one load per page, shared by its views */

  function addScript(source) {
    return new Promise((resolve, reject) => {
      const script = make("script", { src: source });
      script.addEventListener("load", resolve);
      script.addEventListener("error", () => reject(new Error(`could not read ${source.split("/").pop()}`)));
      document.head.append(script);
    });
  }

  function openModel(onProgress) {
    if (!modelLoad) {
      const controller = new AbortController();
      const listeners = new Set();
      const promise = (async () => {
        if (!SCRIPT_URL) throw new Error("this page does not say where the model's files are");
        if (!globalThis.mhaModel) await addScript(new URL("model.js", SCRIPT_URL).href);
        const folder = new URL("model/", SCRIPT_URL).href;
        const reader = location.protocol === "file:" ? globalThis.mhaModel.scriptReader(folder)
          : globalThis.mhaModel.fetchReader(folder);
        return globalThis.mhaModel.open(reader, { signal: controller.signal,
          onProgress: (progress) => listeners.forEach((listener) => listener(progress)) });
      })();
      modelLoad = { promise, controller, listeners };
      promise.catch(() => { modelLoad = null; });  /* a failed or cancelled load can be tried again */
    }
    modelLoad.listeners.add(onProgress);
    return modelLoad;
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, (character) => `&#${character.charCodeAt(0)};`);
  }

  function headLabel(layer, head) {
    return `L${layer}H${head}`;
  }

  /* Word-level units of a tokenised sentence, as mha.pretrained.word_maps does with [CLS] and [SEP] kept: a piece
     starting with ## continues the word before it. Returns {ids: word id per token (-1 for [CLS] and [SEP]),
     units: token positions per unit, labels: one per unit}. */
  function wordsOf(tokens) {
    const ids = [];
    const units = [];
    const labels = [];
    let word = -1;
    tokens.forEach((token, position) => {
      const special = position === 0 || position === tokens.length - 1;
      if (special) {
        ids.push(-1);
        units.push([position]);
        labels.push(token);
      } else if (token.startsWith("##") && word >= 0) {
        ids.push(word);
        units[units.length - 1].push(position);
        labels[labels.length - 1] += token.slice(2);
      } else {
        word += 1;
        ids.push(word);
        units.push([position]);
        labels.push(token);
      }
    });
    return { ids, units, labels };
  }

  /* One head's map (n, n) merged into word units: the weight a unit receives is the sum over its tokens' columns,
     the weight it sends the mean over its tokens' rows (mha.pretrained.word_maps.word_attention). */
  function wordWeights(weights, n, units) {
    const m = units.length;
    const merged = new Float64Array(m * m);
    units.forEach((rows, u) => {
      units.forEach((columns, v) => {
        let total = 0;
        for (const row of rows) for (const column of columns) total += weights[row * n + column];
        merged[u * m + v] = total / rows.length;
      });
    });
    return merged;
  }

  /* Four scores of one head on one sentence (mha.analysis.head_roles.role_table.sentence_head_scores): weights (n, n) with
     [CLS] first and [SEP] last, wordIds from wordsOf. */
  function sentenceScores(weights, n, wordIds) {
    const content = [];
    for (let position = 1; position < n - 1; position += 1) content.push(position);
    const mean = (values) => values.reduce((total, value) => total + value, 0) / values.length;
    let link = 0;
    for (const query of content) {
      for (const key of content) {
        if (wordIds[query] !== wordIds[key]) link = Math.max(link, weights[query * n + key]);
      }
    }
    const rows = Array.from({ length: n }, (_, row) => row);
    return {
      previous_share: mean(content.map((row) => weights[row * n + row - 1])),
      cls_share: mean(rows.map((row) => weights[row * n])),
      self_share: mean(content.map((row) => weights[row * n + row])),
      strongest_link: link,
    };
  }

  const SCORE_NAMES = { previous_share: "on the previous token", cls_share: "on [CLS]",
    self_share: "on the token itself", strongest_link: "strongest link between two words" };

  /* Where value falls among the treebank's sentences: the share below it, read off the stored quantiles. */
  function shareBelow(value, levels, quantiles) {
    if (value <= quantiles[0]) return 0;
    if (value >= quantiles[quantiles.length - 1]) return 1;
    let index = 0;
    while (quantiles[index + 1] < value) index += 1;
    const width = quantiles[index + 1] - quantiles[index];
    return levels[index] + (width > 0 ? (value - quantiles[index]) / width : 0) * (levels[index + 1] - levels[index]);
  }

  function scoreTable(spread, scores, layer, head, where) {
    const levels = spread.quantiles;
    const at = (level) => levels.findIndex((value) => Math.abs(value - level) < 1e-9);
    const header = make("tr", {}, ...["weight", "this sentence", "treebank median", "treebank 5–95%", "below it"]
      .map((text) => make("th", { scope: "col" }, text)));
    const lines = Object.keys(SCORE_NAMES).map((name) => {
      const quantiles = spread.scores[name][layer][head];
      const value = scores[name];
      return make("tr", {}, make("th", { scope: "row" }, SCORE_NAMES[name]), make("td", {}, value.toFixed(2)),
        make("td", {}, quantiles[at(0.5)].toFixed(2)),
        make("td", {}, `${quantiles[at(0.05)].toFixed(2)}–${quantiles[at(0.95)].toFixed(2)}`),
        make("td", {}, `${Math.round(100 * shareBelow(value, levels, quantiles))}%`));
    });
    const table = make("table", { class: "mha-scores" },
      make("caption", {}, `${headLabel(layer, head)} on this sentence (${where}), against ${spread.source}; the last ` +
        "column is the share of those sentences that score lower."),
      make("thead", {}, header), make("tbody", {}, ...lines));
    return make("div", { class: "mha-scores-box", tabindex: "0", role: "region",
      "aria-label": `scores of ${headLabel(layer, head)} on this sentence` }, table);
  }

  /* The typing part of a chapter-3 view: the box, the progress bar, the fidelity note, the scores and the switch. */
  function typing(view, payload, byName) {
    const model = payload.page_model;
    const sentence = byName.sentence;
    const stored = sentence.control.values.length;
    const nLayers = byName.layer.control.values.length;
    const nHeads = byName.head.control.values.length;
    const entries = [];  /* typed or switched-off runs: {text, removed, tokens, attention, vector, words, label} */
    const box = make("input", { type: "text", id: `${view.id}-typed`, name: "typed", maxlength: 10000,
      autocomplete: "off", spellcheck: "false", placeholder: "type a sentence, then press Enter" });
    const form = make("form", { class: "mha-typed", role: "search", "aria-label": "run the model on your own sentence" },
      make("label", { for: box.id }, "Your own sentence"), box, make("button", { type: "submit", class: "mha-button" },
        "Run the model"));
    const bar = make("progress", { max: 100, value: 0, "aria-label": "model loaded" });
    const status = make("span", { class: "mha-loading-text", "aria-live": "polite" });
    const cancel = make("button", { type: "button", class: "mha-button" }, "Cancel");
    const loading = make("div", { class: "mha-loading", hidden: "" }, bar, status, cancel);
    const switchOff = make("button", { type: "button", class: "mha-button mha-switch" }, "Switch this head off");
    const fidelity = model.fidelity;
    const size = model.download_bytes ? ` (${(model.download_bytes / 1e6).toFixed(1)} MB, and the rows of the word ` +
      "table your sentence needs)" : "";
    const about = make("p", { class: "mha-fidelity" }, make("b", {}, "In your page: "),
      "the model runs here, in JavaScript, from its own weights stored as 16-bit floats and computed in 32-bit. " +
      (fidelity ? `On this view's ${fidelity.sentences} sentences, every attention weight is within ` +
        `${fidelity.max_difference.toFixed(4)} of the book's PyTorch encoder, and ` +
        `${(100 * fidelity.same_argmax).toFixed(2)}% of rows look hardest at the same token. ` : "") +
      `The weights${size} load the first time you press Enter; nothing leaves your computer.`);
    view.controls.after(form, loading, about);
    cancel.addEventListener("click", () => { if (modelLoad) modelLoad.controller.abort(); });

    const say = (...parts) => view.message.replaceChildren(...parts);
    const isWords = (state) => Boolean(byName.word_level) &&
      byName.word_level.control.values[state.word_level] === true;

    function labelOf(entry) {
      const text = entry.text.length > 60 ? `${entry.text.slice(0, 59)}…` : entry.text;
      return entry.removed.length ? `${text} (without ${entry.removed.map(([l, h]) => headLabel(l, h)).join(", ")})`
        : `${text} (typed)`;
    }

    const running = new Map();  /* a run asked for again before it ends (a second Enter while the model loads) */

    function run(text, removed) {
      const key = JSON.stringify([text, removed]);
      if (!running.has(key)) {
        running.set(key, runOnce(text, removed).finally(() => running.delete(key)));
      }
      return running.get(key);
    }

    async function runOnce(text, removed) {
      const known = entries.findIndex((entry) => entry.text === text &&
        JSON.stringify(entry.removed) === JSON.stringify(removed));
      if (known >= 0) return stored + known;
      const onProgress = ({ loaded, total }) => {
        bar.value = total ? Math.round((100 * loaded) / total) : 0;
        status.textContent = `Loading the model: ${(loaded / 1e6).toFixed(1)} of ${(total / 1e6).toFixed(1)} MB ` +
          `(${bar.value}%)`;
      };
      const load = openModel(onProgress);
      loading.hidden = false;
      let opened;
      try {
        opened = await load.promise;
      } finally {
        load.listeners.delete(onProgress);
        loading.hidden = true;
      }
      const { ids, tokens } = opened.tokenize(text);
      if (tokens.length > model.max_tokens) {
        throw new Error(`the sentence has ${tokens.length} tokens with [CLS] and [SEP]; a map of more than ` +
          `${model.max_tokens} cannot be read. Shorten it (the model itself accepts up to 512 tokens).`);
      }
      const result = await opened.run(ids, { removed });
      const entry = { text, removed, tokens, attention: result.attention, vector: result.sentenceVector,
        words: wordsOf(tokens) };
      entry.label = labelOf(entry);
      entries.push(entry);
      const index = stored + entries.length - 1;
      sentence.input.append(make("option", { value: index }, entry.label));
      if (view.compareInput) view.compareInput.append(make("option", { value: index }, entry.label));
      return index;
    }

    function failed(error) {
      say(...problem(`${String(error.message).replace(/\.$/, "")}. The stored sentences still work.`));
    }

    async function typeSentence(text) {
      if (typeof text !== "string" || !text.trim()) {
        say(...problem("the box is empty: type a few words, e.g. “The keys to the cabinet are on the table.”"));
        return null;
      }
      try {
        const index = await run(text, []);
        view.compareWith = null;
        if (view.compareInput) view.compareInput.value = "";
        view.apply({ ...view.state, sentence: index });  /* the grid stays a grid: every head on the new sentence */
        return index;
      } catch (error) {
        failed(error);
        return null;
      }
    }

    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const start = performance.now();
      typeSentence(box.value).then(() => {
        view.root.dataset.typedMs = (performance.now() - start).toFixed(1);
        requestAnimationFrame(() => setTimeout(() => {
          view.root.dataset.typedPaintMs = (performance.now() - start).toFixed(1);
          view.root.dataset.typedRuns = String(Number(view.root.dataset.typedRuns || 0) + 1);
        }, 0));
      });
    });

    /* Switch the head on show off: run the sentence with and without it, and compare the two. */
    async function switchHeadOff(layer, head, sentenceIndex) {
      const text = sentenceIndex < stored ? String(sentence.control.values[sentenceIndex])
        : entries[sentenceIndex - stored].text;
      try {
        const whole = await run(text, []);
        const without = await run(text, [[layer, head]]);
        view.compareWith = without;
        if (view.compareInput) view.compareInput.value = String(without);
        view.mode = "single";
        view.apply({ ...view.state, sentence: whole, layer: Math.min(nLayers - 1, layer + 1) });
      } catch (error) {
        failed(error);
      }
    }
    switchOff.addEventListener("click", () => switchHeadOff(view.state.layer, view.state.head, view.state.sentence));

    /* The map and message of a typed or switched-off run, shaped as a stored view is. */
    function drawnAt(state) {
      const entry = entries[state.sentence - stored];
      if (!entry) return null;
      const n = entry.tokens.length;
      const offset = (state.layer * nHeads + state.head) * n * n;
      const tokenWeights = entry.attention.subarray(offset, offset + n * n);
      const words = isWords(state);
      const labels = words ? entry.words.labels : entry.tokens;
      const weights = words ? wordWeights(tokenWeights, n, entry.words.units) : tokenWeights;
      const m = labels.length;
      const hundredths = Uint8Array.from(weights, (weight) => Math.max(0, Math.min(100, Math.round(weight * 100))));
      const unit = words ? "words" : "tokens";
      let strongest = null;
      for (let query = 1; query < m - 1; query += 1) {
        for (let key = 1; key < m - 1; key += 1) {
          if (query !== key && (!strongest || weights[query * m + key] > weights[strongest[0] * m + strongest[1]])) {
            strongest = [query, key];
          }
        }
      }
      const mean = (column) => labels.reduce((total, _, row) => total + weights[row * m + column], 0) / m;
      const percent = (value) => `${Math.round(100 * value)}%`;
      let message = `${headLabel(state.layer, state.head)}: ${m} ${unit}; attention to [CLS] ${percent(mean(0))}, to ` +
        `[SEP] ${percent(mean(m - 1))} (mean over rows). ` + (strongest
        ? `Strongest link between two different ${unit}: <code>${escapeHtml(labels[strongest[0]])}</code> → ` +
          `<code>${escapeHtml(labels[strongest[1]])}</code>.`
        : `There is only one ${unit.slice(0, -1)} between [CLS] and [SEP], so no link between two different ` +
          `${unit}; type a longer sentence to see one.`);
      const compared = view.compareWith === null ? null : entries[view.compareWith - stored];
      const switched = entry.removed.length ? entry
        : compared && compared.text === entry.text && compared.removed.length ? compared : null;
      if (switched) {
        const whole = entries.find((other) => other.text === entry.text && !other.removed.length);
        if (whole) {
          let dot = 0;
          for (let index = 0; index < whole.vector.length; index += 1) dot += whole.vector[index] * switched.vector[index];
          const [layer] = switched.removed[0];
          message += ` With ${switched.removed.map(([l, h]) => headLabel(l, h)).join(", ")} switched off, the sentence ` +
            `vector moves by 1 − cos = ${(1 - dot).toFixed(4)}; every head of layers 0 to ${layer} attends as before` +
            (layer + 1 < nLayers ? `, from layer ${layer + 1} on the maps can change.` : ".");
        }
      }
      return { message: null, messageHtml: message, panels: {}, top: {}, shown: {},
        computed: { title: headLabel(state.layer, state.head), rows: labels, columns: labels, hundredths, marked: [],
          scale: { kind: "weight" } } };
    }

    /* The scores of the head on show for the sentence on show, from its token map: a run's own weights, or a stored
       sentence's two-decimal map. */
    function showScores(state, storedTokenMap) {
      let weights;
      let tokens;
      let where;
      const entry = entries[state.sentence - stored];
      if (entry) {
        const n = entry.tokens.length;
        const offset = (state.layer * nHeads + state.head) * n * n;
        weights = entry.attention.subarray(offset, offset + n * n);
        tokens = entry.tokens;
        where = "run in your page";
      } else if (storedTokenMap) {
        weights = Float64Array.from(storedTokenMap.hundredths, (value) => value / 100);
        tokens = storedTokenMap.rows;
        where = "its stored map, to two decimals";
      }
      if (!view.panelParts.scores) {
        view.panelParts.scores = make("div", { class: "mha-panel mha-panel-scores" });
        view.panels.prepend(view.panelParts.scores);
      }
      if (!weights || tokens.length < 3 || view.mode === "grid") {
        view.panelParts.scores.replaceChildren();
        return;
      }
      const scores = sentenceScores(weights, tokens.length, wordsOf(tokens).ids);
      view.panelParts.scores.replaceChildren(scoreTable(model.spread, scores, state.layer, state.head, where),
        switchOff);
    }

    /* The address of a run: its text, and the heads switched off. */
    function addressParts(state, parts) {
      const entry = entries[state.sentence - stored];
      if (entry) {
        parts.delete("sentence");
        parts.set("text", entry.text);
        if (entry.removed.length) parts.set("off", entry.removed.map(([l, h]) => `${l}.${h}`).join(","));
      }
      const compared = view.compareWith === null ? null : entries[view.compareWith - stored];
      if (compared) {
        parts.delete("compare");
        if (compared.text !== (entry && entry.text)) parts.set("compare_text", compared.text);
        parts.set("compare_off", compared.removed.map(([l, h]) => `${l}.${h}`).join(","));
      }
    }

    function heads(text, what) {
      if (!text) return [];
      return text.split(",").map((pair) => {
        const match = /^([0-9]{1,2})\.([0-9]{1,2})$/.exec(pair);
        if (!match || Number(match[1]) >= nLayers || Number(match[2]) >= nHeads) {
          throw new Error(`${what} should name heads as layer.head, from 0.0 to ${nLayers - 1}.${nHeads - 1}, not ` +
            `“${pair.slice(0, 40)}”`);
        }
        return [Number(match[1]), Number(match[2])];
      });
    }

    /* Runs named in an address: {text, off, compare_text, compare_off}. Loads the model, as typing does. */
    async function readRuns(found) {
      const removed = heads(found.off, "off");
      const index = await run(found.text, removed);
      let compared = null;
      if (found.compare_off !== undefined || found.compare_text !== undefined) {
        compared = await run(found.compare_text || found.text, heads(found.compare_off, "compare_off"));
      }
      return { index, compared };
    }

    return { stored, drawnAt, showScores, addressParts, readRuns, typeSentence, isRun: (state) => state.sentence >= stored,
      failed };
  }

  /* --- "table": every reachable view stored ---------------------------------------------------------------------- */

  function mountTable(root, payload, options) {
    const view = frame(root, payload, options);
    const strings = payload.strings;
    const inputs = payload.controls.map((control) => {
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
    const byName = Object.fromEntries(inputs.map((part) => [part.control.name, part]));
    const readInput = ({ control, input }) => (control.kind === "checkbox"
      ? control.values.indexOf(input.checked) : Number(input.value));
    const keyOf = (state) => payload.controls.map((control) => state[control.name]).join("|");
    const typed = payload.page_model && !view.hosted && byName.sentence && byName.layer && byName.head
      ? typing(view, payload, byName) : null;
    const drawnAt = (state) => {
      if (typed && typed.isRun(state)) return typed.drawnAt(state);
      const index = payload.views[keyOf(state)];
      return index === undefined ? null : payload.drawn[index];
    };
    const mapOf = (drawn) => {
      if (drawn && drawn.computed) return drawn.computed;
      if (!drawn || !drawn.map) return null;
      const stored = drawn.map;
      const size = stored.shape[0] * stored.shape[1];
      if (stored.offset + size > payload.weights.length) throw new Error("a map's numbers are missing from the data");
      return { title: strings[stored.title], rows: strings[stored.rows], columns: strings[stored.columns],
        hundredths: payload.weights.subarray(stored.offset, stored.offset + size), marked: stored.marked,
        scale: { kind: "weight" } };
    };

    view.state = Object.fromEntries(inputs.map((part) => [part.control.name, readInput(part)]));
    view.mapAt = (state) => mapOf(drawnAt(state));
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

    view.apply = (state) => {
      for (const part of inputs) {
        const value = state[part.control.name];
        if (part.control.kind === "checkbox") part.input.checked = part.control.values[value] === true;
        else part.input.value = String(value);
      }
      view.redraw();
    };

    view.redraw = () => {
      let state = Object.fromEntries(inputs.map((part) => [part.control.name, readInput(part)]));
      let drawn = drawnAt(state);
      if (!drawn) {
        view.message.replaceChildren(...problem("no view is stored for this setting."));
        return;
      }
      for (const part of inputs) {
        const name = part.control.name;
        if (drawn.top[name] !== undefined) part.input.max = String(drawn.top[name]);
        if (drawn.shown[name] !== undefined) part.input.value = String(drawn.shown[name]);
      }
      state = Object.fromEntries(inputs.map((part) => [part.control.name, readInput(part)]));
      drawn = drawnAt(state) || drawn;
      view.state = state;
      for (const part of inputs) {
        const label = part.control.labels[readInput(part)];
        if (part.output) part.output.textContent = label;
        if (part.control.kind === "slider") part.input.setAttribute("aria-valuetext", label);
      }
      view.root.dataset.key = keyOf(state);
      setHtml(view.message, drawn.messageHtml !== undefined ? drawn.messageHtml : strings[drawn.message]);
      for (const [name, index] of Object.entries(drawn.panels)) {
        if (!view.panelParts[name]) {
          view.panelParts[name] = make("div", { class: `mha-panel mha-panel-${name}` });
          view.panels.append(view.panelParts[name]);
        }
        setHtml(view.panelParts[name], strings[index]);
      }
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
      part.input.addEventListener(part.control.kind === "slider" ? "input" : "change", timed(view, () => view.redraw()));
    }
    return finish(view);
  }

  /* --- "head-explorer": the chapter-1 layer, computed here ----------------------------------------------------- */

  /* The same steps as src/mha/core/toy_sentences.py: words and punctuation; a 32-bit FNV-1a hash of the lower-cased
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

  /* Every head's weights (heads, seq, seq) for the tokens: softmax(q_h k_hᵀ / sqrt(d_head)) row by row. */
  function headMaps(payload, tokens, heads) {
    const dModel = payload.d_model;
    const dHead = dModel / heads;
    const x = embed(tokens, dModel, payload.seed);
    const q = project(x, payload.W_Q, payload.b_Q);
    const k = project(x, payload.W_K, payload.b_K);
    const scale = Math.sqrt(dHead);
    const maps = [];
    for (let head = 0; head < heads; head += 1) {
      const from = head * dHead;
      maps.push(q.map((query) => {
        const scores = k.map((key) => {
          let dot = 0;
          for (let feature = from; feature < from + dHead; feature += 1) dot += query[feature] * key[feature];
          return dot / scale;
        });
        const top = Math.max(...scores);
        const exps = scores.map((score) => Math.exp(score - top));
        const total = exps.reduce((sum, value) => sum + value, 0);
        return exps.map((value) => value / total);
      }));
    }
    return maps;
  }

  function sentenceProblem(sentence, maxTokens) {
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

  function mountHeadExplorer(root, payload, options) {
    const view = frame(root, payload, options);
    const box = make("input", { type: "text", id: `${view.id}-sentence`, name: "sentence", spellcheck: "false",
      autocomplete: "off", "aria-describedby": `${view.id}-message` });
    box.value = payload.sentence;
    view.controls.append(make("label", { class: "mha-control mha-wide", for: box.id }, make("span", {}, "sentence"), box,
      make("small", {}, " (press Enter to redraw)")));
    const heads = slider(view, "heads", "heads", payload.max_heads - 1, payload.heads - 1);
    const head = slider(view, "head", "head shown", payload.heads - 1, payload.head);
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
      return { title: `head ${shown} of ${nHeads} (d_head = ${payload.d_model / nHeads})`, rows: tokens,
        columns: tokens, marked: [], scale: { kind: "weight" },
        hundredths: Uint8Array.from(weights[shown].flat(), (weight) => Math.round(weight * 100)) };
    };
    view.state = { sentence: box.value, heads: payload.heads - 1, head: payload.head };
    view.mapAt = mapFor;
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

    box.addEventListener("change", timed(view, () => view.redraw()));
    heads.input.addEventListener("input", timed(view, () => view.redraw()));
    head.input.addEventListener("input", timed(view, () => view.redraw()));
    return finish(view);
  }

  /* --- "timeline": a tiny model's heads through training ------------------------------------------------------ */

  /* The loss curve: the repeat loss at every logged step, chance as a dotted line, the phase change as a dashed
     one, and a cursor at the step on show. */
  function lossCurve(payload) {
    const [width, height, left, right, top, bottom] = [380, 210, 46, 26, 30, 40];
    const steps = payload.curve.steps;
    const losses = payload.curve.loss;
    const last = steps[steps.length - 1] || 1;
    const high = Math.max(payload.chance_loss, ...losses.filter((value) => value !== null)) * 1.05;
    const x = (step) => left + ((width - left - right) * step) / last;
    const y = (loss) => top + (height - top - bottom) * (1 - loss / high);
    const svg = makeSvg("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", class: "mha-map mha-curve",
      "aria-label": `Repeat loss over training, from ${losses[0]} at step 0 to ${losses[losses.length - 1]} at step ` +
        `${last}; the phase change is at step ${payload.phase_change.step}` });
    svg.append(makeSvg("text", { x: left, y: 12, class: "mha-map-title" }, "repeat loss (nats) over training"));
    const points = steps.map((step, index) => (losses[index] === null ? null : `${x(step).toFixed(1)},${y(losses[index]).toFixed(1)}`))
      .filter(Boolean).join(" ");
    svg.append(makeSvg("line", { x1: left, x2: width - right, y1: y(payload.chance_loss), y2: y(payload.chance_loss),
      class: "mha-chance" }));
    svg.append(makeSvg("text", { x: left + 4, y: y(payload.chance_loss) + 13 }, "chance"));
    const phase = x(payload.phase_change.step);
    svg.append(makeSvg("line", { x1: phase, x2: phase, y1: top, y2: height - bottom, class: "mha-phase" }));
    svg.append(makeSvg("text", { x: phase, y: top - 4, "text-anchor": "middle" }, `phase change, step ${payload.phase_change.step}`));
    svg.append(makeSvg("polyline", { points, class: "mha-loss-line" }));
    svg.append(makeSvg("line", { x1: left, x2: left, y1: top, y2: height - bottom, class: "mha-tick" }));
    svg.append(makeSvg("line", { x1: left, x2: width - right, y1: height - bottom, y2: height - bottom, class: "mha-tick" }));
    for (const value of [0, Math.round(high / 2), Math.floor(high)]) {
      svg.append(makeSvg("text", { x: left - 4, y: y(value) + 4, "text-anchor": "end" }, String(value)));
    }
    for (const step of [0, Math.round(last / 2), last]) {
      svg.append(makeSvg("text", { x: x(step), y: height - bottom + 14, "text-anchor": "middle" }, step.toLocaleString("en")));
    }
    svg.append(makeSvg("text", { x: (left + width) / 2, y: height - 6, "text-anchor": "middle", class: "mha-axis" },
      "training step"));
    const cursor = makeSvg("line", { y1: top, y2: height - bottom, class: "mha-cursor" });
    svg.append(cursor);
    return { svg, moveTo: (step) => { cursor.setAttribute("x1", x(step)); cursor.setAttribute("x2", x(step)); } };
  }

  function mountTimeline(root, payload, options) {
    const view = frame(root, payload, options);
    const [nLayers, nHeads, nSteps, size] = [payload.n_layers, payload.n_heads, payload.steps.length, payload.seq_len];
    const expected = payload.sequences.length * nLayers * nHeads * size * size * nSteps;
    if (payload.weights.length !== expected) {
      throw new Error(`the timeline holds ${payload.weights.length} weights where its shape needs ${expected}`);
    }
    const stepNames = payload.steps.map((step) => `step ${step.toLocaleString("en")}`);
    const step = slider(view, "step", "training", nSteps - 1, payload.start || 0);
    const play = button(view.controls, "Play", "play training from this step", () => toggle());
    const sequence = menu(view, "sequence", "sequence", payload.sequences.map((item) => item.title), 0);
    const layer = { value: nLayers - 1 };
    const head = { value: 0 };
    let timer = null;

    function toggle() {
      if (timer) {
        clearInterval(timer);
        timer = null;
      } else {
        if (Number(step.input.value) >= nSteps - 1) step.input.value = "0";
        timer = setInterval(() => {
          const next = Number(step.input.value) + 1;
          if (next >= nSteps) { toggle(); return; }
          step.input.value = String(next);
          view.redraw();
        }, 160);
      }
      play.textContent = timer ? "Pause" : "Play";
      play.setAttribute("aria-label", timer ? "pause training" : "play training from this step");
    }

    const mapFor = (state) => {
      const item = payload.sequences[state.sequence];
      const base = ((state.sequence * nLayers + state.layer) * nHeads + state.head) * size * size * nSteps;
      const hundredths = new Uint8Array(size * size);
      for (let cell = 0; cell < size * size; cell += 1) hundredths[cell] = payload.weights[base + cell * nSteps + state.step];
      const label = payload.head_labels[state.layer][state.head];
      const prefix = payload.prefix_matching[state.step][state.layer][state.head];
      return { title: `${label} at ${stepNames[state.step]}`, tile: `${label} · prefix ${prefix === null ? "–" : prefix.toFixed(2)}`,
        rows: item.labels, columns: item.labels, hundredths, marked: item.marked, scale: { kind: "weight" } };
    };
    view.state = { step: Number(step.input.value), sequence: 0, layer: layer.value, head: head.value };
    view.mapAt = mapFor;
    view.stateNames = ["step", "sequence", "layer", "head"];
    view.addressValue = (name) => (name === "step" ? payload.steps[view.state.step] : view.state[name]);
    view.valueOf = (name, text) => {
      if (name === "step") {
        const wanted = wholeNumber(text, 0, payload.steps[nSteps - 1], "step");
        const index = payload.steps.indexOf(wanted);
        if (index < 0) {
          const after = payload.steps.findIndex((recorded) => recorded > wanted);
          throw new Error(`step ${wanted} was not recorded; the nearest recorded steps are ` +
            `${payload.steps[Math.max(after - 1, 0)]} and ${payload.steps[after]}`);
        }
        return index;
      }
      const top = { sequence: payload.sequences.length, layer: nLayers, head: nHeads }[name];
      return wholeNumber(text, 0, top - 1, name);
    };
    view.gridNames = ["layer", "head"];
    view.range = (name) => Array.from({ length: name === "layer" ? nLayers : nHeads }, (_, index) => index);
    view.compareName = "step";
    view.compareControl = { label: "step", labels: stepNames };

    const curve = lossCurve(payload);
    const scores = make("div", { class: "mha-panel mha-panel-scores" });
    view.panels.append(make("div", { class: "mha-panel mha-panel-curve" }, curve.svg), scores);

    function scoreTable(at) {
      const header = make("tr", {}, make("th", { scope: "col" }, "head"), make("th", { scope: "col" }, "previous-token"),
        make("th", { scope: "col" }, "prefix-matching"));
      const body = make("tbody");
      for (let l = 0; l < nLayers; l += 1) {
        for (let h = 0; h < nHeads; h += 1) {
          const cells = [payload.previous_token[at][l][h], payload.prefix_matching[at][l][h]].map((value) => {
            const text = value === null ? "–" : value.toFixed(2);
            return make("td", value !== null && value >= payload.threshold ? { class: "mha-strong" } : {}, text);
          });
          body.append(make("tr", {}, make("th", { scope: "row" }, payload.head_labels[l][h]), ...cells));
        }
      }
      return make("table", { class: "mha-scores" }, make("caption", {}, `Held-out scores at ${stepNames[at]} ` +
        `(bold: at least ${payload.threshold}, a role)`), make("thead", {}, header), body);
    }

    view.apply = (state) => {
      step.input.value = String(state.step);
      sequence.value = String(state.sequence);
      layer.value = state.layer;
      head.value = state.head;
      view.redraw();
    };

    view.redraw = () => {
      const at = Number(step.input.value);
      view.state = { step: at, sequence: Number(sequence.value), layer: layer.value, head: head.value };
      step.output.textContent = stepNames[at];
      step.input.setAttribute("aria-valuetext", stepNames[at]);
      const loss = payload.loss[at];
      const phase = payload.phase_change.step;
      const where = payload.steps[at] < phase ? `${phase - payload.steps[at]} steps before the phase change`
        : payload.steps[at] === phase ? "the phase change" : `${payload.steps[at] - phase} steps after the phase change`;
      view.message.replaceChildren(`${stepNames[at]} of ${payload.steps[nSteps - 1].toLocaleString("en")} (${where}): ` +
        `repeat loss ${loss === null ? "–" : loss.toFixed(2)} nats (chance ${payload.chance_loss.toFixed(2)}).`);
      curve.moveTo(payload.steps[at]);
      scores.replaceChildren(scoreTable(at));
      showState(view, mapFor(view.state));
    };

    step.input.addEventListener("input", timed(view, () => view.redraw()));
    sequence.addEventListener("change", timed(view, () => view.redraw()));
    return finish(view);
  }

  /* --- start ---------------------------------------------------------------------------------------------------- */

  const MOUNT = { table: mountTable, "head-explorer": mountHeadExplorer, timeline: mountTimeline };

  function mount(root, payload, options) {
    return MOUNT[payload.kind](root, payload, options || {});
  }

  function showFailure(root, error) {
    const fallback = root.querySelector(".mha-view-fallback");
    const note = make("p", { class: "mha-message" }, ...problem(`this view could not be opened (${error.message}). ` +
      "The launch buttons at the top of the page run it as a notebook."));
    root.replaceChildren(...(fallback ? [fallback, note] : [note]));
    root.setAttribute("data-ready", "failed");
  }

  /* Draw the view of an encoded payload in root; options.hosted: in Jupyter, where the address is the notebook's. */
  async function open(root, encoded, options) {
    try {
      root.mhaView = mount(root, await readPayload(encoded), options);
    } catch (error) {
      showFailure(root, error);
    }
    return root.mhaView;
  }

  async function start(root) {
    const data = root.querySelector("script.mha-view-payload");
    if (data) await open(root, data.textContent);
  }

  globalThis.mhaViews = { open, readPayload, checkPayload, schemaProblem, PAYLOAD_SCHEMA, PAYLOAD_VERSION,
    parts: { sentenceScores, wordsOf, wordWeights, shareBelow } };  /* parts: for the tests, against the package */
  if (typeof document !== "undefined" && !globalThis.mhaViewsHostedByWidget) {
    document.querySelectorAll(".mha-view").forEach(start);
  }
}());
