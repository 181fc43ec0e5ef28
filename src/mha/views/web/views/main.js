/* The book's interactive views: one script draws every view, in Jupyter and on the website. This is its entry
   module; mha.views.widget joins it and the modules it imports into views.js, one classic script.

   A view is a plain description sent by the package (src/mha/views/payloads.py): its controls, its data, and what
   it draws. views.js draws it, wherever it runs:
   - on the website, the book's build (site/view_payloads.py) embeds each view's payload in its placeholder,
     <div class="mha-view">, as base64 text of gzip-compressed bytes, inflated here with the browser's own
     DecompressionStream; nothing is fetched, so a page works opened from disk (file://);
   - in Jupyter (JupyterLab, Notebook 7, VS Code, Colab), anywidget loads the same script as an ES module
     (mha.views.widget.ViewWidget adds `export default {render}` to it) and hands it the same encoded payload.

   Payload kinds (payload.schema.json): "table" (table.js), "head-explorer" (head_explorer.js) and "timeline"
   (timeline.js; with trainer_bridge.js, the reader trains the model in the page). Every attention map has a labelled colour scale (drawing.js); a readout of any cell by mouse, touch
   and keyboard (focus.js); a table of its numbers for screen readers; export as SVG, PNG and CSV (exports.js); a
   grid of every head at once and a comparison of two settings with their difference (tools.js); and the whole state
   in the page's address (address.js). Text that came from the reader or from the address is only ever set as text,
   never parsed as HTML; the HTML messages of a table payload were written, and escaped, by the package (dom.js).
   After each input a view dispatches "mha-view-updated" on its root (frame.js), which the book's tests and
   benchmark time. */

import { make, problem } from "./dom.js";
import { PAYLOAD_SCHEMA, PAYLOAD_VERSION, checkPayload, readPayload, schemaProblem } from "./schema.js";
import { UPDATED } from "./frame.js";
import { sentenceScores, shareBelow, wordWeights, wordsOf } from "./scores.js";
import { mountTable } from "./table.js";
import { mountHeadExplorer } from "./head_explorer.js";
import { mountTimeline } from "./timeline.js";

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

/* parts: for the tests, against the package. */
globalThis.mhaViews = { open, readPayload, checkPayload, schemaProblem, PAYLOAD_SCHEMA, PAYLOAD_VERSION, UPDATED,
  parts: { sentenceScores, wordsOf, wordWeights, shareBelow } };
if (typeof document !== "undefined" && !globalThis.mhaViewsHostedByWidget) {
  document.querySelectorAll(".mha-view").forEach(start);
}
