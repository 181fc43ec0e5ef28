// SHA-256 (NIST FIPS 180-4) in plain JavaScript, for a page where the browser's crypto.subtle is missing: it exists
// only in a secure context (https:// or localhost), so a copy of the site served over plain http:// has none, and
// the model's parts are checked against the manifest's sha256 with this instead (chapter 3, "A tour of all 72
// heads"). tests/site/test_web_model.py checks it on FIPS 180-4's examples and against Python's hashlib.

// The first 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS 180-4, 4.2.2)
var ROUND_CONSTANTS = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

// The first 32 bits of the fractional parts of the square roots of the first 8 primes (FIPS 180-4, 5.3.3)
var INITIAL_HASH = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19];

// One 64-byte block of `data` at `offset` into `state` (8 words); `schedule` is 64 words of scratch.
function compressBlock(state, schedule, data, offset) {
  var t;
  for (t = 0; t < 16; t++) {
    var i = offset + 4 * t;
    schedule[t] = (data[i] << 24) | (data[i + 1] << 16) | (data[i + 2] << 8) | data[i + 3];
  }
  for (t = 16; t < 64; t++) {
    var early = schedule[t - 15], late = schedule[t - 2];
    var sigma0 = ((early >>> 7) | (early << 25)) ^ ((early >>> 18) | (early << 14)) ^ (early >>> 3);
    var sigma1 = ((late >>> 17) | (late << 15)) ^ ((late >>> 19) | (late << 13)) ^ (late >>> 10);
    schedule[t] = (schedule[t - 16] + sigma0 + schedule[t - 7] + sigma1) | 0;
  }
  var a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7];
  for (t = 0; t < 64; t++) {
    var bigSigma1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    var choice = (e & f) ^ (~e & g);
    var first = (h + bigSigma1 + choice + ROUND_CONSTANTS[t] + schedule[t]) | 0;
    var bigSigma0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    var majority = (a & b) ^ (a & c) ^ (b & c);
    var second = (bigSigma0 + majority) | 0;
    h = g; g = f; f = e; e = (d + first) | 0;
    d = c; c = b; b = a; a = (first + second) | 0;
  }
  state[0] += a; state[1] += b; state[2] += c; state[3] += d; // a Uint32Array keeps each sum modulo 2**32
  state[4] += e; state[5] += f; state[6] += g; state[7] += h;
}

// The SHA-256 of `bytes` (a Uint8Array) as 64 lowercase hex digits, as crypto.subtle and Python's hashlib give it.
export function sha256HexOf(bytes) {
  var state = new Uint32Array(INITIAL_HASH), schedule = new Uint32Array(64);
  var whole = bytes.length - (bytes.length % 64);
  for (var offset = 0; offset < whole; offset += 64) compressBlock(state, schedule, bytes, offset);
  // the padding: the rest of the bytes, a 1 bit, zeros, and the length in bits as a 64-bit big-endian number
  var rest = bytes.length - whole;
  var tail = new Uint8Array(rest + 9 <= 64 ? 64 : 128);
  tail.set(bytes.subarray(whole));
  tail[rest] = 0x80;
  var high = Math.floor(bytes.length / 0x20000000), low = (bytes.length * 8) >>> 0; // bits = 8 * bytes
  var end = tail.length;
  tail[end - 8] = high >>> 24; tail[end - 7] = high >>> 16; tail[end - 6] = high >>> 8; tail[end - 5] = high;
  tail[end - 4] = low >>> 24; tail[end - 3] = low >>> 16; tail[end - 2] = low >>> 8; tail[end - 1] = low;
  for (offset = 0; offset < end; offset += 64) compressBlock(state, schedule, tail, offset);
  return Array.from(state, function (word) { return word.toString(16).padStart(8, "0"); }).join("");
}
