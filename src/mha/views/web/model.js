/*
 * all-MiniLM-L6-v2 in the page: the book's pretrained encoder run in plain JavaScript (a classic script, no
 * modules, so it works from file://, in served pages and under Node 20). It reads the parts that
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
 *     Loads manifest, vocab, base and every layer; checks each part's sha256 where crypto.subtle exists.
 *   model.tokenize(text) -> {ids: number[n], tokens: string[n], wordIds: (number|null)[n]}
 *     as the package's tokenizer, [CLS] ... [SEP] included; throws an Error for empty text, a lone
 *     surrogate, or more than config.max_positions (512) tokens (the message says how many).
 *   await model.run(ids, {removed: [[layer, head], ...], signal}) ->
 *     {n, attention: Float32Array (layers, heads, n, n)   row = query (attends from), column = key,
 *      hidden: Float32Array (layers + 1, n, d_model)       embeddings, then each layer's output,
 *      sentenceVector: Float32Array (d_model)             mean over the n tokens, scaled to length 1}
 *     removed heads have their output z_h set to 0 before W_O, as MiniLMEncoder's head_mask does.
 *     Loads (and keeps) the word-embedding chunks the ids fall in.
 *   model.config  {n_layers, n_heads, d_model, d_head, d_mlp, vocab_size, max_positions, layer_norm_eps, ...}
 *   model.backend "wasm-simd" or "js"; model.bytesLoaded: bytes of .bin read so far, the manifest's included.
 * Everything is computed in float32 (weights are stored as float16). The two backends give identical numbers.
 */
