"""The page's trainer (trainer.js, joined from src/mha/views/web/trainer/) against PyTorch and the package, under
Node (chapter 3, "Induction heads").

- from the same weights and batch (a TinyTransformer built by the package, a batch of InductionTask.sample), the
  JavaScript loss, logits and attention weights are PyTorch's, and its hand-written gradient of every parameter is
  loss.backward()'s to 1e-4 of that tensor's largest entry; the WebAssembly SIMD kernel and the plain-JavaScript
  fallback give the same numbers to the bit;
- a batch split into parts (as the page's workers run it) gives the whole batch's loss and gradient;
- after one full step (clipping to a norm, then AdamW) the weights are torch.optim.AdamW's;
- a fresh model's entries follow the package's initialisation (normal / Glorot-uniform / zeros), by scipy's tests;
- the JavaScript task's batches keep InductionTask's layout (distinct tokens, [noise][A][A], the repeat scored) and
  draw the period uniformly (a chi-square test by scipy);
- its head scores are mha.lab.circuit_scores.head_role_scores on the same weights and batch;
- one stored seed of data/lab/web_trainer_spread.json re-runs to the same row under Node; every stored page run forms
  its induction head within the range of the stored PyTorch runs, and the two sets of formation steps are not told
  apart by a Mann-Whitney U test (scipy).
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from conftest import load_script, trained_a_little
from scipy import stats

from mha.lab.checkpoints import load_json
from mha.lab.circuit_scores import head_role_scores, prefix_matching_score, previous_token_score
from mha.lab.induction import held_out_batch
from mha.lab.tasks import INDUCTION_TRAIN_PERIODS, InductionTask, masked_cross_entropy
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js (apt install nodejs)")
spread = load_script("web_trainer_spread")
rounded = load_script("induction_phase_spread").rounded  # how the study file rounds its numbers
TASK = InductionTask()
CONFIG = TinyTransformerConfig(vocab_size=64, max_seq_len=40, d_model=64, n_layers=2, n_heads=4)
LEARNING_RATE = 3e-3
CLIP = 0.05  # below this batch's gradient norm, so that the step clips (the page clips to 1, as the package does)


def weights_of(model: TinyTransformer) -> dict[str, list[float]]:
    return {name: p.detach().reshape(-1).tolist() for name, p in model.named_parameters()}


def batch_of(batch) -> dict:
    size, seq = batch.inputs.shape
    return {"batchSize": size, "seqLen": seq, "inputs": batch.inputs.reshape(-1).tolist(),
            "targets": batch.targets.reshape(-1).tolist(), "lossMask": batch.loss_mask.reshape(-1).int().tolist(),
            "repeatMask": batch.details["repeat_mask"].reshape(-1).int().tolist()}


@pytest.fixture(scope="module", name="trained_a_little")
def page_model_trained_a_little() -> TinyTransformer:
    """The page's model, 30 PyTorch steps in, so that no gradient is at its initial, special value."""
    return trained_a_little(TinyTransformer(CONFIG, seed=3), TASK, 30, LEARNING_RATE, seed=3)


@pytest.fixture(scope="module")
def batch():
    return TASK.sample(32, 11)


