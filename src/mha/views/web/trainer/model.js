// The tiny attention-only transformer of chapter 3 ("Induction heads"), as mha.lab.tiny_model.TinyTransformer lays
// it out: token embedding W_E (vocab, d_model) plus positional embedding W_pos (max_seq_len, d_model), n_layers of
// mha.core.attention.MultiHeadAttention (W_Q, W_K, W_V, W_O (d_model, d_model), then b_Q, b_K, b_V, b_O (d_model)),
// causal, no LayerNorm and no MLP, and logits = residual @ W_U (d_model, vocab). Vectors are rows (x @ W).
// Every parameter lives in one Float32Array, in the order of the package's model.parameters(), so the optimiser
// and the gradient clipping are flat loops.

import { randomStream, STREAMS } from "./random.js";

const LAYER_TENSORS = ["W_Q", "W_K", "W_V", "W_O", "b_Q", "b_K", "b_V", "b_O"];

function whole(name, value, minimum) {
  if (!Number.isInteger(value) || value < minimum) {
    throw new Error("config." + name + " must be a whole number >= " + minimum + ", got " + value + ".");
  }
  return value;
}

// {vocab_size, max_seq_len, d_model, n_layers, n_heads}, checked: d_model must split evenly into heads.
export function checkConfig(config) {
  if (!config || typeof config !== "object") {
    throw new Error("config must be an object {vocab_size, max_seq_len, d_model, n_layers, n_heads}.");
  }
  var checked = {};
  ["vocab_size", "max_seq_len", "d_model", "n_layers", "n_heads"].forEach(function (name) {
    checked[name] = whole(name, config[name], 1);
  });
  if (checked.d_model % checked.n_heads) {
    throw new Error("d_model = " + checked.d_model + " does not split into n_heads = " + checked.n_heads +
      " equal heads; choose d_model a multiple of n_heads.");
  }
  var count = 2 * checked.vocab_size * checked.d_model + checked.max_seq_len * checked.d_model +
    checked.n_layers * (4 * checked.d_model * checked.d_model + 4 * checked.d_model);
  if (count > 64 * 1024 * 1024) throw new Error("this config has " + count + " parameters; the page trains at most 2^26.");
  checked.d_head = checked.d_model / checked.n_heads;
  return checked;
}

// [{name, shape, offset, size}] in the order of TinyTransformer.parameters().
export function parameterLayout(config) {
  var d = config.d_model, layout = [], offset = 0;
  function add(name, shape) {
    var size = shape.reduce(function (a, b) { return a * b; }, 1);
    layout.push({ name: name, shape: shape, offset: offset, size: size });
    offset += size;
  }
  add("W_E", [config.vocab_size, d]);
  add("W_pos", [config.max_seq_len, d]);
  for (var l = 0; l < config.n_layers; l++) {
    LAYER_TENSORS.forEach(function (tensor) {
      add("blocks." + l + ".attention." + tensor, tensor[0] === "W" ? [d, d] : [d]);
    });
  }
  add("W_U", [d, config.vocab_size]);
  return layout;
}

// A model: {config, layout, values: Float32Array of every parameter, tensor(name) -> its view, layers: [{W_Q, ...}]}.
function assemble(config, values) {
  var layout = parameterLayout(config), byName = new Map();
  layout.forEach(function (entry) { byName.set(entry.name, values.subarray(entry.offset, entry.offset + entry.size)); });
  function tensor(name) {
    if (!byName.has(name)) throw new Error("the model has no parameter " + JSON.stringify(name) + ".");
    return byName.get(name);
  }
  var layers = [];
  for (var l = 0; l < config.n_layers; l++) {
    var layer = {};
    LAYER_TENSORS.forEach(function (name) { layer[name] = tensor("blocks." + l + ".attention." + name); });
    layers.push(layer);
  }
  return { config: config, layout: layout, values: values, tensor: tensor, layers: layers,
    W_E: tensor("W_E"), W_pos: tensor("W_pos"), W_U: tensor("W_U") };
}

// A fresh model from `seed`, initialised with the package's scheme: W_E, W_pos, W_U ~ N(0, 1) / sqrt(d_model);
// each W_Q, W_K, W_V, W_O ~ U(-b, b) with b = sqrt(6 / (2 d_model)) (Glorot-uniform); biases 0.
export function createModel(config, seed) {
  config = checkConfig(config);
  var layout = parameterLayout(config), last = layout[layout.length - 1];
  var values = new Float32Array(last.offset + last.size), random = randomStream(seed, STREAMS.model);
  var scale = 1 / Math.sqrt(config.d_model), bound = Math.sqrt(6 / (2 * config.d_model));
  layout.forEach(function (entry) {
    var kind = entry.name.split(".").pop(), i;
    if (kind === "W_E" || kind === "W_pos" || kind === "W_U") {
      for (i = 0; i < entry.size; i++) values[entry.offset + i] = random.normal() * scale;
    } else if (kind[0] === "W") {
      for (i = 0; i < entry.size; i++) values[entry.offset + i] = (2 * random.next() - 1) * bound;
    }
  });
  return assemble(config, values);
}

// A model holding given weights: `weights` maps each parameter name (as in the package's named_parameters(), e.g.
// "blocks.0.attention.W_Q") to a flat row-major array of its entries.
export function modelFromWeights(config, weights) {
  config = checkConfig(config);
  var layout = parameterLayout(config), last = layout[layout.length - 1];
  var values = new Float32Array(last.offset + last.size);
  var missing = layout.filter(function (entry) { return !weights || !(entry.name in weights); });
  if (missing.length) throw new Error("weights lacks " + missing.map(function (e) { return e.name; }).join(", ") + ".");
  layout.forEach(function (entry) {
    var given = weights[entry.name];
    if (given.length !== entry.size) {
      throw new Error("weights[" + JSON.stringify(entry.name) + "] has " + given.length + " entries; shape [" +
        entry.shape.join(", ") + "] needs " + entry.size + ".");
    }
    values.set(given, entry.offset);
  });
  return assemble(config, values);
}

// A model whose parameters are `values` itself (a Float32Array in parameterLayout(config)'s order, not copied).
export function modelWithValues(config, values) {
  config = checkConfig(config);
  var layout = parameterLayout(config), last = layout[layout.length - 1];
  if (!(values instanceof Float32Array) || values.length !== last.offset + last.size) {
    throw new Error("values must be a Float32Array of the config's " + (last.offset + last.size) + " parameters.");
  }
  return assemble(config, values);
}

// A copy of `model` (same config, its own values).
export function cloneModel(model) {
  return assemble(model.config, new Float32Array(model.values));
}
