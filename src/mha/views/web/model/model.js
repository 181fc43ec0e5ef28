// The model once its parts are read: every layer's matrices packed into one float32 arena (with scratch rows for
// the longest sentence), the tokenizer, and the word-embedding chunks, loaded as sentences need them.

import { tensorsOf } from "./bytes.js";
import { forwardByLayer } from "./forward.js";
import { PANEL, matmulJs, pack, simdKernel } from "./kernel.js";
import { abortable, loadPart } from "./loading.js";
import { headVectors, scoreParts } from "./qk_parts.js";
import { Tokenizer } from "./tokenizer.js";

// manifest: the export's manifest; byName: its parts by name; raws: the gunzipped vocab, base and layer parts;
// readPart: the reader, for the word chunks; useSimd: false forces matmulJs; bytesLoaded: .bin bytes read so far.
export function Model(manifest, byName, raws, readPart, useSimd, bytesLoaded) {
  var c = manifest.config, d = c.d_model, dm = c.d_mlp, L = c.n_layers;
  this.manifest = manifest;
  this.config = c;
  this.bytesLoaded = bytesLoaded;
  this._byName = byName;
  this._readPart = readPart;
  this._chunks = new Map(); // chunk index -> Promise<Float32Array (rows, d_model)>
  this._lastRun = Promise.resolve(); // runs share the arena's scratch rows: each starts when the one before ends
  this._tokenizer = new Tokenizer(new TextDecoder().decode(raws[0]).split("\n"), manifest.tokenizer, manifest.special_ids);

  var base = tensorsOf(raws[1], byName.get("base"));
  this._position = base.position_embeddings; // (max_positions, d_model)
  this._tokenType = base.token_type_embedding; // (d_model,)
  this._embeddingNorm = [base["embedding_norm.weight"], base["embedding_norm.bias"]];

  // one float32 arena: every layer's packed matrices and biases, then scratch rows for max_positions tokens
  var sizes = { qkv: d * 3 * d, bqkv: 3 * d, o: d * d, bo: d, in: d * dm, bin: dm, out: dm * d, bout: d };
  var perLayer = Object.keys(sizes).reduce(function (s, k) { return s + sizes[k]; }, 0);
  // and, for one head at a time, the matrix products of attention (forward.js): its queries (n, d_head), keys
  // packed as K^T (d_head, n rounded up to 8), scores (n, n rounded up), weights (n, n), values packed (n, d_head),
  // output z_h (n, d_head), and a row of zeros for the products' bias
  var n = c.max_positions, dh = c.d_head, wide = Math.ceil(n / PANEL) * PANEL;
  var scratch = { x: n * d, qkv: n * 3 * d, z: n * d, tmp: n * d, h: n * dm, headQ: n * dh, headKT: wide * dh,
    headScores: n * wide, headWeights: n * n, headV: n * dh, headZ: n * dh, zeros: Math.max(wide, dh) };
  var floats = L * perLayer + Object.keys(scratch).reduce(function (s, k) { return s + scratch[k]; }, 0);
  var memory = null, kernel = null, buffer;
  if (useSimd && typeof WebAssembly === "object") {
    memory = new WebAssembly.Memory({ initial: Math.ceil(floats * 4 / 65536) });
    kernel = simdKernel(memory);
  }
  buffer = kernel ? memory.buffer : new ArrayBuffer(floats * 4);
  this.backend = kernel ? "wasm-simd" : "js";
  this._kernel = kernel;
  var F = this._F = new Float32Array(buffer), next = 0;
  function take(count) { var at = next; next += count; return at; } // float offsets into F
  this._layers = [];
  for (var l = 0; l < L; l++) {
    var t = tensorsOf(raws[2 + l], byName.get("layer-" + l));
    var layer = {
      qkv: take(sizes.qkv), bqkv: take(sizes.bqkv), o: take(sizes.o), bo: take(sizes.bo),
      in: take(sizes.in), bin: take(sizes.bin), out: take(sizes.out), bout: take(sizes.bout),
      norm1: [t["attention_norm.weight"], t["attention_norm.bias"]], norm2: [t["mlp_norm.weight"], t["mlp_norm.bias"]],
    };
    pack(F, layer.qkv, [t.W_Q, t.W_K, t.W_V], [d, d, d], d);
    F.set(t.b_Q, layer.bqkv); F.set(t.b_K, layer.bqkv + d); F.set(t.b_V, layer.bqkv + 2 * d);
    pack(F, layer.o, [t.W_O], [d], d); F.set(t.b_O, layer.bo);
    pack(F, layer.in, [t.W_in], [dm], d); F.set(t.b_in, layer.bin);
    pack(F, layer.out, [t.W_out], [d], dm); F.set(t.b_out, layer.bout);
    this._layers.push(layer);
  }
  this._scratch = {};
  for (var key in scratch) this._scratch[key] = take(scratch[key]);
  this._warmUp();
}

