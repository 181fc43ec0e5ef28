"""The chapter-3 head-count explorer: quick to update, explains bad input, keeps the last good view, trains live."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import load_script, trained_a_little
from scipy import stats

from mha.lab.head_count_study import load_study
from mha.lab.head_count_sweep import (
    analysis_batch,
    head_role,
    relation_shares,
    token_names,
    train_two_relation_model,
)
from mha.lab.tasks import masked_cross_entropy
from mha.lab.tiny_model import TinyTransformer
from mha.lab.training import TrainingConfig
from mha.views.head_count_explorer import (
    LIVE_TRAINING,
    N_EXAMPLES,
    HeadCountStudyExplorer,
    parse_head_count,
    shares_table_html,
)
from mha.views.heatmaps import weight_hundredths
from mha.views.payloads import decode_payload, stored_weights
from mha.views.widget import web_file

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def explorer():
    return HeadCountStudyExplorer()


def model_maps(model, study, seed: int) -> np.ndarray:
    """The first N_EXAMPLES maps (sequences, heads, seq, seq) of ``model`` on the analysis batch of ``seed``."""
    with torch.no_grad():
        return model(analysis_batch(study.task, seed).inputs).attention_weights[0][:N_EXAMPLES].numpy()


def kept(explorer) -> tuple:
    """What must survive a refusal: the last good view, and the panels on screen."""
    return explorer.current, explorer.curves.value, explorer.shares_view.value


def test_first_view_shows_a_stored_model(explorer):
    assert "h = 1 heads of d_head = 32" in explorer.message.value
    assert "11,904 parameters" in explorer.message.value
    drawn = explorer.current.attention_map
    batch = analysis_batch(explorer.study.task, 0)
    assert drawn.query_labels == token_names(explorer.study.task, batch.inputs[0].tolist())
    assert any(label.startswith("ask k") for label in drawn.query_labels)
    np.testing.assert_allclose(drawn.weights, model_maps(explorer.study.model(1, 0), explorer.study, 0)[0, 0],
                               atol=1e-6)
    assert explorer.shares_view.value.count("<td>head ") == 1
    assert explorer.curves.value.startswith("<svg") and "polyline" in explorer.curves.value


def test_picking_a_head_count_updates_every_part(explorer):
    explorer.heads_picker.value = 8
    assert explorer.head_slider.max == 7
    assert explorer.shares_view.value.count("<td>head ") == 8
    assert "h = 8 heads of d_head = 4" in explorer.message.value
    explorer.head_slider.value = 7
    explorer.heads_picker.value = 2
    assert explorer.head_slider.max == 1 and explorer.head_slider.value == 1
    assert explorer.current.attention_map.title.startswith("head 1 of 2, held-out sequence 0")
    np.testing.assert_allclose(explorer.current.attention_map.weights,
                               model_maps(explorer.study.model(2, 0), explorer.study, 0)[0, 1], atol=1e-6)


@pytest.mark.parametrize("n_heads, seed, words", [(3, 0, "does not divide d_model = 32"), (64, 0, "does not divide"),
                                                  (12, 0, "1, 2, 4, 8, 16, 32"), ("four", 0, "whole number"),
                                                  (4, 42, "no run with seed 42")])
def test_asking_for_a_run_that_does_not_exist_explains_and_keeps_the_view(explorer, n_heads, seed, words):
    assert explorer.show(4, 0)
    before = kept(explorer)
    assert not explorer.show(n_heads, seed)
    assert "Cannot show this" in explorer.message.value and words in explorer.message.value
    assert kept(explorer) == before
    assert explorer.heads_picker.value == 4 and explorer.seed_picker.value == 0


@pytest.mark.parametrize("typed, words", [("5", "cannot split d_model = 32"), ("0", "cannot split"),
                                          ("64", "type one of 1, 2, 4, 8, 16, 32"), ("four", "not a whole number"),
                                          ("<b>2</b>", "&lt;b&gt;")])
def test_a_bad_head_count_to_train_is_explained_without_training(explorer, typed, words):
    explorer.train_heads.value = typed
    assert not explorer.retrain()
    assert explorer.progress.value == 0  # refused before a single training step
    assert "Cannot train this" in explorer.status.value and words in explorer.status.value


def test_parse_head_count():
    assert parse_head_count(" 16 ", 32) == 16
    with pytest.raises(ValueError, match="1, 2, 3, 4, 6, 8, 12, 24"):
        parse_head_count(5, 24)
    for width in ("32", 0, 2.5, None):  # the width itself is checked before any message is written
        with pytest.raises(ValueError, match="d_model must be a whole number"):
            parse_head_count("4", width)


def test_every_control_redraws_the_view(explorer):
    # How fast each update is belongs to the benchmark (scripts/bench_views.py, budget 50 ms), not to a timed test.
    seen = set()
    for n_heads in (1, 2, 4, 8, 16, 32):  # first visit of each: loads a checkpoint, measures, draws the curves
        explorer.show(n_heads, 1)
        assert explorer.shares_view.value.count("<td>head ") == n_heads
        seen.add(explorer.shares_view.value)
    assert len(seen) == 6
    for control, values in ((explorer.head_slider, range(explorer.head_slider.max + 1)),
                            (explorer.example_slider, (1, 2, 3))):
        weights, titles = set(), set()
        for value in values:
            control.value = value
            assert explorer.last_refresh_seconds is not None
            weights.add(explorer.current.attention_map.weights.tobytes())
            titles.add(explorer.current.attention_map.title)
        assert len(weights) > 1, f"moving {control.description!r} changed nothing in the map"
        assert len(titles) == len(values), f"moving {control.description!r} did not retitle the map"


@pytest.mark.slow
def test_live_retrain_shows_the_new_model_and_fits_the_time_budget(explorer):
    explorer.seed_picker.value = 0
    explorer.train_heads.value = "32"  # the slowest head count; its time is measured by scripts/bench_views.py
    steps = 150
    assert explorer.retrain(steps=steps)
    assert explorer.progress.value == steps and explorer.progress.max == steps
    assert "The model you trained live" in explorer.message.value and "h = 32" in explorer.message.value
    assert "Trained h = 32, seed 0" in explorer.status.value
    assert explorer.shares_view.value.count("<td>head ") == 32
    assert explorer.current.attention_map.title.startswith(f"head {explorer.head_slider.value} of 32,")
    explorer.heads_picker.value = 4  # back to the stored models
    assert "The model you trained live" not in explorer.message.value


@pytest.mark.slow
def test_in_jupyter_the_view_shows_the_model_trained_live_then_the_stored_ones_again():
    explorer = HeadCountStudyExplorer(n_heads=4, seed=1)
    assert explorer.status in explorer.widget.children
    stored = explorer.view_widget.payload
    steps = 5
    assert explorer.retrain("2", steps=steps)
    payload = decode_payload(explorer.view_widget.payload)
    controls = payload["controls"]
    assert [control["name"] for control in controls] == ["head", "sequence"]  # the live model has no heads or seed
    assert controls[0]["values"] == [0, 1] and controls[1]["values"] == list(range(N_EXAMPLES))
    assert len(payload["views"]) == len(payload["drawn"]) == 2 * N_EXAMPLES
    # the maps are those of the model that the same training gives again
    training = TrainingConfig(**{**LIVE_TRAINING.to_dict(), "seed": 1, "steps": steps})
    model, _ = train_two_relation_model(explorer.study.config(2), explorer.study.task, training, seed=1)
    maps = model_maps(model, explorer.study, 1)  # (sequences, 2 heads, seq, seq)
    for key, index in payload["views"].items():
        head, sequence = (int(part) for part in key.split("|"))
        drawn = payload["drawn"][index]
        assert payload["strings"][drawn["map"]["title"]].startswith(f"head {head} of 2, held-out sequence {sequence}")
        assert "The model you trained live</b>: h = 2 heads" in payload["strings"][drawn["message"]]
        np.testing.assert_array_equal(stored_weights(payload, drawn["map"]), weight_hundredths(maps[sequence, head]))
    assert explorer.show(4, 1)  # a stored run in code: the view on screen is the stored study's again
    assert explorer.view_widget.payload == stored


def test_html_views_reject_wrong_shapes():
    with pytest.raises(ValueError, match=r"\(heads, 3\)"):
        shares_table_html(np.zeros((4, 2)))


@pytest.mark.parametrize("typed", ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "\ud800", "9" * 5000])
def test_anything_typed_as_a_head_count_is_answered_as_text(explorer, typed):
    explorer.train_heads.value = typed
    assert not explorer.retrain()
    status = explorer.status.value
    assert "Cannot train this" in status and "<img" not in status and "<script" not in status


@pytest.mark.parametrize("n_heads, seed", [([4], 0), (None, 0), (4, [0]), (4.5, 0)])
def test_odd_values_passed_to_show_get_a_message(explorer, n_heads, seed):
    assert explorer.show(4, 0)
    assert not explorer.show(n_heads, seed)
    assert "Cannot show this" in explorer.message.value


def test_a_run_that_cannot_be_loaded_is_a_message_not_a_dead_view(explorer, monkeypatch):
    from mha.lab.checkpoints import CheckpointError

    assert explorer.show(4, 0)
    before = kept(explorer)

    def damaged(n_heads, seed):
        raise CheckpointError("checkpoint file head_count_h2_seed3.safetensors is corrupted <b>")
    monkeypatch.setattr(explorer, "_stored_view", damaged)
    assert not explorer.show(2, 3)
    assert "Cannot show this" in explorer.message.value and "unexpected CheckpointError" in explorer.message.value
    assert "corrupted &lt;b&gt;" in explorer.message.value
    assert kept(explorer) == before


def test_a_live_run_that_fails_says_why_and_keeps_the_view(explorer, monkeypatch):
    import mha.views.head_count_explorer

    assert explorer.show(4, 0)
    before = kept(explorer)

    def failing(*args, **kwargs):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(mha.views.head_count_explorer, "train_two_relation_model", failing)
    assert not explorer.retrain("2", steps=10)
    assert "unexpected RuntimeError (out of memory)" in explorer.status.value
    assert not explorer.train_button.disabled
    assert kept(explorer) == before


# Section 3.7's "train live" in the page: trainer.js's two-relation task and training against PyTorch, under Node
# (chapter 3, "One big head or many").
#
# - the JavaScript task's batches have TwoRelationTask's exact layout (distinct keys in the facts, [modifier][ask]
#   pairs, the answer of the asked fact and the modifier, only the ask positions scored) and its distributions (keys,
#   values, asked facts and modifiers uniform: chi-square tests by scipy; the answer tokens drawn as often as
#   torch's sampler draws them: a chi-square test of the two count tables);
# - from the same weights and batch, the gradients of every parameter are loss.backward()'s to 1e-4 of that tensor's
#   largest entry, for 1, 4 and 32 heads (d_head 32, 8 and 1);
# - its head shares and roles are mha.lab.head_count_sweep.relation_shares / head_role on the same attention;
# - runs of the notebook's live schedule (LIVE_TRAINING) end, over several seeds, at held-out losses that a
#   Mann-Whitney U test does not tell apart from PyTorch's runs of the same seeds, with the same head roles.

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (apt install nodejs)")
spread = load_script("web_trainer_spread")  # run_in_node: the "gradients" request
STUDY = load_study()
TASK = STUDY.task
SEEDS = (0, 1, 2, 3)

# node DRIVER TRAINER_JS REQUEST.json OUT.json; REQUEST {"kind": "sample", seed, size} or {"kind": "train", config,
# seed, options} (the run's last row, the analysis batch's shares and roles) or {"kind": "shares", attention,
# factPosition, batch, seq, heads}.
DRIVER = r"""
"use strict";
const fs = require("fs");
require(require("path").resolve(process.argv[2]));
const R = globalThis.mhaTrainer.twoRelation;
const request = JSON.parse(fs.readFileSync(process.argv[3], "utf8"));
async function main() {
  const task = R.task();
  let out;
  if (request.kind === "sample") {
    const b = task.sample(request.size, request.seed);
    out = { inputs: Array.from(b.inputs), targets: Array.from(b.targets), lossMask: Array.from(b.lossMask),
      factPosition: Array.from(b.factPosition), vocabSize: task.vocabSize, seqLen: task.seqLen };
  } else if (request.kind === "train") {
    const runs = [];
    for (const seed of request.seeds) {
      const done = await R.train(Object.assign({ config: request.config, seed, task }, request.options));
      const measured = await R.measure(done.model, done.engine, task, seed, 1);
      runs.push({ seed, last: done.rows[done.rows.length - 1], shares: measured.shares, roles: measured.roles });
    }
    out = { runs };
  } else {
    out = { shares: R.relationShares(Float32Array.from(request.attention), Int32Array.from(request.factPosition),
      request.batch, request.seq, request.heads) };
    out.roles = out.shares.map((s) => R.headRole(s[0], s[1]));
  }
  fs.writeFileSync(process.argv[4], JSON.stringify(out));
}
main().catch((error) => { process.stderr.write(String(error.stack || error)); process.exit(1); });
"""


def in_node(request: dict) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        (folder / "trainer.js").write_text(web_file("trainer.js"), encoding="utf-8")
        (folder / "driver.js").write_text(DRIVER, encoding="utf-8")
        (folder / "request.json").write_text(json.dumps(request), encoding="utf-8")
        ran = subprocess.run(["node", str(folder / "driver.js"), str(folder / "trainer.js"),
                              str(folder / "request.json"), str(folder / "out.json")],
                             capture_output=True, text=True, timeout=1800)
        assert ran.returncode == 0, ran.stderr[-3000:]
        return json.loads((folder / "out.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def drawn():
    size = 4000
    out = in_node({"kind": "sample", "seed": 7, "size": size})
    assert (out["vocabSize"], out["seqLen"]) == (TASK.vocab_size, TASK.seq_len)
    shape = (size, TASK.seq_len)
    return {name: np.array(out[name]).reshape(shape) for name in ("inputs", "targets", "lossMask", "factPosition")}


@needs_node
def test_the_batches_keep_two_relation_tasks_layout(drawn):
    theirs = TASK.sample(2, 0)  # where the package scores: the same positions in every sequence
    F, V, M = TASK.n_facts, TASK.n_values, TASK.n_modifiers
    inputs, targets, facts = drawn["inputs"], drawn["targets"], drawn["factPosition"]
    mask = drawn["lossMask"].astype(bool)
    assert (mask == theirs.loss_mask[0].numpy()).all()
    assert ((facts >= 0) == mask).all() and (targets[~mask] == -100).all()
    keys, values = inputs[:, :F] // V, inputs[:, :F] % V
    assert (inputs[:, :F] < TASK.first_ask).all()
    assert all(len(set(row)) == F for row in keys)  # distinct keys
    asks = np.flatnonzero(mask[0])
    modifiers = inputs[:, asks - 1] - TASK.first_modifier
    assert ((modifiers >= 0) & (modifiers < M)).all()
    asked = facts[:, asks]  # (size, queries): which fact each ask asks
    rows = np.arange(len(inputs))[:, None]
    assert (inputs[:, asks] == TASK.first_ask + keys[rows, asked]).all()  # the ask names the fact's key
    assert (targets[:, asks] == TASK.first_answer + values[rows, asked] * M + modifiers).all()


@needs_node
def test_the_batches_draw_as_two_relation_task_draws(drawn):
    F, V, K = TASK.n_facts, TASK.n_values, TASK.n_keys
    inputs, facts, mask = drawn["inputs"], drawn["factPosition"], drawn["lossMask"].astype(bool)
    keys = inputs[:, :F] // V
    assert stats.chisquare(np.bincount(keys[:, 0], minlength=K)).pvalue > 1e-3
    pairs = keys[:, 0] * K + keys[:, 1]  # ordered pairs of distinct keys, each as likely
    counts = np.bincount(pairs, minlength=K * K)[[a * K + b for a in range(K) for b in range(K) if a != b]]
    assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.chisquare(np.bincount((inputs[:, :F] % V).ravel(), minlength=V)).pvalue > 1e-3
    assert stats.chisquare(np.bincount(facts[mask], minlength=F)).pvalue > 1e-3
    asks = np.flatnonzero(mask[0])
    modifiers = (inputs[:, asks - 1] - TASK.first_modifier).ravel()
    assert stats.chisquare(np.bincount(modifiers, minlength=TASK.n_modifiers)).pvalue > 1e-3
    theirs = TASK.sample(len(inputs), 7)  # torch's draws: the answers as often, by a test of the two count tables
    answers = np.arange(TASK.first_answer, TASK.vocab_size)
    table = np.array([[(drawn["targets"][mask] == a).sum() for a in answers],
                      [(theirs.targets[theirs.loss_mask] == a).sum().item() for a in answers]])
    assert stats.chi2_contingency(table).pvalue > 1e-3


def study_model_trained_a_little(n_heads: int) -> TinyTransformer:
    """The study's model with ``n_heads`` heads, 20 PyTorch steps in, so that no gradient is at its initial value."""
    return trained_a_little(TinyTransformer(STUDY.config(n_heads), seed=n_heads), TASK, 20, 1e-2, seed=n_heads)


