"""Linear probes on what each head writes, with control tasks and baselines (4.4 "Probing and its limits").

A probe is a small classifier trained to read a property (a word's part of speech, its dependency label) from a
model's vectors. Here the vectors are each head's output ``z_h`` (before ``W_O``) averaged over a word's
wordpieces (:func:`mha.pretrained.corpus_encoding.encode_word_head_outputs`), and the probe is a multinomial
logistic regression on standardised features, solved to its optimum by Newton's method (:func:`fitted_probe`).
High probe accuracy says that the property can be read linearly from the vectors; it does not say that the model
uses it. Three baselines keep the reading honest:

* the **majority class** (:func:`majority_accuracy`): what a probe gets by always guessing the commonest label;
* a **control task** (Hewitt and Liang 2019, "Designing and interpreting probes with control tasks"):
  :func:`control_labels` gives every word type a fixed random label drawn from the real label distribution, so a
  probe can only solve it by memorising word identity; **selectivity** is real accuracy minus control accuracy;
* a **model with random weights** (:meth:`mha.pretrained.encoder.MiniLMEncoder.with_random_weights`), probed in
  the same way: what the architecture and the word identities give without any training.

:func:`read_labelled_sentences` reads the words of a UD treebank with their UPOS tag and dependency label,
numbered exactly as :func:`mha.corpora.treebank.read_conllu` numbers them.

Decodable is not used. :func:`leace_eraser` removes, in closed form, exactly the linear information about a property
from a set of vectors (LEACE, Belrose et al. 2023, "LEACE: Perfect linear concept erasure in closed form"): after it
no linear probe does better than a constant guess on those vectors, and it moves them as little as possible.
:func:`random_eraser` removes as many random directions in the same way, the control. Erasing a property from one
head's output inside the model and watching a readout further up ("amnesic probing", Elazar et al. 2021) tests
whether the model uses what the probe found (``scripts/amnesic_probing.py``).
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from mha.core.argument_checks import check_whole_numbers
from mha.core.validation import as_array, as_path, as_real_array, check_items, check_whole_number
from mha.corpora.treebank import read_ud_trees

__all__ = ["LabelledSentence", "read_labelled_sentences", "most_frequent_labels", "control_labels",
           "majority_accuracy", "fitted_probe", "fit_probe", "probe_every_head", "probe_every_layer",
           "correct_per_sentence", "LinearEraser", "leace_eraser", "random_eraser", "AMNESIC_PROBING_PATH",
           "load_amnesic_probing"]


@dataclass(frozen=True)
class LabelledSentence:
    """A treebank sentence's words with their universal part of speech and dependency label (section 4.4).

    ``deprel`` is the universal relation without its subtype (``nsubj:pass`` -> ``nsubj``). Words are the
    syntactic words of the CoNLL-U file (multiword-token ranges and empty nodes skipped), in the order and
    numbering of :func:`mha.corpora.treebank.read_conllu`.
    """

    words: tuple[str, ...]
    upos: tuple[str, ...]
    deprel: tuple[str, ...]


def read_labelled_sentences(path: str | Path, *, limit: int | None = None) -> list[LabelledSentence]:
    """The first ``limit`` sentences (all by default) of a CoNLL-U file, with each word's UPOS and DEPREL (4.4).

    Read by :func:`mha.corpora.treebank.read_ud_trees`; the relation loses its subtype (``nsubj:pass`` -> ``nsubj``).
    """
    return [LabelledSentence(words=tree.words, upos=tree.upos,
                             deprel=tuple(deprel.split(":")[0] for deprel in tree.deprels))
            for tree in read_ud_trees(path, limit=limit)]


def most_frequent_labels(labels: Sequence[str], k: int, *, other: str = "other") -> np.ndarray:
    """``labels`` with every label outside the ``k`` most frequent replaced by ``other`` (ties: first seen) (4.4).

    Fewer classes make 72 probes fast; the merged class keeps every word in the data.
    """
    labels = check_items("labels", labels, "a list of labels")
    k = check_whole_number("k", k, minimum=1, meaning="labels to keep")
    kept = {label for label, _ in Counter(labels).most_common(k)}
    return np.array([label if label in kept else other for label in labels], dtype=object)


def control_labels(word_types: Sequence, labels: Sequence, seed: int = 0) -> np.ndarray:
    """Hewitt and Liang's control task: each word type gets one fixed random label, drawn as the labels fall (4.4).

    ``word_types`` and ``labels`` have one entry per word occurrence. The distinct types, sorted
    (``np.unique``), each draw one label from ``labels`` itself (``rng.choice(labels, size=n_types)`` with
    ``rng = np.random.default_rng(seed)``), so the control labels follow the real label distribution over
    occurrences; every occurrence of a type then carries its type's label. Returns an array like ``labels``.
    """
    word_types, labels = np.asarray(word_types), np.asarray(labels)
    if word_types.ndim != 1 or word_types.shape != labels.shape or len(labels) == 0:
        raise ValueError(f"word_types {word_types.shape} and labels {labels.shape} must be 1-d, non-empty and "
                         "parallel: one type and one label per word occurrence.")
    types, type_of_word = np.unique(word_types, return_inverse=True)
    drawn = np.random.default_rng(seed).choice(labels, size=len(types))  # (types,): one label per type
    return drawn[type_of_word]


def majority_accuracy(train_labels: Sequence, test_labels: Sequence) -> float:
    """Accuracy on ``test_labels`` of always guessing the commonest training label (ties: the smallest) (4.4)."""
    train_labels, test_labels = np.asarray(train_labels), np.asarray(test_labels)
    if len(train_labels) == 0 or len(test_labels) == 0:
        raise ValueError("train_labels and test_labels must each hold at least one label.")
    values, counts = np.unique(train_labels, return_counts=True)
    return float(np.mean(test_labels == values[counts.argmax()]))


def fitted_probe(train_features, train_labels, *, C: float = 1.0, tol: float = 1e-10, max_iter: int = 100):
    """A linear probe fitted to its optimum: ``(scaler, probe)``, to apply as ``probe.predict(scaler.transform(x))``.

    Features (words, features) are standardised with the training words' mean and standard deviation, then a
    multinomial logistic regression with an L2 penalty of strength ``1 / C`` is solved by Newton's method
    (scikit-learn's ``newton-cholesky``) until the gradient is below ``tol``. Newton's method reaches the optimum,
    which is unique, to about twelve digits within a few dozen steps, so the probe does not depend on the path a
    looser solver took nor on the CPU's kernels (section 4.4); a fit that has not converged within ``max_iter``
    steps is refused rather than used. It runs on one thread, so many probes in a row do not fight over the cores.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    train_features = as_real_array("train_features", train_features).astype(np.float64)
    train_labels = np.asarray(train_labels)
    if train_features.ndim != 2:
        raise ValueError(f"train_features must be (words, features): got {train_features.shape}.")
    if len(train_labels) != len(train_features):
        raise ValueError("give one label per word: the labels and the features' first axis differ in length.")
    if len(np.unique(train_labels)) < 2:
        raise ValueError("the training words carry a single label; a probe needs at least two classes.")
    max_iter = check_whole_number("max_iter", max_iter, minimum=1, meaning="Newton steps")
    with _thread_pools().limit(limits=1), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)  # reported below, with the fix
        scaler = StandardScaler().fit(train_features)
        probe = LogisticRegression(C=C, solver="newton-cholesky", tol=tol, max_iter=max_iter)
        probe.fit(scaler.transform(train_features), train_labels)
    if int(np.max(probe.n_iter_)) >= max_iter:
        raise RuntimeError(f"the probe had not converged after max_iter={max_iter} Newton steps (gradient above "
                           f"tol={tol:g}); raise max_iter, or standardise features that are constant or collinear.")
    return scaler, probe


