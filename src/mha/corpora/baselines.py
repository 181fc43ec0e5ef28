"""Guesses that read no attention, scored on the gold relations: what a head must beat (chapter 3).

A head that puts its largest weight on the word two to the right is "right" on every relation that the word two
to the right happens to fill. :func:`fixed_offset_baseline` is the best such guess for a relation (Clark et al.
2019), :func:`nearest_candidate_baseline` the nearest-noun guess for a pronoun's antecedent. Both read only the
annotated sentences (:mod:`mha.corpora.annotation`); :mod:`mha.analysis.head_roles.role_table` sets each head's accuracy
beside them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from mha.core.validation import check_items, check_type
from mha.corpora.annotation import RELATION_KINDS, AnnotatedSentence

__all__ = ["SYNTACTIC_KINDS", "best_offset", "fixed_offset_baseline", "nearest_candidate_baseline",
           "nearest_candidate_before"]

#: relation kinds scored by "most-attended word" accuracy; pronouns are scored among their candidates instead
SYNTACTIC_KINDS: tuple[str, ...] = tuple(k for k in RELATION_KINDS if k != "pron_antecedent")


def best_offset(offset_counts: Counter, total: int, offsets: Sequence[int]) -> tuple[float, int]:
    """Accuracy and value of the offset that most often lands on the gold word (ties: smallest |offset|, then
    negative)."""
    check_type("offset_counts", offset_counts, Mapping, "a Counter of gold words by offset")
    if total == 0:
        return math.nan, 0
    best = max(sorted(offsets, key=lambda k: (abs(k), k)), key=lambda k: offset_counts[k])
    return offset_counts[best] / total, best


def fixed_offset_baseline(sentences: Iterable[AnnotatedSentence], kind: str, direction: str = "source_to_target",
                          offsets: Sequence[int] = tuple(range(-5, 6))) -> tuple[float, int]:
    """The best fixed-offset guess for a relation, in one direction (chapter 3, empirical head roles).

    For ``direction="source_to_target"`` the guess for a source word at index
    ``i`` is the word at ``i + offset``; for ``"target_to_source"`` the guess
    for the target is ``target + offset``. The offset is the one in
    ``offsets`` (0 excluded) that is right most often over ``sentences``,
    the fixed-offset baseline of Clark et al. (2019). Returns ``(accuracy,
    offset)``; accuracy is NaN when no sentence has the relation.
    """
    if kind not in SYNTACTIC_KINDS:
        raise ValueError(f"kind must be one of {', '.join(SYNTACTIC_KINDS)}, got {kind!r}.")
    if direction not in ("source_to_target", "target_to_source"):
        raise ValueError(f"direction must be 'source_to_target' or 'target_to_source', got {direction!r}.")
    sign = 1 if direction == "source_to_target" else -1
    counts: Counter = Counter()
    for sentence in sentences:
        counts.update(sign * (r.target - r.source) for r in sentence.relations_of(kind))
    return best_offset(counts, sum(counts.values()), [k for k in offsets if k != 0])


def nearest_candidate_before(sentence: AnnotatedSentence) -> int:
    """The candidate closest before the pronoun (closest after it if none precedes it)."""
    check_type("sentence", sentence, AnnotatedSentence, "an AnnotatedSentence with a pronoun")
    before = [c for c in sentence.candidates if c < sentence.pronoun]
    if before:
        return max(before)
    return min(sentence.candidates, key=lambda c: abs(c - sentence.pronoun))


def nearest_candidate_baseline(sentences: Iterable[AnnotatedSentence]) -> float:
    """Accuracy of guessing each pronoun's antecedent as the nearest candidate before it (chapter 3, empirical head
    roles).

    Only sentences with a ``pronoun``, ``candidates`` and ``antecedent`` count;
    when no candidate precedes the pronoun the nearest one after it is the
    guess. Returns NaN when no sentence qualifies. In the template corpus each
    minimal pair has one answer per candidate, so this baseline scores 0.5.
    """
    sentences = check_items("sentences", sentences, "a list of AnnotatedSentences, e.g. generate_corpus()")
    for index, sentence in enumerate(sentences):
        check_type(f"sentences[{index}]", sentence, AnnotatedSentence, "an AnnotatedSentence, e.g. from "
                   "generate_corpus()")
    guesses = [
        nearest_candidate_before(s) == s.antecedent
        for s in sentences
        if s.pronoun is not None and s.candidates and s.antecedent is not None
    ]
    return float(np.mean(guesses)) if guesses else math.nan