@pytest.mark.parametrize("n_heads", [1, 4, 32])
@needs_node
def test_one_steps_gradients_are_pytorchs(n_heads):
    model, batch = study_model_trained_a_little(n_heads), TASK.sample(32, 100 + n_heads)
    model.zero_grad()
    loss = masked_cross_entropy(model(batch.inputs).logits, batch.targets, batch.loss_mask)
    loss.backward()
    weights = {name: p.detach().reshape(-1).tolist() for name, p in model.named_parameters()}
    flat = {"batchSize": 32, "seqLen": TASK.seq_len, "inputs": batch.inputs.reshape(-1).tolist(),
            "targets": batch.targets.reshape(-1).tolist(), "lossMask": batch.loss_mask.reshape(-1).int().tolist()}
    ours = spread.run_in_node({"kind": "gradients", "config": STUDY.config(n_heads).to_dict(), "weights": weights,
                               "batch": flat})
    assert ours["loss"] == pytest.approx(float(loss.detach()), rel=1e-5)
    largest = max(float(p.grad.abs().max()) for p in model.parameters())
    for name, p in model.named_parameters():
        theirs = p.grad.double()
        mine = torch.tensor(ours["gradients"][name], dtype=torch.float64).reshape(theirs.shape)
        if name.endswith("b_K"):  # the softmax ignores a key bias: both sides give rounding noise
            assert float(mine.abs().max()) < 1e-6 * largest and float(theirs.abs().max()) < 1e-6 * largest
            continue
        assert float((mine - theirs).abs().max() / theirs.abs().max()) < 1e-4, name