def torch_gradients(model: TinyTransformer, batch) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad()
    output = model(batch.inputs)
    loss = masked_cross_entropy(output.logits, batch.targets, batch.loss_mask)
    loss.backward()
    return float(loss.detach()), {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def close_to(ours, theirs: torch.Tensor, relative: float) -> float:
    """The largest |difference|, as a share of ``theirs``' largest |entry|."""
    ours = torch.tensor(ours, dtype=torch.float64).reshape(theirs.shape)
    return float((ours - theirs.double()).abs().max() / theirs.double().abs().max())


def test_gradients_of_every_parameter_are_pytorchs(trained_a_little, batch):
    loss, gradients = torch_gradients(trained_a_little, batch)
    request = {"kind": "gradients", "config": CONFIG.to_dict(), "weights": weights_of(trained_a_little),
               "batch": batch_of(batch)}
    simd, plain = spread.run_in_node(request), spread.run_in_node({**request, "simd": False})
    assert (simd["backend"], plain["backend"]) == ("wasm-simd", "js")
    assert simd["gradients"] == plain["gradients"] and simd["logits"] == plain["logits"]  # to the bit
    assert simd["loss"] == pytest.approx(loss, rel=1e-5)
    with torch.no_grad():
        output = trained_a_little(batch.inputs)
    assert close_to(simd["logits"], output.logits, 1e-4) < 1e-5
    for layer, weights in enumerate(simd["attention"]):
        assert np.abs(np.array(weights) - output.attention_weights[layer].reshape(-1).numpy()).max() < 1e-5
    largest = max(float(g.abs().max()) for g in gradients.values())
    for name, theirs in gradients.items():
        if name.endswith("b_K"):
            # a key bias adds the same q . b_K to every key's score, which the softmax ignores: its gradient is 0
            # in exact arithmetic, and both sides give rounding noise far below the other gradients
            assert max(abs(g) for g in simd["gradients"][name]) < 1e-6 * largest
            assert float(theirs.abs().max()) < 1e-6 * largest
            continue
        assert close_to(simd["gradients"][name], theirs, 1e-4) < 1e-4, name


def test_a_batch_in_parts_gives_the_whole_batchs_loss_and_gradient(trained_a_little, batch):
    """The page splits each batch into four parts of eight sequences (its workers run one each) and adds their
    losses and gradients: each part divides by the whole batch's scored positions, so the sum is the batch's mean
    loss and its gradient, PyTorch's on the whole batch, not four means added up. (Clipping is off: it would hide a
    gradient off by a constant factor.)"""
    loss, gradients = torch_gradients(trained_a_little, batch)
    weights = weights_of(trained_a_little)
    request = {"kind": "step", "config": CONFIG.to_dict(), "weights": weights, "batch": batch_of(batch),
               "learningRate": LEARNING_RATE, "gradClip": 0}
    whole, parts = spread.run_in_node({**request, "batchParts": 1}), spread.run_in_node({**request, "batchParts": 4})
    assert parts["loss"] == pytest.approx(loss, rel=1e-5) and whole["loss"] == pytest.approx(loss, rel=1e-5)
    assert parts["gradient"] != whole["gradient"]  # the rows are summed part by part: other roundings
    for name, theirs in gradients.items():
        if name.endswith("b_K"):  # rounding noise on both sides (see above)
            continue
        assert close_to(parts["gradient"][name], theirs, 1e-4) < 1e-4, name
        assert close_to(parts["gradient"][name], torch.tensor(whole["gradient"][name]), 1e-5) < 1e-5, name


def test_one_clipped_adamw_step_gives_pytorchs_weights(trained_a_little, batch):
    model = TinyTransformer(CONFIG, seed=3)
    model.load_state_dict(trained_a_little.state_dict())
    before = weights_of(model)
    optimiser = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE, betas=(0.9, 0.999), weight_decay=0.01)
    model.zero_grad()
    masked_cross_entropy(model(batch.inputs).logits, batch.targets, batch.loss_mask).backward()
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP))
    assert norm > CLIP  # so the clipping is exercised
    optimiser.step()
    ours = spread.run_in_node({"kind": "step", "config": CONFIG.to_dict(), "weights": before,
                               "batch": batch_of(batch), "learningRate": LEARNING_RATE, "gradClip": CLIP})["weights"]
    for name, theirs in model.named_parameters():
        if name.endswith("b_K"):  # its gradient is rounding noise (see above): each side moves it by less than lr
            assert np.abs(np.array(ours[name]) - np.array(before[name])).max() < LEARNING_RATE
            continue
        assert close_to(ours[name], theirs.detach(), 1e-4) < 1e-4, name
        moved = np.abs(np.array(ours[name]) - np.array(before[name])).max()
        assert moved > 1e-4 * LEARNING_RATE, f"{name} did not move"


