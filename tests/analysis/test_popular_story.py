"""The popular story of head roles (3.1): fox-sentence weights, verdicts and the sentence bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from mha.analysis.head_roles.role_table import heads_above_thresholds, sentence_head_scores
from mha.analysis.popular_story import VERDICTS, fox_role_weights, role_verdict, unit_bootstrap

FOX_TOKENS = ["[CLS]", "the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", ".", "[SEP]"]


def test_fox_role_weights_read_the_right_cells():
    n = len(FOX_TOKENS)
    attention = np.full((1, 2, n, n), 1.0 / n)
    attention[0, 0] = np.eye(n)[[max(i - 1, 0) for i in range(n)]]  # head 0: previous token
    weights = fox_role_weights(attention, FOX_TOKENS)
    assert weights["local"][0, 0] == pytest.approx(1.0)  # quick -> the
    assert weights["subject"][0, 0] == pytest.approx(1.0)  # jumps -> fox, the previous word
    assert weights["related words"][0, 0] == pytest.approx(0.0)
    assert weights["punctuation and special"][0, 1] == pytest.approx(3 / n)  # uniform: 3 fixed tokens of n
    assert weights["punctuation alone"][0, 1] == pytest.approx(1 / n)  # uniform: the full stop alone
    sink = np.zeros((1, 1, n, n))
    sink[..., 0] = 1.0  # every row on [CLS]: a sink, no punctuation head
    assert fox_role_weights(sink, FOX_TOKENS)["punctuation and special"][0, 0] == pytest.approx(1.0)
    assert fox_role_weights(sink, FOX_TOKENS)["punctuation alone"][0, 0] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="not in"):
        fox_role_weights(attention, ["[CLS]"] + ["x"] * (n - 2) + ["[SEP]"])


def test_role_verdict_follows_its_rule():
    assert role_verdict(0.9, 0.6, 0.5) == "exists"
    assert role_verdict(0.9, 0.4, 0.5) == "exists only for this sentence"
    assert role_verdict(0.1, 0.4, 0.5) == "not found"
    assert role_verdict(0.1, 0.4, 0.5, sentence_threshold=0.05) == "exists only for this sentence"
    assert set(VERDICTS) == {"exists", "exists only for this sentence", "not found"}
    with pytest.raises(ValueError, match="number"):
        role_verdict("high", 0.4, 0.5)


def test_unit_bootstrap_brackets_the_mean_and_is_seeded():
    values = np.arange(20, dtype=float)
    statistic = lambda w: np.array([w @ values / w.sum()])  # noqa: E731
    low, high = unit_bootstrap(statistic, 20, seed=0)
    assert low[0] < values.mean() < high[0]
    again = unit_bootstrap(statistic, 20, seed=0)
    assert again[0][0] == low[0] and again[1][0] == high[0]
    with pytest.raises(ValueError, match="n_units"):
        unit_bootstrap(statistic, 1)


def record(n, cls_weight):
    """A one-head map whose rows put cls_weight on [CLS] and the rest on themselves."""
    tokens = ["[CLS]"] + ["w"] * (n - 2) + ["[SEP]"]
    attention = np.eye(n) * (1 - cls_weight)
    attention[:, 0] += cls_weight
    return {"attention": attention[None, None], "tokens": tokens, "word_ids": [None, *range(n - 2), None]}


def test_sentence_scores_and_threshold_counts():
    records = [record(5, 0.8), record(10, 0.2)]
    scores = sentence_head_scores(records)
    assert scores["cls_share"][:, 0, 0] == pytest.approx([0.8 + 0.2 / 5, 0.2 + 0.8 / 10])  # [CLS] row looks at itself
    assert scores["content_same_token_share"][0, 0, 0] == pytest.approx(0.2)
    assert scores["rows"].tolist() == [5, 10]
    found = heads_above_thresholds(scores["cls_share"][:, 0], (0.3, 0.9), rows=scores["rows"], n_resamples=200)
    pooled = (5 * 0.84 + 10 * 0.28) / 15
    assert found["heads"].tolist() == [int(pooled >= 0.3), 0]
    assert (found["low"] <= found["heads"]).all() and (found["heads"] <= found["high"]).all()
    with pytest.raises(ValueError, match="rows"):
        heads_above_thresholds(scores["cls_share"], (0.5,), rows=[1, 2, 3])
