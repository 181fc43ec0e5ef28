/* The book's interactive views, drawn in the reader's browser without a kernel (issue 9).

   Every view of the book is an mha.views Explorer. In a notebook it is a live ipywidgets view; its output also
   stores a placeholder, <div class="mha-view" data-mha-recipe="...">, which the book's build (site/static_views.py)
   fills with a payload (src/mha/views/static_form.py): base64 text of gzip-compressed bytes, inflated here with the
   browser's own DecompressionStream, so nothing is fetched and the page works opened from disk (file://).

   Two kinds of payload:
   - "table": every view the controls can reach, computed by the package when the book was built. A control moves,
     and the view for the new setting is looked up and drawn.
   - "head-explorer" (chapter 1.2): the random layer's query and key projections. The page computes the maps itself,
     for any sentence the reader types: the same tokens, word vectors (src/mha/core/toy_sentences.py) and scaled
     dot-product attention as the package, in double precision.

   Every view draws its map as SVG (rows are queries, columns keys, the viridis colours of mha.views.heatmaps) and
   writes the same numbers into a table, for screen readers. Text that came from the reader is only ever set as
   text (textContent), never parsed as HTML; the HTML messages of a table payload were written, and escaped, by the
   package. Each update's time is kept on the view (data-update-ms: computing and drawing; data-paint-ms: until the
   next frame is painted), for the book's tests and benchmark. */
