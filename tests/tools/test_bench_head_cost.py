"""scripts/bench_head_cost.py's bookkeeping: the ratios it stores and the order it measures the layer's arms in.

The times themselves depend on the machine; what is tested here is what the script does with them, against numpy
and a hand count, with the clock replaced by a fake one.
"""

import numpy as np
import pytest

from scripts import bench_head_cost


def test_the_summary_is_the_median_of_each_repeats_ratio_to_one_head():
    times = {1: [2.0, 4.0, 3.0], 4: [3.0, 4.0, 9.0], 16: [8.0, 6.0, 3.0]}  # seconds, three repeats
    summary = bench_head_cost.summary(times)
    repeats = np.array(list(times.values()))  # (head counts, repeats)
    np.testing.assert_allclose(summary["median"], [3.0, 4.0, 6.0])
    # per repeat 4 heads: 1.5, 1, 3 -> 1.5; 16 heads: 4, 1.5, 1 -> 1.5 (not 6 / 3 = 2, the ratio of the medians)
    np.testing.assert_allclose(summary["median_ratio_to_one_head"], [1.0, 1.5, 1.5])
    np.testing.assert_allclose(summary["median_ratio_to_one_head"], np.median(repeats / repeats[:1], axis=1))
    assert summary["repeats"] == list(times.values())


@pytest.mark.parametrize("d_model, expected", [(32, [1, 2, 4, 8, 16, 32]), (384, [1, 2, 4, 8, 12, 16, 24, 32, 48]),
                                               (768, [1, 2, 4, 8, 12, 16, 24, 32, 48])])
def test_the_layers_head_counts_are_those_that_divide_d_model(d_model, expected):
    assert bench_head_cost.layer_head_counts(d_model) == expected


def test_each_repeat_measures_every_arm_once_in_a_rotated_order(monkeypatch):
    monkeypatch.setattr(bench_head_cost, "LAYER_SETTINGS", ((8, 3, 2), (4, 5, 1)))
    monkeypatch.setattr(bench_head_cost, "LAYER_HEAD_COUNTS", (1, 2, 4))
    order = []

    def fake_seconds(layer, inputs, calls):  # one head takes 1 s, h heads h s: the ratios are known
        order.append((layer.d_model, inputs.shape[1], layer.n_heads, calls))
        return float(layer.n_heads)

    monkeypatch.setattr(bench_head_cost, "layer_seconds", fake_seconds)
    settings = bench_head_cost.measure_layers(repeats=3)
    arms = [(8, 3, 1), (8, 3, 2), (8, 3, 4), (4, 5, 1), (4, 5, 2), (4, 5, 4)]
    measured = [arm[:3] for arm in order[-3 * len(arms):]]  # after the warm-up
    for repeat in range(3):
        assert measured[repeat * 6:(repeat + 1) * 6] == arms[repeat:] + arms[:repeat]
    assert [(s["d_model"], s["seq_len"], s["batch_size"], s["head_counts"]) for s in settings] == \
        [(8, 3, 2, [1, 2, 4]), (4, 5, 1, [1, 2, 4])]
    for setting in settings:
        assert setting["calls_per_measurement"] == 1  # a call of one head takes 1 s, more than the target
        np.testing.assert_allclose(setting["forward_seconds"]["median_ratio_to_one_head"], [1.0, 2.0, 4.0])
