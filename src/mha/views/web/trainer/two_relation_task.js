// The two-relation task of chapter 3 ("One big head or many"), as mha.lab.tasks.TwoRelationTask.sample lays it out
// and draws it: n_facts fact tokens (key k, value v) with distinct keys, then n_queries pairs [modifier m][ask k];
// at each ask position the target is the answer token (v of the fact with key k, m just before). Token ids: facts
// 0..K*V-1 (fact (k, v) is k*V + v), then K ask tokens, M modifiers and V*M answers ((v, m) is firstAnswer + v*M +
// m). The same distributions as the package (keys a uniform random ordered choice without repeats; values, asked
// facts and modifiers uniform), drawn from our own seeded streams (random.js), not torch's.
// Also the measurements the head-count view makes of a model trained on it (mha.lab.head_count_sweep:
// relation_shares, head_role, token_names, analysis_batch) and the package's training loop for it
// (mha.lab.training.train at LIVE_TRAINING, as HeadCountStudyExplorer.retrain runs it).

import { forward, maskedCrossEntropy } from "./forward.js";
import { randomStream, STREAMS } from "./random.js";
import { IGNORE_INDEX } from "./task.js";
import { createTrainer, pauseUnlessStopped, stopped } from "./train.js";

export const ANALYSIS_BATCH = { size: 256, seed: 10000 }; // the analysis batch of run seed s: seed 10000 + s
export const EVAL_SEED_OFFSET = 1000003; // mha.lab.training.train's evaluation batch: seed + 1_000_003
export const ROLE_SHARE_THRESHOLD = 0.5;
export const SPLIT_THRESHOLD = 0.2;

function whole(name, value) {
  if (!Number.isInteger(value) || value < 1) throw new Error(name + " must be a whole number >= 1, got " + value + ".");
  return value;
}

// The task {nKeys, nValues, nModifiers, nFacts, nQueries} (defaults 8, 8, 4, 8, 8, the package's), checked as
// TwoRelationTask checks it; with its token ranges, vocabSize, seqLen (n_facts + 2 n_queries) and sample().
export function twoRelationTask(options) {
  options = Object.assign({ nKeys: 8, nValues: 8, nModifiers: 4, nFacts: 8, nQueries: 8 }, options || {});
  var task = {};
  ["nKeys", "nValues", "nModifiers", "nFacts", "nQueries"].forEach(function (name) {
    task[name] = whole(name, options[name]);
  });
  if (task.nFacts > task.nKeys) {
    throw new Error("nFacts = " + task.nFacts + " facts need distinct keys, but there are only nKeys = " + task.nKeys + ".");
  }
  task.firstAsk = task.nKeys * task.nValues;
  task.firstModifier = task.firstAsk + task.nKeys;
  task.firstAnswer = task.firstModifier + task.nModifiers;
  task.vocabSize = task.firstAnswer + task.nValues * task.nModifiers;
  task.seqLen = task.nFacts + 2 * task.nQueries;
  task.sample = function (batchSize, random) { return sampleTwoRelation(task, batchSize, random); };
  return task;
}

// A batch of `batchSize` sequences from `random` (a randomStream, or a seed: then its data stream). Returns
// {batchSize, seqLen, inputs, targets (IGNORE_INDEX off the ask positions), factPosition (the asked fact's position
// at each ask, -1 elsewhere): Int32Array (batch, seq); lossMask: Uint8Array (batch, seq), 1 at the ask positions}.
export function sampleTwoRelation(task, batchSize, random) {
  if (!Number.isInteger(batchSize) || batchSize < 1 || batchSize > 65536) {
    throw new Error("batchSize must be a whole number from 1 to 65536, got " + batchSize + ".");
  }
  if (typeof random === "number") random = randomStream(random, STREAMS.data);
  var F = task.nFacts, Q = task.nQueries, T = task.seqLen, M = task.nModifiers;
  var inputs = new Int32Array(batchSize * T), targets = new Int32Array(batchSize * T).fill(IGNORE_INDEX);
  var lossMask = new Uint8Array(batchSize * T), factPosition = new Int32Array(batchSize * T).fill(-1);
  var deck = new Int32Array(task.nKeys), values = new Int32Array(F);
  for (var b = 0; b < batchSize; b++) {
    var row = b * T, i;
    for (i = 0; i < task.nKeys; i++) deck[i] = i;
    for (i = 0; i < F; i++) { // a partial Fisher-Yates shuffle: F distinct keys in random order
      var j = i + random.below(task.nKeys - i), kept = deck[i];
      deck[i] = deck[j]; deck[j] = kept;
    }
    for (i = 0; i < F; i++) values[i] = random.below(task.nValues);
    for (i = 0; i < F; i++) inputs[row + i] = deck[i] * task.nValues + values[i];
    for (var q = 0; q < Q; q++) {
      var asked = random.below(F), modifier = random.below(M), ask = row + F + 1 + 2 * q;
      inputs[ask - 1] = task.firstModifier + modifier;
      inputs[ask] = task.firstAsk + deck[asked];
      targets[ask] = task.firstAnswer + values[asked] * M + modifier;
      lossMask[ask] = 1;
      factPosition[ask] = asked; // facts sit at positions 0..F-1
    }
  }
  return { batchSize: batchSize, seqLen: T, inputs: inputs, targets: targets, lossMask: lossMask,
    factPosition: factPosition };
}

