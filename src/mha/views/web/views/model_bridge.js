/* The bridge to the page's model, all-MiniLM-L6-v2 run in the reader's page.

   model.js (beside views.js) and the model's weights (its model/ folder) load only when the reader first asks, with
   a progress bar and a cancel; the stored sentences keep working whatever happens. model.js's API:
   mhaModel.open(readPart, {onProgress, signal}) -> model; model.tokenize(text) -> {ids, tokens};
   model.run(ids, {removed: [[layer, head]], ablation: "zero" | "mean"}) -> {attention: Float32Array (layers, heads,
   n, n), hidden, sentenceVector: Float32Array (d_model)}; model.scoreParts(run, layer, head, query, key) -> what lies
   behind one weight (weight_parts.js). */

import { make } from "./dom.js";

/* Where views.js was loaded from, read while it runs (a classic script; null in Jupyter, where it is a module). */
const SCRIPT_URL = typeof document !== "undefined" && document.currentScript ? document.currentScript.src : null;
let modelLoad = null;  /* {promise, controller, listeners}: one load per page, shared by its views */

function addScript(source) {
  return new Promise((resolve, reject) => {
    const script = make("script", { src: source });
    script.addEventListener("load", resolve);
    script.addEventListener("error", () => reject(new Error(`could not read ${source.split("/").pop()}, the script ` +
      "that runs the model; check the connection (or that the site's files are all there), then reload the page")));
    document.head.append(script);
  });
}

/* The page's model, loading (once per page) or loaded: {promise, controller, listeners}; onProgress hears how far
   the load is until the caller takes it out of `listeners`. */
export function openModel(onProgress) {
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

/* Cancel the load under way, if any. */
export function cancelModelLoad() {
  if (modelLoad) modelLoad.controller.abort();
}
