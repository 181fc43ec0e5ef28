// Training in the page, as mha.lab.induction.train_until_induction trains in the kernel (chapter 3, "Induction
// heads"): fresh batches of the induction task every step, masked cross-entropy on the repeat, gradients clipped
// to norm 1, AdamW; every scoreEvery steps (and before the first) the heads are scored on a held-out batch of
// held-out periods, and training stops at the first scoring step where a last-layer head's prefix matching passes
// stopWhenFormed (the kernel's definition of a formed induction head). Each batch is split into batchParts parts
// whose gradients are added in order (parts.js): on Web Workers where the page can start them (workers.js), else in
// this thread in chunks, yielding to the page between them; the numbers are the same either way. An AbortSignal
// stops it.

import { maskedCrossEntropy } from "./forward.js";
import { createEngine } from "./matmul.js";
import { checkConfig, createModel } from "./model.js";
import { adamW, clipGradientNorm, learningRateAt } from "./optimiser.js";
import { addParts, batchPart, forwardPiece, partGradient, splitBatch } from "./parts.js";
import { randomStream, STREAMS } from "./random.js";
import { headScores } from "./scores.js";
import { heldOutBatch, inductionTask } from "./task.js";
import { startWorkers, workerCount } from "./workers.js";

// The page's setting: mha.lab.induction's FAST_INDUCTION_MODEL at FAST_LEARNING_RATE, batch 32, no warm-up, as the
// kernel trains it; heads scored every 20 steps on 256 held-out sequences (the kernel's held_out_batch has 512: the
// page halves the cost of scoring; scripts/web_trainer_spread.py measures both at this setting). Each batch runs in
// four parts of 8 sequences, so up to four cores share a step.
export const PAGE_SETTING = {
  config: { vocab_size: 64, max_seq_len: 40, d_model: 64, n_layers: 2, n_heads: 4 },
  learningRate: 3e-3, batchSize: 32, batchParts: 4, warmupSteps: 0, weightDecay: 0.01, betas: [0.9, 0.999],
  gradClip: 1, scoreEvery: 20, heldOutSize: 256, stopWhenFormed: 0.5, maxSteps: 3000,
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

// A trainer of one model: {model, engine, step(batch?) -> the batch's loss before the update, steps(), and the
// step in pieces for a caller that may run the parts elsewhere: nextBatch(), split(batch) -> {parts, divisor},
// partGradients({parts, divisor}) -> results, update(results) -> loss}. options as for train (config, seed or
// model, learningRate, batchSize, batchParts (1 unless given), warmupSteps, weightDecay, betas, gradClip, simd,
// task).
export function createTrainer(options) {
  var setting = Object.assign({}, PAGE_SETTING, options || {});
  if (!options || options.batchParts === undefined) setting.batchParts = 1;
  var model = setting.model || createModel(checkConfig(setting.config), setting.seed);
  var config = model.config;
  // setting.task: any task {sample(batchSize, stream) -> batch with inputs, targets, lossMask}; default the induction task
  var task = setting.task || inductionTask({ vocabSize: config.vocab_size, seqLen: config.max_seq_len });
  var engine = setting.engine || createEngine(setting.simd);
  var data = randomStream(setting.seed === undefined ? 0 : setting.seed, STREAMS.data);
  var optimiser = adamW(model.values.length, { betas: setting.betas, weightDecay: setting.weightDecay });
  var gradient = new Float32Array(model.values.length), taken = 0;
  if (!(setting.learningRate > 0)) throw new Error("learningRate must be a positive number, e.g. 3e-3.");
  function split(batch) { return splitBatch(batch, setting.batchParts); }
  // the parts' {loss, gradient} (in the parts' order) added, clipped, and one AdamW step taken
  function update(results) {
    var loss = addParts(results, gradient);
    if (setting.gradClip) clipGradientNorm(gradient, setting.gradClip);
    taken += 1;
    optimiser.step(model.values, gradient, learningRateAt(taken, setting.learningRate, setting.warmupSteps));
    return loss;
  }
  var trainer = {
    model: model, engine: engine, task: task, gradient: gradient, optimiser: optimiser, parts: setting.batchParts,
    steps: function () { return taken; },
    nextBatch: function () { return task.sample(setting.batchSize, data); },
    split: split, update: update,
    // Every part's {loss, gradient} of split(batch)'s {parts, divisor}, in this thread.
    partGradients: function (pieces) {
      return pieces.parts.map(function (part) { return partGradient(model, engine, part, pieces.divisor); });
    },
    // One optimiser step on `batch` (default: the next batch of the data stream), every part in this thread.
    step: function (batch) { return update(trainer.partGradients(split(batch || trainer.nextBatch()))); },
  };
  return trainer;
}

// The forward pass of `batch` in pieces of `piece` sequences (forwardPiece): every layer's attention at every row,
// joined into (batch, heads, seq, seq) per layer, and the logits at the rows of the repeat mask only, with their
// targets, stacked. Every row of a product and every head of a sequence is computed on its own, so the pieces give
// the numbers of one pass over the whole batch. `workers` (startWorkers's) run the pieces, all at once; without
// them, `between()` is awaited after each piece, so the page stays free to paint.
async function forwardInPieces(model, engine, batch, piece, between, workers, simd) {
  var config = model.config, T = batch.seqLen, H = config.n_heads, attention = [], logits = [], targets = [];
  var pieces = [], passes;
  for (var l = 0; l < config.n_layers; l++) attention.push(new Float32Array(batch.batchSize * H * T * T));
  for (var from = 0; from < batch.batchSize; from += piece) {
    pieces.push(batchPart(batch, from, Math.min(batch.batchSize, from + piece)));
  }
  if (workers) {
    passes = await Promise.all(pieces.map(function (part, p) {
      return workers.ask(p, { kind: "forward", config: config, values: model.values, simd: simd, piece: part });
    }));
  } else {
    passes = [];
    for (var p = 0; p < pieces.length; p++) {
      passes.push(forwardPiece(model, engine, pieces[p]));
      if (between) await between();
    }
  }
  passes.forEach(function (pass, p) {
    var first = p * piece;
    logits.push(pass.logits);
    pass.outputRows.forEach(function (r) { targets.push(batch.targets[first * T + r]); });
    pass.attention.forEach(function (weights, layer) { attention[layer].set(weights, first * H * T * T); });
  });
  var joined = new Float32Array(targets.length * config.vocab_size), at = 0;
  logits.forEach(function (part) { joined.set(part, at); at += part.length; });
  return { logits: joined, targets: Int32Array.from(targets), attention: attention };
}

// The held-out repeat loss and head scores of `model` on `batch`: {repeat_loss, previous_token, prefix_matching,
// best_previous_token (first layer), best_prefix_matching (last layer)}. Resolves once every piece has run
// (options.piece sequences at a time: on options.workers if given, else here with options.between() awaited after
// each; options.simd as for createEngine).
export async function scoreModel(model, engine, batch, options) {
  options = options || {};
  var config = model.config;
  var pass = await forwardInPieces(model, engine, batch, options.piece || batch.batchSize, options.between,
    options.workers, options.simd);
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
// backend, workers (how many ran the parts at the end; 0: this thread), workerProblem (why workers stopped, or
// null)}. options: PAGE_SETTING's keys, seed, model (to continue one), onProgress(row) after each scoring step,
// signal (AbortSignal), chunkMs (work between yields to the page, without workers), simd (false: plain
// JavaScript), workers (how many to start, at most batchParts; 0: none; default one per part, at most the cores).
export async function train(options) {
  var setting = Object.assign({}, PAGE_SETTING, options || {});
  if (!Number.isInteger(setting.scoreEvery) || setting.scoreEvery < 1) {
    throw new Error("scoreEvery must be a whole number of steps >= 1, got " + setting.scoreEvery + ".");
  }
  if (!Number.isInteger(setting.maxSteps) || setting.maxSteps < 0) {
    throw new Error("maxSteps must be a whole number >= 0, got " + setting.maxSteps + ".");
  }
  if (setting.workers !== undefined && !(Number.isInteger(setting.workers) && setting.workers >= 0)) {
    throw new Error("workers must be a whole number >= 0 (0: train in the page's own thread), got " + setting.workers + ".");
  }
  var trainer = createTrainer(setting), model = trainer.model, signal = setting.signal;
  var heldOut = heldOutBatch(trainer.task, setting.heldOutSize, setting.heldOutSeed);
  var rows = [], losses = [], seconds = 0, chunkMs = setting.chunkMs || 40, formedStep = null;
  if (signal && signal.aborted) throw stopped();
  var wanted = setting.workers === undefined ? workerCount(trainer.parts) : Math.min(setting.workers, trainer.parts);
  var workers = wanted > 0 ? startWorkers(wanted) : null, workerProblem = null;
  function between() { return pauseUnlessStopped(signal); } // yield to the page; stop if asked
  // job(workers), or job(null) in this thread once the workers have failed (the numbers are the same)
  async function withWorkers(job) {
    if (workers) {
      try {
        var done = await job(workers);
        if (signal && signal.aborted) throw stopped();
        return done;
      } catch (problem) {
        if (problem.name !== "WorkerError") throw problem;
        workerProblem = problem.message;
        workers.close();
        workers = null;
      }
    }
    return job(null);
  }
  function step() {
    var pieces = trainer.split(trainer.nextBatch());
    return withWorkers(function (pool) {
      if (!pool) return trainer.partGradients(pieces);
      return Promise.all(pieces.parts.map(function (part, p) {
        return pool.ask(p, { kind: "gradient", config: model.config, values: model.values, simd: setting.simd,
          part: part, divisor: pieces.divisor });
      }));
    }).then(trainer.update);
  }
  async function score(step) {
    var scored = await withWorkers(function (pool) {
      return scoreModel(model, trainer.engine, heldOut, { piece: setting.batchSize, between: between, workers: pool,
        simd: setting.simd });
    });
    var row = Object.assign({ step: step, seconds: seconds,
      train_loss: losses.length ? losses.reduce(function (a, b) { return a + b; }, 0) / losses.length : NaN }, scored);
    losses = [];
    rows.push(row);
    if (setting.onProgress) setting.onProgress(row);
    return setting.stopWhenFormed !== null && row.best_prefix_matching > setting.stopWhenFormed;
  }
  try {
    var done = await score(0);
    if (done) formedStep = 0;
    var chunkStart = now();
    while (!done && trainer.steps() < setting.maxSteps) {
      var started = now();
      losses.push(await step());
      seconds += (now() - started) / 1000;
      var taken = trainer.steps();
      if (taken % setting.scoreEvery === 0 || taken === setting.maxSteps) {
        done = await score(taken);
        if (done) formedStep = taken;
        chunkStart = now();
      }
      if (!workers && now() - chunkStart > chunkMs) { // waiting on workers already lets the page run
        await between();
        chunkStart = now();
      }
    }
  } finally {
    if (workers) workers.close();
  }
  return { formed: formedStep !== null, formedStep: formedStep, steps: trainer.steps(), seconds: seconds, rows: rows,
    model: model, backend: trainer.engine.backend, workers: workers ? workers.size : 0, workerProblem: workerProblem };
}