// Readable names of one sequence's tokens, as mha.lab.head_count_sweep.token_names: "k3=v5", "ask k3", "m2", "v5·m2".
export function tokenNames(task, tokens) {
  return Array.from(tokens, function (token) {
    if (token < task.firstAsk) return "k" + Math.floor(token / task.nValues) + "=v" + (token % task.nValues);
    if (token < task.firstModifier) return "ask k" + (token - task.firstAsk);
    if (token < task.firstAnswer) return "m" + (token - task.firstModifier);
    if (token < task.vocabSize) {
      var answer = token - task.firstAnswer;
      return "v" + Math.floor(answer / task.nModifiers) + "·m" + (answer % task.nModifiers);
    }
    throw new Error("token " + token + " is outside the task's vocabulary 0.." + (task.vocabSize - 1) + ".");
  });
}

// One word for a head, as mha.lab.head_count_sweep.head_role: "fact", "previous", "split" or "other".
export function headRole(factShare, previousShare) {
  if (factShare >= ROLE_SHARE_THRESHOLD) return "fact";
  if (previousShare >= ROLE_SHARE_THRESHOLD) return "previous";
  if (factShare >= SPLIT_THRESHOLD && previousShare >= SPLIT_THRESHOLD) return "split";
  return "other";
}

// Sums, per head, of the attention the ask positions pay to their fact and to the previous token, added into
// `sums` (heads, 2), for weights (batch, heads, seq, seq) of a batch with factPosition (batch, seq); returns the
// number of ask positions seen.
function addRelationSums(weights, factPosition, batch, seq, heads, sums) {
  var asks = 0;
  for (var b = 0; b < batch; b++) {
    for (var t = 0; t < seq; t++) {
      var fact = factPosition[b * seq + t];
      if (fact < 0) continue;
      asks++;
      for (var h = 0; h < heads; h++) {
        var at = ((b * heads + h) * seq + t) * seq;
        sums[2 * h] += weights[at + fact];
        sums[2 * h + 1] += weights[at + t - 1];
      }
    }
  }
  return asks;
}

// mha.lab.head_count_sweep.relation_shares: per head [fact, previous, elsewhere], the mean attention an ask
// position pays to the matching fact, to the previous token and to everything else (a row sums to 1).
export function relationShares(weights, factPosition, batch, seq, heads) {
  var sums = new Float64Array(2 * heads), asks = addRelationSums(weights, factPosition, batch, seq, heads, sums);
  if (!asks) throw new Error("the batch has no ask position to measure.");
  return sharesOf(sums, asks, heads);
}

function sharesOf(sums, asks, heads) {
  var shares = [];
  for (var h = 0; h < heads; h++) {
    var fact = sums[2 * h] / asks, previous = sums[2 * h + 1] / asks;
    shares.push([fact, previous, 1 - fact - previous]);
  }
  return shares;
}

// Loss and accuracy (top logit = target) over the ask positions, as TwoRelationTask.metrics.
export function askMetrics(logits, batch, vocab) {
  var right = 0, scored = 0;
  for (var r = 0; r < batch.lossMask.length; r++) {
    if (!batch.lossMask[r]) continue;
    var at = r * vocab, best = 0;
    for (var c = 1; c < vocab; c++) if (logits[at + c] > logits[at + best]) best = c;
    scored++;
    if (best === batch.targets[r]) right++;
  }
  return { loss: maskedCrossEntropy(logits, batch.targets, batch.lossMask, vocab, null), accuracy: right / scored };
}

