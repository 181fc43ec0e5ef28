"""Probes on each head's output, their baselines and the features they read (section 4.4,
mha.analysis.caveats.probing)."""

import numpy as np
import pytest
import torch

from mha.analysis.caveats.probing import (
    control_labels,
    correct_per_sentence,
    fit_probe,
    fitted_probe,
    majority_accuracy,
    most_frequent_labels,
    probe_every_head,
    probe_every_layer,
    read_labelled_sentences,
)
from mha.corpora.treebank import SAMPLE_TREEBANK_PATH, read_conllu


def test_labelled_sentences_number_words_as_the_treebank_reader_does():
    labelled = read_labelled_sentences(SAMPLE_TREEBANK_PATH)
    annotated = read_conllu(SAMPLE_TREEBANK_PATH)
    assert [s.words for s in labelled] == [s.words for s in annotated]
    assert all(len(s.upos) == len(s.deprel) == len(s.words) for s in labelled)
    assert all(":" not in label for s in labelled for label in s.deprel)
    assert len(read_labelled_sentences(SAMPLE_TREEBANK_PATH, limit=2)) == 2
    with pytest.raises(FileNotFoundError, match="EWT_DEV_PATH"):
        read_labelled_sentences("no/such/file.conllu")


def test_control_labels_are_one_random_label_per_type_from_the_real_distribution():
    rng = np.random.default_rng(0)
    types = rng.integers(0, 2000, size=20000)
    labels = rng.choice(["NOUN", "VERB", "DET"], size=20000, p=[0.6, 0.3, 0.1])
    control = control_labels(types, labels, seed=1)
    for word_type in np.unique(types)[:50]:
        assert len(set(control[types == word_type])) == 1, "every occurrence of a type shares its label"
    shares = {label: np.mean(control == label) for label in ("NOUN", "VERB", "DET")}
    assert shares["NOUN"] > shares["VERB"] > shares["DET"] > 0
    assert np.array_equal(control, control_labels(types, labels, seed=1))
    assert not np.array_equal(control, control_labels(types, labels, seed=2))
    with pytest.raises(ValueError, match="parallel"):
        control_labels(types[:5], labels[:4])


def test_majority_and_label_merging():
    assert majority_accuracy(["a", "a", "b"], ["a", "b", "b", "a"]) == 0.5
    merged = most_frequent_labels(["x", "x", "y", "z", "z", "z"], 2)
    assert merged.tolist() == ["x", "x", "other", "z", "z", "z"]


def test_a_probe_reads_the_head_that_carries_the_label_and_not_the_others():
    rng = np.random.default_rng(0)
    n_words, d_head = 300, 3
    labels = rng.integers(0, 3, size=n_words)
    features = rng.normal(size=(n_words, 2, 2, d_head))
    features[:, 1, 1, 0] += 4.0 * labels  # only head (1, 1) carries the label, in one feature
    features[:, 1, 1, 1] *= 1000.0  # a feature on another scale: standardisation keeps the probe working
    train, test = np.arange(200), np.arange(200, n_words)
    correct = probe_every_head(features, labels, train, test)
    accuracy = correct.mean(axis=-1)
    assert correct.shape == (2, 2, 100) and accuracy[1, 1] > 0.9
    assert accuracy.ravel()[:3].max() < 0.5
    assert probe_every_layer(features, labels, train, test).mean(axis=-1)[1] > 0.9
    with pytest.raises(ValueError, match="share words"):
        probe_every_head(features, labels, train, train)
    with pytest.raises(ValueError, match="single label"):
        fit_probe(features[:10, 0, 0], np.zeros(10), features[10:20, 0, 0], np.zeros(10))


def test_the_probe_is_the_optimum_that_an_independent_solver_finds():
    """The probe's class probabilities are those of the penalised multinomial likelihood's optimum, found here by
    scipy's BFGS on the objective written out by hand: 0.5 |W|^2 + C * sum_i -log softmax(W x_i + b)_{y_i}, with the
    intercepts b unpenalised, on standardised features."""
    from scipy.optimize import minimize
    from scipy.special import log_softmax

    rng = np.random.default_rng(3)
    n_words, n_features, n_classes, C = 150, 4, 3, 0.5
    labels = rng.integers(0, n_classes, size=n_words)
    features = rng.normal(size=(n_words, n_features)) + 0.8 * np.eye(n_classes, n_features)[labels]
    features[:, 2] *= 50.0  # another scale: the probe standardises
    x = (features - features.mean(axis=0)) / features.std(axis=0)
    onehot = np.eye(n_classes)[labels]

    def objective(flat):
        W, b = flat[:n_classes * n_features].reshape(n_classes, n_features), flat[n_classes * n_features:]
        log_p = log_softmax(x @ W.T + b, axis=1)
        residual = C * (np.exp(log_p) - onehot)  # d(loss)/d(logits)
        value = 0.5 * np.sum(W ** 2) - C * np.sum(onehot * log_p)
        return value, np.concatenate([(W + residual.T @ x).ravel(), residual.sum(axis=0)])

    best = minimize(objective, np.zeros(n_classes * (n_features + 1)), jac=True, method="BFGS",
                    options={"gtol": 1e-10, "maxiter": 10_000})
    W, b = best.x[:n_classes * n_features].reshape(n_classes, n_features), best.x[n_classes * n_features:]
    scaler, probe = fitted_probe(features, labels, C=C)
    grid = rng.normal(size=(500, n_features)) * features.std(axis=0) + features.mean(axis=0)
    expected = np.exp(log_softmax(((grid - features.mean(axis=0)) / features.std(axis=0)) @ W.T + b, axis=1))
    np.testing.assert_allclose(probe.predict_proba(scaler.transform(grid)), expected, atol=1e-7)


