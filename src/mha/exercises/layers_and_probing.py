"""Checks for the exercises of chapter 4's sections "Layer dependence" (4.3) and "Probing and its limits" (4.4).

Layer dependence: :func:`check_pooled_ratio_interval`, :func:`check_held_out_gain`, :func:`check_depth_trend`,
:func:`check_selection_inflation` (on the real model's per-sentence accuracies, drawn by the seed through
:func:`mha.analysis.head_roles.seeded_sentences.treebank_relation_hits`).
Probing and its limits: :func:`check_word_features`, :func:`check_control_labels`, :func:`check_probe_accuracy`.

Each check runs the learner's function on small seeded inputs (no model needed), compares with the package's own
implementation (:mod:`mha.analysis.caveats.layer_profile`, :mod:`mha.analysis.caveats.probing`,
:mod:`mha.pretrained.word_maps`), and names the slip when the answer matches a typical wrong one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from scipy.stats import pearsonr

from mha.analysis.caveats.layer_profile import depth_trend
from mha.analysis.caveats.probing import control_labels, fit_probe
from mha.analysis.head_roles.seeded_sentences import RELATIONS, treebank_relation_hits
from mha.analysis.statistics import percentile_interval, resampled_ratios
from mha.core.resampling import bootstrap_counts
from mha.core.validation import check_seed
from mha.pretrained.word_maps import word_units

from .checking import (
    AnswerError,
    CheckResult,
    answer_tuple,
    compare_array,
    compare_number,
    describe_difference,
    matches,
    run_check,
)

__all__ = [
    "check_pooled_ratio_interval",
    "check_held_out_gain",
    "check_depth_trend",
    "check_word_features",
    "check_control_labels",
    "check_probe_accuracy",
    "check_selection_inflation",
]


# --- Layer dependence --------------------------------------------------------------------------------

def _pooled_interval(numerators, denominators, n_resamples, seed) -> np.ndarray:
    counts = bootstrap_counts(len(numerators), n_resamples, seed)
    return np.array(percentile_interval(resampled_ratios(numerators, denominators, counts)))


def check_pooled_ratio_interval(interval_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(numerators (n,), denominators (n,), n_resamples, seed) -> (low, high)``: 95% interval of sum / sum."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n, n_resamples, draw_seed in ((5, 200, 0), (12, 500, 1), (40, 1000, 2), (60, 300, 7)):
            denominators = rng.integers(1, 12, size=n).astype(float)  # gold pairs per sentence: 1 to 11
            numerators = rng.binomial(denominators.astype(int), rng.uniform(0.2, 0.9)).astype(float)
            label = f"{n} sentences, {n_resamples} resamples, seed {draw_seed}"
            case = (numerators, denominators, n_resamples, draw_seed)
            yield label, (numerators.copy(), denominators.copy(), n_resamples, draw_seed), {}, case

    def compare(got, case) -> str | None:
        numerators, denominators, n_resamples, draw_seed = case
        low, high = answer_tuple(got, ["low", "high"])
        expected = _pooled_interval(numerators, denominators, n_resamples, draw_seed)
        answer = np.array([_scalar(low, "low"), _scalar(high, "high")])
        problem = describe_difference("(low, high)", answer, expected)
        if problem is None:
            return None
        draws = np.random.default_rng(draw_seed).integers(0, len(numerators), size=(n_resamples, len(numerators)))
        per_item = (numerators / denominators)[draws].mean(axis=1)
        if matches(answer, np.quantile(per_item, [0.025, 0.975])):
            return problem + (" That is the mean of each sentence's own ratio: pool instead, sum the numerators and "
                              "the denominators of a resample and divide the two sums.")
        pooled = numerators[draws].sum(axis=1) / denominators[draws].sum(axis=1)
        if matches(answer, np.quantile(pooled, [0.05, 0.95])):
            return problem + " Those are the 5th and 95th percentiles: a 95% interval leaves 2.5% in each tail."
        return compare_array(answer, expected, {"fractions": (np.percentile(pooled, [0.025, 0.975]), "np.percentile "
                             "takes percents (2.5, 97.5), not fractions: use np.quantile(ratios, [0.025, 0.975]).")},
                             "(low, high)")

    return run_check(interval_fn, cases(), compare, "gives the pooled ratio's bootstrap interval")


def _scalar(value, name: str) -> float:
    array = np.asarray(value.detach() if hasattr(value, "detach") else value)
    if array.dtype.kind not in "biuf" or array.size != 1:
        raise AnswerError(f"{name} should be one number, got {type(value).__name__} {str(value)[:40]!r}.")
    return float(array.reshape(()))


def _held_out_gain(selection_accuracy, selection_baseline, report_accuracy, report_baseline) -> np.ndarray:
    choice = (selection_accuracy - selection_baseline[:, None]).argmax(axis=0)  # (heads,)
    heads = np.arange(selection_accuracy.shape[1])
    return report_accuracy[choice, heads] - report_baseline[choice]


def check_held_out_gain(gain_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(selection_accuracy (relations, heads), selection_baseline (relations,), report_accuracy, report_baseline)
    -> (heads,)``: each head's relation chosen by its selection gain, its gain measured on the report set."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for relations, heads in ((2, 3), (4, 6), (6, 12), (14, 72)):
            baselines = rng.uniform(0.1, 0.7, size=(2, relations))
            accuracies = np.clip(baselines[:, :, None] + rng.normal(0, 0.15, size=(2, relations, heads)), 0, 1)
            accuracies[1] = np.clip(accuracies[0] + rng.normal(0, 0.1, size=(relations, heads)), 0, 1)  # related
            args = (accuracies[0], baselines[0], accuracies[1], baselines[1])
            yield f"{relations} relations, {heads} heads", tuple(a.copy() for a in args), {}, args

    def compare(got, args) -> str | None:
        selection_accuracy, selection_baseline, report_accuracy, report_baseline = args
        slips = {
            "chosen on report": (_held_out_gain(report_accuracy, report_baseline, report_accuracy, report_baseline),
                                 "You chose each head's relation on the report set: choose on the selection set, "
                                 "so that the report set grades a choice it did not make."),
            "chosen by accuracy": (_held_out_gain(selection_accuracy, 0 * selection_baseline, report_accuracy,
                                                  report_baseline),
                                   "You chose by accuracy alone; choose by accuracy minus the baseline (the gain), "
                                   "since some relations are easy for any fixed offset."),
            "accuracy returned": (_held_out_gain(selection_accuracy, selection_baseline, report_accuracy,
                                                 0 * report_baseline),
                                  "That is the report accuracy; subtract the report baseline of the same relation."),
        }
        expected = _held_out_gain(*args)
        return compare_array(got, expected, slips, "the report gains")

    return run_check(gain_fn, cases(), compare, "chooses on one set and reports on the other")


def check_depth_trend(trend_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(layer_values (layers,), early, late) -> (difference, rank_correlation)``: late minus early, Spearman."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        yield "6 layers rising steadily", (np.linspace(0.1, 0.6, 6), [0, 1], [4, 5]), {}, None
        values = rng.uniform(size=6)
        yield "6 random layer values", (values, [0, 1], [4, 5]), {}, None
        values = np.array([0.1, 0.5, 0.45, 0.3, 0.2, 0.15]) ** 3  # a peak in the middle, uneven steps
        yield "6 layers with a middle peak", (values, [0], [5]), {}, None
        values = rng.uniform(size=12)
        yield "12 layers, early 0-3, late 8-11", (values, [0, 1, 2, 3], [8, 9, 10, 11]), {}, None

    def run_cases() -> Iterator:
        for label, args, kwargs, _ in cases():
            values, early, late = args
            yield label, (values.copy(), list(early), list(late)), kwargs, args

    def compare(got, args) -> str | None:
        values, early, late = args
        difference, rank_correlation = answer_tuple(got, ["difference", "rank_correlation"])
        trend = depth_trend(values, np.tile(values, (2, 1)), early=early, late=late)
        problem = compare_number(difference, trend["difference"], {
            "reversed": (-trend["difference"], "That is early minus late; the trend is late minus early."),
            "sums": (values[late].sum() - values[early].sum(), "That is a difference of SUMS; take the mean of the "
                     "late layers minus the mean of the early ones."),
        }, "the difference")
        if problem is not None:
            return problem
        layers = np.arange(len(values))
        return compare_number(rank_correlation, trend["rank_correlation"], {
            "pearson": (float(pearsonr(layers, values)[0]),
                        "That is Pearson's r of the values; Spearman's correlates their ranks with the layer index."),
        }, "the rank correlation")

    return run_check(trend_fn, run_cases(), compare, "measures a trend with depth")


# --- Probing and its limits --------------------------------------------------------------------------

def _word_features(head_outputs, word_ids) -> np.ndarray:
    units = word_units(word_ids)
    return np.stack([head_outputs[:, :, list(unit)].mean(axis=2) for unit in units], axis=2)


def check_word_features(features_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(head_outputs (layers, heads, seq, d_head), word_ids (seq,)) -> (layers, heads, words, d_head)``."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for layers, heads, word_ids, d_head in ((1, 1, [None, 0, 1, None], 2),
                                                (2, 3, [None, 0, 0, 1, 2, 2, 2, None], 4),
                                                (3, 2, [None, 0, 1, 1, 2, 3, None], 5),
                                                (6, 12, [None, 0, 1, 2, 2, 3, 4, 4, 5, None], 8)):
            head_outputs = rng.normal(size=(layers, heads, len(word_ids), d_head))
            label = f"head_outputs {head_outputs.shape}, word_ids {word_ids}"
            yield label, (head_outputs.copy(), list(word_ids)), {}, (head_outputs, word_ids)

    def compare(got, case) -> str | None:
        head_outputs, word_ids = case
        units = word_units(word_ids)
        slips = {
            "sum": (np.stack([head_outputs[:, :, list(u)].sum(axis=2) for u in units], axis=2),
                    "You added the pieces' outputs; average them, so a long word is not louder than a short one."),
            "first piece": (np.stack([head_outputs[:, :, u[0]] for u in units], axis=2),
                            "You kept only each word's first piece; average over all its pieces."),
            "last piece": (np.stack([head_outputs[:, :, u[-1]] for u in units], axis=2),
                           "You kept only each word's last piece; average over all its pieces."),
        }
        return compare_array(got, _word_features(head_outputs, word_ids), slips, "the word features")

    return run_check(features_fn, cases(), compare, "averages each head's output over a word's pieces")


def check_control_labels(control_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(word_types (n,) int, labels (n,) int, seed) -> (n,) int``: Hewitt and Liang's control task."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n, n_types, n_labels, draw_seed in ((6, 3, 2, 0), (20, 8, 4, 1), (100, 30, 9, 2), (400, 120, 17, 5)):
            word_types = rng.integers(0, n_types, size=n) * 7 + 3  # type ids that are not 0..n_types-1
            labels = rng.choice(n_labels, size=n, p=rng.dirichlet(np.ones(n_labels) * 0.7))
            label = f"{n} words of {len(np.unique(word_types))} types, {n_labels} labels, seed {draw_seed}"
            yield label, (word_types.copy(), labels.copy(), draw_seed), {}, (word_types, labels, draw_seed)

    def compare(got, case) -> str | None:
        word_types, labels, draw_seed = case
        types, inverse = np.unique(word_types, return_inverse=True)
        slips = {
            "uniform": (np.random.default_rng(draw_seed).choice(np.unique(labels), size=len(types))[inverse],
                        "You drew among the distinct labels, each equally likely; draw from `labels` itself, so "
                        "common labels stay common (the control task keeps the real label distribution)."),
            "per occurrence": (np.random.default_rng(draw_seed).choice(labels, size=len(labels)),
                               "Each occurrence got its own draw; every occurrence of a type must share one label."),
        }
        order = list(dict.fromkeys(word_types.tolist()))  # types in order of first appearance
        drawn = np.random.default_rng(draw_seed).choice(labels, size=len(order))
        slips["first appearance"] = (drawn[[order.index(t) for t in word_types.tolist()]],
                                     "You numbered the types in order of first appearance; use np.unique's sorted "
                                     "order, as the exercise says.")
        return compare_array(got, control_labels(word_types, labels, draw_seed), slips, "the control labels", atol=0)

    return run_check(control_fn, cases(), compare, "gives each word type one fixed random label")


def check_probe_accuracy(accuracy_fn: Callable, seed: int = 0) -> CheckResult:
    """``fn(train_features, train_labels, test_features, test_labels) -> float``: a standardised logistic probe."""
    rng = np.random.default_rng(check_seed("seed", seed))

    def cases() -> Iterator:
        for n_train, n_test, n_features, n_labels in ((60, 40, 3, 2), (120, 80, 5, 3), (200, 150, 8, 4)):
            centres = rng.normal(0, 1.2, size=(n_labels, n_features))
            scales = rng.uniform(0.01, 100.0, size=n_features)  # features on very different scales
            labels = rng.integers(0, n_labels, size=n_train + n_test)
            features = (centres[labels] + rng.normal(size=(len(labels), n_features))) * scales
            train = (features[:n_train], labels[:n_train])
            test = (features[n_train:], labels[n_train:])
            label = f"{n_train} training and {n_test} test words, {n_features} features, {n_labels} labels"
            yield label, (train[0].copy(), train[1].copy(), test[0].copy(), test[1].copy()), {}, (*train, *test)

    def compare(got, case) -> str | None:
        train_features, train_labels, test_features, test_labels = case
        expected = float(fit_probe(train_features, train_labels, test_features, test_labels).mean())
        slips = {
            "train": (float(fit_probe(train_features, train_labels, train_features, train_labels).mean()),
                      "That is the accuracy on the training words; score the probe on the test words."),
            "unscaled": (_default_probe_accuracy(*case, scaling="none"), "That is the probe on the raw features: "
                         "standardise them first (StandardScaler fitted on the training words), since their scales "
                         "differ a thousandfold."),
            "own scaler": (_default_probe_accuracy(*case, scaling="own"), "You scaled the test words with their OWN "
                           "mean and deviation; transform them with the scaler fitted on the training words."),
        }
        problem = compare_number(got, expected, slips, "the test accuracy", atol=0.011)
        if problem is not None and compare_number(got, _default_probe_accuracy(*case), {}, "the test accuracy",
                                                  atol=0.011) is None:
            return None  # scikit-learn's default solver, stopped short of the optimum, is a right answer too
        return problem

    return run_check(accuracy_fn, cases(), compare, "fits and scores a linear probe")


def _default_probe_accuracy(train_features, train_labels, test_features, test_labels, scaling: str = "train") -> float:
    """The test accuracy of the probe a learner most often writes: scikit-learn's ``LogisticRegression()`` with its
    defaults (lbfgs, at most 100 steps) on standardised features, which on some draws stops short of the optimum
    that :func:`~mha.analysis.caveats.probing.fit_probe` reaches. ``scaling`` "none" leaves the features as they are,
    "own" scales the test words with their own mean and deviation: two slips."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scaler = StandardScaler(with_mean=scaling != "none", with_std=scaling != "none").fit(train_features)
        probe = LogisticRegression().fit(scaler.transform(train_features), train_labels)
        test_scaler = StandardScaler().fit(test_features) if scaling == "own" else scaler
    return float((probe.predict(test_scaler.transform(test_features)) == test_labels).mean())


