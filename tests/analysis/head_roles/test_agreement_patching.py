"""Agreement on real text: verb rows scored against subjects and attractors, and the number signal patched
(section 3.2).

The scores are checked against attention maps written by hand; the patching against traces and the probe run
separately, and against the package's patch of one head at a time; the stored file against its hash.
"""


import hashlib

import numpy as np
import pytest

from mha.analysis.head_roles.agreement import (
    AgreementScores,
    attractor_verdict,
    binomial_power,
    nearest_noun,
    verb_row_scores,
)
from mha.analysis.head_roles.agreement_patching import (
    AGREEMENT_PATH,
    agreement_patching,
    fit_number_probe,
    load_agreement,
    swapped_words,
    verb_vectors,
)
from mha.analysis.statistics import bootstrap_ratio_interval, detection_power
from mha.corpora.agreement import AgreementItem
from mha.corpora.treebank import UDTree
from mha.data_files import DATA_DIRECTORY, SHA256_LIST
from mha.pretrained.patching import final_states_with_heads_patched

WORDS = ("The", "key", "to", "the", "cabinets", "is", "here")
ITEM = AgreementItem(0, WORDS, 1, 5, "Sing", "NOUN", (4,))


def test_the_verb_row_leaves_itself_out_and_names_subject_or_attractor():
    maps = np.full((2, 7, 7), 0.05)
    maps[0, 5, [1, 5]] = [0.3, 0.4]  # head 0: itself first, then the subject
    maps[1, 5, [1, 4]] = [0.2, 0.3]  # head 1: the attractor
    hits, share, to_attractor = verb_row_scores(maps, ITEM)
    assert hits.tolist() == [True, False] and to_attractor.tolist() == [False, True]
    assert np.allclose(share, [0.3, 0.2])
    with pytest.raises(ValueError, match="maps of the item's own sentence"):
        verb_row_scores(maps[:, :5, :5], ITEM)


def test_the_nearest_noun_is_the_attractor_when_there_is_one():
    tree = UDTree(WORDS, ("DET", "NOUN", "ADP", "DET", "NOUN", "AUX", "ADV"), (1, 5, 4, 4, 1, -1, 5),
                  ("det", "nsubj", "case", "det", "nmod", "root", "advmod"))
    assert nearest_noun(tree, ITEM) == 4


def test_intervals_resample_whole_sentences():
    rng = np.random.default_rng(0)
    sentences = np.array([0, 0, 1, 2, 2, 2, 3, 4])
    hits = rng.integers(0, 2, size=(8, 2, 3)).astype(float)
    zeros = np.zeros(8)
    narrow = np.array([True, False] * 4)
    scores = AgreementScores(sentences, zeros.astype(bool), np.ones(8, dtype=int), hits, hits, hits, zeros,
                             np.zeros((8, 8)), narrow)
    items = np.arange(8)
    sums = np.stack([hits[sentences == s].sum(axis=0) for s in range(5)])
    oracle = bootstrap_ratio_interval(sums, np.bincount(sentences).astype(float))
    low, high = scores.interval(hits, items)
    assert np.allclose(low, oracle[0]) and np.allclose(high, oracle[1])
    assert np.allclose(scores.rate(hits, items), hits.mean(axis=0))
    assert scores.select([2, 3]).tolist() == [3, 4, 5, 6]
    assert scores.select([2, 3], narrow=True).tolist() == [4, 6]
    assert np.array_equal(AgreementScores.from_dict(scores.to_dict()).narrow, narrow)


def test_the_power_of_the_exact_binomial_test_matches_a_hand_calculation_and_scipy():
    from scipy.stats import binomtest

    # 10 pairs against a rule right for 10%: P(X >= 3) = 0.0702 > 0.05, P(X >= 4) = 0.0128, so 4 hits are needed;
    # a head right for half of them gets 4 or more with probability 1 - (1 + 10 + 45 + 120) / 1024 = 848 / 1024
    result = binomial_power(10, 0.1, 0.5)
    assert result.critical == 4 and np.isclose(result.power, 848 / 1024)
    for n, null, rate in ((26, 0.12, 0.5), (60, 0.2, 0.35), (7, 0.5, 0.9)):
        result = binomial_power(n, null, rate)
        assert binomtest(result.critical, n, null, alternative="greater").pvalue <= 0.05
        assert binomtest(result.critical - 1, n, null, alternative="greater").pvalue > 0.05
        assert np.isclose(result.power, detection_power(n, rate, result.critical))
        assert np.isclose(detection_power(n, result.smallest_rate, result.critical), 0.8, atol=1e-6)
        assert detection_power(n, result.smallest_rate - 1e-3, result.critical) < 0.8
    assert binomial_power(3, 0.5, 0.9).critical is None  # even 3 of 3 has p = 0.125
    with pytest.raises(ValueError, match="alpha must be a probability strictly between 0 and 1"):
        binomial_power(10, 0.1, 0.5, alpha=0)


