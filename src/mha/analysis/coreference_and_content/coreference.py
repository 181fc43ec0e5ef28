"""Does a head link a pronoun to its antecedent? Heads scored on pronoun minimal pairs (3.3 "Coreference, honestly").

The pronoun items of :func:`mha.corpora.templates.pronoun_pairs` come in minimal pairs:
two sentences that differ in one word, which flips the noun the pronoun
refers to ("The trophy does not fit in the suitcase because it is too
big / small"). For each item and head we read the word-level attention
from the pronoun's ROW (query, attends FROM) to each candidate noun's COLUMN
(key, attended TO), and the head "picks" the candidate it attends to most.

Accuracy alone misleads here: the answers are balanced (one per candidate
in every pair), so a head that always picks the same position scores exactly
50%, and so do the nearest-noun and first-noun baselines. What matters is
whether the pick FLIPS when the one word flips the answer:

* right flip: the head picks the correct candidate in both halves;
* wrong flip: it picks the wrong one in both (it flips, the wrong way round);
* no flip: the same position in both halves (one right, one wrong).

With two candidates, accuracy over a pair is 1, 0 or 1/2 in these three cases,
so ``accuracy = 1/2 + (right - wrong) / (2 * pairs)``.

Attention says where a head reads; :func:`pair_patching` asks what its output
carries. For each pair it patches every head's output from one half into the
other (:mod:`mha.pretrained.patching`) and measures how much of the pair's
difference in the pronoun's final vector (:func:`lean_to_first_candidate`)
moves with it; ``scripts/coreference_patching.py`` stores the result, which
:func:`load_pair_patching` reads.

Candidates are indexed in sentence order, as in ``AnnotatedSentence.candidates``:
a pick of 0 is the first candidate. Word indices refer to ``sentence.words``,
so trace the gold words with ``is_split_into_words=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha.analysis.pair_patching import PairPatching, patch_between_halves
from mha.core.argument_checks import check_whole_numbers
from mha.core.layouts import WORDS, takes_attention
from mha.core.validation import InputError, as_path, as_real_array, check_items, check_type, check_whole_number
from mha.corpora.annotation import AnnotatedSentence
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder, check_encoder
from mha.pretrained.interventions import final_states_without_each_head
from mha.pretrained.traces import EncoderTrace, check_trace
from mha.pretrained.word_maps import word_attention, word_units

__all__ = [
    "candidate_weights",
    "candidate_picks",
    "baseline_picks",
    "pair_halves",
    "flip_scores",
    "FlipCounts",
    "count_flips",
    "antecedent_preference",
    "PronounScores",
    "score_pronoun_items",
    "candidate_similarity",
    "lean_to_first_candidate",
    "pair_patching",
    "COREFERENCE_PATCHING_PATH",
    "load_pair_patching",
    "antecedent_lean",
    "lean_change_without_each_head",
    "COREFERENCE_REMOVAL_PATH",
    "load_lean_change_without_each_head",
]


@takes_attention(word_maps=WORDS.with_leading(6))
def candidate_weights(word_maps: np.ndarray, pronoun: int, candidates: Sequence[int]) -> np.ndarray:
    """Weight from the pronoun's row to each candidate's column: (..., words, words) -> (..., candidates).

    ``word_maps`` are word-level attention maps (rows = query, columns = key),
    any leading axes (layers, heads). Chapter 3, "Coreference, honestly".
    """
    word_maps = as_real_array("word_maps", word_maps)
    n = word_maps.shape[-1] if word_maps.ndim else 0
    if word_maps.ndim < 2 or word_maps.shape[-2] != n:
        raise ValueError(f"word_maps has shape {word_maps.shape}; it should be (..., words, words).")
    pronoun = check_whole_number("pronoun", pronoun, meaning="the pronoun's word index")
    candidates = check_whole_numbers("candidates", candidates, meaning="the candidates' word indices")
    bad = [i for i in (pronoun, *candidates) if not 0 <= i < n]
    if bad or not len(candidates):
        raise ValueError(f"pronoun {pronoun} and candidates {tuple(candidates)} must be word indices in 0..{n - 1} "
                         "(and at least one candidate).")
    return word_maps[..., pronoun, list(candidates)]  # (..., candidates)


def candidate_picks(weights: np.ndarray) -> np.ndarray:
    """The candidate each head attends to most: (..., candidates) -> (...) indices (ties: the first).

    Chapter 3, "Coreference, honestly".
    """
    weights = as_real_array("weights", weights, meaning="(..., candidates)")
    if weights.ndim == 0 or weights.shape[-1] == 0:
        raise InputError(f"weights has shape {weights.shape}; give (..., candidates) with at least one candidate.")
    return weights.argmax(axis=-1)


def baseline_picks(items: Sequence[AnnotatedSentence], rule: str) -> np.ndarray:
    """What a fixed rule picks for each pronoun item, as an index into its candidates (items,).

    ``rule="nearest"``: the candidate closest before the pronoun (the
    recency heuristic; closest after it if none precedes it);
    ``rule="first"``: the first candidate in the sentence (in these items,
    the subject: the subject-preference heuristic). Chapter 3, "Coreference, honestly".
    """
    if not isinstance(rule, str) or rule not in ("nearest", "first"):
        raise ValueError(f"rule must be 'nearest' or 'first', got {rule!r}.")
    picks = []
    for item in _pronoun_items(items):
        _check_item(item)
        if rule == "first":
            picks.append(0)
            continue
        before = [k for k, c in enumerate(item.candidates) if c < item.pronoun]
        if before:
            picks.append(max(before, key=lambda k: item.candidates[k]))
        else:
            picks.append(min(range(len(item.candidates)), key=lambda k: abs(item.candidates[k] - item.pronoun)))
    return np.array(picks)


def _pronoun_items(items) -> tuple[AnnotatedSentence, ...]:
    """``items`` as a tuple, or an error if it is not a list."""
    return tuple(check_items("items", items, "a list of pronoun items (AnnotatedSentences), e.g. pronoun_pairs()"))


def _check_item(item: AnnotatedSentence) -> None:
    check_type("each item", item, AnnotatedSentence, "a pronoun item, an AnnotatedSentence, e.g. from pronoun_pairs()")
    if item.pronoun is None or not item.candidates or item.antecedent is None:
        raise ValueError(f"{item.text!r} is not a pronoun item: it needs pronoun, candidates and antecedent.")


def pair_halves(items: Sequence[AnnotatedSentence]) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the two halves of every minimal pair: ``(first, second)``, each (pairs,).

    Items are grouped by ``pair_id`` in order of first appearance; each pair
    must have exactly two items whose antecedents differ. Chapter 3, "Coreference, honestly".
    """
    items = check_items("items", items, "a list of AnnotatedSentences in minimal pairs")
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(items):
        _check_item(item)
        if item.pair_id is None:
            raise ValueError(f"{item.text!r} has no pair_id, so its minimal pair cannot be found.")
        groups.setdefault(item.pair_id, []).append(index)
    for pair_id, members in groups.items():
        if len(members) != 2:
            raise ValueError(f"pair {pair_id!r} has {len(members)} items; a minimal pair has exactly 2.")
        if items[members[0]].antecedent == items[members[1]].antecedent:
            raise ValueError(f"the two halves of pair {pair_id!r} have the same antecedent; nothing flips.")
    first = np.array([members[0] for members in groups.values()])
    second = np.array([members[1] for members in groups.values()])
    return first, second


