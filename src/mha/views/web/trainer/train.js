// Training in the page, as mha.lab.induction.train_until_induction trains in the kernel (chapter 3, "Induction
// heads"): fresh batches of the induction task every step, masked cross-entropy on the repeat, gradients clipped
// to norm 1, AdamW; every scoreEvery steps (and before the first) the heads are scored on a held-out batch of
// held-out periods, and training stops at the first scoring step where a last-layer head's prefix matching passes
// stopWhenFormed (the kernel's definition of a formed induction head). Work runs in chunks, yielding to the page
// between them, and an AbortSignal stops it.

import { lossAndGradient } from "./backward.js";
import { maskedCrossEntropy, rowsOf, runModel } from "./forward.js";
import { createEngine } from "./matmul.js";
import { checkConfig, createModel } from "./model.js";
import { adamW, clipGradientNorm, learningRateAt } from "./optimiser.js";
import { randomStream, STREAMS } from "./random.js";
import { headScores } from "./scores.js";
import { heldOutBatch, inductionTask } from "./task.js";

// The page's setting: mha.lab.induction's FAST_INDUCTION_MODEL at FAST_LEARNING_RATE, batch 32, no warm-up, as the
// kernel trains it; heads scored every 20 steps on 256 held-out sequences (the kernel's held_out_batch has 512: the
// page halves the cost of scoring; scripts/web_trainer_spread.py measures both at this setting).
export const PAGE_SETTING = {
  config: { vocab_size: 64, max_seq_len: 40, d_model: 64, n_layers: 2, n_heads: 4 },
  learningRate: 3e-3, batchSize: 32, warmupSteps: 0, weightDecay: 0.01, betas: [0.9, 0.999], gradClip: 1,
  scoreEvery: 20, heldOutSize: 256, stopWhenFormed: 0.5, maxSteps: 3000,
};

export function stopped() {
  var error = new Error("Training was cancelled (its signal was aborted).");
  error.name = "AbortError";
  return error;
}

function now() { return typeof performance === "object" ? performance.now() : Date.now(); }

// Let the page run (paint, take input) between chunks of work, then stop with stopped() if `signal` has been aborted
// meanwhile. A timer: a message to a channel of our own comes back sooner, without the few milliseconds a nested
// timer is held back, but Chromium then painted about half as often while training, for little time saved.
export function pauseUnlessStopped(signal) {
  return new Promise(function (resolve) { setTimeout(resolve, 0); }).then(function () {
    if (signal && signal.aborted) throw stopped();
  });
}

// A trainer of one model: {model, engine, step() -> the batch's loss before the update, steps()}. options as for
// train (config, seed or model, learningRate, batchSize, warmupSteps, weightDecay, betas, gradClip, simd, task).
export function createTrainer(options) {
  var setting = Object.assign({}, PAGE_SETTING, options || {});
  var model = setting.model || createModel(checkConfig(setting.config), setting.seed);
  var config = model.config;
  // setting.task: any task {sample(batchSize, stream) -> batch with inputs, targets, lossMask}; default the induction task
  var task = setting.task || inductionTask({ vocabSize: config.vocab_size, seqLen: config.max_seq_len });
  var engine = setting.engine || createEngine(setting.simd);
  var data = randomStream(setting.seed === undefined ? 0 : setting.seed, STREAMS.data);
  var optimiser = adamW(model.values.length, { betas: setting.betas, weightDecay: setting.weightDecay });
  var gradient = new Float32Array(model.values.length), taken = 0;
  if (!(setting.learningRate > 0)) throw new Error("learningRate must be a positive number, e.g. 3e-3.");
  return {
    model: model, engine: engine, task: task, gradient: gradient, optimiser: optimiser,
    steps: function () { return taken; },
    // One optimiser step on `batch` (default: the next batch of the data stream).
    step: function (batch) {
      batch = batch || task.sample(setting.batchSize, data);
      // logits only where the loss looks (the last layer's keys and values still at every row)
      var pass = runModel(model, engine, batch.inputs, batch.batchSize, batch.seqLen, { outputRows: rowsOf(batch.lossMask) });
      var loss = lossAndGradient(model, engine, pass, batch, gradient).loss;
      if (setting.gradClip) clipGradientNorm(gradient, setting.gradClip);
      taken += 1;
      optimiser.step(model.values, gradient, learningRateAt(taken, setting.learningRate, setting.warmupSteps));
      return loss;
    },
  };
}

// The rows of sequences from..to of `batch`.
function sequences(batch, from, to) {
  var T = batch.seqLen;
  return { batchSize: to - from, seqLen: T, inputs: batch.inputs.subarray(from * T, to * T) };
}

