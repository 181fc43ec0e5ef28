"""The page's trainer (trainer.js) in Chromium, against PyTorch and the stored spread (chapter 3, "Induction heads").

One browser session: a page adds trainer.js only when asked (as a chapter page does when the reader presses train),
served over http and opened from file://; in both the gradient of every parameter on one batch is PyTorch's
loss.backward() to 1e-4 of that tensor's largest entry. Then one seed trains to a formed induction head in the page,
at a step within the range of the stored PyTorch runs (data/lab/web_trainer_spread.json), the very step trainer.js
took for that seed under Node.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

import numpy as np
import pytest
import torch
from conftest import HARNESS, load_script

from mha.lab.checkpoints import load_json
from mha.lab.tasks import InductionTask, masked_cross_entropy
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig
from mha.views.widget import web_file

rounded = load_script("induction_phase_spread").rounded  # how the study file rounds its numbers
CONFIG = TinyTransformerConfig(vocab_size=64, max_seq_len=40, d_model=64, n_layers=2, n_heads=4)

PAGE = """<!doctype html><meta charset="utf-8"><title>trainer</title>
<script>
// what a chapter page does when the reader presses train: add the trainer, then call it
function loadTrainer() {
  return new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = "trainer.js";
    script.onload = () => resolve(typeof globalThis.mhaTrainer);
    script.onerror = () => reject(new Error("trainer.js did not load"));
    document.head.appendChild(script);
  });
}
function gradients(request) {
  const T = globalThis.mhaTrainer, model = T.modelFromWeights(request.config, request.weights);
  const b = request.batch, engine = T.createEngine(true);
  const batch = {batchSize: b.batchSize, seqLen: b.seqLen, inputs: Int32Array.from(b.inputs),
    targets: Int32Array.from(b.targets), lossMask: Uint8Array.from(b.lossMask)};
  const gradient = new Float32Array(model.values.length);
  const pass = T.forward(model, engine, batch.inputs, batch.batchSize, batch.seqLen);
  const loss = T.lossAndGradient(model, engine, pass, batch, gradient).loss;
  const out = {};
  model.layout.forEach((e) => { out[e.name] = Array.from(gradient.subarray(e.offset, e.offset + e.size)); });
  return {backend: engine.backend, loss, gradients: out};
}
async function trainSeed(seed, options) {
  const rows = [];
  const result = await globalThis.mhaTrainer.train(Object.assign({seed, onProgress: (row) => rows.push(row.step)},
                                                                 options));
  return {formed: result.formed, formedStep: result.formedStep, backend: result.backend, reported: rows,
          workers: result.workers, workerProblem: result.workerProblem, values: Array.from(result.model.values),
          cores: navigator.hardwareConcurrency,
          rows: result.rows.map((row) => ({step: row.step, repeat_loss: row.repeat_loss, train_loss: row.train_loss,
            best_previous_token: row.best_previous_token, best_prefix_matching: row.best_prefix_matching,
            previous_token: row.previous_token, prefix_matching: row.prefix_matching}))};
}
</script>
"""


@pytest.fixture(scope="module")
def page_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trainer_page")
    (folder / "trainer.js").write_text(web_file("trainer.js"), encoding="utf-8")
    (folder / "index.html").write_text(PAGE, encoding="utf-8")
    return folder


@contextlib.asynccontextmanager
async def offline_context(chromium: str, folder):
    """A Chromium context that reaches nothing but ``folder``, served, with the served address: (context, site)."""
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=HARNESS.CHROMIUM_ARGS)
        try:
            with HARNESS.served(folder) as site:
                yield await browser.new_context(proxy=HARNESS.offline_proxy(site)), site
        finally:
            await browser.close()


def one_batch_request() -> tuple[dict, dict[str, torch.Tensor]]:
    model = TinyTransformer(CONFIG, seed=4)
    batch = InductionTask().sample(16, 21)
    masked_cross_entropy(model(batch.inputs).logits, batch.targets, batch.loss_mask).backward()
    size, seq = batch.inputs.shape
    request = {"config": CONFIG.to_dict(),
               "weights": {name: p.detach().reshape(-1).tolist() for name, p in model.named_parameters()},
               "batch": {"batchSize": size, "seqLen": seq, "inputs": batch.inputs.reshape(-1).tolist(),
                         "targets": batch.targets.reshape(-1).tolist(),
                         "lossMask": batch.loss_mask.reshape(-1).int().tolist()}}
    return request, {name: p.grad.detach() for name, p in model.named_parameters()}


def agree(ours: dict, theirs: dict[str, torch.Tensor]) -> None:
    largest = max(float(g.abs().max()) for g in theirs.values())
    for name, gradient in theirs.items():
        got = np.array(ours[name], dtype=np.float64).reshape(gradient.shape)
        if name.endswith("b_K"):  # zero in exact arithmetic (the softmax ignores a shift shared by every key)
            assert np.abs(got).max() < 1e-6 * largest
            continue
        assert np.abs(got - gradient.double().numpy()).max() < 1e-4 * float(gradient.abs().max()), name


@pytest.mark.browser
def test_trainer_js_in_chromium_gives_pytorchs_gradients_and_forms_a_head_within_the_spread(chromium, page_folder):
    request, theirs = one_batch_request()
    study = load_json("web_trainer_spread.json")
    kernel_steps = [run["formation_step"] for run in study["kernel_runs"]]
    node_run = next(run for run in study["javascript_runs"] if run["seed"] == 0)  # the seed a reader gets first

    async def run() -> tuple[list, dict]:
        async with offline_context(chromium, page_folder) as (context, site):
            found = []
            for address in (site + "index.html", (page_folder / "index.html").as_uri()):
                page = await context.new_page()
                await page.goto(address)
                assert await page.evaluate("typeof globalThis.mhaTrainer") == "undefined"  # not until asked
                assert await page.evaluate("loadTrainer()") == "object"
                found.append(await page.evaluate("(request) => gradients(request)", request))
            trained = await page.evaluate("([seed, options]) => trainSeed(seed, options)",
                                          [node_run["seed"], {"scoreEvery": study["score_every"],
                                                              "maxSteps": study["max_steps"]}])
            return found, trained

    found, trained = asyncio.run(run())
    for ours in found:
        assert ours["backend"] == "wasm-simd"
        agree(ours["gradients"], theirs)
    assert found[0]["gradients"] == found[1]["gradients"]  # http and file:// run the same script
    assert trained["formed"] and min(kernel_steps) <= trained["formedStep"] <= max(kernel_steps), (trained,
                                                                                                 kernel_steps)
    assert trained["formedStep"] == node_run["formation_step"], json.dumps(trained)
    assert trained["reported"] == list(range(0, trained["formedStep"] + 1, study["score_every"]))
    # the page ran the batch's parts on Web Workers (from file://), Node in one thread: the same scores at every row
    assert trained["workers"] >= 1 and trained["workerProblem"] is None, trained["workerProblem"]
    keys = ("step", "repeat_loss", "best_previous_token", "best_prefix_matching")
    assert [rounded({key: row[key] for key in keys}) for row in trained["rows"]] == node_run["head_scores"]


@pytest.mark.browser
def test_training_on_workers_and_in_the_pages_own_thread_gives_the_same_numbers(chromium, page_folder):
    """A page whose policy forbids workers (worker-src 'none') trains in its own thread, and a page asked for one
    worker sends it every part: each run's scores at every row and its final weights are those of the run on a
    worker per part, to the bit."""
    (page_folder / "no_workers.html").write_text(PAGE.replace(
        "<title>", "<meta http-equiv=\"Content-Security-Policy\" content=\"worker-src 'none'\"><title>"),
        encoding="utf-8")
    options = {"maxSteps": 40, "scoreEvery": 20, "stopWhenFormed": None}

    async def run() -> list[dict]:
        async with offline_context(chromium, page_folder) as (context, site):
            runs = []
            for name, extra in (("index.html", {}), ("index.html", {"workers": 1}), ("no_workers.html", {})):
                page = await context.new_page()
                await page.goto(site + name)
                await page.evaluate("loadTrainer()")
                runs.append(await page.evaluate("([seed, options]) => trainSeed(seed, options)",
                                                [3, {**options, **extra}]))
            return runs

    on_workers, on_one, alone = asyncio.run(run())
    assert on_workers["workers"] == min(4, on_workers["cores"]), on_workers  # one per part, at most the cores
    assert on_one["workers"] == 1 and alone["workers"] == 0
    assert [row["step"] for row in alone["rows"]] == [0, 20, 40]
    for other in (on_one, alone):
        assert other["rows"] == on_workers["rows"] and other["values"] == on_workers["values"]
