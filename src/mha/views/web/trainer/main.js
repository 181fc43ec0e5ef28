/*
 * The tiny induction model of chapter 3 ("Induction heads"), trained in the page. This is the entry module;
 * mha.views.widget joins it and the modules it imports into trainer.js, one classic script (no modules, so it works
 * from file://, in served pages and under Node). A page adds trainer.js only when the reader asks to train; it
 * sets globalThis.mhaTrainer. Everything mirrors the package: the model of mha.lab.tiny_model (attention only,
 * causal, biases, no LayerNorm), the task of mha.lab.tasks.InductionTask, the loop of mha.lab.training.train (AdamW,
 * clipping, warm-up) and the scores of mha.lab.circuit_scores.head_role_scores. Random numbers come from a seeded
 * generator of our own (random.js): the same distributions as torch's initialisation and sampling, not its draws.
 *
 * API (what a page calls):
 *   await mhaTrainer.train(options) -> {formed, formedStep, steps, seconds, rows, model, backend, workers,
 *     workerProblem}
 *     trains until a last-layer head's held-out prefix matching passes options.stopWhenFormed (0.5; null: run
 *     maxSteps), scoring every scoreEvery steps and before the first. options (defaults: mhaTrainer.PAGE_SETTING):
 *       seed            whole number 0..2^32-1 (model initialisation and training data)   default 0
 *       config          {vocab_size, max_seq_len, d_model, n_layers, n_heads}             the book's fast model
 *       learningRate, batchSize, batchParts, warmupSteps, weightDecay, betas, gradClip, maxSteps, scoreEvery,
 *       heldOutSize, heldOutSeed (the held-out batch: held-out periods 7, 11, 14, 17, 19)
 *       onProgress(row) called after each scoring step, for a live chart; row = {step, seconds (training time so
 *         far), train_loss (mean since the last row; NaN at step 0), repeat_loss (held out), best_previous_token
 *         (layer 0), best_prefix_matching (last layer), previous_token, prefix_matching ([layers][heads])}
 *       signal          an AbortSignal: aborting rejects with an Error named "AbortError"
 *       chunkMs         milliseconds of work between yields to the page, when no worker runs (40)
 *       simd            false forces the plain-JavaScript matrix product (the numbers are identical)
 *       workers         Web Workers to run the batch's parts on (0: none, the page's own thread); by default one
 *                       per part, at most navigator.hardwareConcurrency. The numbers do not depend on it: each
 *                       batch is split into batchParts parts (4) and their gradients added in order either way.
 *                       result.workers says how many ran at the end (0 if they could not start or failed, with
 *                       result.workerProblem saying why)
 *   mhaTrainer.createModel(config, seed) -> model   the package's initialisation scheme, seeded
 *   mhaTrainer.modelFromWeights(config, weights) -> model   weights: {name: flat row-major array}, names as the
 *     package's named_parameters() ("W_E", "W_pos", "blocks.0.attention.W_Q", ..., "W_U")
 *   model = {config, layout: [{name, shape, offset, size}], values: Float32Array, tensor(name)}
 *   mhaTrainer.inductionTask({vocabSize, seqLen, periods}) -> task; task.sample(batchSize, seed | stream) ->
 *     {batchSize, seqLen, inputs, targets: Int32Array (batch, seq), lossMask, repeatMask: Uint8Array (batch, seq),
 *      period, repeatStart: Int32Array (batch)};  mhaTrainer.heldOutBatch(task, size, seed)
 *   mhaTrainer.createEngine(simd) -> engine {backend: "wasm-simd" | "js"}
 *   mhaTrainer.forward(model, engine, tokens, batch, seq) -> {logits (batch * seq, vocab), attention: [layers] of
 *     (batch, heads, seq, seq), row = query, column = key}
 *   mhaTrainer.lossAndGradient(model, engine, pass, batch, gradient) -> {loss}; gradient in model.values' layout
 *   mhaTrainer.clipGradientNorm(gradient, maxNorm), mhaTrainer.adamW(size, {betas, eps, weightDecay}),
 *   mhaTrainer.createTrainer(options) -> {model, step(batch?) -> loss} (batchParts 1 unless given), mhaTrainer.scoreModel(model, engine, batch),
 *   mhaTrainer.headScores(attention, tokens, queryMask, batch, seq, heads) -> {previous_token, prefix_matching};
 *     mhaTrainer.previousTokenScores(attention, batch, seq, heads) and prefixMatchingScores(attention, tokens,
 *     queryMask, batch, seq, heads) give each alone (prefix matching throws where no token repeats)
 *   mhaTrainer.serveWorker(scope): what a training worker runs (workers.js); a page does not call it
 *   mhaTrainer.pauseUnlessStopped(signal) -> a promise: resolves once the page has had a turn, or rejects with an
 *     AbortError if signal has been aborted by then
 *   mhaTrainer.twoRelation: section 3.7's task and live run (two_relation_task.js): task(options), train(options) ->
 *     {rows, model, engine, seconds}, measure(model, engine, task, seed, examples) -> {shares, roles, tokens, maps}
 */

import { lossAndGradient } from "./backward.js";
import { forward, maskedCrossEntropy } from "./forward.js";
import { createEngine } from "./matmul.js";
import { checkConfig, cloneModel, createModel, modelFromWeights } from "./model.js";
import { adamW, clipGradientNorm, learningRateAt } from "./optimiser.js";
import { randomStream } from "./random.js";
import { headScores, prefixMatchingScores, previousTokenScores } from "./scores.js";
import { HELD_OUT_PERIODS, heldOutBatch, inductionTask, TRAIN_PERIODS } from "./task.js";
import { createTrainer, PAGE_SETTING, pauseUnlessStopped, scoreModel, train } from "./train.js";
import { headRole, measureTwoRelation, relationShares, tokenNames, trainTwoRelation, twoRelationTask } from "./two_relation_task.js";
import { serveWorker } from "./workers.js";

globalThis.mhaTrainer = {
  train: train, PAGE_SETTING: PAGE_SETTING, createTrainer: createTrainer, scoreModel: scoreModel,
  createModel: createModel, modelFromWeights: modelFromWeights, cloneModel: cloneModel, checkConfig: checkConfig,
  inductionTask: inductionTask, heldOutBatch: heldOutBatch, TRAIN_PERIODS: TRAIN_PERIODS,
  HELD_OUT_PERIODS: HELD_OUT_PERIODS, randomStream: randomStream,
  createEngine: createEngine, forward: forward, lossAndGradient: lossAndGradient,
  maskedCrossEntropy: maskedCrossEntropy, clipGradientNorm: clipGradientNorm, adamW: adamW,
  learningRateAt: learningRateAt, headScores: headScores, previousTokenScores: previousTokenScores,
  prefixMatchingScores: prefixMatchingScores,
  twoRelation: { task: twoRelationTask, train: trainTwoRelation, measure: measureTwoRelation, // chapter 3.7
    relationShares: relationShares, headRole: headRole, tokenNames: tokenNames },
  pauseUnlessStopped: pauseUnlessStopped, serveWorker: serveWorker,
};
