"""The checks whose cases come from the real model and real training runs (3.2, 3.5, 4.2, 4.3) pass an independent
solution on their public and hidden inputs, fail with the slip named on the mistakes learners make, and compute
their expected answers as the package's reference and the model itself do."""

import numpy as np
import torch
from slips import assert_slip_named

from mha.analysis.head_roles.relations import select_and_report
from mha.analysis.head_roles.seeded_sentences import treebank_relation_hits
from mha.exercises.caveats import check_attention_without_head, treebank_trace
from mha.exercises.emergence import check_phase_change_step
from mha.exercises.head_roles import check_held_out_relation_head
from mha.exercises.layers_and_probing import check_selection_inflation


def assert_fails_with(result, *words):
    assert not result and result.message.startswith("✗"), result.message
    for word in words:
        assert word.lower() in result.message.lower(), f"{word!r} missing from: {result.message}"


def not_attempted(*args, **kwargs):
    raise NotImplementedError


# --- 3.2: a relation head chosen on some sentences, reported on others ---------------------------------

def relation_head_solution(hits, pairs, selection, held_out):
    accuracy = hits[selection].sum(axis=0) / pairs[selection].sum()  # (layers, heads)
    layer, head = np.unravel_index(np.argmax(accuracy), accuracy.shape)
    return int(layer), int(head), float(accuracy[layer, head]), float(hits[held_out, layer, head].sum()
                                                                       / pairs[held_out].sum())


def relation_head_chosen_on_everything(hits, pairs, selection, held_out):
    return relation_head_solution(hits, pairs, np.arange(len(pairs)), held_out)


def relation_head_reporting_selection(hits, pairs, selection, held_out):
    layer, head, chosen, _ = relation_head_solution(hits, pairs, selection, held_out)
    return layer, head, chosen, chosen


def test_relation_head_check_passes_the_solution_on_public_and_hidden_inputs():
    for seed in (0, 1):
        assert check_held_out_relation_head(relation_head_solution, seed=seed)
    assert_fails_with(check_held_out_relation_head(not_attempted), "not attempted")
    assert_fails_with(check_held_out_relation_head(relation_head_chosen_on_everything), "all sentences")
    assert_fails_with(check_held_out_relation_head(relation_head_reporting_selection), "where it was chosen")


def test_the_real_hits_agree_with_select_and_report_and_differ_between_seeds():
    counts = treebank_relation_hits(0)
    assert counts.hits.shape == (40, len(counts.relations), 6, 12)
    selection, held_out = np.arange(20), np.arange(20, 40)
    table = select_and_report(counts.subset(selection), counts.subset(held_out), relations=["det_noun"],
                              n_resamples=10).iloc[0]
    r = counts.relations.index("det_noun")
    layer, head, chosen, held = relation_head_solution(counts.hits[:, r], counts.pairs[:, r], selection, held_out)
    assert (layer, head) == (table["layer"], table["head"])
    assert np.isclose(chosen, table["selection_acc"]) and np.isclose(held, table["acc"])
    assert not np.array_equal(counts.pairs, treebank_relation_hits(1).pairs)  # a hidden variant: other sentences


# --- 3.5: the phase change of real training runs -------------------------------------------------------

def phase_change_solution(steps, losses, window_steps):
    best, middle = -np.inf, None
    for start in range(len(steps)):
        end = next((k for k in range(start, len(steps)) if steps[k] - steps[start] >= window_steps), len(steps) - 1)
        if end <= start:
            break
        if losses[start] - losses[end] > best:
            best, centre = losses[start] - losses[end], (steps[start] + steps[end]) / 2
            middle = min(range(start, end + 1), key=lambda k: abs(steps[k] - centre))
    return steps[middle]


def test_phase_change_check_passes_the_solution_and_names_the_slips():
    for seed in (0, 1, 2):
        assert check_phase_change_step(phase_change_solution, seed=seed)
    index_not_step = lambda steps, losses, window: steps.index(phase_change_solution(steps, losses, window))  # noqa: E731
    assert_fails_with(check_phase_change_step(index_not_step), "position in the list")
    window_end = lambda steps, losses, window: phase_change_solution(steps, losses, window) + window // 2  # noqa: E731
    assert_fails_with(check_phase_change_step(window_end), "ENDS")
    rise = lambda steps, losses, window: phase_change_solution(steps, [-v for v in losses], window)  # noqa: E731
    assert_fails_with(check_phase_change_step(rise), "RISES")