def flip_scores(picks_first, picks_second, answers_first, answers_second) -> np.ndarray:
    """Per pair and head: +1 for a right flip, -1 for a wrong flip, 0 for no flip (chapter 3).

    ``picks_*`` (pairs, heads...) are the candidate indices a head picked in
    each half; ``answers_*`` (pairs,) the correct ones, which must differ
    within a pair (two candidates per item). Right flip: correct in both
    halves; wrong flip: wrong in both; otherwise the head picked the same
    candidate twice. Chapter 3, "Coreference, honestly".
    """
    picks_first, picks_second = np.asarray(picks_first), np.asarray(picks_second)
    answers_first, answers_second = np.asarray(answers_first), np.asarray(answers_second)
    if picks_first.shape != picks_second.shape or picks_first.shape[:1] != answers_first.shape:
        raise ValueError(
            f"picks of shapes {picks_first.shape} and {picks_second.shape} and answers of shape "
            f"{answers_first.shape}: give picks (pairs, heads...) for both halves and answers (pairs,)."
        )
    if np.any(answers_first == answers_second):
        raise ValueError("in every pair the two halves need different answers; otherwise nothing can flip.")
    expand = (slice(None),) + (None,) * (picks_first.ndim - 1)
    right_first = picks_first == answers_first[expand]
    right_second = picks_second == answers_second[expand]
    return right_first.astype(int) + right_second.astype(int) - 1  # 2 right -> +1, 0 right -> -1, else 0