def fit_probe(train_features, train_labels, test_features, test_labels, **probe_options) -> np.ndarray:
    """Fit one linear probe (:func:`fitted_probe`, with ``probe_options``) and return, for each test word, whether
    it labels it correctly: (test words,) bool (section 4.4)."""
    test_features = as_real_array("test_features", test_features).astype(np.float64)
    test_labels = np.asarray(test_labels)
    train_shape = np.shape(train_features)
    if test_features.ndim != 2 or len(train_shape) != 2 or train_shape[1] != test_features.shape[1]:
        raise ValueError(f"features must be (words, features) with the same features: got {train_shape} "
                         f"and {test_features.shape}.")
    if len(test_labels) != len(test_features):
        raise ValueError("give one label per word: the labels and the features' first axis differ in length.")
    scaler, probe = fitted_probe(train_features, train_labels, **probe_options)
    return probe.predict(scaler.transform(test_features)) == test_labels


@cache
def _thread_pools():
    """One ``threadpoolctl.ThreadpoolController`` over the thread pools of numpy, scipy and scikit-learn, found once:
    finding them scans every loaded library, so it is done once rather than once for each of many probes."""
    import sklearn.linear_model  # noqa: F401  (loads scipy's and scikit-learn's pools before the scan)
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _check_features(features, labels, train, test) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    features = as_array("features", features)  # (words, layers, heads, d_head), in its own dtype
    labels = check_items("labels", labels, "one label per word")
    labels = np.asarray(labels)
    train = np.asarray(check_whole_numbers("train", train, minimum=0, meaning="indices of the words to fit on"), int)
    test = np.asarray(check_whole_numbers("test", test, minimum=0, meaning="indices of the words to score on"), int)
    if features.ndim != 4 or len(labels) != features.shape[0]:
        raise ValueError(f"features {features.shape} should be (words, layers, heads, d_head) with one label per "
                         f"word ({len(labels)} labels).")
    if np.intersect1d(train, test).size:
        raise ValueError("train and test share words; fit the probe on one set of sentences, score it on another.")
    return features, labels, train, test