(function () {
  "use strict";

  const SVG = "http://www.w3.org/2000/svg";
  const NUMBERS_TITLE = "The numbers behind the map, as a table";
  let counter = 0;

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
    return `${Math.floor(hundredths / 100)}.${String(hundredths % 100).padStart(2, "0")}`;
  }

  function problem(text) {  /* the package's "Cannot draw this:" message, for a problem found here */
    return [make("b", { style: "color:#b35806" }, "Cannot draw this:"), " " + text];
  }

  /* --- the payload ---------------------------------------------------------------------------------------------- */

  async function readPayload(encoded) {
    const bytes = Uint8Array.from(atob(encoded.trim()), (character) => character.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const raw = new Uint8Array(await new Response(stream).arrayBuffer());
    const length = new DataView(raw.buffer, raw.byteOffset, 4).getUint32(0, true);
    const payload = JSON.parse(new TextDecoder().decode(raw.subarray(4, 4 + length)));
    payload.weights = raw.subarray(4 + length);
    return payload;
  }

  /* --- one map: SVG picture and table of numbers ----------------------------------------------------------------- */

  /* map: {title, rows, columns, hundredths (rows x columns, row by row), marked: [[query, key], ...]}. A map with the
     same labels as the one on screen (another head of the same sentence) only recolours its cells and rewrites their
     numbers; a new sentence draws the picture and the table afresh. */
  function drawMap(view, map) {
    const layout = [map.rows.length, ...map.rows, "\u0000", ...map.columns].join("\u0001");
    if (view.drawn && view.drawn.layout === layout) {
      repaint(view, map);
      return;
    }
    const palette = view.payload.palette;
    const nRows = map.rows.length;
    const nColumns = map.columns.length;
    const cell = Math.max(8, Math.min(22, Math.floor(380 / Math.max(nRows, nColumns))));
    const every = Math.max(nRows, nColumns) > 30 ? 5 : 1;
    const longest = (labels) => Math.min(18, Math.max(1, ...labels.map((label) => [...label].length)));
    const left = 26 + 6 * longest(map.rows);
    const top = 22;
    const bottom = 22 + 6 * longest(map.columns);
    const width = left + cell * nColumns + 10;
    const height = top + cell * nRows + bottom;
    const cut = (label) => ([...label].length > 18 ? [...label].slice(0, 17).join("") + "…" : label);
    const svg = makeSvg("svg", {
      viewBox: `0 0 ${width} ${height}`, width: width, height: height, role: "img", class: "mha-map",
    });
    const title = makeSvg("text", { x: left + (cell * nColumns) / 2, y: 14, "text-anchor": "middle", class: "mha-map-title" });
    svg.append(title);
    const cells = [];
    for (let row = 0; row < nRows; row += 1) {
      for (let column = 0; column < nColumns; column += 1) {
        const rect = makeSvg("rect", { x: left + column * cell, y: top + row * cell, width: cell, height: cell });
        const tip = makeSvg("title");
        rect.append(tip);
        svg.append(rect);
        cells.push({ rect, tip, label: `${map.rows[row]} → ${map.columns[column]}: ` });
      }
    }
    const rings = makeSvg("g", { class: "mha-rings" });
    svg.append(rings);
    for (let row = 0; row < nRows; row += every) {
      svg.append(makeSvg("text", { x: left - 4, y: top + (row + 0.5) * cell + 3, "text-anchor": "end" }, cut(map.rows[row])));
    }
    for (let column = 0; column < nColumns; column += every) {
      const x = left + (column + 0.5) * cell + 3;
      const y = top + nRows * cell + 4;
      svg.append(makeSvg("text", { x: x, y: y, "text-anchor": "end", transform: `rotate(-90 ${x} ${y})` },
        cut(map.columns[column])));
    }
    const axes = view.payload.axes;
    svg.append(makeSvg("text", { x: left + (cell * nColumns) / 2, y: height - 4, "text-anchor": "middle", class: "mha-axis" },
      axes.key));
    const middle = top + (cell * nRows) / 2;
    svg.append(makeSvg("text", { x: 10, y: middle, "text-anchor": "middle", class: "mha-axis",
      transform: `rotate(-90 10 ${middle})` }, axes.query));
    const table = tableOf(map);
    view.drawn = { layout, svg, title, cells, rings, left, top, cell, table };
    repaint(view, map);
    view.picture.replaceChildren(svg);
    view.table.replaceChildren(table.element);
  }

  function repaint(view, map) {  /* the colours, numbers, title and rings of a map whose layout is drawn */
    const palette = view.payload.palette;
    const { svg, title, cells, rings, left, top, cell, table } = view.drawn;
    title.textContent = map.title;
    svg.setAttribute("aria-label", `${map.title}: attention map, ${map.rows.length} queries by ${map.columns.length} ` +
      "keys; the numbers are in the table below");
    table.title.textContent = map.title;
    cells.forEach((part, index) => {
      const hundredths = map.hundredths[index];
      const [background, text] = palette[Math.round((hundredths / 100) * 255)];
      const written = hundredthsText(hundredths);
      part.rect.setAttribute("fill", background);
      part.tip.textContent = part.label + written;
      table.cells[index].textContent = written;
      table.cells[index].style.background = background;
      table.cells[index].style.color = text;
    });
    const circles = [];
    for (const [query, key] of map.marked) {
      for (const [colour, strokeWidth] of [["black", 2.2], ["white", 0.9]]) {
        circles.push(makeSvg("circle", {
          cx: left + (key + 0.5) * cell, cy: top + (query + 0.5) * cell, r: Math.max(cell * 0.3, 3),
          fill: "none", stroke: colour, "stroke-width": strokeWidth,
        }));
      }
    }
    rings.replaceChildren(...circles);
  }

  function tableOf(map) {  /* the table of a map's layout: its cells are filled by repaint() */
    const title = make("b");
    const caption = make("caption", {}, title, make("br"),
      "rows: query, the position attending FROM · columns: key, the position attended TO");
    const header = make("tr", {}, make("td"));
    for (const key of map.columns) header.append(make("th", { scope: "col", class: "mha-key" }, key));
    const element = make("table", { class: "mha-numbers" }, caption, header);
    const cells = [];
    for (const query of map.rows) {
      const line = make("tr", {}, make("th", { scope: "row" }, query));
      for (let column = 0; column < map.columns.length; column += 1) {
        const td = make("td");
        cells.push(td);
        line.append(td);
      }
      element.append(line);
    }
    return { element, title, cells };
  }

  /* --- what every view has: guidance, controls, message, map, numbers, panels ------------------------------------ */

  function frame(root, payload) {
    const id = `mha-view-${(counter += 1)}`;
    const guide = make("p", { class: "mha-guide" }, make("b", {}, "Try: "), payload.guidance.try, make("br"),
      make("b", {}, "Notice: "), payload.guidance.notice);
    const controls = make("div", { class: "mha-controls", role: "group", "aria-label": "controls of the view" });
    const message = make("div", { class: "mha-message", "aria-live": "polite", id: `${id}-message` });
    const picture = make("div", { class: "mha-picture" });
    const table = make("div", { class: "mha-table" });
    const numbers = make("details", { class: "mha-details" }, make("summary", {}, NUMBERS_TITLE), table);
    const panels = make("div", { class: "mha-panels" });
    const parts = [guide, controls, message, make("div", { class: "mha-body" }, make("div", {}, picture, numbers), panels)];
    if (payload.note) parts.push(make("p", { class: "mha-note" }, payload.note));
    root.replaceChildren(...parts);
    root.setAttribute("data-ready", "true");
    return { root, id, payload, controls, message, picture, table, panels, panelParts: {} };
  }

  function timed(view, update) {
    return (event) => {
      const start = performance.now();
      update(event);
      view.root.dataset.updateMs = (performance.now() - start).toFixed(2);
      requestAnimationFrame(() => setTimeout(() => {
        view.root.dataset.paintMs = (performance.now() - start).toFixed(2);
        view.root.dataset.updates = String(Number(view.root.dataset.updates || 0) + 1);
      }, 0));
    };
  }

  function slider(view, name, label, max, value) {
    const input = make("input", { type: "range", min: 0, max: max, step: 1, value: value, id: `${view.id}-${name}`,
      name: name, "aria-describedby": `${view.id}-message` });
    const output = make("output", { for: input.id });
    const wrapper = make("label", { class: "mha-control", for: input.id }, make("span", {}, label), input, output);
    view.controls.append(wrapper);
    return { input, output };
  }

  /* --- "table": every reachable view stored ---------------------------------------------------------------------- */

  function mountTable(root, payload) {
    const view = frame(root, payload);
    const inputs = payload.controls.map((control) => {
      let input;
      let output = null;
      if (control.kind === "slider") {
        ({ input, output } = slider(view, control.name, control.label, control.values.length - 1, control.start));
      } else if (control.kind === "menu") {
        input = make("select", { id: `${view.id}-${control.name}`, name: control.name,
          "aria-describedby": `${view.id}-message` });
        control.labels.forEach((label, index) => input.append(make("option", { value: index }, label)));
        input.value = String(control.start);
        view.controls.append(make("label", { class: "mha-control", for: input.id }, make("span", {}, control.label), input));
      } else {
        input = make("input", { type: "checkbox", id: `${view.id}-${control.name}`, name: control.name,
          "aria-describedby": `${view.id}-message` });
        input.checked = control.values[control.start] === true;
        view.controls.append(make("label", { class: "mha-control mha-checkbox", for: input.id }, input,
          make("span", {}, control.label)));
      }
      return { control, input, output };
    });
    const indexOf = ({ control, input }) => (control.kind === "checkbox"
      ? control.values.indexOf(input.checked) : Number(input.value));
    const strings = payload.strings;

    function show() {
      let key = inputs.map(indexOf).join("|");
      const drawn = payload.drawn[payload.views[key]];
      for (const part of inputs) {
        const name = part.control.name;
        if (drawn.top[name] !== undefined) part.input.max = String(drawn.top[name]);
        if (drawn.shown[name] !== undefined) part.input.value = String(drawn.shown[name]);
      }
      key = inputs.map(indexOf).join("|");
      for (const part of inputs) {
        if (part.output) part.output.textContent = part.control.labels[indexOf(part)];
        if (part.control.kind === "slider") part.input.setAttribute("aria-valuetext", part.control.labels[indexOf(part)]);
      }
      view.root.dataset.key = key;
      view.message.innerHTML = strings[drawn.message];  /* written and escaped by the package */
      for (const [name, index] of Object.entries(drawn.panels)) {
        if (!view.panelParts[name]) {
          view.panelParts[name] = make("div", { class: `mha-panel mha-panel-${name}` });
          view.panels.append(view.panelParts[name]);
        }
        view.panelParts[name].innerHTML = strings[index];  /* written and escaped by the package */
      }
      if (drawn.map) {
        const stored = drawn.map;
        const size = stored.shape[0] * stored.shape[1];
        drawMap(view, {
          title: strings[stored.title], rows: strings[stored.rows], columns: strings[stored.columns],
          hundredths: payload.weights.subarray(stored.offset, stored.offset + size), marked: stored.marked,
        });
      }
    }

    for (const part of inputs) {
      const update = timed(view, show);
      part.input.addEventListener(part.control.kind === "slider" ? "input" : "change", update);
    }
    show();
    return view;
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

  function mountHeadExplorer(root, payload) {
    const view = frame(root, payload);
    const box = make("input", { type: "text", id: `${view.id}-sentence`, name: "sentence", value: payload.sentence,
      spellcheck: "false", autocomplete: "off", "aria-describedby": `${view.id}-message` });
    box.value = payload.sentence;
    view.controls.append(make("label", { class: "mha-control mha-wide", for: box.id }, make("span", {}, "sentence"), box,
      make("small", {}, " (press Enter to redraw)")));
    const heads = slider(view, "heads", "heads", payload.max_heads - 1, payload.heads - 1);
    const head = slider(view, "head", "head shown", payload.heads - 1, payload.head);

    function compute(sentence, nHeads) {
      const tokens = sentence.match(TOKEN) || [];
      return { tokens, weights: headMaps(payload, tokens, nHeads) };
    }
    view.compute = compute;

    function show() {
      const nHeads = Number(heads.input.value) + 1;
      heads.output.textContent = String(nHeads);
      heads.input.setAttribute("aria-valuetext", `${nHeads} heads`);
      const refusal = payload.refusals[String(nHeads)];
      if (refusal) {
        view.message.innerHTML = refusal;  /* written and escaped by the package */
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
      const { tokens, weights } = compute(box.value, nHeads);
      const dHead = payload.d_model / nHeads;
      view.last = { sentence: box.value, heads: nHeads, head: shown, tokens, weights };
      view.message.replaceChildren(
        `${nHeads} head${nHeads > 1 ? "s" : ""} × d_head = ${dHead} features each (d_model = ${payload.d_model}); ` +
        `showing head ${shown}. Tokens: `, make("code", {}, tokens.join(" | ")));
      drawMap(view, {
        title: `head ${shown} of ${nHeads} (d_head = ${dHead})`, rows: tokens, columns: tokens, marked: [],
        hundredths: weights[shown].flat().map((weight) => Math.round(weight * 100)),
      });
    }

    box.addEventListener("change", timed(view, show));
    heads.input.addEventListener("input", timed(view, show));
    head.input.addEventListener("input", timed(view, show));
    show();
    return view;
  }

  /* --- start ---------------------------------------------------------------------------------------------------- */

  const MOUNT = { table: mountTable, "head-explorer": mountHeadExplorer };

  async function start(root) {
    const data = root.querySelector("script.mha-view-payload");
    if (!data) return;
    try {
      const payload = await readPayload(data.textContent);
      if (payload.version !== 1 || !MOUNT[payload.kind]) throw new Error(`a view of unknown kind ${payload.kind}`);
      root.mhaView = MOUNT[payload.kind](root, payload);
    } catch (error) {
      const fallback = root.querySelector(".mha-view-fallback");
      const note = make("p", { class: "mha-message" }, ...problem(`this browser could not open the view (${error.message}); ` +
        "the launch buttons at the top of the page run it as a notebook."));
      root.replaceChildren(...(fallback ? [fallback, note] : [note]));
      root.setAttribute("data-ready", "failed");
    }
  }

  document.querySelectorAll(".mha-view").forEach(start);
}());