@dataclass(frozen=True)
class FlipCounts:
    """How many pairs each head flips the right way, the wrong way, or not at all, each (heads...) (chapter 3)."""

    right: np.ndarray
    wrong: np.ndarray
    unchanged: np.ndarray

    @property
    def accuracy(self) -> np.ndarray:
        """Accuracy over both halves of all pairs: 1/2 + (right - wrong) / (2 * pairs)."""
        pairs = self.right + self.wrong + self.unchanged
        return 0.5 + (self.right - self.wrong) / (2 * pairs)


def count_flips(picks_first, picks_second, answers_first, answers_second) -> FlipCounts:
    """Right flips, wrong flips and no-flips per head, summed over pairs (see :func:`flip_scores`) (chapter 3)."""
    scores = flip_scores(picks_first, picks_second, answers_first, answers_second)  # (pairs, heads...)
    return FlipCounts(right=(scores == 1).sum(axis=0), wrong=(scores == -1).sum(axis=0),
                      unchanged=(scores == 0).sum(axis=0))


def antecedent_preference(weights, answers) -> np.ndarray:
    """Weight on the correct candidate minus weight on the other: (items, heads..., 2), (items,) -> (items, heads...).

    For two-candidate items. Averaged over the two halves of a pair it is
    about 0 for a head that ignores the word that flips the answer, and
    positive for a head that moves toward the right noun. Chapter 3, "Coreference, honestly".
    """
    weights = as_real_array("weights", weights)
    answers = np.asarray(answers)
    if weights.ndim < 2 or answers.ndim != 1 or weights.shape[-1] != 2 or weights.shape[0] != answers.shape[0]:
        raise ValueError(f"weights {weights.shape} should be (items, heads..., 2) and answers (items,), "
                         f"got answers {answers.shape}.")
    expand = (slice(None),) + (None,) * (weights.ndim - 2)
    correct = np.take_along_axis(weights, answers[expand][..., None], axis=-1)[..., 0]
    other = np.take_along_axis(weights, (1 - answers)[expand][..., None], axis=-1)[..., 0]
    return correct - other


