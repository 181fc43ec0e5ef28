"""Every check of sections 4.3 ("Layer dependence") and 4.4 ("Probing and its limits") passes the solution and
fails, with a useful message, on the mistakes learners really make."""

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from slips import assert_key_passes_and_stub_fails, assert_slip_named

from mha.exercises.layers_and_probing import (
    check_control_labels,
    check_depth_trend,
    check_held_out_gain,
    check_pooled_ratio_interval,
    check_probe_accuracy,
    check_word_features,
)


def not_attempted(*args, **kwargs):
    raise NotImplementedError


def assert_fails_with(result, *words):
    assert not result and result.message.startswith("✗"), result.message
    for word in words:
        assert word.lower() in result.message.lower(), f"{word!r} missing from: {result.message}"


# --- layer dependence ------------------------------------------------------------------------------

def pooled_interval_solution(numerators, denominators, n_resamples, seed):
    n = len(numerators)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    ratios = numerators[draws].sum(axis=1) / denominators[draws].sum(axis=1)
    low, high = np.quantile(ratios, [0.025, 0.975])
    return low, high


def pooled_interval_per_item(numerators, denominators, n_resamples, seed):
    n = len(numerators)
    draws = np.random.default_rng(seed).integers(0, n, size=(n_resamples, n))
    low, high = np.quantile((numerators / denominators)[draws].mean(axis=1), [0.025, 0.975])
    return low, high


def test_pooled_ratio_interval():
    assert check_pooled_ratio_interval(pooled_interval_solution)
    assert_fails_with(check_pooled_ratio_interval(pooled_interval_per_item), "pool")
    assert_fails_with(check_pooled_ratio_interval(not_attempted), "Not attempted")
    assert_fails_with(check_pooled_ratio_interval(lambda *args: 0.5), "pair")


def held_out_gain_solution(selection_accuracy, selection_baseline, report_accuracy, report_baseline):
    choice = (selection_accuracy - selection_baseline[:, None]).argmax(axis=0)
    return report_accuracy[choice, np.arange(selection_accuracy.shape[1])] - report_baseline[choice]


def held_out_gain_on_report(selection_accuracy, selection_baseline, report_accuracy, report_baseline):
    return held_out_gain_solution(report_accuracy, report_baseline, report_accuracy, report_baseline)


def test_held_out_gain():
    assert check_held_out_gain(held_out_gain_solution)
    assert_fails_with(check_held_out_gain(held_out_gain_on_report), "selection set")
    by_accuracy = lambda sa, sb, ra, rb: held_out_gain_solution(sa, 0 * sb, ra, rb)  # noqa: E731
    assert_fails_with(check_held_out_gain(by_accuracy), "gain")


def depth_trend_solution(layer_values, early, late):
    return (float(layer_values[late].mean() - layer_values[early].mean()),
            float(spearmanr(np.arange(len(layer_values)), layer_values)[0]))


def test_depth_trend():
    assert check_depth_trend(depth_trend_solution)
    reversed_difference = lambda v, e, l: (-depth_trend_solution(v, e, l)[0], depth_trend_solution(v, e, l)[1])  # noqa: E731
    assert_fails_with(check_depth_trend(reversed_difference), "early minus late")
    pearson = lambda v, e, l: (depth_trend_solution(v, e, l)[0], float(pearsonr(np.arange(len(v)), v)[0]))  # noqa: E731
    assert_fails_with(check_depth_trend(pearson), "ranks")


# --- probing and its limits ------------------------------------------------------------------------

