// Bytes of the model's parts: base64 and gzip, sha256, and the tensors a part holds (float16 or float32, stored
// with their bytes grouped by significance, highest byte first).

import { sha256HexOf } from "./sha256.js";

export function base64ToBytes(text) {
  var binary = atob(text);
  var bytes = new Uint8Array(binary.length);
  for (var i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

export function gunzip(bytes) {
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return new Response(stream).arrayBuffer().then(function (buffer) { return new Uint8Array(buffer); });
}

// The sha256 of `bytes` as hex: the browser's own, or, where crypto.subtle is missing (a page served over plain
// http:// is not a secure context), sha256.js's, so a part is checked wherever the page is served.
export function sha256Hex(bytes) {
  var subtle = globalThis.crypto && globalThis.crypto.subtle;
  if (!subtle) return Promise.resolve().then(function () { return sha256HexOf(bytes); });
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

// Every tensor of a part, by name; `part` is its manifest entry.
export function tensorsOf(raw, part) {
  var out = {};
  part.tensors.forEach(function (entry) { out[entry.name] = readTensor(raw, entry); });
  return out;
}