@dataclass(frozen=True)
class PronounScores:
    """Every head's attention from each pronoun to its candidates (chapter 3, "Coreference, honestly").

    ``weights`` (items, layers, heads, candidates): word-level weight from
    the pronoun's row to each candidate's column; ``answers`` (items,): the
    index of the correct candidate; ``first`` and ``second`` (pairs,): the
    item indices of each minimal pair's two halves (:func:`pair_halves`).
    """

    items: tuple[AnnotatedSentence, ...]
    weights: np.ndarray
    answers: np.ndarray
    first: np.ndarray
    second: np.ndarray

    @property
    def picks(self) -> np.ndarray:
        """(items, layers, heads): the candidate each head attends to most."""
        return candidate_picks(self.weights)

    @property
    def accuracy(self) -> np.ndarray:
        """(layers, heads): share of items where the head's pick is the antecedent."""
        return (self.picks == self.answers[:, None, None]).mean(axis=0)

    def flips(self) -> FlipCounts:
        """Right / wrong / no flips per head, each (layers, heads)."""
        picks = self.picks
        return count_flips(picks[self.first], picks[self.second], self.answers[self.first], self.answers[self.second])

    def flip_scores(self) -> np.ndarray:
        """(pairs, layers, heads): +1 right flip, -1 wrong flip, 0 no flip."""
        picks = self.picks
        return flip_scores(picks[self.first], picks[self.second], self.answers[self.first], self.answers[self.second])

    def preference_shift(self) -> np.ndarray:
        """(pairs, layers, heads): the antecedent preference averaged over the two halves of each pair."""
        preference = antecedent_preference(self.weights, self.answers)  # (items, layers, heads)
        return (preference[self.first] + preference[self.second]) / 2


def _answers(items: Sequence[AnnotatedSentence]) -> np.ndarray:
    return np.array([item.candidates.index(item.antecedent) for item in items])


def score_pronoun_items(trace: EncoderTrace, items: Sequence[AnnotatedSentence]) -> PronounScores:
    """Read every head's pronoun -> candidate weights from a trace of ``items`` (chapter 3, "Coreference, honestly").

    ``trace`` must come from ``encoder.trace([list(s.words) for s in items],
    is_split_into_words=True)`` (possibly with a head mask or an attention
    override), so that word ids index ``sentence.words``. Word pieces are
    merged as in :func:`mha.pretrained.word_maps.word_attention` (received: summed; sent:
    averaged; special tokens dropped).
    """
    items = _pronoun_items(items)
    if len(check_trace(trace).inputs) != len(items):
        raise ValueError(f"the trace has {len(trace.inputs)} sentences but {len(items)} items were given.")
    weights = []
    for index, item in enumerate(items):
        _check_item(item)
        word_ids = _word_ids(trace, index, item)
        word_maps = word_attention(trace.attention_maps(index), word_ids)  # (layers, heads, words, words)
        weights.append(candidate_weights(word_maps, item.pronoun, item.candidates))  # (layers, heads, candidates)
    first, second = pair_halves(items)
    return PronounScores(items, np.stack(weights), _answers(items), first, second)


def _word_ids(trace: EncoderTrace, index: int, item: AnnotatedSentence) -> list[int | None]:
    """The word ids of sentence ``index`` of the trace, padding removed, checked against the item's words."""
    word_ids = trace.word_ids[index][: trace.lengths[index]]
    if len(word_units(word_ids)) != len(item.words):
        raise ValueError(f"item {index} ({item.text!r}) was not traced from its own words; "
                         "use is_split_into_words=True with list(item.words).")
    return word_ids