(function () {
  "use strict";

  // The compiled bytes of model_matmul.wat (wat2wasm 1.0.32), base64.
  var KERNEL_WASM_BASE64 = "AGFzbQEAAAABCwFgB39/f39/f38AAg8BA2VudgZtZW1vcnkCAAEDAgEABwoBBm1hdG11bAAACt8GAdwGAg1/DXsgBUECdCEHIAZBAnQhCCAFQQV0IQkgByERIAdBAXQhEiASIAdqIRMgBkEDdiELQQAhCgJAA0AgCiALTw0BIAIgCkEFdGr9AAQAIRQgAiAKQQV0av0ABBAhFUEAIQwCQANAIAxBBGogBEsNAf0MAAAAAAAAAAAAAAAAAAAAACEZ/QwAAAAAAAAAAAAAAAAAAAAAIRr9DAAAAAAAAAAAAAAAAAAAAAAhG/0MAAAAAAAAAAAAAAAAAAAAACEc/QwAAAAAAAAAAAAAAAAAAAAAIR39DAAAAAAAAAAAAAAAAAAAAAAhHv0MAAAAAAAAAAAAAAAAAAAAACEf/QwAAAAAAAAAAAAAAAAAAAAAISAgASAKIAlsaiENIA0gCWohDiAAIAwgB2xqIQ8DQCAN/QAEACEWIA39AAQQIRcgDyoCAP0TIRggGSAYIBb95gH95AEhGSAaIBggF/3mAf3kASEaIA8gEWoqAgD9EyEYIBsgGCAW/eYB/eQBIRsgHCAYIBf95gH95AEhHCAPIBJqKgIA/RMhGCAdIBggFv3mAf3kASEdIB4gGCAX/eYB/eQBIR4gDyATaioCAP0TIRggHyAYIBb95gH95AEhHyAgIBggF/3mAf3kASEgIA1BIGohDSAPQQRqIQ8gDSAOSQ0ACyADIAwgCGwgCkEFdGpqIRAgECAZIBT95AH9CwQAIBAgGiAV/eQB/QsEECAQIAhqIRAgECAbIBT95AH9CwQAIBAgHCAV/eQB/QsEECAQIAhqIRAgECAdIBT95AH9CwQAIBAgHiAV/eQB/QsEECAQIAhqIRAgECAfIBT95AH9CwQAIBAgICAV/eQB/QsEECAMQQRqIQwMAAsLAkADQCAMIARPDQH9DAAAAAAAAAAAAAAAAAAAAAAhGf0MAAAAAAAAAAAAAAAAAAAAACEaIAEgCiAJbGohDSANIAlqIQ4gACAMIAdsaiEPA0AgDyoCAP0TIRggGSAYIA39AAQA/eYB/eQBIRkgGiAYIA39AAQQ/eYB/eQBIRogDUEgaiENIA9BBGohDyANIA5JDQALIAMgDCAIbCAKQQV0amohECAQIBkgFP3kAf0LBAAgECAaIBX95AH9CwQQIAxBAWohDAwACwsgCkEBaiEKDAALCws=";
  var PANEL = 8; // W is packed in panels of 8 columns (see model_matmul.wat)

  // ------------------------------------------------------------------ bytes

  function base64ToBytes(text) {
    var binary = atob(text);
    var bytes = new Uint8Array(binary.length);
    for (var i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }

  function gunzip(bytes) {
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
  }

  function sha256Hex(bytes) {
    var subtle = globalThis.crypto && globalThis.crypto.subtle;
    if (!subtle) return Promise.resolve(null); // not a secure context: nothing to check with
    return subtle.digest("SHA-256", bytes).then(function (digest) {
      return Array.from(new Uint8Array(digest), function (b) { return b.toString(16).padStart(2, "0"); }).join("");
    });
  }

  var halfTable = null;
  function float16Table() { // every float16 bit pattern -> its value
    if (halfTable) return halfTable;
    halfTable = new Float32Array(65536);
    for (var h = 0; h < 65536; h++) {
      var sign = h & 0x8000 ? -1 : 1, exponent = (h >> 10) & 0x1f, fraction = h & 0x3ff;
      halfTable[h] = exponent === 0 ? sign * fraction * Math.pow(2, -24)
        : exponent === 31 ? (fraction ? NaN : sign * Infinity)
        : sign * (1 + fraction / 1024) * Math.pow(2, exponent - 15);
    }
    return halfTable;
  }

  // A tensor of a part, unshuffled (the stored bytes are grouped by significance, highest byte first).
  function readTensor(raw, entry) {
    var count = entry.shape.reduce(function (a, b) { return a * b; }, 1);
    var o = entry.offset, values = new Float32Array(count);
    if (entry.dtype === "float16") {
      var table = float16Table(), hi = o, lo = o + count;
      for (var i = 0; i < count; i++) values[i] = table[(raw[hi + i] << 8) | raw[lo + i]];
    } else if (entry.dtype === "float32") {
      var bytes = new Uint8Array(values.buffer); // little-endian, as every browser and Node platform is
      for (var j = 0; j < count; j++) {
        bytes[4 * j + 3] = raw[o + j]; bytes[4 * j + 2] = raw[o + count + j];
        bytes[4 * j + 1] = raw[o + 2 * count + j]; bytes[4 * j] = raw[o + 3 * count + j];
      }
    } else {
      throw new Error("the model part holds a tensor " + entry.name + " of dtype " + entry.dtype +
                      "; this model.js reads float16 and float32. Export the model again.");
    }
    return values;
  }

  function tensorsOf(raw, part) {
    var out = {};
    part.tensors.forEach(function (entry) { out[entry.name] = readTensor(raw, entry); });
    return out;
  }

  // ------------------------------------------------------------------ readers

  function withSlash(base) { base = base == null ? "" : String(base); return base && !/\/$/.test(base) ? base + "/" : base; }

  function fetchReader(baseUrl) {
    var base = withSlash(baseUrl);
    return function (name, signal) {
      var url = base + name + ".bin";
      return fetch(url, { signal: signal }).then(function (response) {
        if (!response.ok) throw new Error("could not load the model part \"" + name + "\" from " + url + ": HTTP " + response.status + ".");
        return response.arrayBuffer();
      }).then(function (buffer) { return new Uint8Array(buffer); });
    };
  }

  var waitingScripts = new Map(); // part name -> set of loads waiting for mhaModelPart(name, ...)
  function receivePart(name, text) {
    var waiting = waitingScripts.get(name);
    if (!waiting) return;
    waitingScripts.delete(name);
    var bytes = base64ToBytes(text);
    waiting.forEach(function (load) { load.resolve(bytes); });
  }

  function scriptReader(baseUrl) {
    var base = withSlash(baseUrl);
    globalThis.mhaModelPart = receivePart;
    return function (name, signal) {
      return new Promise(function (resolve, reject) {
        var url = base + name + ".js", script = document.createElement("script"), settled = false;
        var load = {
          resolve: function (bytes) { finish(); resolve(bytes); },
          reject: function (error) { finish(); reject(error); },
        };
        function finish() {
          settled = true;
          var waiting = waitingScripts.get(name);
          if (waiting) { waiting.delete(load); if (!waiting.size) waitingScripts.delete(name); }
          script.remove();
          if (signal) signal.removeEventListener("abort", onAbort);
        }
        function onAbort() { if (!settled) load.reject(cancelled()); }
        if (signal && signal.aborted) { reject(cancelled()); return; }
        if (!waitingScripts.has(name)) waitingScripts.set(name, new Set());
        waitingScripts.get(name).add(load);
        if (signal) signal.addEventListener("abort", onAbort);
        script.onerror = function () { if (!settled) load.reject(new Error("could not load the model part \"" + name + "\" from " + url + " (is the file there?).")); };
        script.onload = function () { if (!settled) load.reject(new Error(url + " loaded but did not hand over the part \"" + name + "\"; export the model again.")); };
        script.src = url;
        document.head.appendChild(script);
      });
    };
  }

  // ------------------------------------------------------------------ loading

  function cancelled() {
    var error = new Error("Loading the model was cancelled (its signal was aborted); nothing was kept. Open it again to load it.");
    error.name = "AbortError";
    return error;
  }

  function abortable(promise, signal) {
    if (!signal) return promise;
    return new Promise(function (resolve, reject) {
      function onAbort() { reject(cancelled()); }
      if (signal.aborted) { onAbort(); return; }
      signal.addEventListener("abort", onAbort, { once: true });
      promise.then(resolve, reject).finally(function () { signal.removeEventListener("abort", onAbort); });
    });
  }

  // Read, check and gunzip one part; `part` is its manifest entry.
  function loadPart(readPart, part, signal) {
    return abortable(Promise.resolve(readPart(part.name, signal)), signal).then(function (bytes) {
      if (!(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes);
      if (bytes.length !== part.bin_bytes) {
        throw new Error("the model part \"" + part.name + "\" has " + bytes.length + " bytes, but the manifest says " +
                        part.bin_bytes + "; it is damaged or from another export. Export the model again.");
      }
      return sha256Hex(bytes).then(function (digest) {
        if (digest !== null && digest !== part.sha256) {
          throw new Error("the model part \"" + part.name + "\" does not match its sha256 in the manifest (" + digest +
                          " instead of " + part.sha256 + "); it was changed or damaged. Export the model again.");
        }
        return abortable(gunzip(bytes), signal);
      });
    });
  }

  var kernelModule = null;
  function simdKernel(memory) {
    try {
      if (typeof WebAssembly !== "object") return null;
      var bytes = base64ToBytes(KERNEL_WASM_BASE64);
      if (!WebAssembly.validate(bytes)) return null; // no SIMD here
      kernelModule = kernelModule || new WebAssembly.Module(bytes);
      return new WebAssembly.Instance(kernelModule, { env: { memory: memory } }).exports.matmul;
    } catch (error) {
      return null;
    }
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
          if (options.onProgress && !signal.aborted) options.onProgress({ loaded: loaded, total: total, part: part.name });
          return partRaw;
        });
      })).then(function (raws) {
        if (signal.aborted) throw cancelled();
        return new Model(manifest, byName, raws, readPart, options.simd !== false, manifestBytes + loaded);
      });
    }).catch(function (error) {
      stop();
      throw signal.aborted && outer && outer.aborted ? cancelled() : error;
    }).finally(function () {
      if (outer) outer.removeEventListener("abort", stop);
    });
  }

  // ------------------------------------------------------------------ the model

  function Model(manifest, byName, raws, readPart, useSimd, bytesLoaded) {
    var c = manifest.config, d = c.d_model, dm = c.d_mlp, L = c.n_layers;
    this.manifest = manifest;
    this.config = c;
    this.bytesLoaded = bytesLoaded;
    this._byName = byName;
    this._readPart = readPart;
    this._chunks = new Map(); // chunk index -> Promise<Float32Array (rows, d_model)>
    this._tokenizer = new Tokenizer(new TextDecoder().decode(raws[0]).split("\n"), manifest.tokenizer, manifest.special_ids);

    var base = tensorsOf(raws[1], byName.get("base"));
    this._position = base.position_embeddings; // (max_positions, d_model)
    this._tokenType = base.token_type_embedding; // (d_model,)
    this._embeddingNorm = [base["embedding_norm.weight"], base["embedding_norm.bias"]];

    // one float32 arena: every layer's packed matrices and biases, then scratch rows for max_positions tokens
    var sizes = { qkv: d * 3 * d, bqkv: 3 * d, o: d * d, bo: d, in: d * dm, bin: dm, out: dm * d, bout: d };
    var perLayer = Object.keys(sizes).reduce(function (s, k) { return s + sizes[k]; }, 0);
    var n = c.max_positions, scratch = { x: n * d, qkv: n * 3 * d, z: n * d, tmp: n * d, h: n * dm };
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

  // Write the matrices `sources` (d_in, cols_s each), side by side, into F at `at` in panels of 8 columns.
  function pack(F, at, sources, cols, dIn) {
    var total = cols.reduce(function (a, b) { return a + b; }, 0), column = 0;
    sources.forEach(function (W, s) {
      for (var j = 0; j < cols[s]; j++, column++) {
        var panelStart = at + Math.floor(column / PANEL) * dIn * PANEL + (column % PANEL);
        for (var k = 0; k < dIn; k++) F[panelStart + k * PANEL] = W[k * cols[s] + j];
      }
    });
    if (total % PANEL) throw new Error("matrices must have a multiple of " + PANEL + " columns, got " + total + ".");
  }

  // out (n, dOut) = x (n, dIn) @ W + b, as model_matmul.wat computes it, float32 rounding after every step.
  function matmulJs(F, x, w, b, out, n, dIn, dOut) {
    var fr = Math.fround;
    for (var p = 0; p < dOut / PANEL; p++) {
      var wPanel = w + p * dIn * PANEL, bp = b + p * PANEL;
      for (var i = 0; i < n; i++) {
        var c0 = 0, c1 = 0, c2 = 0, c3 = 0, c4 = 0, c5 = 0, c6 = 0, c7 = 0, xi = x + i * dIn, wk = wPanel;
        for (var k = 0; k < dIn; k++, wk += PANEL) {
          var a = F[xi + k];
          c0 = fr(c0 + fr(a * F[wk])); c1 = fr(c1 + fr(a * F[wk + 1]));
          c2 = fr(c2 + fr(a * F[wk + 2])); c3 = fr(c3 + fr(a * F[wk + 3]));
          c4 = fr(c4 + fr(a * F[wk + 4])); c5 = fr(c5 + fr(a * F[wk + 5]));
          c6 = fr(c6 + fr(a * F[wk + 6])); c7 = fr(c7 + fr(a * F[wk + 7]));
        }
        var o = out + i * dOut + p * PANEL; // storing into F rounds each sum to float32
        F[o] = c0 + F[bp]; F[o + 1] = c1 + F[bp + 1]; F[o + 2] = c2 + F[bp + 2]; F[o + 3] = c3 + F[bp + 3];
        F[o + 4] = c4 + F[bp + 4]; F[o + 5] = c5 + F[bp + 5]; F[o + 6] = c6 + F[bp + 6]; F[o + 7] = c7 + F[bp + 7];
      }
    }
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

  // LayerNorm of each row of F[x .. x + n*d), in place; gain and bias are (d,) arrays.
  function layerNorm(F, x, n, d, norm, eps) {
    var gain = norm[0], bias = norm[1];
    for (var i = 0; i < n; i++) {
      var row = x + i * d, mean = 0, variance = 0, j;
      for (j = 0; j < d; j++) mean += F[row + j];
      mean /= d;
      for (j = 0; j < d; j++) { var centred = F[row + j] - mean; variance += centred * centred; }
      var scale = 1 / Math.sqrt(variance / d + eps);
      for (j = 0; j < d; j++) F[row + j] = (F[row + j] - mean) * scale * gain[j] + bias[j];
    }
  }

  // erf to about 1e-7 (Abramowitz and Stegun 7.1.26); GELU(x) = x/2 (1 + erf(x / sqrt 2)).
  function erf(x) {
    var sign = x < 0 ? -1 : 1, ax = Math.abs(x), t = 1 / (1 + 0.3275911 * ax);
    var poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    return sign * (1 - poly * Math.exp(-ax * ax));
  }

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

  Model.prototype._checkRun = function (ids, removed) {
    var c = this.config;
    if (!ids || typeof ids.length !== "number" || ids.length < 1 || ids.length > c.max_positions) {
      throw new Error("run needs 1 to " + c.max_positions + " token ids (from model.tokenize(text).ids), got " +
                      (ids && ids.length !== undefined ? ids.length : String(ids)) + ".");
    }
    Array.prototype.forEach.call(ids, function (id, i) {
      if (!Number.isInteger(id) || id < 0 || id >= c.vocab_size) throw new Error("token id " + i + " is " + id + "; ids are whole numbers in 0.." + (c.vocab_size - 1) + ".");
    });
    var keep = new Float32Array(c.n_layers * c.n_heads).fill(1);
    (removed || []).forEach(function (pair) {
      var ok = Array.isArray(pair) && pair.length === 2 && Number.isInteger(pair[0]) && Number.isInteger(pair[1]) &&
        pair[0] >= 0 && pair[0] < c.n_layers && pair[1] >= 0 && pair[1] < c.n_heads;
      if (!ok) throw new Error("removed heads are [layer, head] pairs with layer in 0.." + (c.n_layers - 1) + " and head in 0.." + (c.n_heads - 1) + "; got " + JSON.stringify(pair) + ".");
      keep[pair[0] * c.n_heads + pair[1]] = 0;
    });
    return keep;
  };

  Model.prototype.run = function (ids, options) {
    options = options || {};
    var self = this, keep;
    try { keep = this._checkRun(ids, options.removed); } catch (error) { return Promise.reject(error); }
    var rows = this.config.rows_per_chunk;
    var wanted = Array.from(new Set(Array.prototype.map.call(ids, function (id) { return Math.floor(id / rows); })));
    return abortable(Promise.all(wanted.map(function (index) { return self._chunk(index, options.signal); })), options.signal)
      .then(function (tables) {
        var chunkOf = new Map(wanted.map(function (index, i) { return [index, tables[i]]; }));
        return self._forward(Array.from(ids), keep, chunkOf);
      });
  };

  Model.prototype._forward = function (ids, keep, chunkOf) {
    var c = this.config, d = c.d_model, dm = c.d_mlp, H = c.n_heads, dh = c.d_head, L = c.n_layers;
    var n = ids.length, F = this._F, s = this._scratch, rows = c.rows_per_chunk, eps = c.layer_norm_eps;
    var attention = new Float32Array(L * H * n * n), hidden = new Float32Array((L + 1) * n * d);
    var i, j, k, l;
    // 1. embeddings: word + segment + position, then LayerNorm
    for (i = 0; i < n; i++) {
      var word = chunkOf.get(Math.floor(ids[i] / rows)), wr = (ids[i] % rows) * d, x0 = s.x + i * d, pr = i * d;
      for (j = 0; j < d; j++) F[x0 + j] = word[wr + j] + this._tokenType[j] + this._position[pr + j];
    }
    layerNorm(F, s.x, n, d, this._embeddingNorm, eps);
    hidden.set(F.subarray(s.x, s.x + n * d), 0);
    var scores = new Float64Array(n), scale = 1 / Math.sqrt(dh);
    for (l = 0; l < L; l++) {
      var layer = this._layers[l];
      // 2. queries, keys and values of every head at once: (n, 3 d_model), head h at columns h*d_head..
      this._matmul(s.x, layer.qkv, layer.bqkv, s.qkv, n, d, 3 * d);
      for (var h = 0; h < H; h++) {
        var q0 = s.qkv + h * dh, k0 = q0 + d, v0 = q0 + 2 * d, stride = 3 * d, a0 = (l * H + h) * n * n;
        for (i = 0; i < n; i++) {
          // 3. scaled scores and softmax over the keys (row i = query i)
          var qi = q0 + i * stride, best = -Infinity;
          for (j = 0; j < n; j++) {
            var kj = k0 + j * stride, dot = 0;
            for (k = 0; k < dh; k++) dot += F[qi + k] * F[kj + k];
            scores[j] = Math.fround(dot) * scale;
            if (scores[j] > best) best = scores[j];
          }
          var sum = 0;
          for (j = 0; j < n; j++) { scores[j] = Math.exp(scores[j] - best); sum += scores[j]; }
          var row = a0 + i * n;
          for (j = 0; j < n; j++) attention[row + j] = scores[j] / sum;
          // 4. z_h = weights @ v_h, 0 for a removed head
          var zi = s.z + i * d + h * dh;
          for (k = 0; k < dh; k++) {
            var z = 0;
            if (keep[l * H + h]) for (j = 0; j < n; j++) z += attention[row + j] * F[v0 + j * stride + k];
            F[zi + k] = z;
          }
        }
      }
      // 5. W_O mixes the heads; add the residual, then normalise
      this._matmul(s.z, layer.o, layer.bo, s.tmp, n, d, d);
      for (i = 0; i < n * d; i++) F[s.x + i] += F[s.tmp + i];
      layerNorm(F, s.x, n, d, layer.norm1, eps);
      // 6. MLP: widen, GELU, narrow; add the residual, then normalise
      this._matmul(s.x, layer.in, layer.bin, s.h, n, d, dm);
      for (i = s.h; i < s.h + n * dm; i++) F[i] = 0.5 * F[i] * (1 + erf(F[i] * Math.SQRT1_2));
      this._matmul(s.h, layer.out, layer.bout, s.tmp, n, dm, d);
      for (i = 0; i < n * d; i++) F[s.x + i] += F[s.tmp + i];
      layerNorm(F, s.x, n, d, layer.norm2, eps);
      hidden.set(F.subarray(s.x, s.x + n * d), (l + 1) * n * d);
    }
    // 7. the sentence vector: mean over the tokens, then unit length
    var pooled = new Float64Array(d), norm = 0, sentenceVector = new Float32Array(d);
    for (i = 0; i < n; i++) for (j = 0; j < d; j++) pooled[j] += F[s.x + i * d + j];
    for (j = 0; j < d; j++) { pooled[j] /= n; norm += pooled[j] * pooled[j]; }
    norm = Math.max(Math.sqrt(norm), 1e-12);
    for (j = 0; j < d; j++) sentenceVector[j] = pooled[j] / norm;
    return { n: n, attention: attention, hidden: hidden, sentenceVector: sentenceVector };
  };

  // ------------------------------------------------------------------ the tokenizer

  // BERT's normaliser, pre-tokenizer and WordPiece as the tokenizers library runs them: clean the text, put spaces
  // around CJK characters, strip accents (NFD, drop non-spacing marks), lower-case each character, split on
  // whitespace and around punctuation, then longest-match-first wordpieces.
  var CONTROL = /[\p{Cc}\p{Cf}\p{Co}]/u, WHITESPACE = /\s/u, PUNCTUATION = /\p{P}/u, NONSPACING_MARK = /\p{Mn}/u;
  var CJK = [[0x4e00, 0x9fff], [0x3400, 0x4dbf], [0x20000, 0x2a6df], [0x2a700, 0x2b73f], [0x2b740, 0x2b81f],
             [0x2b920, 0x2ceaf], [0xf900, 0xfaff], [0x2f800, 0x2fa1f]];

  // Where the tokenizers library's Unicode tables (older than a browser's) class a character otherwise than the
  // regular expressions above: [first, last, kind] with kind 0 = an ordinary character (the library's tables do
  // not know it), 1 = punctuation, 2 = dropped. Found by running every code point through the package's tokenizer
  // (tests/site/test_web_model.py runs them all again).
  var TABLE_DIFFERENCES = [
    0x61d,0x61d,0, 0x7fd,0x7fd,0, 0x890,0x891,0, 0x897,0x89f,0, 0x8ca,0x8e2,0, 0x9fd,0x9fe,0, 0xa76,0xa76,0,
    0xafa,0xaff,0, 0xb55,0xb55,0, 0xc04,0xc04,0, 0xc3c,0xc3c,0, 0xc77,0xc77,0, 0xc84,0xc84,0, 0xd00,0xd00,0,
    0xd3b,0xd3c,0, 0xd81,0xd81,0, 0xeba,0xeba,0, 0xece,0xece,0, 0x166d,0x166d,1, 0x1734,0x1734,2, 0x180f,0x180f,0,
    0x1885,0x1886,0, 0x1abf,0x1add,0, 0x1ae0,0x1aeb,0, 0x1b4e,0x1b4f,0, 0x1b7d,0x1b7f,0, 0x1df6,0x1dfb,0,
    0x2e43,0x2e4f,0, 0x2e52,0x2e5d,0, 0xa82c,0xa82c,0, 0xa8c5,0xa8c5,0, 0xa8ff,0xa8ff,0, 0xa9bd,0xa9bd,0,
    0x10d24,0x10d27,0, 0x10d69,0x10d6e,0, 0x10eab,0x10ead,0, 0x10ed0,0x10ed0,0, 0x10efa,0x10eff,0, 0x10f46,0x10f50,0,
    0x10f55,0x10f59,0, 0x10f82,0x10f89,0, 0x11070,0x11070,0, 0x11073,0x11074,0, 0x110c2,0x110c2,0, 0x110cd,0x110cd,0,
    0x111c9,0x111c9,1, 0x111cf,0x111cf,0, 0x1123e,0x1123e,0, 0x11241,0x11241,0, 0x1133b,0x1133b,0, 0x113bb,0x113c0,0,
    0x113ce,0x113ce,0, 0x113d0,0x113d0,0, 0x113d2,0x113d2,0, 0x113d4,0x113d5,0, 0x113d7,0x113d8,0, 0x113e1,0x113e2,0,
    0x11438,0x1143f,0, 0x11442,0x11444,0, 0x11446,0x11446,0, 0x1144b,0x1144f,0, 0x1145a,0x1145b,0, 0x1145d,0x1145e,0,
    0x11660,0x1166c,0, 0x116b9,0x116b9,0, 0x1171e,0x1171e,2, 0x1182f,0x11837,0, 0x11839,0x1183b,0, 0x1193b,0x1193c,0,
    0x1193e,0x1193e,0, 0x11943,0x11946,0, 0x119d4,0x119d7,0, 0x119da,0x119db,0, 0x119e0,0x119e0,0, 0x119e2,0x119e2,0,
    0x11a01,0x11a0a,0, 0x11a33,0x11a38,0, 0x11a3b,0x11a47,0, 0x11a51,0x11a56,0, 0x11a59,0x11a5b,0, 0x11a8a,0x11a96,0,
    0x11a98,0x11a9c,0, 0x11a9e,0x11aa2,0, 0x11b00,0x11b09,0, 0x11b60,0x11b60,0, 0x11b62,0x11b64,0, 0x11b66,0x11b66,0,
    0x11be1,0x11be1,0, 0x11c30,0x11c36,0, 0x11c38,0x11c3d,0, 0x11c3f,0x11c3f,0, 0x11c41,0x11c45,0, 0x11c70,0x11c71,0,
    0x11c92,0x11ca7,0, 0x11caa,0x11cb0,0, 0x11cb2,0x11cb3,0, 0x11cb5,0x11cb6,0, 0x11d31,0x11d36,0, 0x11d3a,0x11d3a,0,
    0x11d3c,0x11d3d,0, 0x11d3f,0x11d45,0, 0x11d47,0x11d47,0, 0x11d90,0x11d91,0, 0x11d95,0x11d95,0, 0x11d97,0x11d97,0,
    0x11ef3,0x11ef4,0, 0x11ef7,0x11ef8,0, 0x11f00,0x11f01,0, 0x11f36,0x11f3a,0, 0x11f40,0x11f40,0, 0x11f42,0x11f4f,0,
    0x11f5a,0x11f5a,0, 0x11fff,0x11fff,0, 0x12ff1,0x12ff2,0, 0x13430,0x13440,0, 0x13447,0x13455,0, 0x1611e,0x16129,0,
    0x1612d,0x1612f,0, 0x16d6d,0x16d6f,0, 0x16e97,0x16e9a,0, 0x16f4f,0x16f4f,0, 0x16fe2,0x16fe2,0, 0x16fe4,0x16fe4,0,
    0x1cf00,0x1cf2d,0, 0x1cf30,0x1cf46,0, 0x1e000,0x1e006,0, 0x1e008,0x1e018,0, 0x1e01b,0x1e021,0, 0x1e023,0x1e024,0,
    0x1e026,0x1e02a,0, 0x1e08f,0x1e08f,0, 0x1e130,0x1e136,0, 0x1e2ae,0x1e2ae,0, 0x1e2ec,0x1e2ef,0, 0x1e4ec,0x1e4ef,0,
    0x1e5ee,0x1e5ef,0, 0x1e5ff,0x1e5ff,0, 0x1e6e3,0x1e6e3,0, 0x1e6e6,0x1e6e6,0, 0x1e6ee,0x1e6ef,0, 0x1e6f5,0x1e6f5,0,
    0x1e944,0x1e94a,0, 0x1e95e,0x1e95f,0, 0x2b820,0x2b91f,0
  ];
  function tableDifference(cp) { // the kind of cp's range in TABLE_DIFFERENCES, or -1
    var low = 0, high = TABLE_DIFFERENCES.length / 3 - 1;
    while (low <= high) {
      var middle = (low + high) >> 1, at = 3 * middle;
      if (cp < TABLE_DIFFERENCES[at]) high = middle - 1;
      else if (cp > TABLE_DIFFERENCES[at + 1]) low = middle + 1;
      else return TABLE_DIFFERENCES[at + 2];
    }
    return -1;
  }

  function isCjk(cp) { return CJK.some(function (r) { return cp >= r[0] && cp <= r[1]; }); }
  function isPunctuation(ch) {
    var cp = ch.codePointAt(0);
    return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
      (tableDifference(cp) === -1 ? PUNCTUATION.test(ch) : tableDifference(cp) === 1);
  }

  function keptAfterNfd(c) { // accents are stripped: non-spacing marks go
    var difference = tableDifference(c.codePointAt(0));
    return difference === -1 ? !NONSPACING_MARK.test(c) : difference !== 2;
  }

  function Tokenizer(vocab, settings, special) {
    this.ids = new Map(vocab.map(function (token, id) { return [token, id]; }));
    this.vocab = vocab;
    this.settings = settings;
    this.special = special;
  }

  function loneSurrogate(text) { // [code point position, code unit] of the first lone surrogate, or null
    for (var i = 0, position = 0; i < text.length; i++, position++) {
      var unit = text.charCodeAt(i);
      if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
        var next = text.charCodeAt(i + 1);
        if (next >= 0xdc00 && next <= 0xdfff) { i++; continue; }
      }
      if (unit >= 0xd800 && unit <= 0xdfff) return [position, unit, i];
    }
    return null;
  }

  Tokenizer.prototype.normalize = function (text) {
    var s = this.settings, out = [];
    for (var ch of text) {
      var cp = ch.codePointAt(0);
      if (s.clean_text) {
        if (cp === 0 || cp === 0xfffd) continue;
        if (ch === "\t" || ch === "\n" || ch === "\r") { out.push(" "); continue; }
        var difference = tableDifference(cp);
        if (difference === 2 || (difference === -1 && CONTROL.test(ch))) continue;
        if (WHITESPACE.test(ch)) { out.push(" "); continue; }
      }
      out.push(s.tokenize_chinese_chars && isCjk(cp) ? " " + ch + " " : ch);
    }
    var text2 = out.join("");
    if (s.strip_accents) text2 = Array.from(text2.normalize("NFD")).filter(keptAfterNfd).join("");
    if (s.do_lower_case) text2 = Array.from(text2, function (c) { return c.toLowerCase(); }).join("");
    return text2;
  };

  Tokenizer.prototype.words = function (normalized) { // split on whitespace, and around each punctuation character
    var words = [], current = "";
    for (var ch of normalized) {
      if (WHITESPACE.test(ch)) { if (current) words.push(current); current = ""; }
      else if (isPunctuation(ch)) { if (current) words.push(current); words.push(ch); current = ""; }
      else current += ch;
    }
    if (current) words.push(current);
    return words;
  };

  Tokenizer.prototype.wordpieces = function (word) {
    var chars = Array.from(word), unk = this.vocab[this.special.UNK], prefix = this.settings.continuing_subword_prefix;
    if (chars.length > this.settings.max_input_chars_per_word) return [unk];
    var pieces = [], start = 0;
    while (start < chars.length) {
      var end = chars.length, found = null;
      while (start < end) {
        var piece = (start > 0 ? prefix : "") + chars.slice(start, end).join("");
        if (this.ids.has(piece)) { found = piece; break; }
        end--;
      }
      if (found === null) return [unk];
      pieces.push(found);
      start = end;
    }
    return pieces;
  };

  Tokenizer.prototype.tokenize = function (text, maxPositions) {
    if (typeof text !== "string") throw new Error("the text must be a string, got " + typeof text + ".");
    if (!text.trim()) throw new Error("the text is empty or only whitespace; type a sentence to run the model on.");
    var lone = loneSurrogate(text);
    if (lone) {
      throw new Error("the text holds a broken character at position " + lone[0] + " (U+" + lone[1].toString(16).toUpperCase() +
        ", after " + JSON.stringify(text.slice(Math.max(0, lone[2] - 10), lone[2])) + "): half of a UTF-16 pair, as left " +
        "behind when an emoji or another character is cut in half. It is not a character, so it cannot be read. " +
        "Delete it, or retype that character.");
    }
    var self = this, tokens = [this.vocab[this.special.CLS]], wordIds = [null];
    this.words(this.normalize(text)).forEach(function (word, index) {
      self.wordpieces(word).forEach(function (piece) { tokens.push(piece); wordIds.push(index); });
    });
    tokens.push(this.vocab[this.special.SEP]); wordIds.push(null);
    if (tokens.length <= 2) throw new Error("the text holds no characters the tokenizer keeps (only control or zero-width characters); type some words.");
    if (tokens.length > maxPositions) {
      throw new Error("the text is " + tokens.length + " tokens long ([CLS] and [SEP] included), but the model has only " +
                      maxPositions + " positions; shorten it or split it into pieces.");
    }
    return { ids: tokens.map(function (t) { return self.ids.get(t); }), tokens: tokens, wordIds: wordIds };
  };

  globalThis.mhaModel = { open: open, fetchReader: fetchReader, scriptReader: scriptReader };
})();
