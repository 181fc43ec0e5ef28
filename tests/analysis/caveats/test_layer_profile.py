"""Per-layer profiles and verdicts on the depth claim (section 4.3, mha.analysis.caveats.layer_profile)."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from mha.analysis.caveats.layer_profile import (
    LAYER_CLAIMS,
    VERDICTS,
    claim_table,
    claim_verdict,
    depth_trend,
    held_out_syntactic_gain,
    relation_accuracy,
    selection_report_split,
    sentence_scores,
    trend_verdict,
    word_key_distance,
)
from mha.analysis.head_roles.role_table import head_role_table
from mha.analysis.statistics import bootstrap_interval, percentile_interval, resampled_means, resampled_ratios
from mha.core.resampling import bootstrap_counts
from mha.corpora.annotation import AnnotatedSentence, Relation
from mha.pretrained.attention_record import AttentionRecord


def test_the_split_is_disjoint_complete_seeded_and_refuses_bad_sizes():
    selection, report = selection_report_split(11, seed=3)
    assert len(selection) == 6 and len(report) == 5
    assert sorted(np.concatenate([selection, report]).tolist()) == list(range(11))
    again = selection_report_split(11, seed=3)
    assert np.array_equal(again[0], selection) and not np.array_equal(selection_report_split(11, seed=4)[0], selection)
    with pytest.raises(ValueError, match="n_items must be a whole number of at least 2"):
        selection_report_split(1)
    with pytest.raises(ValueError, match="strictly between"):
        selection_report_split(10, selection_fraction=1.0)


def test_resampled_means_give_the_same_interval_as_the_statistics_module():
    values = np.random.default_rng(0).normal(size=(30, 4))
    counts = bootstrap_counts(30, 500, seed=2)
    assert counts.shape == (500, 30) and np.all(counts.sum(axis=1) == 30)
    low, high = percentile_interval(resampled_means(values, counts))
    expected = bootstrap_interval(values, n_resamples=500, seed=2)
    assert np.allclose(low, expected[0]) and np.allclose(high, expected[1])


def test_resampled_ratios_pool_sums_rather_than_averaging_ratios():
    numerators, denominators = np.array([1.0, 10.0]), np.array([1.0, 20.0])
    counts = np.array([[1.0, 1.0], [2.0, 0.0]])
    assert np.allclose(resampled_ratios(numerators, denominators, counts), [11 / 21, 1.0])
    per_head = np.stack([numerators, 2 * numerators], axis=1)  # (items, heads) over (items,) denominators
    assert resampled_ratios(per_head, denominators, counts).shape == (2, 2)
    with pytest.raises(ValueError, match="items"):
        resampled_ratios(numerators, denominators, np.ones((3, 5)))


def _record(words, relations, attention_targets, n_layers=2, n_heads=2):
    """A record whose head (0, 0) attends from each word to attention_targets[word]; the others uniformly."""
    n = len(words) + 2  # [CLS] words [SEP]
    attention = np.full((n_layers, n_heads, n, n), 1.0 / n)
    attention[0, 0] = 0.0
    for word, target in enumerate(attention_targets):
        attention[0, 0, word + 1, target + 1] = 1.0
    attention[0, 0, 0, 0] = attention[0, 0, n - 1, n - 1] = 1.0
    tokens = ["[CLS]", *words, "[SEP]"]
    word_ids = [None, *range(len(words)), None]
    return AttentionRecord(attention, tokens, word_ids, AnnotatedSentence(tuple(words), tuple(relations)))


def test_sentence_scores_pool_to_the_role_tables_own_accuracy():
    records = [
        _record(["the", "cat", "sleeps"], [Relation("det_noun", 0, 1)], [1, 0, 1]),
        _record(["a", "big", "dog", "barks"], [Relation("det_noun", 0, 2)], [1, 0, 2, 3]),
        _record(["the", "dogs"], [Relation("det_noun", 0, 1)], [1, 0]),
    ]
    scores = sentence_scores(records, columns=("cls_share", "entropy_ratio"))
    assert scores.values["cls_share"].shape == (3, 2, 2)
    accuracy, baseline, best_offset = relation_accuracy(scores.relation_hits, scores.relation_counts,
                                                        scores.offset_counts)
    table = head_role_table(records)
    det_noun = scores.prefixes.index("det_noun")
    assert np.allclose(accuracy[det_noun].ravel(), table["det_noun_acc"].to_numpy())
    assert accuracy[det_noun, 0, 0] == pytest.approx(2 / 3)  # the second sentence's determiner looks at "big"
    assert baseline[det_noun] == pytest.approx(table["det_noun_baseline_acc"].iloc[0])
    assert scores.offsets[best_offset[det_noun]] == 1
    assert np.allclose(scores.values["cls_share"][:, 0, 0], [1 / 5, 1 / 6, 1 / 4])  # only [CLS] looks at [CLS]
    assert scores.n_sentences == 3


def test_held_out_gain_is_chosen_on_selection_and_measured_on_report():
    records = [_record(["the", "cat", "sleeps"], [Relation("det_noun", 0, 1)], [1, 0, 1]) for _ in range(6)]
    records += [_record(["a", "big", "dog"], [Relation("det_noun", 0, 2)], [2, 0, 1]) for _ in range(6)]
    scores = sentence_scores(records, columns=())
    selection, report = np.arange(0, 12, 2), np.arange(1, 12, 2)
    result = held_out_syntactic_gain(scores, selection, report, min_count=1, n_resamples=50)
    assert result.gain.shape == (2, 2) and result.resampled.shape == (50, 2, 2)
    # head (0, 0) finds every noun; the best single offset (+1) is right for half of the pairs
    assert result.gain[0, 0] == pytest.approx(0.5) and result.relation[0, 0] == "det_noun"
    with pytest.raises(ValueError, match="share sentences"):
        held_out_syntactic_gain(scores, selection, selection)


def test_depth_trend_and_the_verdict_rule():
    rising = np.linspace(0, 1, 6)
    trend = depth_trend(rising, np.tile(rising, (10, 1)))
    assert trend["difference"] == pytest.approx(0.8) and trend["rank_correlation"] == pytest.approx(1.0)
    assert trend_verdict(0.1, 0.3, 1.0, +1) == "holds"
    assert trend_verdict(0.1, 0.3, 0.2, +1) == "holds with a qualifier"
    assert trend_verdict(-0.1, 0.3, 1.0, +1) == "fails on this model"
    assert trend_verdict(-0.3, -0.1, -0.9, -1) == "holds"
    assert trend_verdict(0.1, 0.3, 1.0, -1) == VERDICTS[2]
    with pytest.raises(ValueError, match="direction"):
        trend_verdict(0.1, 0.3, 1.0, 0)
    with pytest.raises(ValueError, match="disjoint"):
        depth_trend(rising, np.tile(rising, (10, 1)), early=(0, 1), late=(1, 2))


def test_claim_table_gives_one_verdict_per_claim():
    rng = np.random.default_rng(0)
    profiles = {c.metric: (np.arange(6.0) * c.direction, np.arange(6.0) * c.direction + rng.normal(0, 0.01, (20, 6)))
                for c in LAYER_CLAIMS}
    table = claim_table(profiles)
    assert list(table["metric"]) == [c.metric for c in LAYER_CLAIMS] and set(table["verdict"]) == {"holds"}
    with pytest.raises(ValueError, match="no profile"):
        claim_table({})


def _toy_record(seed: int, seq: int = 6) -> AttentionRecord:
    """A record of 2 layers x 3 heads over [CLS] w w w w [SEP], rows of random weights summing to 1."""
    rng = np.random.default_rng(seed)
    attention = rng.random((2, 3, seq, seq))
    attention /= attention.sum(-1, keepdims=True)
    tokens = ["[CLS]"] + [f"w{i}" for i in range(seq - 2)] + ["[SEP]"]
    return AttentionRecord(attention=attention, tokens=tokens, word_ids=[None, *range(seq - 2), None])


def test_word_key_distance_renormalises_each_row_over_the_words_by_hand():
    records = [_toy_record(0), _toy_record(1, seq=5)]
    distances = word_key_distance(records)
    assert distances.shape == (2, 2, 3)
    for r, record in enumerate(records):  # the oracle: plain loops over layers, heads, rows and word keys
        seq = len(record.tokens)
        for layer in range(2):
            for head in range(3):
                rows = []
                for i in range(seq):
                    weights = {j: record.attention[layer, head, i, j] for j in range(1, seq - 1)}
                    rows.append(sum(w * abs(i - j) for j, w in weights.items()) / sum(weights.values()))
                assert distances[r, layer, head] == pytest.approx(sum(rows) / seq)


def test_word_key_distance_equals_the_role_tables_distance_when_no_weight_is_on_special_tokens():
    record = _toy_record(2)
    attention = record.attention.copy()
    attention[..., [0, -1]] = 0.0
    attention /= attention.sum(-1, keepdims=True)
    clean = AttentionRecord(attention=attention, tokens=record.tokens, word_ids=record.word_ids)
    table = head_role_table([clean])
    assert word_key_distance([clean])[0].ravel() == pytest.approx(table["mean_distance"].to_numpy())
    assert not np.allclose(word_key_distance([record])[0].ravel(), head_role_table([record])["mean_distance"])


def test_depth_trend_interval_of_the_rank_correlation_is_scipys_spearman_per_resample():
    rng = np.random.default_rng(4)
    resampled = np.array([0.0, 1.0, 0.5, 2.0, 1.8, 3.0]) + rng.normal(0, 0.4, (200, 6))
    trend = depth_trend(resampled.mean(axis=0), resampled)
    oracle = [spearmanr(np.arange(6), row)[0] for row in resampled]
    assert (trend["rank_low"], trend["rank_high"]) == pytest.approx(tuple(np.percentile(oracle, [2.5, 97.5])))
    assert trend["rank_low"] < 0.8 < trend["rank_correlation"] <= trend["rank_high"]


def test_claim_verdict_joins_the_parts_by_its_rule():
    assert claim_verdict({"position": "holds", "syntax": "holds"}) == ("holds", None)
    assert claim_verdict({"position": "holds", "syntax": "holds with a qualifier", "long range": "holds with a "
                          "qualifier"}, ["meaning"]) == (
        "holds with a qualifier", "syntax and long range hold only with a qualifier; meaning not tested")
    assert claim_verdict({"position": "holds"}, ["meaning"]) == ("holds with a qualifier", "meaning not tested")
    assert claim_verdict({"position": "holds", "syntax": "fails on this model"}, ["meaning"]) == (
        "fails on this model", "syntax fails")
    with pytest.raises(ValueError, match="not among"):
        claim_verdict({"position": "maybe"})
    with pytest.raises(ValueError, match="empty"):
        claim_verdict({})
