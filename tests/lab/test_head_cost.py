"""The stored benchmark of section 3.7 (data/lab/head_cost.json, from scripts/bench_head_cost.py) against hand counts.

Times depend on the machine, so only their form is checked; the parameter counts and the memory a forward pass
must hold are counted by hand from the model's shape.
"""

import numpy as np

from mha.lab.checkpoints import load_json

BATCH, SEQ, D_MODEL, VOCAB = 32, 24, 32, 108  # the study's batch, the two-relation task's sequences, its model


def test_head_cost_file_is_verified_and_complete():
    cost = load_json("head_cost.json")  # checked against data/lab/manifest.json's sha256
    assert cost["head_counts"] == [1, 2, 4, 8, 16, 32]
    assert {"cpu", "torch", "threads"} <= set(cost["machine"]) and cost["machine"]["threads"] == 1
    for name in ("train_step_seconds", "forward_seconds"):
        repeats = np.array(cost[name]["repeats"])  # (head counts, repeats)
        assert repeats.shape == (6, cost["setting"]["repeats"]) and (repeats > 0).all()
        np.testing.assert_allclose(cost[name]["median"], np.median(repeats, axis=1))
        np.testing.assert_allclose(cost[name]["median_ratio_to_one_head"],
                                   np.median(repeats / repeats[:1], axis=1))


def test_parameters_and_peak_memory_agree_with_a_hand_count():
    cost = load_json("head_cost.json")
    # token embedding and unembedding, positions, W_Q, W_K, W_V, W_O with biases: the same for every head count
    by_hand = 2 * VOCAB * D_MODEL + SEQ * D_MODEL + 4 * (D_MODEL * D_MODEL + D_MODEL)
    assert cost["parameters"] == [by_hand] * 6
    heads = np.array(cost["head_counts"])
    attention_weights = BATCH * heads * SEQ * SEQ * 4  # float32 (batch, heads, seq, seq): alive at once in a forward
    forward = np.array(cost["forward_peak_bytes"])
    assert (forward >= attention_weights).all()
    assert forward[-1] - forward[0] >= attention_weights[-1] - attention_weights[0]  # 31 more maps
    assert (np.array(cost["train_step_peak_bytes"]) >= forward).all()  # a training step keeps them for backward


def test_the_attention_layers_times_are_complete_and_their_ratios_are_medians_of_each_repeats():
    layer = load_json("head_cost.json")["attention_layer"]
    settings = {(s["d_model"], s["seq_len"]): s for s in layer["settings"]}
    # the toy's width, MiniLM's and BERT-base's, each at the toy's 24 tokens, 128 and 512
    assert set(settings) == {(d, n) for d in (32, 384, 768) for n in (24, 128, 512)}
    for (d_model, _), setting in settings.items():
        counts = setting["head_counts"]
        assert counts[0] == 1 and counts == sorted(counts) and all(d_model % h == 0 for h in counts)
        assert (d_model == 32 and counts[-1] == 32) or (d_model > 32 and counts[-1] == 48)
        repeats = np.array(setting["forward_seconds"]["repeats"])  # (head counts, repeats)
        assert repeats.shape == (len(counts), layer["repeats"]) and (repeats > 0).all()
        np.testing.assert_allclose(setting["forward_seconds"]["median"], np.median(repeats, axis=1))
        np.testing.assert_allclose(setting["forward_seconds"]["median_ratio_to_one_head"],
                                   np.median(repeats / repeats[:1], axis=1))