def test_a_fresh_model_follows_the_packages_initialisation():
    config = CONFIG.to_dict()
    ours = spread.run_in_node({"kind": "init", "config": config, "seed": 5})["weights"]
    theirs = dict(TinyTransformer(CONFIG, seed=5).named_parameters())
    assert set(ours) == set(theirs)
    scale, bound = 1 / np.sqrt(64), np.sqrt(6 / 128)
    for name, values in ours.items():
        values = np.array(values)
        assert values.size == theirs[name].numel(), name
        if name.split(".")[-1].startswith("b_"):
            assert not values.any(), name
        elif name in ("W_E", "W_pos", "W_U"):
            assert stats.kstest(values / scale, "norm").pvalue > 1e-3, name
        else:
            assert np.abs(values).max() <= bound
            assert stats.kstest(values, "uniform", args=(-bound, 2 * bound)).pvalue > 1e-3, name
    again = spread.run_in_node({"kind": "init", "config": config, "seed": 5})["weights"]
    other = spread.run_in_node({"kind": "init", "config": config, "seed": 6})["weights"]
    assert again == ours and other["W_E"] != ours["W_E"]


def test_the_tasks_batches_keep_the_layout_and_draw_periods_uniformly():
    size = 6000
    drawn = spread.run_in_node({"kind": "sample", "seed": 9, "size": size, "periods": list(INDUCTION_TRAIN_PERIODS)})
    seq = TASK.seq_len
    inputs = np.array(drawn["inputs"]).reshape(size, seq)
    targets = np.array(drawn["targets"]).reshape(size, seq)
    mask = np.array(drawn["lossMask"]).reshape(size, seq).astype(bool)
    periods, starts = np.array(drawn["period"]), np.array(drawn["repeatStart"])
    assert set(periods) <= set(INDUCTION_TRAIN_PERIODS)
    for row in range(size):
        period, start = periods[row], starts[row]
        tokens = np.append(inputs[row], targets[row, -1])  # the seq + 1 tokens
        assert start == seq + 1 - period
        assert len(set(tokens[:start])) == start  # distinct noise and first copy
        assert (tokens[start:] == tokens[start - period:seq + 1 - period]).all()  # the second copy
        assert (mask[row] == (np.arange(seq) >= start)).all()
        assert (targets[row][mask[row]] == tokens[1:][mask[row]]).all() and (targets[row][~mask[row]] == -100).all()
        assert 0 <= tokens.min() and tokens.max() < TASK.vocab_size
    counts = np.array([(periods == p).sum() for p in INDUCTION_TRAIN_PERIODS])
    assert stats.chisquare(counts).pvalue > 1e-3, counts  # uniform over the training periods
    first = np.bincount(inputs[:, 0], minlength=TASK.vocab_size)
    assert stats.chisquare(first).pvalue > 1e-3  # every token equally likely


def test_head_scores_are_head_role_scores(trained_a_little):
    held_out = held_out_batch(size=64)
    ours = spread.run_in_node({"kind": "scores", "config": CONFIG.to_dict(), "weights": weights_of(trained_a_little),
                               "batch": batch_of(held_out)})
    theirs = head_role_scores(trained_a_little, held_out.inputs, held_out.details["repeat_mask"])
    for key in ("previous_token", "prefix_matching"):
        assert np.abs(np.array(ours[key]) - theirs[key].numpy()).max() < 1e-5, key
    with torch.no_grad():
        logits = trained_a_little(held_out.inputs).logits
    assert ours["repeat_loss"] == pytest.approx(float(TASK.metrics(logits, held_out)["repeat_loss"]), rel=1e-5)