// Run each matrix product a few times on the (zeroed) scratch rows, so that the engine has compiled the kernel
// fully before the first sentence comes.
Model.prototype._warmUp = function () {
  var d = this.config.d_model, dm = this.config.d_mlp, s = this._scratch, layer = this._layers[0];
  for (var r = 0; r < 3; r++) {
    this._matmul(s.x, layer.qkv, layer.bqkv, s.qkv, 9, d, 3 * d);
    this._matmul(s.x, layer.in, layer.bin, s.h, 9, d, dm);
    this._matmul(s.h, layer.out, layer.bout, s.tmp, 9, dm, d);
  }
};

Model.prototype._matmul = function (x, w, b, out, n, dIn, dOut) {
  if (this._kernel) this._kernel(4 * x, 4 * w, 4 * b, 4 * out, n, dIn, dOut);
  else matmulJs(this._F, x, w, b, out, n, dIn, dOut);
};

Model.prototype._chunk = function (index, signal) {
  var self = this, name = "words-" + index;
  if (!this._chunks.has(index)) {
    var part = this._byName.get(name);
    var promise = loadPart(this._readPart, part, signal).then(function (raw) {
      self.bytesLoaded += part.bin_bytes;
      return tensorsOf(raw, part).word_embeddings;
    });
    promise.catch(function () { self._chunks.delete(index); }); // a failed or cancelled load is tried again next time
    this._chunks.set(index, promise);
  }
  return this._chunks.get(index);
};

Model.prototype.tokenize = function (text) { return this._tokenizer.tokenize(text, this.config.max_positions); };

// The ids checked, and the heads to keep: a Float32Array (layers * heads) of 1, with 0 for each removed head (zero
// ablation) or -1 (mean ablation: the head's output at every token replaced by its mean over the sentence's tokens).
Model.prototype._checkRun = function (ids, removed, ablation) {
  var c = this.config;
  if (!ids || typeof ids.length !== "number" || ids.length < 1 || ids.length > c.max_positions) {
    throw new Error("run needs 1 to " + c.max_positions + " token ids (from model.tokenize(text).ids), got " +
                    (ids && ids.length !== undefined ? ids.length : String(ids)) + ".");
  }
  Array.prototype.forEach.call(ids, function (id, i) {
    if (!Number.isInteger(id) || id < 0 || id >= c.vocab_size) throw new Error("token id " + i + " is " + id + "; ids are whole numbers in 0.." + (c.vocab_size - 1) + ".");
  });
  if (ablation !== undefined && ablation !== "zero" && ablation !== "mean") throw new Error("ablation is \"zero\" or \"mean\", got " + JSON.stringify(ablation) + ".");
  var keep = new Float32Array(c.n_layers * c.n_heads).fill(1);
  (removed || []).forEach(function (pair) {
    var ok = Array.isArray(pair) && pair.length === 2 && Number.isInteger(pair[0]) && Number.isInteger(pair[1]) &&
      pair[0] >= 0 && pair[0] < c.n_layers && pair[1] >= 0 && pair[1] < c.n_heads;
    if (!ok) throw new Error("removed heads are [layer, head] pairs with layer in 0.." + (c.n_layers - 1) + " and head in 0.." + (c.n_heads - 1) + "; got " + JSON.stringify(pair) + ".");
    keep[pair[0] * c.n_heads + pair[1]] = ablation === "mean" ? -1 : 0;
  });
  return keep;
};

// The pass on ids; with options.onLayer, a layer at a time: after each layer, onLayer(result) (result's layersDone
// layers filled) and what it returns awaited, then a task's pause, so that the page can draw and answer meanwhile.
Model.prototype.run = function (ids, options) {
  options = options || {};
  var self = this, keep, onLayer = options.onLayer, signal = options.signal;
  try { keep = this._checkRun(ids, options.removed, options.ablation); } catch (error) { return Promise.reject(error); }
  var rows = this.config.rows_per_chunk;
  var wanted = Array.from(new Set(Array.prototype.map.call(ids, function (id) { return Math.floor(id / rows); })));
  var tables = abortable(Promise.all(wanted.map(function (index) { return self._chunk(index, signal); })), signal);
  var ran = Promise.all([tables, this._lastRun]).then(function (read) {
    var chunkOf = new Map(wanted.map(function (index, i) { return [index, read[0][i]]; }));
    var pass = forwardByLayer(self, Array.from(ids), keep, chunkOf);
    if (!onLayer) {
      while (pass.next()) { /* the next layer */ }
      return pass.result;
    }
    function step() {
      if (signal && signal.aborted) throw new Error("the run was cancelled, as asked.");
      var more = pass.next();
      return Promise.resolve(onLayer(pass.result)).then(function () {
        return more ? new Promise(function (resume) { setTimeout(resume, 0); }).then(step) : pass.result;
      });
    }
    return step();
  });
  this._lastRun = ran.catch(function () { /* the next run starts all the same */ });
  return ran;
};

// One head's queries and keys on a run (qk_parts.js): {q, k, qx, kx (n, d_head), bQ, bK (d_head)}.
Model.prototype.headVectors = function (result, layer, head) { return headVectors(this, result, layer, head); };

// Behind the weight of `query` on `key` (qk_parts.js): vectors, products, score, its softmax row and QK-circuit parts.
Model.prototype.scoreParts = function (result, layer, head, query, key) {
  return scoreParts(this, result, layer, head, query, key);
};
