// The induction task of chapter 3, as mha.lab.tasks.InductionTask.sample draws it: each sequence holds seq_len + 1
// distinct random tokens laid out [noise][A][A], a block A of `period` tokens repeated at the end, with the period
// drawn uniformly for each sequence; inputs are the first seq_len tokens, targets the last seq_len, and only the
// repeat (input positions from repeat_start on) is scored. Some periods are held out of training, so induction can
// be checked on periods the model never saw.

import { randomStream, STREAMS } from "./random.js";

export const IGNORE_INDEX = -100;
export const HELD_OUT_PERIODS = [7, 11, 14, 17, 19];
export const TRAIN_PERIODS = [4, 5, 6, 8, 9, 10, 12, 13, 15, 16, 18, 20];
export const HELD_OUT_BATCH = { size: 512, seed: 2024 };

// The task {vocabSize, seqLen, periods}, checked as InductionTask checks it (periods fit twice into seq_len + 1;
// enough distinct tokens for the longest noise).
export function inductionTask(options) {
  options = options || {};
  var vocabSize = options.vocabSize === undefined ? 64 : options.vocabSize;
  var seqLen = options.seqLen === undefined ? 40 : options.seqLen;
  var periods = (options.periods || TRAIN_PERIODS).slice();
  if (!Number.isInteger(vocabSize) || vocabSize < 1 || !Number.isInteger(seqLen) || seqLen < 1) {
    throw new Error("vocabSize and seqLen must be whole numbers >= 1, got " + vocabSize + " and " + seqLen + ".");
  }
  var longest = Math.floor((seqLen + 1) / 2);
  if (!periods.length) throw new Error("periods is empty; give at least one repeat period to draw from.");
  periods.forEach(function (p) {
    if (!Number.isInteger(p) || p < 2 || p > longest) {
      throw new Error("period " + p + " does not fit: two copies must fit in seq_len + 1 = " + (seqLen + 1) +
        " tokens, so 2 <= p <= " + longest + ".");
    }
  });
  if (vocabSize < seqLen + 1) {
    throw new Error("distinct tokens need vocabSize >= seqLen + 1 = " + (seqLen + 1) + ", got " + vocabSize + ".");
  }
  return { vocabSize: vocabSize, seqLen: seqLen, periods: periods, sample: function (batchSize, random) {
    return sampleInduction(this, batchSize, random);
  } };
}

// A batch of `batchSize` sequences from `random` (a randomStream, or a seed: then the seed's data stream).
// Returns {batchSize, seqLen, inputs, targets (IGNORE_INDEX outside the repeat): Int32Array (batch, seq),
// lossMask = repeatMask: Uint8Array (batch, seq), period, repeatStart: Int32Array (batch)}.
export function sampleInduction(task, batchSize, random) {
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 65536) {
    throw new Error("batchSize must be a whole number from 1 to 65536, got " + batchSize + ".");
  }
  if (typeof random === "number") random = randomStream(random, STREAMS.data);
  var n = task.seqLen + 1, T = task.seqLen, V = task.vocabSize;
  var inputs = new Int32Array(batchSize * T), targets = new Int32Array(batchSize * T);
  var repeatMask = new Uint8Array(batchSize * T), period = new Int32Array(batchSize);
  var repeatStart = new Int32Array(batchSize), deck = new Int32Array(V), tokens = new Int32Array(n);
  for (var b = 0; b < batchSize; b++) {
    var p = task.periods[random.below(task.periods.length)], start = n - p;
    for (var t = 0; t < V; t++) deck[t] = t;
    for (var i = 0; i < start; i++) { // a partial Fisher-Yates shuffle: start distinct tokens
      var j = i + random.below(V - i), kept = deck[i];
      deck[i] = deck[j]; deck[j] = kept;
      tokens[i] = deck[i];
    }
    for (i = start; i < n; i++) tokens[i] = tokens[i - p]; // the second copy of A
    period[b] = p; repeatStart[b] = start;
    for (i = 0; i < T; i++) {
      inputs[b * T + i] = tokens[i];
      var scored = i >= start;
      repeatMask[b * T + i] = scored ? 1 : 0;
      targets[b * T + i] = scored ? tokens[i + 1] : IGNORE_INDEX;
    }
  }
  return { batchSize: batchSize, seqLen: T, inputs: inputs, targets: targets, lossMask: repeatMask,
    repeatMask: repeatMask, period: period, repeatStart: repeatStart };
}

// The held-out batch every formation claim is measured on: the task's held-out periods, `size` sequences drawn
// from the data stream of `seed`.
export function heldOutBatch(task, size, seed) {
  var heldOut = inductionTask({ vocabSize: task.vocabSize, seqLen: task.seqLen, periods: HELD_OUT_PERIODS });
  return sampleInduction(heldOut, size === undefined ? HELD_OUT_BATCH.size : size,
    randomStream(seed === undefined ? HELD_OUT_BATCH.seed : seed, STREAMS.data));
}