def _unit_vectors(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def candidate_similarity(trace: EncoderTrace, items: Sequence[AnnotatedSentence], layer: int = -1,
                         states=None) -> np.ndarray:
    """Cosine similarity of the pronoun's hidden state to each candidate's: (items, candidates) (chapter 3).

    Reads ``trace.hidden_states[layer]`` (0 = embeddings, -1 = the last
    layer's output), or ``states`` (batch, seq, d_model) when given, e.g. the
    output of a model with a head removed (:mod:`mha.pretrained.interventions`), for the
    same batch. A word of several pieces is the mean of its pieces' vectors.
    Chapter 3, "Coreference, honestly" (the intervention).
    """
    items = _pronoun_items(items)
    if len(check_trace(trace).inputs) != len(items):
        raise ValueError(f"the trace has {len(trace.inputs)} sentences but {len(items)} items were given.")
    hidden_states = trace.hidden_states[layer] if states is None else states  # (batch, seq, d_model)
    hidden_states = np.asarray(hidden_states.detach().cpu() if hasattr(hidden_states, "detach") else hidden_states)
    if hidden_states.shape[:2] != tuple(trace.inputs.input_ids.shape):
        raise ValueError(f"states have shape {hidden_states.shape}; they should be (batch, seq, d_model) for the "
                         f"traced batch of shape {tuple(trace.inputs.input_ids.shape)}.")
    similarities = []
    for index, item in enumerate(items):
        _check_item(item)
        units = word_units(_word_ids(trace, index, item))
        hidden = hidden_states[index]  # (seq, d_model)

        def word_vector(word: int, hidden: np.ndarray = hidden, units: list[tuple[int, ...]] = units) -> np.ndarray:
            return hidden[list(units[word])].mean(axis=0)  # (d_model,)

        pronoun = _unit_vectors(word_vector(item.pronoun))
        similarities.append([float(pronoun @ _unit_vectors(word_vector(c))) for c in item.candidates])
    return np.array(similarities)


def lean_to_first_candidate(trace: EncoderTrace, items: Sequence[AnnotatedSentence], states=None) -> np.ndarray:
    """How much the pronoun's vector leans to the first candidate: cos(it, first) - cos(it, second), (items,).

    :func:`candidate_similarity` of the last layer (or of ``states``
    (batch, seq, d_model), a patched run of the same batch) for two-candidate
    items. The readout of "which referent" in chapter 3, "Coreference, honestly".
    """
    similarity = candidate_similarity(trace, items, states=states)  # (items, candidates)
    if similarity.shape[1] != 2:
        raise ValueError(f"the items have {similarity.shape[1]} candidates; the lean compares exactly two.")
    return similarity[:, 0] - similarity[:, 1]


def pair_patching(encoder: MiniLMEncoder, items: Sequence[AnnotatedSentence]) -> PairPatching:
    """Patch every head's output between the two halves of each minimal pair of ``items`` (chapter 3).

    Both halves are traced from their gold words, as in :func:`score_pronoun_items`; a pair whose halves have
    different numbers of tokens is left out (named in ``left_out``). Every head of the first halves is patched
    from the second halves and the reverse, in one batch (:func:`mha.analysis.pair_patching.patch_between_halves`),
    and the change of :func:`lean_to_first_candidate` is turned into :class:`PairPatching`.
    """
    items = _pronoun_items(items)
    all_first, all_second = pair_halves(items)
    words = [list(item.words) for item in items]
    lengths = encoder.tokenize(words, is_split_into_words=True).lengths
    same_length = np.array([lengths[a] == lengths[b] for a, b in zip(all_first, all_second, strict=True)])
    if not same_length.any():
        raise ValueError("no pair has two halves of the same length in tokens, so none can be patched.")
    first, second = all_first[same_length], all_second[same_length]
    rows = np.concatenate([first, second])  # the batch: first halves, then second halves

    def lean(target, states):
        return lean_to_first_candidate(target, [items[i] for i in rows], states)  # (rows,)

    raw_difference, moved = patch_between_halves(encoder, [words[i] for i in first], [words[i] for i in second],
                                                 lean)
    orientation = np.where(_answers([items[i] for i in first]) == 0, 1.0, -1.0)  # +1: first half's answer is first
    # patching the first half from the second moves it toward the second's lean, and the reverse; both, oriented
    # like the difference, are what the head carries
    difference = orientation * raw_difference  # (pairs,)
    carried = orientation[:, None, None] * moved  # (pairs, layers, heads)
    left_out = tuple(items[i].pair_id for i in all_first[~same_length])
    return PairPatching(tuple(items[i].pair_id for i in first), difference, carried, left_out)


COREFERENCE_PATCHING_PATH = DATA_DIRECTORY / "coreference_patching.json"
"""Every head patched between the halves of 3.3's minimal pairs, written by ``scripts/coreference_patching.py``."""


def load_pair_patching(path: str | Path = COREFERENCE_PATCHING_PATH) -> PairPatching:
    """The stored :class:`PairPatching` of ``scripts/coreference_patching.py``, checked against ``data/SHA256SUMS``.

    A missing, tampered or malformed file raises ``ValueError`` with the command that regenerates it
    (chapter 3, "Coreference, honestly").
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored patching of the pronoun pairs"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.coreference_patching", limit=1_000_000)
    try:
        pair_ids = tuple(str(pair_id) for pair_id in content["pair_ids"])
        left_out = tuple(str(pair_id) for pair_id in content["left_out"])
        difference = np.asarray(content["difference"], dtype=float)
        carried = np.asarray(content["carried"], dtype=float)
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{what} {path} is malformed: it needs 'pair_ids', 'left_out', 'difference' (pairs,) and "
                         f"'carried' (pairs, layers, heads) of numbers. {how}") from None
    if difference.shape != (len(pair_ids),) or carried.ndim != 3 or carried.shape[0] != len(pair_ids):
        raise ValueError(f"{what} {path} has {len(pair_ids)} pairs, 'difference' {difference.shape} and 'carried' "
                         f"{carried.shape}; they should be (pairs,) and (pairs, layers, heads). {how}")
    return PairPatching(pair_ids, difference, carried, left_out)


def antecedent_lean(trace: EncoderTrace, items: Sequence[AnnotatedSentence], states=None) -> np.ndarray:
    """Per minimal pair: cos(it, correct) - cos(it, other) of the final states, averaged over its halves: (pairs,).

    :func:`candidate_similarity` of the last layer (or of ``states`` (batch, seq, d_model), a changed run of the
    same batch), oriented by each item's answer; pairs as :func:`pair_halves` finds them (chapter 3, "Coreference,
    honestly": does the representation of *it* lean toward its antecedent).
    """
    first, second = pair_halves(items)
    answers = _answers(items)
    rows = np.arange(len(answers))
    similarity = candidate_similarity(trace, items, states=states)  # (items, 2)
    preference = similarity[rows, answers] - similarity[rows, 1 - answers]  # (items,)
    return (preference[first] + preference[second]) / 2


def lean_change_without_each_head(encoder: MiniLMEncoder, items: Sequence[AnnotatedSentence]) -> np.ndarray:
    """How removing each head changes the mean :func:`antecedent_lean` of ``items``: (layers, heads) (chapter 3).

    The items are traced from their gold words; each head is removed in turn
    (:func:`mha.pretrained.interventions.final_states_without_each_head`), and the entry is the mean lean without
    it minus the full model's. ``scripts/coreference_removal.py`` stores it for the book's pairs.
    """
    items = _pronoun_items(items)
    for item in items:
        _check_item(item)
    trace = check_encoder(encoder).trace([list(item.words) for item in items], is_split_into_words=True)
    full = antecedent_lean(trace, items).mean()
    change = np.zeros((encoder.config.n_layers, encoder.config.n_heads))
    for (layer, head), states in final_states_without_each_head(encoder, trace).items():
        change[layer, head] = antecedent_lean(trace, items, states).mean() - full
    return change


COREFERENCE_REMOVAL_PATH = DATA_DIRECTORY / "coreference_removal.json"
"""Every head removed in turn from 3.3's minimal pairs, written by ``scripts/coreference_removal.py``."""


def load_lean_change_without_each_head(path: str | Path = COREFERENCE_REMOVAL_PATH) -> np.ndarray:
    """The stored :func:`lean_change_without_each_head` of the book's pairs, (layers, heads), checked (chapter 3).

    Read from ``path`` (default: the book's file), checked against ``data/SHA256SUMS``: a missing, tampered or
    malformed file raises ``ValueError`` with the command that regenerates it.
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored change of the lean of 'it' with each head removed"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.coreference_removal", limit=100_000)
    try:
        change = np.asarray(content["change"], dtype=float)
    except (KeyError, TypeError, ValueError):
        change = None
    if change is None or change.ndim != 2 or not change.size or not np.isfinite(change).all():
        raise ValueError(f"{what} {path} is malformed: it needs 'change', a (layers, heads) table of numbers. "
                         f"{how}")
    return change