function rowsOf(batch, from, to) {
  var T = batch.seqLen;
  return { batchSize: to - from, seqLen: T, inputs: batch.inputs.subarray(from * T, to * T),
    targets: batch.targets.subarray(from * T, to * T), lossMask: batch.lossMask.subarray(from * T, to * T),
    factPosition: batch.factPosition.subarray(from * T, to * T) };
}

// What the view shows of a model (HeadCountStudyExplorer._measure): on the analysis batch of run seed `seed`
// (ANALYSIS_BATCH.size sequences from seed ANALYSIS_BATCH.seed + seed), each head's shares and role, and the first
// `examples` sequences' token names and maps {shares: [heads][3], roles: [heads], tokens: [examples][seq],
// maps: Float32Array (examples, heads, seq, seq)}. Runs in pieces of 32 sequences, awaiting between() after each.
export async function measureTwoRelation(model, engine, task, seed, examples, between) {
  var batch = task.sample(ANALYSIS_BATCH.size, randomStream(ANALYSIS_BATCH.seed + seed, STREAMS.data));
  var H = model.config.n_heads, T = batch.seqLen, sums = new Float64Array(2 * H), asks = 0, maps = null;
  for (var from = 0; from < batch.batchSize; from += 32) {
    var part = rowsOf(batch, from, Math.min(batch.batchSize, from + 32));
    var weights = forward(model, engine, part.inputs, part.batchSize, T).attention[0];
    asks += addRelationSums(weights, part.factPosition, part.batchSize, T, H, sums);
    if (!maps) maps = weights.slice(0, examples * H * T * T);
    if (between) await between();
  }
  var shares = sharesOf(sums, asks, H), tokens = [];
  for (var e = 0; e < examples; e++) tokens.push(tokenNames(task, batch.inputs.subarray(e * T, (e + 1) * T)));
  return { shares: shares, roles: shares.map(function (s) { return headRole(s[0], s[1]); }), tokens: tokens,
    maps: maps, seqLen: T, analysisSeed: ANALYSIS_BATCH.seed + seed };
}

// Train a fresh model on the task as mha.lab.training.train does (AdamW, clipping, warm-up; the task's loss and
// accuracy on one fixed evaluation batch of evalBatchSize sequences, seed + EVAL_SEED_OFFSET, at step 0 and every
// logEvery steps). options: config, seed, steps, logEvery, evalBatchSize, learningRate, batchSize, warmupSteps,
// weightDecay, betas, gradClip, task (default twoRelationTask()), signal (AbortSignal), onProgress(row), chunkMs,
// simd. Resolves to {rows: [{step, seconds, train_loss, loss, accuracy}], model, engine, task, seconds, backend}.
export async function trainTwoRelation(options) {
  var setting = Object.assign({ seed: 0, steps: 600, logEvery: 50, evalBatchSize: 128, chunkMs: 40 }, options || {});
  whole("steps", setting.steps);
  whole("logEvery", setting.logEvery);
  var task = setting.task || twoRelationTask();
  var trainer = createTrainer(Object.assign({}, setting, { task: task })), signal = setting.signal;
  var evalBatch = task.sample(setting.evalBatchSize, randomStream(setting.seed + EVAL_SEED_OFFSET, STREAMS.data));
  var rows = [], losses = [], seconds = 0, chunkStart = Date.now();
  function evaluate(step) {
    var pass = forward(trainer.model, trainer.engine, evalBatch.inputs, evalBatch.batchSize, evalBatch.seqLen);
    var row = Object.assign({ step: step, seconds: seconds, train_loss: losses.length
      ? losses.reduce(function (a, b) { return a + b; }, 0) / losses.length : NaN },
    askMetrics(pass.logits, evalBatch, trainer.model.config.vocab_size));
    losses = [];
    rows.push(row);
    if (setting.onProgress) setting.onProgress(row);
  }
  if (signal && signal.aborted) throw stopped();
  evaluate(0);
  while (trainer.steps() < setting.steps) {
    var started = Date.now();
    losses.push(trainer.step());
    seconds += (Date.now() - started) / 1000;
    var step = trainer.steps();
    if (step % setting.logEvery === 0 || step === setting.steps) evaluate(step);
    if (Date.now() - chunkStart > setting.chunkMs) {
      await pauseUnlessStopped(signal);
      chunkStart = Date.now();
    }
  }
  return { rows: rows, model: trainer.model, engine: trainer.engine, task: task, seconds: seconds,
    backend: trainer.engine.backend };
}