def test_a_probe_that_has_not_converged_is_refused_naming_the_fix():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, size=200)
    features = rng.normal(size=(200, 5)) + labels[:, None]
    with pytest.raises(RuntimeError, match="raise max_iter"):
        fitted_probe(features, labels, max_iter=1)
    assert fitted_probe(features, labels)[1].n_iter_.max() < 100


def test_correct_answers_are_counted_per_sentence():
    correct = np.array([[True, False, True, True]])  # (1 head, 4 words)
    hits, words = correct_per_sentence(correct, [7, 7, 3, 7])
    assert words.tolist() == [1, 3] and hits[:, 0].tolist() == [1, 2]


def test_word_head_outputs_average_each_words_pieces_and_random_weights_are_seeded():
    from mha.pretrained.corpus_encoding import encode_word_head_outputs
    from mha.pretrained.encoder import MiniLMEncoder

    encoder = MiniLMEncoder.load()
    words = ["Antidisestablishmentarianism", "results", "arrived", "."]
    [outputs] = encode_word_head_outputs(encoder, [words])
    trace = encoder.trace([words], is_split_into_words=True).sentence(0)
    first = [t for t, w in enumerate(trace.word_ids) if w == 0]
    assert len(first) > 1, "the test needs a word cut into pieces"
    assert outputs.shape == (6, 12, 4, 32)
    assert np.allclose(outputs[:, :, 0], trace.head_outputs[:, :, first].mean(axis=2), atol=1e-6)
    with pytest.raises(ValueError, match="non-empty"):
        encode_word_head_outputs(encoder, [[]])

    before = encoder.layers[0].attention.W_Q.clone()
    random_a, random_b = encoder.with_random_weights(seed=0), encoder.with_random_weights(seed=0)
    assert torch.equal(random_a.layers[3].W_in, random_b.layers[3].W_in)
    assert not torch.equal(random_a.layers[3].W_in, encoder.with_random_weights(seed=1).layers[3].W_in)
    assert torch.equal(encoder.layers[0].attention.W_Q, before), "the pretrained encoder is left unchanged"
    assert float(random_a.word_embeddings.std()) == pytest.approx(0.02, rel=0.05)
    assert torch.all(random_a.layers[0].attention_norm.weight == 1)


# ---------------------------------------------------------------- linear erasure (LEACE) and its control


def _labelled_cloud(n=900, seed=0):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, n)
    features = rng.standard_normal((n, 6)) @ rng.standard_normal((6, 6))  # correlated, full rank
    features[:, 1] += 1.5 * labels
    features[:, 4] -= 2.0 * (labels == 2)
    return features, labels


def test_leace_leaves_no_covariance_with_any_label_and_removes_classes_minus_one_directions():
    from mha.analysis.caveats.probing import leace_eraser

    features, labels = _labelled_cloud()
    eraser = leace_eraser(features, labels)
    erased = eraser(features)
    one_hot = np.eye(3)[labels]
    cross = np.cov(np.hstack([erased, one_hot]), rowvar=False)[:6, 6:]  # numpy's covariance as the oracle
    assert np.abs(cross).max() < 1e-10
    assert eraser.rank == 2
    assert np.linalg.matrix_rank(features - erased, tol=1e-8) == 2
    before = fit_probe(features[:600], labels[:600], features[600:], labels[600:]).mean()
    after = fit_probe(erased[:600], labels[:600], erased[600:], labels[600:]).mean()
    assert before > 0.8 and after < majority_accuracy(labels[:600], labels[600:]) + 0.06


def test_leace_on_white_data_projects_out_the_class_mean_differences():
    """With identity covariance LEACE is the orthogonal projection off the span of the class means (a hand oracle)."""
    from scipy.linalg import orth

    from mha.analysis.caveats.probing import leace_eraser

    rng = np.random.default_rng(1)
    labels = np.repeat([0, 1, 2], 4000)
    means = np.array([[0, 0, 0, 0, 0], [1, 0.5, 0, 0, 0], [0, -1, 1, 0, 0.]])
    features = rng.standard_normal((len(labels), 5))
    features -= features.mean(0)
    features = features @ np.linalg.inv(np.linalg.cholesky(np.cov(features, rowvar=False))).T  # exactly white
    features += means[labels]
    features = (features - features.mean(0)) @ np.linalg.inv(np.linalg.cholesky(np.cov(features, rowvar=False))).T
    centred_means = np.stack([features[labels == k].mean(0) for k in range(3)]) - features.mean(0)
    span = orth(centred_means.T)  # (5, 2)
    expected = features - (features - features.mean(0)) @ span @ span.T
    np.testing.assert_allclose(leace_eraser(features, labels)(features), expected, atol=1e-8)


def test_random_eraser_removes_as_many_directions_and_works_on_tensors():
    from mha.analysis.caveats.probing import leace_eraser, random_eraser

    features, labels = _labelled_cloud()
    control = random_eraser(features, 2, seed=3)
    assert control.rank == 2
    assert np.linalg.matrix_rank(features - control(features), tol=1e-8) == 2
    np.testing.assert_array_equal(control.matrix, random_eraser(features, 2, seed=3).matrix)
    assert not np.allclose(control.matrix, random_eraser(features, 2, seed=4).matrix)
    eraser = leace_eraser(features, labels)
    as_tensor = eraser(torch.tensor(features))
    np.testing.assert_allclose(as_tensor.numpy(), eraser(features), atol=1e-12)
    with pytest.raises(ValueError, match="single value"):
        leace_eraser(features, np.zeros(len(features)))
    with pytest.raises(ValueError, match="at least rank"):
        random_eraser(features, 7)
    with pytest.raises(ValueError, match="vectors of 6"):
        eraser(np.zeros((2, 5)))
