"""When does the page's trainer (trainer.js) form an induction head, and is that within the kernel's spread?
(chapter 3, "Induction heads").

Run from the repository root:

    python -m scripts.web_trainer_spread [--workers 2] [--only javascript|kernel]

For each of ten seeds, trains the page's setting (``mhaTrainer.PAGE_SETTING``: the book's fast model, d_model 64,
2 layers, 4 heads, learning rate 3e-3, batch 32) twice: in PyTorch with the package's own training code
(:func:`mha.lab.induction.train_until_induction` with ``stop_when_formed=0.5``, one thread per run) and in
JavaScript with trainer.js under Node. Both score the heads on a held-out batch of held-out periods before the first
step and every ``SCORE_EVERY`` steps, and stop at the first scoring step where a last-layer head's prefix matching
passes 0.5 (:data:`mha.lab.induction.ROLE_SCORE_THRESHOLD`): the formation step. The two use different random
streams (the page cannot draw torch's), so the claim is about the spread, not seed by seed. Writes
``data/lab/web_trainer_spread.json`` (per run: the formation step, the training seconds, the held-out scores at every
scoring step) and records it in the manifest. ``--workers`` share the runs out, two at most. The file is rewritten
after every finished run (``complete`` is false until the last), so an interrupted study still leaves its finished
runs. ``--only`` reruns one side and keeps the other's stored runs (after a change to trainer.js, say, which leaves
the PyTorch runs as they were).

:func:`run_in_node` is how the tests and this script run trainer.js under Node on a request (see ``DRIVER``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

if not __package__:  # run as a file, it could not import the other tools
    sys.exit("run it from the repository's root as a module: python -m scripts.web_trainer_spread")

from mha.views.widget import web_file
from scripts.induction_phase_spread import write_study  # the lab's stored studies

FILE_NAME = "web_trainer_spread.json"
REGENERATE = "python -m scripts.web_trainer_spread"
SEEDS = tuple(range(10))
SCORE_EVERY = 20
MAX_STEPS = 3000
THRESHOLD = 0.5
SETTING = dict(d_model=64, n_layers=2, n_heads=4, learning_rate=3e-3, batch_size=32)

# The Node side: node DRIVER TRAINER_JS REQUEST.json OUT.json. REQUEST is {"kind": ..., ...}:
#   "gradients" {config, weights, batch, simd}: loss, logits, attention and every parameter's gradient;
#   "step"      {config, weights, batch, learningRate, gradClip, simd, batchParts}: the weights after one clipped
#               AdamW step (gradClip 0: none), and the gradient it took, added up from batchParts parts (default 1);
#   "sample"    {seed, size, periods}: a batch of the induction task from the seed's data stream;
#   "scores"    {config, weights, batch}: head scores on the batch (its repeat mask as query mask);
#   "role scores" {attention: [layers] of flat (batch, heads, seq, seq), tokens, batch, seq, heads}: the two
#               scores each alone: {previous_token, prefix_matching or null, prefix_error (its message) or null};
#   "init"      {config, seed}: a fresh model's weights;
#   "train"     {seed, options}: mhaTrainer.train's result, without the model.
# weights: {name: flat list}; batch: {batchSize, seqLen, inputs, targets, lossMask} as flat lists.
DRIVER = r"""
"use strict";
const fs = require("fs");
require(require("path").resolve(process.argv[2]));
const T = globalThis.mhaTrainer;
const request = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
const list = (array) => Array.from(array);
function batchOf(b) {
  return { batchSize: b.batchSize, seqLen: b.seqLen, inputs: Int32Array.from(b.inputs),
    targets: Int32Array.from(b.targets), lossMask: Uint8Array.from(b.lossMask),
    repeatMask: Uint8Array.from(b.repeatMask || b.lossMask) };
}
function weightsOf(model, values) {
  const out = {};
  model.layout.forEach((e) => { out[e.name] = list(values.subarray(e.offset, e.offset + e.size)); });
  return out;
}
async function main() {
  const kind = request.kind;
  let out;
  if (kind === "gradients" || kind === "step") {
    const model = T.modelFromWeights(request.config, request.weights), batch = batchOf(request.batch);
    const engine = T.createEngine(request.simd !== false);
    if (kind === "gradients") {
      const gradient = new Float32Array(model.values.length);
      const pass = T.forward(model, engine, batch.inputs, batch.batchSize, batch.seqLen);
      const loss = T.lossAndGradient(model, engine, pass, batch, gradient).loss;
      out = { backend: engine.backend, loss, logits: list(pass.logits), attention: pass.attention.map(list),
        gradients: weightsOf(model, gradient) };
    } else {
      const trainer = T.createTrainer({ model, engine, learningRate: request.learningRate,
        gradClip: request.gradClip, batchParts: request.batchParts });
      out = { loss: trainer.step(batch), weights: weightsOf(model, model.values),
        gradient: weightsOf(model, trainer.gradient) };
    }
  } else if (kind === "sample") {
    const task = T.inductionTask({ periods: request.periods });
    const b = task.sample(request.size, request.seed);
    out = { inputs: list(b.inputs), targets: list(b.targets), lossMask: list(b.lossMask), period: list(b.period),
      repeatStart: list(b.repeatStart) };
  } else if (kind === "scores") {
    const model = T.modelFromWeights(request.config, request.weights), batch = batchOf(request.batch);
    const scored = await T.scoreModel(model, T.createEngine(true), batch, { piece: 16 });
    out = { previous_token: scored.previous_token, prefix_matching: scored.prefix_matching,
      repeat_loss: scored.repeat_loss };
  } else if (kind === "role scores") {
    const attention = request.attention.map((layer) => Float32Array.from(layer));
    const [batch, seq, heads] = [request.batch, request.seq, request.heads];
    out = { previous_token: T.previousTokenScores(attention, batch, seq, heads), prefix_matching: null,
      prefix_error: null };
    try {
      out.prefix_matching = T.prefixMatchingScores(attention, Int32Array.from(request.tokens), null, batch, seq, heads);
    } catch (error) {
      out.prefix_error = error.message;
    }
  } else if (kind === "init") {
    const model = T.createModel(request.config, request.seed);
    out = { weights: weightsOf(model, model.values) };
  } else if (kind === "train") {
    const result = await T.train(Object.assign({ seed: request.seed }, request.options || {}));
    out = { formed: result.formed, formedStep: result.formedStep, steps: result.steps, seconds: result.seconds,
      backend: result.backend, rows: result.rows.map((row) => ({ step: row.step, repeat_loss: row.repeat_loss,
        best_previous_token: row.best_previous_token, best_prefix_matching: row.best_prefix_matching })) };
  } else {
    throw new Error("unknown request kind " + kind);
  }
  fs.writeFileSync(process.argv[4], JSON.stringify(out));
}
main().catch((error) => { process.stderr.write(String(error.stack || error)); process.exit(1); });
"""


def run_in_node(request: dict, *, timeout: float = 600) -> dict:
    """trainer.js (joined as the site serves it) under Node on ``request`` (see ``DRIVER``); its JSON answer."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("Node.js is not installed: apt-get install -y nodejs")
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "trainer.js").write_text(web_file("trainer.js"), encoding="utf-8")
        (folder / "driver.js").write_text(DRIVER, encoding="utf-8")
        (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
        ran = subprocess.run([node, str(folder / "driver.js"), str(folder / "trainer.js"), str(folder / "request.json"),
                              str(folder / "out.json")], capture_output=True, text=True, timeout=timeout)
        if ran.returncode != 0:
            raise RuntimeError(f"trainer.js failed under Node: {ran.stderr[-3000:]}")
        return json.loads((folder / "out.json").read_text(encoding="utf-8"))


def js_run(seed: int) -> dict:
    """One seed of the page's trainer under Node: formation step, training seconds and the scores on the way."""
    began = time.perf_counter()
    result = run_in_node({"kind": "train", "seed": seed, "options": {"scoreEvery": SCORE_EVERY, "maxSteps": MAX_STEPS,
                                                                     "stopWhenFormed": THRESHOLD}}, timeout=3600)
    return {"seed": seed, "formed": result["formed"], "formation_step": result["formedStep"],
            "steps": result["steps"], "training_seconds": result["seconds"],
            "wall_seconds": time.perf_counter() - began, "head_scores": result["rows"]}


def kernel_run(seed: int) -> dict:
    """One seed in PyTorch with the package's training code (one thread), stopped at a formed induction head."""
    import torch

    from mha.lab.induction import first_step_above, held_out_batch, train_until_induction
    from mha.lab.tasks import InductionTask
    from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
    from mha.lab.training import TrainingConfig

    torch.set_num_threads(1)
    task = InductionTask()
    config = TinyTransformerConfig(vocab_size=task.vocab_size, max_seq_len=task.seq_len, d_model=SETTING["d_model"],
                                   n_layers=SETTING["n_layers"], n_heads=SETTING["n_heads"])
    model = TinyTransformer(config, seed=seed)
    training = TrainingConfig(steps=MAX_STEPS, learning_rate=SETTING["learning_rate"], seed=seed,
                              batch_size=SETTING["batch_size"], log_every=SCORE_EVERY, eval_batch_size=64)
    began = time.perf_counter()
    result = train_until_induction(model, task, training, held_out_batch(task), score_every=SCORE_EVERY,
                                   stop_when_formed=THRESHOLD)
    step = first_step_above(result["head_scores"], "best_prefix_matching", THRESHOLD)
    return {"seed": seed, "formed": step is not None, "formation_step": step, "steps": result["steps"],
            "training_seconds": result["seconds"], "wall_seconds": time.perf_counter() - began,
            "head_scores": result["head_scores"]}


def run_job(job: tuple[str, int]) -> tuple[str, int, dict]:
    """One (side, seed) job, in a worker process."""
    side, seed = job
    return side, seed, (kernel_run if side == "kernel" else js_run)(seed)


def write(runs: dict[str, dict[int, dict]], complete: bool) -> None:
    """Write the study's JSON (the finished runs, by seed) and record it in the manifest."""

    content = {"setting": SETTING, "task": "mha.lab.tasks.InductionTask()", "score_every": SCORE_EVERY,
               "threshold": THRESHOLD, "max_steps": MAX_STEPS, "seeds": list(SEEDS), "complete": complete,
               "formation": "first scoring step at which the best last-layer held-out prefix matching exceeds "
                            "the threshold (kernel: mha.lab.induction.train_until_induction(stop_when_formed=0.5) "
                            "on held_out_batch(); page: mhaTrainer.train on its own held-out batch)",
               "kernel_runs": [runs["kernel"][seed] for seed in sorted(runs["kernel"])],
               "javascript_runs": [runs["javascript"][seed] for seed in sorted(runs["javascript"])]}
    write_study(FILE_NAME, content, REGENERATE,
                "formation step of an induction head over ten seeds: PyTorch and the page's trainer.js")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2, choices=(1, 2), help="processes (default 2)")
    parser.add_argument("--only", choices=("javascript", "kernel"), help="rerun one side, keep the other's stored runs")
    args = parser.parse_args(argv)
    sides = (args.only,) if args.only else ("kernel", "javascript")
    jobs = [(side, seed) for seed in SEEDS for side in sides]
    runs: dict[str, dict[int, dict]] = {"kernel": {}, "javascript": {}}
    if args.only:
        from mha.lab.checkpoints import load_json

        stored = load_json(FILE_NAME)
        kept = "kernel" if args.only == "javascript" else "javascript"
        runs[kept] = {run["seed"]: run for run in stored[f"{kept}_runs"]}
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for future in as_completed([pool.submit(run_job, job) for job in jobs]):
            side, seed, run = future.result()
            runs[side][seed] = run
            print(f"{side} seed {seed}: formed at step {run['formation_step']} ({run['training_seconds']:.0f} s)",
                  flush=True)
            write(runs, complete=False)
    write(runs, complete=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
