// The matrix product out (n, dOut) = x (n, dIn) @ W + b, on float32 rows in one arena: the WebAssembly SIMD kernel
// (model_matmul.wat) where the engine has SIMD, and the same sums in plain JavaScript where it has not. W is packed
// in panels of PANEL columns (pack), as the kernel reads it.

import { base64ToBytes } from "./bytes.js";

// The compiled bytes of model_matmul.wat (wat2wasm 1.0.32), base64.
export const KERNEL_WASM_BASE64 = "AGFzbQEAAAABCwFgB39/f39/f38AAg8BA2VudgZtZW1vcnkCAAEDAgEABwoBBm1hdG11bAAACt8GAdwGAg1/DXsgBUECdCEHIAZBAnQhCCAFQQV0IQkgByERIAdBAXQhEiASIAdqIRMgBkEDdiELQQAhCgJAA0AgCiALTw0BIAIgCkEFdGr9AAQAIRQgAiAKQQV0av0ABBAhFUEAIQwCQANAIAxBBGogBEsNAf0MAAAAAAAAAAAAAAAAAAAAACEZ/QwAAAAAAAAAAAAAAAAAAAAAIRr9DAAAAAAAAAAAAAAAAAAAAAAhG/0MAAAAAAAAAAAAAAAAAAAAACEc/QwAAAAAAAAAAAAAAAAAAAAAIR39DAAAAAAAAAAAAAAAAAAAAAAhHv0MAAAAAAAAAAAAAAAAAAAAACEf/QwAAAAAAAAAAAAAAAAAAAAAISAgASAKIAlsaiENIA0gCWohDiAAIAwgB2xqIQ8DQCAN/QAEACEWIA39AAQQIRcgDyoCAP0TIRggGSAYIBb95gH95AEhGSAaIBggF/3mAf3kASEaIA8gEWoqAgD9EyEYIBsgGCAW/eYB/eQBIRsgHCAYIBf95gH95AEhHCAPIBJqKgIA/RMhGCAdIBggFv3mAf3kASEdIB4gGCAX/eYB/eQBIR4gDyATaioCAP0TIRggHyAYIBb95gH95AEhHyAgIBggF/3mAf3kASEgIA1BIGohDSAPQQRqIQ8gDSAOSQ0ACyADIAwgCGwgCkEFdGpqIRAgECAZIBT95AH9CwQAIBAgGiAV/eQB/QsEECAQIAhqIRAgECAbIBT95AH9CwQAIBAgHCAV/eQB/QsEECAQIAhqIRAgECAdIBT95AH9CwQAIBAgHiAV/eQB/QsEECAQIAhqIRAgECAfIBT95AH9CwQAIBAgICAV/eQB/QsEECAMQQRqIQwMAAsLAkADQCAMIARPDQH9DAAAAAAAAAAAAAAAAAAAAAAhGf0MAAAAAAAAAAAAAAAAAAAAACEaIAEgCiAJbGohDSANIAlqIQ4gACAMIAdsaiEPA0AgDyoCAP0TIRggGSAYIA39AAQA/eYB/eQBIRkgGiAYIA39AAQQ/eYB/eQBIRogDUEgaiENIA9BBGohDyANIA5JDQALIAMgDCAIbCAKQQV0amohECAQIBkgFP3kAf0LBAAgECAaIBX95AH9CwQQIAxBAWohDAwACwsgCkEBaiEKDAALCws=";
export const PANEL = 8; // W is packed in panels of 8 columns (see model_matmul.wat)

var kernelModule = null;

// The kernel's matmul over `memory`, or null where WebAssembly or its SIMD is missing.
export function simdKernel(memory) {
  try {
    if (typeof WebAssembly !== "object") return null;
    var bytes = base64ToBytes(KERNEL_WASM_BASE64);
    if (!WebAssembly.validate(bytes)) return null; // no SIMD here
    kernelModule = kernelModule || new WebAssembly.Module(bytes);
    return new WebAssembly.Instance(kernelModule, { env: { memory: memory } }).exports.matmul;
  } catch {
    return null;
  }
}

// Write the matrices `sources` (d_in, cols_s each), side by side, into F at `at` in panels of 8 columns.
export function pack(F, at, sources, cols, dIn) {
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
export function matmulJs(F, x, w, b, out, n, dIn, dOut) {
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