def word_features_solution(head_outputs, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    positions = [[t for t, w in enumerate(word_ids) if w == word] for word in range(n_words)]
    return np.stack([head_outputs[:, :, p].mean(axis=2) for p in positions], axis=2)


def word_features_first_piece(head_outputs, word_ids):
    n_words = max(w for w in word_ids if w is not None) + 1
    firsts = [word_ids.index(word) for word in range(n_words)]
    return head_outputs[:, :, firsts]


def test_word_features():
    assert check_word_features(word_features_solution)
    assert_fails_with(check_word_features(word_features_first_piece), "first piece")


def control_labels_solution(word_types, labels, seed):
    types, type_of_word = np.unique(word_types, return_inverse=True)
    return np.random.default_rng(seed).choice(labels, size=len(types))[type_of_word]


def control_labels_uniform(word_types, labels, seed):
    types, type_of_word = np.unique(word_types, return_inverse=True)
    return np.random.default_rng(seed).choice(np.unique(labels), size=len(types))[type_of_word]


def test_control_labels():
    assert check_control_labels(control_labels_solution)
    assert_fails_with(check_control_labels(control_labels_uniform), "distribution")
    per_occurrence = lambda t, labels, seed: np.random.default_rng(seed).choice(labels, size=len(labels))  # noqa: E731
    assert_fails_with(check_control_labels(per_occurrence), "share one label")


def probe_accuracy_solution(train_features, train_labels, test_features, test_labels):
    scaler = StandardScaler().fit(train_features)
    probe = LogisticRegression().fit(scaler.transform(train_features), train_labels)
    return float((probe.predict(scaler.transform(test_features)) == test_labels).mean())


def probe_accuracy_on_training_words(train_features, train_labels, test_features, test_labels):
    return probe_accuracy_solution(train_features, train_labels, train_features, train_labels)


def test_probe_accuracy():
    assert check_probe_accuracy(probe_accuracy_solution)
    assert_fails_with(check_probe_accuracy(probe_accuracy_on_training_words), "training words")


# --- named slips, on the public case and hidden seeds ------------------------------------------------

def pooled_interval_percentile_of_fractions(numerators, denominators, n_resamples, seed):
    draws = np.random.default_rng(seed).integers(0, len(numerators), size=(n_resamples, len(numerators)))
    low, high = np.percentile(numerators[draws].sum(axis=1) / denominators[draws].sum(axis=1), [0.025, 0.975])
    return low, high


def depth_trend_of_sums(layer_values, early, late):
    return (float(layer_values[late].sum() - layer_values[early].sum()),
            depth_trend_solution(layer_values, early, late)[1])


def probe_accuracy_scaled(how):
    """The learner's probe on unscaled features (``how`` "none") or with the test words scaled on their own."""
    def my_probe_accuracy(train_features, train_labels, test_features, test_labels):
        if how == "none":
            probe = LogisticRegression().fit(train_features, train_labels)
            return float((probe.predict(test_features) == test_labels).mean())
        probe = LogisticRegression().fit(StandardScaler().fit_transform(train_features), train_labels)
        return float((probe.predict(StandardScaler().fit_transform(test_features)) == test_labels).mean())
    return my_probe_accuracy


@pytest.mark.parametrize("check, wrong, words", [
    (check_pooled_ratio_interval, pooled_interval_percentile_of_fractions, ["np.percentile takes percents"]),
    (check_depth_trend, depth_trend_of_sums, ["Case 1", "difference of SUMS"]),
    (check_probe_accuracy, probe_accuracy_scaled("none"), ["the probe on the raw features"]),
    (check_probe_accuracy, probe_accuracy_scaled("own"), ["with their OWN mean and deviation"]),
], ids=["percentile of fractions", "sums", "unscaled", "own scaler"])
def test_named_slips_on_hidden_seeds(check, wrong, words):
    assert_slip_named(check, wrong, words, seeds=(0, 1, 2, 3))


@pytest.mark.parametrize("check, key", [(check_pooled_ratio_interval, pooled_interval_solution),
                                        (check_depth_trend, depth_trend_solution),
                                        (check_probe_accuracy, probe_accuracy_solution)],
                         ids=lambda value: getattr(value, "__name__", ""))
def test_the_key_passes_on_several_seeds_and_a_stub_is_not_attempted(check, key):
    assert_key_passes_and_stub_fails(check, key)