def test_the_verdict_follows_the_stated_rule():
    assert attractor_verdict(0.55, 0.8, 0.99) == ("holds", None)
    assert attractor_verdict(0.1, 0.3, 0.95) == ("fails on this model", None)
    assert attractor_verdict(0.1, 0.3, 0.5) == ("not shown", "too few pairs to detect a head at the bar")
    assert attractor_verdict(0.3, 0.6, 0.95) == ("not shown", "the interval reaches the bar")
    assert attractor_verdict(0.1, 0.45, 0.95, bar=0.4)[0] == "not shown"
    with pytest.raises(ValueError, match="give \\(low, high\\)"):
        attractor_verdict(0.6, 0.4, 0.9)


@pytest.fixture(scope="module")
def encoder():
    from mha.pretrained.encoder import MiniLMEncoder

    return MiniLMEncoder.load()


SENTENCES = [("The", "dog", "near", "the", "cars", "runs", "."), ("The", "cats", "on", "the", "mat", "sleep", "."),
             ("The", "man", "with", "the", "hats", "sings", "."), ("Birds", "near", "the", "lake", "sing", "."),
             ("The", "girl", "by", "the", "trees", "waits", "."), ("The", "boys", "in", "the", "car", "laugh", ".")]
NUMBERS = ["Sing", "Plur", "Sing", "Plur", "Sing", "Plur"]
OTHERS = ["dogs", "cat", "men", "Bird", "girls", "boy"]


@pytest.fixture(scope="module")
def pairs():
    items = [AgreementItem(i, words, int(words[0] == "The"), len(words) - 2, number, "NOUN", ())
             for i, (words, number) in enumerate(zip(SENTENCES, NUMBERS, strict=True))]
    return list(zip(items, OTHERS, strict=True))


@pytest.mark.slow
def test_patching_follows_the_probe_and_the_package_patch_of_one_head(encoder, pairs):
    probe = fit_number_probe(encoder, pairs)
    result = agreement_patching(encoder, pairs, probe, chunk=4)
    items = [item for item, _ in pairs]
    assert result.pair_ids == ("0:5", "1:5", "2:5", "3:4", "4:5", "5:5") and result.left_out == ()
    # the difference, from separate traces and the probe alone: plural subject's logit minus singular's
    originals = encoder.trace([list(w) for w in SENTENCES], is_split_into_words=True)
    swapped = encoder.trace([swapped_words(i, o) for i, o in pairs], is_split_into_words=True)
    verbs = [i.verb for i in items]
    logit = probe.decision_function(verb_vectors(originals, verbs))
    logit_swapped = probe.decision_function(verb_vectors(swapped, verbs))
    sign = np.array([1.0 if i.number == "Plur" else -1.0 for i in items])
    assert np.allclose(result.difference, sign * (logit - logit_swapped), atol=1e-4)
    # one head (layer 3, head 5), patched both ways with the package's patch of a set of heads
    into_original = final_states_with_heads_patched(encoder, originals, swapped, [(3, 5)])
    into_swapped = final_states_with_heads_patched(encoder, swapped, originals, [(3, 5)])
    moved = (probe.decision_function(verb_vectors(swapped, verbs, into_swapped)) - logit_swapped) - (
        probe.decision_function(verb_vectors(originals, verbs, into_original)) - logit)
    assert np.allclose(result.carried[:, 3, 5], sign * moved / 2, atol=1e-4)


@pytest.mark.slow
def test_pairs_of_different_lengths_are_left_out_and_too_few_pairs_refused(encoder, pairs):
    probe = fit_number_probe(encoder, pairs)
    item = pairs[0][0]
    with pytest.raises(ValueError, match="no pair has two sentences of the same length"):
        agreement_patching(encoder, [(item, "hippopotamuses")], probe)
    assert agreement_patching(encoder, [(item, "hippopotamuses"), pairs[1]], probe).left_out == ("0:5",)
    with pytest.raises(ValueError, match="cannot be cut into 5 folds"):
        fit_number_probe(encoder, pairs[:3])


def test_the_stored_file_is_the_recorded_one_and_adds_up():
    lines = (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
    recorded = next(line.split()[0] for line in lines if line.split()[1] == "ewt_agreement.json")
    assert hashlib.sha256(AGREEMENT_PATH.read_bytes()).hexdigest() == recorded
    stored = load_agreement()
    assert stored.scores.attracted.sum() >= 20 and len(stored.patching.pair_ids) >= 100
    assert 0.5 < stored.probe_accuracy <= 1
    check = load_agreement(check=True)
    n = len(check.sentences)
    assert np.array_equal(check.hits, stored.scores.hits[:n])