def test_a_hand_made_curve_has_its_drop_where_the_solution_says():
    steps, losses = [0, 100, 200, 300, 400, 500], [4.0, 4.0, 3.9, 1.0, 0.9, 0.9]  # the fall is between 200 and 300
    assert phase_change_solution(steps, losses, 200) == 200  # rows 100 and 300: 3.0 nats, the largest 200-step fall


# --- 4.2: one head removed by hand ---------------------------------------------------------------------

def without_head_solution(head_outputs, W_O, b_O, head):
    z = head_outputs.copy()
    z[head] = 0.0
    heads, seq, d_head = z.shape
    return z.transpose(1, 0, 2).reshape(seq, heads * d_head) @ W_O + b_O


def test_attention_without_head_check_passes_the_solution_and_names_the_slips():
    for seed in (0, 1):
        assert check_attention_without_head(without_head_solution, seed=seed)
    no_bias = lambda z, W_O, b_O, head: without_head_solution(z, W_O, b_O, head) - b_O  # noqa: E731
    assert_fails_with(check_attention_without_head(no_bias), "bias")
    kept = lambda z, W_O, b_O, head: without_head_solution(z, W_O, b_O, head) * 0 + (  # noqa: E731
        z.transpose(1, 0, 2).reshape(z.shape[1], -1) @ W_O + b_O)
    assert_fails_with(check_attention_without_head(kept), "every head kept")


def test_the_reference_is_the_models_own_attention_block_with_the_head_masked():
    encoder, trace = treebank_trace(0)
    layer, head = 2, 5
    attention = encoder.layers[layer].attention
    with torch.no_grad():
        mask = torch.ones(encoder.config.n_heads)
        mask[head] = 0.0
        want = attention(trace.hidden_states[layer], head_mask=mask).output[0].numpy()
    got = without_head_solution(trace.head_outputs[layer, 0].numpy(), attention.W_O.detach().numpy(),
                                attention.b_O.detach().numpy(), head)
    assert np.allclose(got, want, atol=2e-4)
    full = attention(trace.hidden_states[layer]).output[0].detach().numpy()
    assert not np.allclose(got, full, atol=1e-3)  # removing the head changes the output


# --- 4.3: how much choosing inflates a score -----------------------------------------------------------

def inflation_solution(scores, splits):
    out = []
    for split in splits:
        chosen = int(np.argmax(scores[split].mean(axis=0)))
        out.append(scores[split, chosen].mean() - scores[~split, chosen].mean())
    return np.array(out)


def test_selection_inflation_check_passes_the_solution_and_names_the_slips():
    for seed in (0, 1):
        assert check_selection_inflation(inflation_solution, seed=seed)
    assert_fails_with(check_selection_inflation(lambda s, sp: -inflation_solution(s, sp)), "sign")
    best_elsewhere = lambda scores, splits: np.array([  # noqa: E731
        scores[split].mean(axis=0).max() - scores[~split].mean(axis=0).max() for split in splits])
    assert_fails_with(check_selection_inflation(best_elsewhere), "OTHER items")


def test_choosing_on_the_real_scores_inflates_them():
    counts = treebank_relation_hits(0)
    r = counts.relations.index("det_noun")
    some = counts.pairs[:, r] > 0
    scores = counts.hits[some, r].reshape(int(some.sum()), -1) / counts.pairs[some, r][:, None]
    rng = np.random.default_rng(0)
    splits = np.array([rng.permutation(len(scores)) < len(scores) // 2 for _ in range(200)])
    assert inflation_solution(scores, splits).mean() > 0  # the winner's curse, on the real model


def without_head_reshaped_without_transpose(head_outputs, W_O, b_O, head):
    z = head_outputs.copy()
    z[head] = 0.0
    heads, seq, d_head = z.shape
    return z.reshape(seq, heads * d_head) @ W_O + b_O


def without_head_with_W_O_transposed(head_outputs, W_O, b_O, head):
    return without_head_solution(head_outputs, W_O.T, b_O, head)


def test_attention_without_head_names_a_reshape_without_transpose_and_W_O_transposed_on_hidden_seeds_too():
    assert_slip_named(check_attention_without_head, without_head_reshaped_without_transpose,
                      ["without moving the heads axis", "z.transpose(1, 0, 2)"], seeds=(0, 2))
    assert_slip_named(check_attention_without_head, without_head_with_W_O_transposed, ["You used W_O.T"],
                      seeds=(0, 2))
    assert check_attention_without_head(not_attempted).message.startswith("✗ Not attempted yet")