// The forward pass of `batch` in pieces of `piece` sequences, awaiting `between()` after each piece: every layer's
// attention at every row, joined into (batch, heads, seq, seq) per layer, and the logits at the rows of the repeat
// mask only, with their targets, stacked. Every row of a product and every head of a sequence is computed on its
// own, so the pieces give the numbers of one pass over the whole batch, while the page stays free to paint.
async function forwardInPieces(model, engine, batch, piece, between) {
  var config = model.config, T = batch.seqLen, H = config.n_heads, attention = [], logits = [], targets = [];
  for (var l = 0; l < config.n_layers; l++) attention.push(new Float32Array(batch.batchSize * H * T * T));
  for (var from = 0; from < batch.batchSize; from += piece) {
    var to = Math.min(batch.batchSize, from + piece), part = sequences(batch, from, to);
    var outputRows = rowsOf(batch.repeatMask.subarray(from * T, to * T));
    var pass = runModel(model, engine, part.inputs, part.batchSize, T, { outputRows: outputRows, fullAttention: true });
    logits.push(pass.logits);
    outputRows.forEach(function (r) { targets.push(batch.targets[from * T + r]); });
    pass.attention.forEach(function (weights, layer) { attention[layer].set(weights, from * H * T * T); });
    if (between) await between();
  }
  var joined = new Float32Array(targets.length * config.vocab_size), at = 0;
  logits.forEach(function (part) { joined.set(part, at); at += part.length; });
  return { logits: joined, targets: Int32Array.from(targets), attention: attention };
}

// The held-out repeat loss and head scores of `model` on `batch`: {repeat_loss, previous_token, prefix_matching,
// best_previous_token (first layer), best_prefix_matching (last layer)}. Resolves once every piece has run
// (options.piece sequences at a time, options.between() awaited after each).
export async function scoreModel(model, engine, batch, options) {
  options = options || {};
  var config = model.config;
  var pass = await forwardInPieces(model, engine, batch, options.piece || batch.batchSize, options.between);
  var scores = headScores(pass.attention, batch.inputs, batch.repeatMask, batch.batchSize, batch.seqLen, config.n_heads);
  return {
    repeat_loss: maskedCrossEntropy(pass.logits, pass.targets, new Uint8Array(pass.targets.length).fill(1),
      config.vocab_size, null),
    previous_token: scores.previous_token, prefix_matching: scores.prefix_matching,
    best_previous_token: Math.max.apply(null, scores.previous_token[0]),
    best_prefix_matching: Math.max.apply(null, scores.prefix_matching[config.n_layers - 1]),
  };
}

// Train until a formed induction head (or maxSteps): resolves to {formed, formedStep, steps, seconds, rows, model,
// backend}. options: PAGE_SETTING's keys, seed, model (to continue one), onProgress(row) after each scoring step,
// signal (AbortSignal), chunkMs (work between yields to the page), simd (false: plain JavaScript).
export async function train(options) {
  var setting = Object.assign({}, PAGE_SETTING, options || {});
  if (!Number.isInteger(setting.scoreEvery) || setting.scoreEvery < 1) {
    throw new Error("scoreEvery must be a whole number of steps >= 1, got " + setting.scoreEvery + ".");
  }
  if (!Number.isInteger(setting.maxSteps) || setting.maxSteps < 0) {
    throw new Error("maxSteps must be a whole number >= 0, got " + setting.maxSteps + ".");
  }
  var trainer = createTrainer(setting), model = trainer.model, signal = setting.signal;
  var heldOut = heldOutBatch(trainer.task, setting.heldOutSize, setting.heldOutSeed);
  var rows = [], losses = [], seconds = 0, chunkMs = setting.chunkMs || 40, formedStep = null;
  function between() { return pauseUnlessStopped(signal); } // yield to the page; stop if asked
  async function score(step) {
    var scored = await scoreModel(model, trainer.engine, heldOut, { piece: setting.batchSize, between: between });
    var row = Object.assign({ step: step, seconds: seconds,
      train_loss: losses.length ? losses.reduce(function (a, b) { return a + b; }, 0) / losses.length : NaN }, scored);
    losses = [];
    rows.push(row);
    if (setting.onProgress) setting.onProgress(row);
    return setting.stopWhenFormed !== null && row.best_prefix_matching > setting.stopWhenFormed;
  }
  if (signal && signal.aborted) throw stopped();
  var done = await score(0);
  if (done) formedStep = 0;
  var chunkStart = now();
  while (!done && trainer.steps() < setting.maxSteps) {
    var started = now();
    losses.push(trainer.step());
    seconds += (now() - started) / 1000;
    var step = trainer.steps();
    if (step % setting.scoreEvery === 0 || step === setting.maxSteps) {
      done = await score(step);
      if (done) formedStep = step;
      chunkStart = now();
    }
    if (now() - chunkStart > chunkMs) {
      await between();
      chunkStart = now();
    }
  }
  return { formed: formedStep !== null, formedStep: formedStep, steps: trainer.steps(), seconds: seconds, rows: rows,
    model: model, backend: trainer.engine.backend };
}
