// The trainer's matrix products, out (n, m) = x (n, k) @ W (k, m) [+ b], with W optionally given transposed
// (stored (m, k)). They run on the kernel of the page's model (model/kernel.js: WebAssembly SIMD where the engine
// has it, the same float32 sums in plain JavaScript where it has not, so both give identical numbers): x, the
// packed W and the bias are copied into one arena, and the result copied out.

import { matmulJs, PANEL, simdKernel } from "../model/kernel.js";

const PAGE = 65536;

// An engine {backend: "wasm-simd" | "js", product(x, n, k, W, m, transposed, bias, out)}; `simd` false forces js.
export function createEngine(simd) {
  var memory = typeof WebAssembly === "object" ? new WebAssembly.Memory({ initial: 16 }) : null;
  var kernel = simd === false || !memory ? null : simdKernel(memory);
  var buffer = memory ? memory.buffer : new ArrayBuffer(16 * PAGE), F = new Float32Array(buffer);

  function room(floats) { // an arena of at least `floats` float32s
    if (floats <= F.length) return;
    if (memory) {
      memory.grow(Math.ceil((floats * 4 - memory.buffer.byteLength) / PAGE));
      F = new Float32Array(memory.buffer);
    } else {
      F = new Float32Array(Math.ceil(floats / (PAGE / 4)) * (PAGE / 4));
    }
  }

  // out (n, m) = x (n, k) @ W + bias; W is (k, m), or (m, k) read transposed; bias (m,) or null; out Float32Array.
  function product(x, n, k, W, m, transposed, bias, out) {
    var width = Math.ceil(m / PANEL) * PANEL; // columns padded to whole panels of zeros
    var xAt = 0, wAt = n * k, bAt = wAt + k * width, outAt = bAt + width;
    room(outAt + n * width);
    F.set(x.subarray(0, n * k), xAt);
    for (var p = 0; p < width; p += PANEL) { // pack W in panels of PANEL columns: (k, PANEL) each, row by row
      var columns = Math.min(PANEL, m - p), at = wAt + p * k, r, c;
      if (columns < PANEL) F.fill(0, at, at + k * PANEL);
      if (transposed) {
        for (c = 0; c < columns; c++) { var from = (p + c) * k; for (r = 0; r < k; r++) F[at + r * PANEL + c] = W[from + r]; }
      } else if (columns === 8) { // a whole panel: eight columns per row, written out (PANEL is 8)
        for (r = 0; r < k; r++) {
          var from8 = r * m + p, to8 = at + r * 8;
          F[to8] = W[from8]; F[to8 + 1] = W[from8 + 1]; F[to8 + 2] = W[from8 + 2]; F[to8 + 3] = W[from8 + 3];
          F[to8 + 4] = W[from8 + 4]; F[to8 + 5] = W[from8 + 5]; F[to8 + 6] = W[from8 + 6]; F[to8 + 7] = W[from8 + 7];
        }
      } else {
        for (r = 0; r < k; r++) {
          var row = r * m + p, to = at + r * PANEL;
          for (c = 0; c < columns; c++) F[to + c] = W[row + c];
        }
      }
    }
    F.fill(0, bAt, bAt + width);
    if (bias) F.set(bias.subarray(0, m), bAt);
    if (kernel) kernel(xAt * 4, wAt * 4, bAt * 4, outAt * 4, n, k, width);
    else matmulJs(F, xAt, wAt, bAt, outAt, n, k, width);
    if (width === m) { out.set(F.subarray(outAt, outAt + n * m)); return out; }
    for (var i = 0; i < n; i++) out.set(F.subarray(outAt + i * width, outAt + i * width + m), i * m);
    return out;
  }

  // out (k, m) = x (n, k)ᵀ @ y (n, m): the weight gradient of a product, summed over the n rows.
  var scratch = new Float32Array(0);
  function productTransposedLeft(x, n, k, y, m, out) {
    if (scratch.length < n * k) scratch = new Float32Array(n * k);
    for (var i = 0; i < n; i++) for (var c = 0; c < k; c++) scratch[c * n + i] = x[i * k + c];
    return product(scratch, k, n, y, m, false, null, out);
  }

  return { backend: kernel ? "wasm-simd" : "js", product: product, productTransposedLeft: productTransposedLeft };
}
