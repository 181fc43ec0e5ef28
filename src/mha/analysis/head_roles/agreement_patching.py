"""Agreement under patching: which heads carry the subject's number to the verb? (3.2).

Attention maps say where a verb looks; patching asks what reaches it. Each pair of :func:`mha.corpora.agreement.
number_swaps` is a sentence of UD English-EWT and the same sentence with its subject in the other number ("the
*key* to the cabinets is" and "the *keys* to the cabinets is"); the verb is left as it was. The model's **number
signal** is read at the verb: a logistic-regression probe (scikit-learn) trained to tell, from the verb's
last-layer vector (the mean of its pieces), whether the subject is plural, on both sentences of the pairs of one
half of the treebank (:func:`fit_number_probe`); :func:`probe_accuracy_by_layer` shows how readable the number is
after each layer. Since both sentences of a pair have the same verb, the probe
cannot read number from the verb's own form; it reads what the sentence has sent to the verb about its subject.

For each pair, :func:`agreement_patching` patches every head's output (:mod:`mha.pretrained.patching`) from one
sentence into the other, both ways, and measures how far the probe's logit moves, oriented so that positive is
toward the source's number: :class:`mha.analysis.pair_patching.PairPatching`, whose shares
are in units of the mean difference between the two sentences (1 = all of it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sklearn.linear_model import LogisticRegressionCV
from sklearn.model_selection import GroupKFold
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

from mha.analysis.head_roles.agreement import AgreementScores
from mha.analysis.pair_patching import PairPatching, patch_between_halves
from mha.core.argument_checks import check_whole_numbers
from mha.core.validation import as_array, as_path, check_items, check_rank, check_type
from mha.corpora.agreement import AgreementItem
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.traces import EncoderTrace
from mha.pretrained.word_maps import word_units

__all__ = ["PROBE_STRENGTHS", "swapped_words", "verb_vectors", "fit_number_probe", "probe_accuracy_by_layer",
           "probe_accuracy", "agreement_patching",
           "AGREEMENT_PATH", "StoredAgreement", "load_agreement"]


PROBE_STRENGTHS = (0.001, 0.01, 0.1, 1.0)
"""The inverse regularisation strengths (scikit-learn's C) the probe chooses among by cross-validation."""


def swapped_words(item: AgreementItem, other: str) -> list[str]:
    """The item's words with its subject replaced by ``other`` (3.2)."""
    check_type("item", item, AgreementItem, "an AgreementItem (mha.corpora.agreement.agreement_items)")
    words = list(item.words)
    words[item.subject] = other
    return words


def verb_vectors(trace: EncoderTrace, verbs: Sequence[int], states=None) -> np.ndarray:
    """Each sentence's verb vector: the mean of its pieces' last-layer states, (batch, d_model) (3.2).

    ``trace`` was traced from words (``is_split_into_words=True``); ``verbs`` gives each sentence's verb (a word
    index); ``states`` (batch, seq, d_model), a patched run of the same batch, replaces the trace's last layer.
    """
    check_type("trace", trace, EncoderTrace, "an EncoderTrace traced from words (is_split_into_words=True)")
    states = trace.hidden_states[-1] if states is None else states  # (batch, seq, d_model)
    states = as_array("states", states)  # (batch, seq, d_model), in its own dtype
    check_rank("states", states.shape, (3,), "(batch, seq, d_model): a run of the trace's batch")
    verbs = check_whole_numbers("verbs", verbs, minimum=0, meaning="each sentence's verb, a word index")
    if len(verbs) != states.shape[0]:
        raise ValueError(f"{len(verbs)} verbs for a batch of {states.shape[0]} sentences; give one verb each.")
    vectors = []
    for b, verb in enumerate(verbs):
        units = word_units(trace.word_ids[b][: trace.lengths[b]])
        if not 0 <= verb < len(units):
            raise ValueError(f"sentence {b} has {len(units)} words, so word {verb} cannot be its verb.")
        vectors.append(states[b, list(units[verb])].mean(axis=0))
    return np.stack(vectors)


def _pair_traces(encoder: MiniLMEncoder, pairs) -> tuple[EncoderTrace, list[int], np.ndarray]:
    """One trace of every pair's two sentences, originals first: rows 0..n-1 and n..2n-1; the verbs; plural or not."""
    originals = [list(item.words) for item, _ in pairs]
    swapped = [swapped_words(item, other) for item, other in pairs]
    trace = encoder.trace(originals + swapped, is_split_into_words=True)
    verbs = [item.verb for item, _ in pairs] * 2
    plural = np.array([item.number == "Plur" for item, _ in pairs] + [item.number != "Plur" for item, _ in pairs])
    return trace, verbs, plural


def fit_number_probe(encoder: MiniLMEncoder, pairs: Sequence[tuple[AgreementItem, str]], *,
                     layer: int = -1) -> Pipeline:
    """A probe for the subject's number from the verb's vector at ``layer`` (default the last), trained on both
    sentences of ``pairs`` (:func:`mha.corpora.agreement.number_swaps`); ``predict`` 1 means plural (3.2).

    Standardised features and an L2-regularised logistic regression whose strength is chosen by 5-fold
    cross-validation over the pairs (both sentences of a pair in the same fold), among :data:`PROBE_STRENGTHS`.
    """
    pairs = check_items("pairs", pairs, "a list of (AgreementItem, other form) from number_swaps")
    if len(pairs) < 5:
        raise ValueError(f"{len(pairs)} pairs cannot be cut into 5 folds; give at least 5 pairs to train a probe on.")
    trace, verbs, plural = _pair_traces(encoder, pairs)
    return _fitted_probe(verb_vectors(trace, verbs, trace.hidden_states[layer]), plural)


def _fitted_probe(features: np.ndarray, plural: np.ndarray) -> Pipeline:
    """The probe fitted on (2 * pairs, d_model) features, originals first, and their labels (2 * pairs,)."""
    pairs = len(plural) // 2
    folds = list(GroupKFold(n_splits=5).split(features, plural, groups=np.tile(np.arange(pairs), 2)))
    regression = LogisticRegressionCV(Cs=list(PROBE_STRENGTHS), cv=folds, max_iter=5000, l1_ratios=(0.0,),
                                      scoring="accuracy", use_legacy_attributes=False)  # L2, chosen by accuracy
    return make_pipeline(StandardScaler(), regression).fit(features, plural.astype(int))


def probe_accuracy_by_layer(encoder: MiniLMEncoder, train: Sequence[tuple[AgreementItem, str]],
                            test: Sequence[tuple[AgreementItem, str]]) -> np.ndarray:
    """How well the subject's number can be read at the verb after each layer: a probe trained on ``train`` at
    every layer (0 = the embeddings) and scored on ``test``, (layers + 1,) (3.2)."""
    train = check_items("train", train, "a list of (AgreementItem, other form) from number_swaps")
    test = check_items("test", test, "a list of (AgreementItem, other form) from number_swaps")
    if len(train) < 5:
        raise ValueError(f"{len(train)} pairs cannot be cut into 5 folds; give at least 5 pairs to train on.")
    (train_trace, train_verbs, train_plural), (trace, verbs, plural) = (_pair_traces(encoder, train),
                                                                        _pair_traces(encoder, test))
    accuracies = []
    for layer in range(len(trace.hidden_states)):
        probe = _fitted_probe(verb_vectors(train_trace, train_verbs, train_trace.hidden_states[layer]), train_plural)
        predicted = probe.predict(verb_vectors(trace, verbs, trace.hidden_states[layer]))  # (2 * test pairs,)
        accuracies.append(float((predicted == plural).mean()))
    return np.array(accuracies)


def probe_accuracy(encoder: MiniLMEncoder, probe: Pipeline,
                   pairs: Sequence[tuple[AgreementItem, str]]) -> float:
    """The share of the sentences of ``pairs`` (both of each) whose subject's number ``probe`` reads right (3.2)."""
    pairs = check_items("pairs", pairs, "a list of (AgreementItem, other form) from number_swaps")
    trace, verbs, plural = _pair_traces(encoder, pairs)
    return float((probe.predict(verb_vectors(trace, verbs)) == plural).mean())


def agreement_patching(encoder: MiniLMEncoder, pairs: Sequence[tuple[AgreementItem, str]],
                       probe: Pipeline, *, chunk: int = 16) -> PairPatching:
    """Patch every head between the two sentences of each pair and measure the move of the probe's logit (3.2).

    Pairs whose two sentences have different numbers of tokens cannot be patched and are named in ``left_out``;
    pair ids are ``"<sentence>:<verb>"``. ``difference`` (pairs,): the logit of the sentence with the plural subject
    minus the other's; ``carried`` (pairs, layers, heads): how far patching the head moves it, in the same units and
    direction, averaged over both directions (:func:`mha.analysis.pair_patching.patch_between_halves`). ``chunk``
    pairs are patched at a time.
    """
    pairs = check_items("pairs", pairs, "a list of (AgreementItem, other form) from number_swaps")
    originals = [list(item.words) for item, _ in pairs]
    swapped = [swapped_words(item, other) for item, other in pairs]
    lengths = encoder.tokenize(originals + swapped, is_split_into_words=True).lengths
    same = [lengths[i] == lengths[i + len(pairs)] for i in range(len(pairs))]
    kept = [i for i, ok in enumerate(same) if ok]
    if not kept:
        raise ValueError("no pair has two sentences of the same length in tokens, so none can be patched.")
    differences, carried = [], []
    for first in range(0, len(kept), chunk):
        part = kept[first:first + chunk]
        verbs = [pairs[i][0].verb for i in part] * 2

        def logit(target, states, verbs=verbs):
            return probe.decision_function(verb_vectors(target, verbs, states))  # (2 * pairs,)

        raw_difference, moved = patch_between_halves(encoder, [originals[i] for i in part],
                                                     [swapped[i] for i in part], logit)
        orientation = np.array([1.0 if pairs[i][0].number == "Plur" else -1.0 for i in part])  # +1: original plural
        differences.append(orientation * raw_difference)
        carried.append(orientation[:, None, None] * moved)
    ids = tuple(f"{pairs[i][0].tree}:{pairs[i][0].verb}" for i in kept)
    left_out = tuple(f"{item.tree}:{item.verb}" for (item, _), ok in zip(pairs, same, strict=True) if not ok)
    return PairPatching(ids, np.concatenate(differences), np.concatenate(carried), left_out)


AGREEMENT_PATH = DATA_DIRECTORY / "ewt_agreement.json"
"""Every head scored and patched on EWT's agreement items, written by ``scripts/ewt_agreement.py``."""


@dataclass(frozen=True)
class StoredAgreement:
    """What ``scripts/ewt_agreement.py`` stores (3.2): the attention scores of every item, the sentences of the
    selection half, the probe's accuracy on the report half's pairs (after each layer, and at the last one), and
    the patching of every pair."""

    scores: AgreementScores
    selection: np.ndarray
    probe_accuracy: float
    probe_accuracy_by_layer: np.ndarray
    patching: PairPatching


def load_agreement(path: str | Path = AGREEMENT_PATH, *, check: bool = False) -> StoredAgreement | AgreementScores:
    """The stored :class:`StoredAgreement`, checked against ``data/SHA256SUMS``; a missing, tampered or malformed
    file raises ``ValueError`` saying how to restore it (3.2). With ``check=True``: the scores of the first items
    alone, which the script also computed on their own, to recompute and compare."""
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored agreement scores"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.ewt_agreement", limit=8_000_000)
    try:
        if check:
            return AgreementScores.from_dict(content["check"])
        patching = content["patching"]
        carried = np.asarray(patching["carried"], dtype=float)
        difference = np.asarray(patching["difference"], dtype=float)
        ids = tuple(str(i) for i in patching["pair_ids"])
        if carried.ndim != 3 or carried.shape[0] != len(ids) or difference.shape != (len(ids),):
            raise ValueError("the patching needs one row per pair")
        probe = content["probe"]
        return StoredAgreement(AgreementScores.from_dict(content["scores"]),
                               np.asarray(content["selection_sentences"], dtype=int),
                               float(probe["held_out_accuracy"]),
                               np.asarray(probe["held_out_accuracy_by_layer"], dtype=float),
                               PairPatching(ids, difference, carried, tuple(str(i) for i in patching["left_out"])))
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{what} {path} is malformed ({error}). {how}") from None