def probe_every_head(features, labels, train, test, **probe_options) -> np.ndarray:
    """One probe per head: correctness (layers, heads, test words) bool (section 4.4).

    ``features`` (words, layers, heads, d_head) holds every head's output for every word, ``labels`` (words,) the
    property to read, ``train`` and ``test`` the word indices to fit and to score on (from different sentences).
    ``probe_options`` go to :func:`fit_probe`.
    """
    features, labels, train, test = _check_features(features, labels, train, test)
    _, n_layers, n_heads, _ = features.shape
    correct = np.zeros((n_layers, n_heads, len(test)), dtype=bool)
    for layer in range(n_layers):
        for head in range(n_heads):
            correct[layer, head] = fit_probe(features[train, layer, head], labels[train],
                                             features[test, layer, head], labels[test], **probe_options)
    return correct


def probe_every_layer(features, labels, train, test, **probe_options) -> np.ndarray:
    """One probe per layer on all its heads' outputs side by side (heads * d_head features): (layers, test words)."""
    features, labels, train, test = _check_features(features, labels, train, test)
    n_words, n_layers = features.shape[:2]
    per_layer = features.reshape(n_words, n_layers, -1)  # (words, layers, heads * d_head)
    return np.stack([fit_probe(per_layer[train, layer], labels[train], per_layer[test, layer], labels[test],
                               **probe_options) for layer in range(n_layers)])


def correct_per_sentence(correct, sentence_of_word) -> tuple[np.ndarray, np.ndarray]:
    """Correct answers counted per sentence, for a bootstrap over sentences (section 4.4).

    ``correct`` (..., words) bool, e.g. from :func:`probe_every_head`; ``sentence_of_word`` (words,) gives each
    word's sentence. Returns ``hits`` (sentences, ...) and ``words`` (sentences,), sentences in sorted order of
    their ids, ready for :func:`mha.analysis.statistics.resampled_ratios`.
    """
    correct = np.asarray(correct)
    sentence_of_word = np.asarray(sentence_of_word)
    if sentence_of_word.ndim != 1 or correct.shape[-1] != len(sentence_of_word):
        raise ValueError(f"correct {correct.shape} must end with one entry per word ({len(sentence_of_word)} "
                         "sentence ids).")
    sentences, index = np.unique(sentence_of_word, return_inverse=True)
    hits = np.zeros((len(sentences),) + correct.shape[:-1])
    np.add.at(hits, index, np.moveaxis(correct, -1, 0).astype(float))
    return hits, np.bincount(index, minlength=len(sentences)).astype(float)


@dataclass(frozen=True)
class LinearEraser:
    """An affine erasure ``x -> x - (x - mean) @ matrix.T`` on the last axis, removing ``rank`` directions (4.4).

    Built by :func:`leace_eraser` or :func:`random_eraser`; apply it with ``eraser(x)`` to numpy arrays or torch
    tensors of any leading shape (the matrix is cast to the input's dtype).
    """

    mean: np.ndarray
    matrix: np.ndarray
    rank: int

    def __call__(self, x):
        if hasattr(x, "detach"):  # a torch tensor: stay in torch, on its device and dtype
            import torch

            mean = torch.as_tensor(self.mean, dtype=x.dtype, device=x.device)
            matrix = torch.as_tensor(self.matrix, dtype=x.dtype, device=x.device)
            return x - (x - mean) @ matrix.T
        x = np.asarray(x)
        if x.shape[-1] != len(self.mean):
            raise ValueError(f"the eraser works on vectors of {len(self.mean)} numbers; got shape {x.shape}.")
        return x - (x - self.mean) @ self.matrix.T


def _whitening(features: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, W, W_pinv)``: W = Sigma^(-1/2) and its pseudo-inverse Sigma^(1/2) on the directions the data span."""
    features = as_real_array("features", features).astype(np.float64)
    if features.ndim != 2 or len(features) < 2:
        raise ValueError(f"features must be (vectors, dimensions) with at least two vectors: got {features.shape}.")
    mean = features.mean(axis=0)
    covariance = np.cov(features, rowvar=False).reshape(features.shape[1], features.shape[1])
    values, vectors = np.linalg.eigh(covariance)
    kept = values > tol * max(float(values.max()), np.finfo(float).tiny)
    root = np.zeros_like(values)
    root[kept] = np.sqrt(values[kept])
    inverse_root = np.zeros_like(values)
    inverse_root[kept] = 1 / root[kept]
    return mean, (vectors * inverse_root) @ vectors.T, (vectors * root) @ vectors.T


def _eraser(mean, W, W_pinv, basis: np.ndarray) -> LinearEraser:
    """The oblique erasure ``W_pinv P W`` for P the orthogonal projection onto ``basis``'s columns (whitened space)."""
    projection = basis @ basis.T
    return LinearEraser(mean=mean, matrix=W_pinv @ projection @ W, rank=int(basis.shape[1]))