@pytest.mark.parametrize("repeats", [False, True], ids=["no token repeats", "a repeat"])
def test_each_score_alone_is_the_packages_and_prefix_matching_is_refused_where_nothing_repeats(trained_a_little,
                                                                                                 repeats):
    # a sequence typed into 3.6 need not repeat: previous-token is still defined there, prefix matching is not
    tokens = torch.arange(12).repeat(2)[None] if repeats else torch.arange(0, 48, 2)[None]  # (1, 24)
    with torch.no_grad():
        weights = trained_a_little(tokens).attention_weights  # (layers, 1, heads, 24, 24)
    ours = spread.run_in_node({"kind": "role scores", "attention": [layer.flatten().tolist() for layer in weights],
                               "tokens": tokens.flatten().tolist(), "batch": 1, "seq": 24, "heads": CONFIG.n_heads})
    assert np.abs(np.array(ours["previous_token"]) - previous_token_score(weights).numpy()).max() < 1e-6
    if repeats:
        theirs = prefix_matching_score(weights, tokens)
        assert ours["prefix_error"] is None
        assert np.abs(np.array(ours["prefix_matching"]) - theirs.numpy()).max() < 1e-6
    else:
        with pytest.raises(ValueError, match="no query has an earlier copy of its token"):
            prefix_matching_score(weights, tokens)
        assert ours["prefix_matching"] is None
        assert ours["prefix_error"].startswith("no query has an earlier copy of its token")


def test_the_page_runs_fall_inside_the_kernels_spread_as_often_as_runs_of_one_distribution_would():
    """The page's formation steps against the range (min to max) of the kernel's ten runs. Even when both come from
    one distribution, a new run falls outside the range of ten others with probability 2/11, so some page runs are
    expected outside it; the test asks whether as many fall outside as here is unusual for one distribution, by
    splitting the twenty runs into two groups of ten at random (a permutation test, 20,000 splits, seeded)."""
    study = load_json("web_trainer_spread.json")
    kernel_steps = np.array([run["formation_step"] for run in study["kernel_runs"]])
    page_steps = np.array([run["formation_step"] for run in study["javascript_runs"]])
    assert all(run["formed"] for run in study["kernel_runs"] + study["javascript_runs"])

    def outside(kernel: np.ndarray, page: np.ndarray) -> np.ndarray:  # (splits,) page runs outside kernel's range
        low, high = kernel.min(axis=-1, keepdims=True), kernel.max(axis=-1, keepdims=True)
        return ((page < low) | (page > high)).sum(axis=-1)

    observed = int(outside(kernel_steps, page_steps))
    pooled = np.concatenate([kernel_steps, page_steps])
    generator = np.random.default_rng(0)
    splits = np.argsort(generator.random((20_000, len(pooled))), axis=1)  # (splits, 20) random orders
    shuffled = pooled[splits]
    counts = outside(shuffled[:, :len(kernel_steps)], shuffled[:, len(kernel_steps):])
    p_value = float((counts >= observed).mean())
    assert observed <= len(page_steps) // 2, (observed, sorted(kernel_steps), sorted(page_steps))
    assert p_value > 0.05, (observed, p_value, sorted(kernel_steps), sorted(page_steps))


def test_the_page_and_the_kernel_form_their_heads_at_steps_of_one_distribution():
    study = load_json("web_trainer_spread.json")
    kernel_steps = [run["formation_step"] for run in study["kernel_runs"]]
    page_steps = [run["formation_step"] for run in study["javascript_runs"]]
    assert len(kernel_steps) == len(page_steps) == 10 and study["complete"]
    assert stats.mannwhitneyu(kernel_steps, page_steps).pvalue > 0.01, (kernel_steps, page_steps)


@pytest.mark.slow
def test_a_stored_page_run_reproduces_under_node():
    study = load_json("web_trainer_spread.json")
    stored = min(study["javascript_runs"], key=lambda run: run["formation_step"])  # the cheapest to re-run
    again = rounded(spread.js_run(stored["seed"]))
    timings = ("training_seconds", "wall_seconds")
    assert {key: value for key, value in again.items() if key not in timings} == \
        {key: value for key, value in stored.items() if key not in timings}