# --- Layer dependence: how much choosing inflates a score, on the real model --------------------------

def check_selection_inflation(selection_inflation: Callable, seed: int = 0) -> CheckResult:
    """``fn(scores (items, heads), splits (n_splits, items) bool) -> (n_splits,)``: for each split, the chosen
    head's mean on the choosing items (True) minus its mean on the others, on the real model's per-sentence
    accuracies (4.3)."""
    rng = np.random.default_rng(check_seed("seed", seed))
    counts = treebank_relation_hits(seed)

    def cases() -> Iterator:
        for relation, n_splits in zip(rng.choice(RELATIONS, size=4, replace=False), (3, 8, 20, 50), strict=True):
            r = counts.relations.index(str(relation))
            some = counts.pairs[:, r] > 0
            scores = counts.hits[some, r].reshape(int(some.sum()), -1) / counts.pairs[some, r][:, None]  # (items, 72)
            splits = np.zeros((n_splits, len(scores)), dtype=bool)
            for row in splits:
                row[rng.permutation(len(scores))[:len(scores) // 2]] = True
            label = f"per-sentence {relation} accuracies of the model's 72 heads on {len(scores)} sentences, " \
                    f"{n_splits} random splits"
            yield label, (scores.copy(), splits.copy()), {}, (scores, splits)

    def compare(got, case) -> str | None:
        scores, splits = case
        chosen_means = np.array([scores[split].mean(axis=0) for split in splits])  # (n_splits, heads)
        other_means = np.array([scores[~split].mean(axis=0) for split in splits])
        best = chosen_means.argmax(axis=1)
        rows = np.arange(len(splits))
        want = chosen_means[rows, best] - other_means[rows, best]
        slips = {
            "sign": (-want, "The sign is reversed: the chosen items' mean minus the others', so "
                     "inflation is positive."),
            "best elsewhere": (chosen_means[rows, best] - other_means.max(axis=1),
                               "You subtracted the best head on the OTHER items; follow the chosen head there."),
            "all items": (chosen_means[rows, best] - scores.mean(axis=0)[best],
                          "You compared with the head's mean over all items; compare with the items not chosen on."),
        }
        return compare_array(got, want, slips, "the inflation")

    return run_check(selection_inflation, cases(), compare, "measures how much choosing inflates a score")

