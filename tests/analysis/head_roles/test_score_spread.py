"""The four scores a typed sentence is read by on the website, and their spread over treebank sentences."""

import numpy as np
import pytest

from mha.analysis.head_roles.role_table import sentence_head_scores
from mha.analysis.head_roles.score_spread import SPREAD_QUANTILES, SPREAD_SCORES, score_spread
from mha.pretrained.attention_record import AttentionRecord


def one_head_record(weights, tokens, word_ids):
    return AttentionRecord(np.asarray(weights, dtype=float)[None, None], tokens, word_ids)


def test_previous_token_and_strongest_link_by_hand():
    # [CLS] the dog ##s bark [SEP]; "dog" and "##s" are one word
    tokens = ["[CLS]", "the", "dog", "##s", "bark", "[SEP]"]
    word_ids = [None, 0, 1, 1, 2, None]
    weights = np.full((6, 6), 0.0)
    weights[:, 0] = 0.2
    weights[1, 0] += 0.8          # "the" -> [CLS] (its previous token)
    weights[2, 1] = 0.5           # "dog" -> "the"
    weights[2, 2] = 0.3
    weights[3, 2] = 0.7           # "##s" -> "dog": same word, so not a link
    weights[3, 5] = 0.1
    weights[4, 3] = 0.6           # "bark" -> "##s": previous token, and a link between words
    weights[4, 4] = 0.2
    weights[0, 0] = 1.0
    weights[5, 5] = 0.8
    assert np.allclose(weights.sum(-1), 1.0)
    scores = sentence_head_scores([one_head_record(weights, tokens, word_ids)])
    # content rows 1..4: previous weights 1.0 (row 1 -> [CLS]), 0.5, 0.7, 0.6
    assert scores["content_prev_token_share"][0, 0, 0] == pytest.approx((1.0 + 0.5 + 0.7 + 0.6) / 4)
    # links between different words among content tokens: 0.5 (dog -> the), 0.6 (bark -> ##s); 0.7 is within "dogs"
    assert scores["strongest_link"][0, 0, 0] == pytest.approx(0.6)
    assert scores["cls_share"][0, 0, 0] == pytest.approx(weights[:, 0].mean())
    assert scores["content_same_token_share"][0, 0, 0] == pytest.approx((0 + 0.3 + 0 + 0.2) / 4)


def test_one_word_sentence_has_no_link():
    weights = np.array([[1.0, 0, 0], [0.5, 0.5, 0], [0, 0, 1.0]])
    scores = sentence_head_scores([one_head_record(weights, ["[CLS]", "hi", "[SEP]"], [None, 0, None])])
    assert scores["strongest_link"][0, 0, 0] == 0.0


def test_spread_is_the_quantiles_of_each_head_over_sentences():
    rng = np.random.default_rng(0)
    values = {name: rng.random((40, 2, 3)) for name in SPREAD_SCORES}
    spread = score_spread(values)
    assert spread["sentences"] == 40 and spread["quantiles"] == list(SPREAD_QUANTILES)
    for name in SPREAD_SCORES:
        stored = np.array(spread["scores"][name])  # (layers, heads, quantiles)
        assert stored.shape == (2, 3, 21)
        # by hand: the median of 40 values is the mean of the 20th and 21st smallest; the ends are min and max
        ordered = np.sort(values[name], axis=0)
        assert np.allclose(stored[..., 10], (ordered[19] + ordered[20]) / 2, atol=1e-4)
        assert np.allclose(stored[..., 0], ordered[0], atol=1e-4) and np.allclose(
            stored[..., -1], ordered[-1], atol=1e-4
        )


@pytest.mark.parametrize("bad, message", [
    ({"content_prev_token_share": np.zeros((3, 2, 2))}, "no scores named"),
    ({name: np.zeros((0, 2, 2)) for name in SPREAD_SCORES}, "at least one sentence"),
    ({name: np.zeros((3, 2)) for name in SPREAD_SCORES}, "(sentences, layers, heads)"),
])
def test_spread_refuses_what_it_cannot_summarise(bad, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        score_spread(bad)