def leace_eraser(features, labels, *, tol: float = 1e-10) -> LinearEraser:
    """LEACE: the least-squares-smallest affine map after which ``features`` carry no linear information about
    ``labels`` (Belrose et al. 2023) (4.4).

    ``features`` (vectors, dimensions), ``labels`` (vectors,) of any kind (one-hot encoded in sorted order). With
    ``W = Sigma^(-1/2)`` the whitening of the features and ``P`` the orthogonal projection onto the column space of
    ``W Sigma_xz`` (``Sigma_xz`` the cross-covariance of the features with the one-hot labels), the eraser is
    ``x -> x - W^+ P W (x - mean)``. Afterwards the cross-covariance of the erased features with every label
    indicator is 0, so no linear probe beats a constant on them (on these vectors); at most ``classes - 1``
    directions are removed. Eigenvalues below ``tol`` times the largest count as 0.
    """
    features = as_real_array("features", features).astype(np.float64)
    labels = np.asarray(labels)
    if labels.ndim != 1 or features.ndim != 2 or len(labels) != len(features):
        raise ValueError(f"features {features.shape} must be (vectors, dimensions) with one label per vector "
                         f"(labels {labels.shape}).")
    classes, index = np.unique(labels, return_inverse=True)
    if len(classes) < 2:
        raise ValueError("the labels take a single value; there is nothing to erase.")
    mean, W, W_pinv = _whitening(features, tol)
    one_hot = np.eye(len(classes))[index]  # (vectors, classes)
    cross = (features - mean).T @ (one_hot - one_hot.mean(axis=0)) / (len(features) - 1)  # (dimensions, classes)
    left, singular, _ = np.linalg.svd(W @ cross, full_matrices=False)
    basis = left[:, singular > tol * max(float(singular.max()), np.finfo(float).tiny)]  # (dimensions, rank)
    return _eraser(mean, W, W_pinv, basis)


def random_eraser(features, rank: int, seed: int = 0, *, tol: float = 1e-10) -> LinearEraser:
    """The control for :func:`leace_eraser`: the same kind of erasure of ``rank`` random directions (4.4).

    The directions are an orthonormal basis (QR of a Gaussian matrix from ``np.random.default_rng(seed)``) of the
    whitened space of ``features``, so the control removes as many directions, measured in the same way, but not
    the ones that carry the property.
    """
    features = as_real_array("features", features).astype(np.float64)
    rank = check_whole_number("rank", rank, minimum=1, meaning="directions to remove")
    if features.ndim != 2 or rank > features.shape[1]:
        raise ValueError(f"features {features.shape} must be (vectors, dimensions) with at least rank={rank} "
                         "dimensions.")
    mean, W, W_pinv = _whitening(features, tol)
    basis, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((features.shape[1], rank)))
    return _eraser(mean, W, W_pinv, basis)


def _amnesic_path() -> Path:
    from mha.data_files import DATA_DIRECTORY

    return DATA_DIRECTORY / "amnesic_probing.json"


AMNESIC_PROBING_PATH = _amnesic_path()
"""Each named head's property erased inside the model, with its control; written by ``scripts/amnesic_probing.py``."""


def load_amnesic_probing(path: str | Path = AMNESIC_PROBING_PATH) -> dict:
    """What ``scripts/amnesic_probing.py`` stored, checked against ``data/SHA256SUMS`` (4.4): per property, the head,
    and per held-out sentence the correct words of the head's own probe and of the last layer's probe (clean, LEACE,
    random) and how far the sentence vector moved. A missing, tampered or malformed file raises ``ValueError`` with
    the command that regenerates it."""
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored amnesic probing"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.amnesic_probing", limit=2_000_000)
    try:
        words = np.asarray(content["test_words_per_sentence"], dtype=float)
        for record in content["properties"].values():
            for block in ("head_probe", "final_probe"):
                for kind in ("clean", "leace", "random"):
                    if np.shape(record[block][kind]) != words.shape:
                        raise ValueError
            for kind in ("leace", "random"):
                if np.shape(record["sentence_moved"][kind]) != words.shape:
                    raise ValueError
    except (KeyError, TypeError, ValueError, AttributeError):
        raise ValueError(f"{what} {path} is malformed: it needs 'test_words_per_sentence' and, per property, "
                         f"'head_probe', 'final_probe' and 'sentence_moved', one entry per sentence. {how}") from None
    return content
