/*
 * all-MiniLM-L6-v2 in the page: the book's pretrained encoder run in plain JavaScript. This is the entry module;
 * mha.views.widget joins it and the modules it imports into model.js, one classic script (no modules, so it
 * works from file://, in served pages and under Node 20). It reads the parts that
 * mha.pretrained.web_export.export_web_model writes, and sets globalThis.mhaModel.
 *
 * API (what a page calls):
 *   mhaModel.open(readPart, options) -> Promise<model>
 *     readPart(name, signal) -> Promise<Uint8Array>: the gzip bytes of part NAME (NAME.bin). Ready-made:
 *       mhaModel.fetchReader(baseUrl)   fetches baseUrl + NAME + ".bin"              (pages served over http)
 *       mhaModel.scriptReader(baseUrl)  adds <script src=baseUrl + NAME + ".js">     (pages opened from file://)
 *     options.onProgress({loaded, total, part})  bytes of .bin read so far / to read, the part just read
 *     options.signal                             an AbortSignal: aborting rejects, and nothing is kept
 *     options.simd                               false forces the plain-JavaScript matrix product
 *     Loads manifest, vocab, base and every layer; checks each part's sha256 (the browser's, or sha256.js where
 *     crypto.subtle is missing).
 *   model.tokenize(text) -> {ids: number[n], tokens: string[n], wordIds: (number|null)[n]}
 *     as the package's tokenizer, [CLS] ... [SEP] included; throws an Error for empty text, a lone
 *     surrogate, or more than config.max_positions (512) tokens (the message says how many).
 *   await model.run(ids, {removed: [[layer, head], ...], ablation: "zero" | "mean", signal}) ->
 *     {n, attention: Float32Array (layers, heads, n, n)   row = query (attends from), column = key,
 *      hidden: Float32Array (layers + 1, n, d_model)       embeddings, then each layer's output,
 *      sentenceVector: Float32Array (d_model)             mean over the n tokens, scaled to length 1}
 *     removed heads have their output z_h set to 0 before W_O, as MiniLMEncoder's head_mask does ("zero", the
 *     default), or to its mean over the sentence's n tokens at every token ("mean"). With options.onLayer, the pass
 *     goes a layer at a time: after each, onLayer(result) with result.layersDone layers filled (sentenceVector null
 *     until the last), its return value awaited, then a pause for the page; the same numbers as in one go. Runs
 *     share the model's scratch memory, so each starts when the one before has ended.
 *   model.scoreParts(result, layer, head, query, key) -> {query, key, products (d_head), score, scores, weights (n),
 *     parts: {bilinear, query_only, key_only, constant}}: what lies behind one weight of result.attention, the
 *     score split as chapter 2's mha.core.geometry.score_terms splits it; model.headVectors(result, layer, head)
 *     -> {q, k, qx, kx (n, d_head), bQ, bK (d_head)}, computed from result.hidden[layer].
 *     Loads (and keeps) the word-embedding chunks the ids fall in.
 *   model.config  {n_layers, n_heads, d_model, d_head, d_mlp, vocab_size, max_positions, layer_norm_eps, ...}
 *   model.backend "wasm-simd" or "js"; model.bytesLoaded: bytes of .bin read so far, the manifest's included.
 * Everything is computed in float32 (weights are stored as float16). The two backends give identical numbers.
 */

import { gunzip } from "./bytes.js";
import { abortable, cancelled, loadPart } from "./loading.js";
import { Model } from "./model.js";
import { fetchReader, scriptReader } from "./readers.js";

// The manifest, then every part the model needs before its first sentence (vocabulary, base and each layer), read
// side by side; onProgress hears each part read. Resolves to [manifest, byName, raws, bytes read].
function readParts(readPart, signal, onProgress) {
  var manifestBytes = 0;
  return abortable(Promise.resolve(readPart("manifest", signal)), signal).then(function (bytes) {
    manifestBytes = bytes.byteLength;
    return abortable(gunzip(bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes)), signal);
  }).then(function (raw) {
    var manifest = JSON.parse(new TextDecoder().decode(raw));
    if (manifest.format !== "mha-web-model-1") throw new Error("the manifest is not an mha web model (format " + manifest.format + ").");
    var byName = new Map(manifest.parts.map(function (part) { return [part.name, part]; }));
    var names = ["vocab", "base"];
    for (var l = 0; l < manifest.config.n_layers; l++) names.push("layer-" + l);
    var parts = names.map(function (name) { return byName.get(name); });
    var total = parts.reduce(function (sum, part) { return sum + part.bin_bytes; }, 0), loaded = 0;
    return Promise.all(parts.map(function (part) {
      return loadPart(readPart, part, signal).then(function (partRaw) {
        loaded += part.bin_bytes;
        if (onProgress && !signal.aborted) onProgress({ loaded: loaded, total: total, part: part.name });
        return partRaw;
      });
    })).then(function (raws) { return [manifest, byName, raws, manifestBytes + loaded]; });
  });
}

function open(readPart, options) {
  options = options || {};
  if (typeof readPart !== "function") {
    throw new Error("mhaModel.open needs a function readPart(name, signal) -> Promise<Uint8Array>, e.g. mhaModel.fetchReader(\"model/\").");
  }
  var outer = options.signal, inner = new AbortController(); // inner: stops the other reads when one fails
  function stop() { inner.abort(); }
  if (outer) { if (outer.aborted) return Promise.reject(cancelled()); outer.addEventListener("abort", stop, { once: true }); }
  var signal = inner.signal;
  return readParts(readPart, signal, options.onProgress).then(function (read) {
    if (signal.aborted) throw cancelled();
    return new Model(read[0], read[1], read[2], readPart, options.simd !== false, read[3]);
  }).catch(function (error) {
    stop();
    throw signal.aborted && outer && outer.aborted ? cancelled() : error;
  }).finally(function () {
    if (outer) outer.removeEventListener("abort", stop);
  });
}

globalThis.mhaModel = { open: open, fetchReader: fetchReader, scriptReader: scriptReader };