@needs_node
def test_shares_and_roles_are_relation_shares_and_head_role():
    model, batch = study_model_trained_a_little(4), TASK.sample(16, 5)
    with torch.no_grad():
        weights = model(batch.inputs).attention_weights[0]  # (batch, heads, seq, seq)
    ours = in_node({"kind": "shares", "attention": weights.reshape(-1).tolist(), "batch": 16, "seq": TASK.seq_len,
                    "heads": 4, "factPosition": batch.details["fact_position"].reshape(-1).tolist()})
    theirs = relation_shares(weights, batch.details["fact_position"]).numpy()
    assert np.abs(np.array(ours["shares"]) - theirs).max() < 1e-5
    assert ours["roles"] == [head_role(float(f), float(p)) for f, p, _ in theirs]


def pytorch_runs(n_heads: int) -> list[dict]:
    runs = []
    for seed in SEEDS:
        training = TrainingConfig(**{**LIVE_TRAINING.to_dict(), "seed": seed})
        model, log = train_two_relation_model(STUDY.config(n_heads), TASK, training, seed=seed)
        batch = TASK.sample(256, 10_000 + seed)
        with torch.no_grad():
            shares = relation_shares(model(batch.inputs).attention_weights[0], batch.details["fact_position"])
        runs.append({"loss": log.rows[-1]["loss"], "accuracy": log.rows[-1]["accuracy"],
                     "roles": sorted(head_role(float(f), float(p)) for f, p, _ in shares)})
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("n_heads", [1, 4])
@needs_node
def test_live_runs_end_where_pytorchs_do(n_heads):
    """Over SEEDS, the page's runs of LIVE_TRAINING and PyTorch's: final held-out losses of one distribution (a
    Mann-Whitney U test), and the head roles PyTorch's runs reach."""
    schedule = LIVE_TRAINING
    options = {"steps": schedule.steps, "learningRate": schedule.learning_rate, "batchSize": schedule.batch_size,
               "logEvery": schedule.log_every, "evalBatchSize": schedule.eval_batch_size, "chunkMs": 1e9}
    ours = in_node({"kind": "train", "config": STUDY.config(n_heads).to_dict(), "seeds": list(SEEDS),
                    "options": options})["runs"]
    theirs = pytorch_runs(n_heads)
    our_losses, their_losses = [run["last"]["loss"] for run in ours], [run["loss"] for run in theirs]
    assert stats.mannwhitneyu(our_losses, their_losses).pvalue > 0.05, (our_losses, their_losses)
    their_roles = {role for run in theirs for role in run["roles"]}
    for run in ours:
        assert set(run["roles"]) <= their_roles | {"other"}, (run["roles"], their_roles)
    if all({"fact", "previous"} <= set(run["roles"]) for run in theirs):  # every PyTorch run splits the work
        assert all({"fact", "previous"} <= set(run["roles"]) for run in ours), [run["roles"] for run in ours]
