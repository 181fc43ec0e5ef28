// Seeded random numbers for the trainer: a small counter-free generator (sfc32) whose state comes from the seed and
// a stream number through splitmix32, so the model's initialisation and the training data draw from separate,
// reproducible streams. Not torch's stream: the same seed gives the same numbers here on every engine, and the
// same distributions as the package, not the same draws.

// splitmix32: 32 well-mixed bits from a 32-bit state, advancing it.
function splitmix32(state) {
  state.s = (state.s + 0x9e3779b9) | 0;
  var z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

export const MAX_SEED = 4294967295;

// A generator for (seed, stream): next() -> uniform in [0, 1) with 32 random bits; below(n) -> integer in 0..n-1;
// normal() -> a standard normal (Box-Muller, in float64).
export function randomStream(seed, stream) {
  if (!Number.isInteger(seed) || seed < 0 || seed > MAX_SEED) {
    throw new Error("seed must be a whole number from 0 to " + MAX_SEED + ", got " + seed + ".");
  }
  var mixer = { s: (seed ^ Math.imul(stream + 1, 0x27d4eb2f)) | 0 };
  var a = splitmix32(mixer), b = splitmix32(mixer), c = splitmix32(mixer), d = splitmix32(mixer) | 1;
  function bits() { // sfc32
    var t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return t >>> 0;
  }
  for (var warm = 0; warm < 12; warm++) bits();
  var spare = null;
  var generator = {
    next: function () { return bits() / 4294967296; },
    below: function (n) { return Math.floor(generator.next() * n); },
    normal: function () {
      if (spare !== null) { var kept = spare; spare = null; return kept; }
      var u = 1 - generator.next(), v = generator.next(); // u in (0, 1]: log(u) is finite
      var radius = Math.sqrt(-2 * Math.log(u)), angle = 2 * Math.PI * v;
      spare = radius * Math.sin(angle);
      return radius * Math.cos(angle);
    },
  };
  return generator;
}

// The named streams of one seed.
export const STREAMS = { model: 0, data: 1 };
