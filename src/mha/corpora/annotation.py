"""A sentence with gold word-to-word relations: the form every corpus of the book is read into (chapter 3).

The templates (:mod:`mha.corpora.templates`) write sentences whose relations are known by construction; the
treebank reader (:mod:`mha.corpora.treebank`) reads them from Universal Dependencies. Both give
:class:`AnnotatedSentence` objects, whose :class:`Relation` arrows the head scores of :mod:`mha.analysis` read.

Relations are arrows between WORD indices (not wordpiece tokens), and the
name of a kind spells the arrow, source first:

========================  ==========================================================
kind                      source -> target
========================  ==========================================================
``det_noun``              determiner -> the noun it belongs to ("the" -> "dog")
``adj_noun``              adjective -> the noun it modifies ("old" -> "dog")
``subj_verb``             subject noun -> its lexical verb ("dog" -> "sleeps"); as in
                          Universal Dependencies the verb is the main verb, not an
                          auxiliary ("dog" -> "eaten" in "the dog has eaten")
``verb_obj``              verb -> its direct object ("found" -> "key")
``prep_obj``              preposition -> its object noun ("under" -> "table")
``poss_noun``             possessor -> the possessed noun ("my" -> "coat",
                          "farmer" -> "dog" in "the farmer 's dog")
``aux_verb``              auxiliary -> the lexical verb ("will" -> "open")
``pron_antecedent``       pronoun -> its antecedent ("it" -> "trophy")
========================  ==========================================================

When attention weights are read against these arrows, the *source* word's
row is the query (attending FROM) and the *target* word's column is the key
(attended TO): ``det_noun`` accuracy asks whether the determiner's row puts its
largest weight on the noun's column. :mod:`mha.analysis.head_roles.role_table` also scores the reverse
direction (noun row -> determiner column).
"""

from __future__ import annotations

from dataclasses import dataclass

from mha.core.validation import check_items, check_type, check_whole_number

__all__ = ["RELATION_KINDS", "AnnotatedSentence", "Relation"]

RELATION_KINDS: tuple[str, ...] = (
    "det_noun",
    "adj_noun",
    "subj_verb",
    "verb_obj",
    "prep_obj",
    "poss_noun",
    "aux_verb",
    "pron_antecedent",
)


@dataclass(frozen=True)
class Relation:
    """One gold arrow ``source -> target`` between word indices of a sentence (chapter 3, empirical head roles).

    ``kind`` is one of :data:`RELATION_KINDS`, whose name spells the arrow
    (``det_noun``: ``source`` is the determiner, ``target`` the noun). Read
    against an attention map, ``source`` is a row (query, attends FROM) and
    ``target`` a column (key, attended TO).
    """

    kind: str
    source: int
    target: int

    def __post_init__(self) -> None:
        check_type("Relation.kind", self.kind, str, f"the name of a relation kind, one of {', '.join(RELATION_KINDS)}")
        if self.kind not in RELATION_KINDS:
            raise ValueError(f"unknown relation kind {self.kind!r}; choose one of {', '.join(RELATION_KINDS)}.")
        for name in ("source", "target"):
            object.__setattr__(self, name, check_whole_number(f"Relation.{name}", getattr(self, name), minimum=0,
                                                              meaning="a word index, counted from 0"))
        if self.source == self.target:
            raise ValueError(f"a {self.kind} relation cannot point from word {self.source} to itself.")


@dataclass(frozen=True)
class AnnotatedSentence:
    """A sentence as a tuple of words with its gold relations (chapter 3, empirical head roles).

    ``words`` are plain tokens, punctuation included as its own word (``"."``,
    ``","``, ``"'s"``); ``text`` joins them with spaces. ``relations`` hold
    word indices into ``words``. ``origin`` names what produced the sentence
    (a template name, ``"pronoun_pair"``, or ``"<file>#<sent_id>"`` for a
    treebank). Pronoun items also carry ``pair_id`` (shared by the two halves
    of a minimal pair), ``pronoun`` (its word index), ``candidates`` (word
    indices of the nouns it could refer to, in sentence order) and
    ``antecedent`` (the correct candidate); subject-verb items with a noun
    between subject and verb carry that noun's index as ``attractor``.
    """

    words: tuple[str, ...]
    relations: tuple[Relation, ...]
    origin: str = ""
    pair_id: str | None = None
    pronoun: int | None = None
    candidates: tuple[int, ...] = ()
    antecedent: int | None = None
    attractor: int | None = None

    def __post_init__(self) -> None:
        for name in ("words", "relations", "candidates"):  # lists in, tuples stored: the sentence stays hashable
            object.__setattr__(self, name, tuple(check_items(name, getattr(self, name), f"a list of {name}")))
        for index, relation in enumerate(self.relations):
            check_type(f"relations[{index}]", relation, Relation, "a Relation(kind, source, target)")
        if not self.words:
            raise ValueError("an AnnotatedSentence needs at least one word.")
        n = len(self.words)
        indices = [i for r in self.relations for i in (r.source, r.target)]
        indices += [i for i in (self.pronoun, self.antecedent, self.attractor) if i is not None]
        indices += list(self.candidates)
        bad = [i for i in indices if not 0 <= i < n]
        if bad:
            raise ValueError(
                f"word indices {bad} are outside 0..{n - 1} for the {n}-word sentence {' '.join(self.words)!r}."
            )
        if self.antecedent is not None and self.antecedent not in self.candidates:
            raise ValueError(
                f"antecedent {self.antecedent} must be one of the candidates {self.candidates}."
            )

    @property
    def text(self) -> str:
        """The words joined by single spaces."""
        return " ".join(self.words)

    def relations_of(self, kind: str) -> tuple[Relation, ...]:
        """The relations of one kind, in the order they were annotated."""
        return tuple(r for r in self.relations if r.kind == kind)
