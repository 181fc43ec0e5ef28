"""Subject-verb agreement in a treebank: each subject with the verb form that agrees with it, and its attractors (3.2).

In English a verb agrees in number with its subject ("the key *is*", "the keys *are*") where its form shows number:
the present tense of the third person and *was*/*were*. An **attractor** is a noun between the subject and the
verb whose number differs from the subject's ("the key to the *cabinets* is"); a reader who took the nearest noun
for the subject would be misled by it (Linzen, Dupoux and Goldberg 2016).

:func:`agreement_items` finds them in UD trees read with :func:`mha.corpora.treebank.read_ud_trees` (UD English-EWT
marks ``Number`` on nouns, pronouns and finite verbs). For every ``nsubj`` or ``nsubj:pass`` (copular subjects
included: UD makes the predicate their head) that is a noun, proper noun or pronoun with a ``Number``, the **verb**
is the finite word that agrees with it: the head's first finite ``aux`` or ``cop`` dependent after the subject when
it has one (the head is then a participle, or the predicate of a copula: in "the premise *is* that it sets ...",
*is* agrees with *premise* and *sets* with *it*), else the head itself. It is kept when it agrees with the
subject in ``Number`` and comes after it, and, with ``verbs="number"`` (the default), when its form shows number (of
the third person, in the present tense or a form of *be*); ``verbs="finite"`` keeps every finite verb that the
treebank marks with ``Number``, whatever its person and tense (whether the verb's attention finds its subject does
not depend on its form).
The words between subject and verb that are nouns or proper nouns of the other number are its attractors, wherever
they stand: in a prepositional phrase, a relative clause or a parenthesis.

``extra_subjects`` adds subjects that the basic tree does not attach to their verb but UD's **enhanced** graph
does (:func:`enhanced_subjects`): the shared subject of conjoined verbs ("Iran wants ... and *is*"), the antecedent
of a relative clause ("links today that strongly *indicate*") and the controller of an open clause.

:func:`number_swaps` makes minimal pairs for patching: the same sentence with the subject in the other number,
taking the other form from the same treebank (a noun seen in both numbers with the same lemma), so no form is
invented; the verb is left as it was, so one sentence of each pair does not agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mha.core.validation import check_items, check_type
from mha.corpora.treebank import UDTree, _checked_words_and_heads, _parsed_sentences, _treebank_text, check_trees

__all__ = ["SUBJECT_UPOS", "VERB_KINDS", "AgreementItem", "enhanced_subjects", "agreement_items", "number_swaps"]

SUBJECT_UPOS = frozenset({"NOUN", "PROPN", "PRON"})
"""The parts of speech of the subjects kept; attractors are nouns and proper nouns."""

VERB_KINDS = ("number", "finite")
"""Which verbs :func:`agreement_items` keeps: those whose form shows number, or every finite one of the third person."""


@dataclass(frozen=True)
class AgreementItem:
    """A subject and the verb form that agrees with it in one sentence, word indices from 0 (3.2).

    ``tree``: the sentence's index in the list given to :func:`agreement_items`; ``number``: the subject's,
    ``"Sing"`` or ``"Plur"``; ``attractors``: the nouns between subject and verb of the other number;
    ``shows_number``: the verb's form shows number (present tense or *be*); ``enhanced``: the subject is attached to
    the verb only in the enhanced graph.
    """

    tree: int
    words: tuple[str, ...]
    subject: int
    verb: int
    number: str
    subject_upos: str
    attractors: tuple[int, ...]
    shows_number: bool = True
    enhanced: bool = False


def _features(tree: UDTree, word: int) -> dict[str, str]:
    field = tree.feats[word]
    return {} if field == "_" else dict(part.split("=", 1) for part in field.split("|") if "=" in part)


def _shows_number(tree: UDTree, word: int) -> bool:
    features = _features(tree, word)
    return (features.get("VerbForm") == "Fin" and features.get("Person") == "3" and "Number" in features
            and (features.get("Tense") == "Pres" or tree.lemmas[word].lower() == "be"))


def _kept_verb(tree: UDTree, word: int, verbs: str) -> bool:
    if verbs == "number":
        return _shows_number(tree, word)
    features = _features(tree, word)
    return features.get("VerbForm") == "Fin" and "Number" in features


def _agreeing_verb(tree: UDTree, subject: int, head: int, verbs: str = "number") -> int | None:
    finite = [i for i, (h, rel) in enumerate(zip(tree.heads, tree.deprels, strict=True)) if h == head and i > subject
              and rel.split(":")[0] in ("aux", "cop") and _features(tree, i).get("VerbForm") == "Fin"]
    verb = finite[0] if finite else head  # "the premise *is* that it sets": the copula agrees, not the clause's verb
    return verb if _kept_verb(tree, verb, verbs) else None


def enhanced_subjects(path: str | Path) -> list[tuple[tuple[int, int], ...]]:
    """For each sentence of a CoNLL-U file, the ``(subject, head)`` word pairs (from 0) that UD's enhanced graph
    (the DEPS column) links by ``nsubj`` or ``nsubj:pass`` (any subtype: ``nsubj:xsubj`` too) and the basic tree
    does not (3.2).

    The sentences and words are those of :func:`mha.corpora.treebank.read_ud_trees` on the same file; edges to
    empty nodes are skipped. Give the result to :func:`agreement_items` as ``extra_subjects``. A file without
    enhanced dependencies gives no pair.
    """
    path, text = _treebank_text(path)
    subjects = []
    for tokens, origin, line in _parsed_sentences(text, path.name):
        words, heads = _checked_words_and_heads(tokens, origin, line)
        index = {word["id"]: i for i, word in enumerate(words)}
        pairs = []
        for i, word in enumerate(words):
            for edge in str(word.get("deps") or "_").split("|"):
                head, _, relation = edge.partition(":")
                if relation.split(":")[0] != "nsubj" or not head.isdigit() or int(head) not in index:
                    continue  # not a subject, the root (0) or an empty node ("8.1")
                head = index[int(head)]
                if (head, relation.split(":")[0]) != (heads[i], word["deprel"].split(":")[0]):
                    pairs.append((i, head))
        subjects.append(tuple(pairs))
    return subjects


def agreement_items(trees: Sequence[UDTree], *, verbs: str = "number",
                    extra_subjects: Sequence[Sequence[tuple[int, int]]] | None = None) -> list[AgreementItem]:
    """Every subject with the verb that agrees with it, in ``trees`` read with their features (3.2).

    ``trees`` come from :func:`mha.corpora.treebank.read_ud_trees`, which reads lemmas and features; ``verbs`` is
    ``"number"`` (only verbs whose form shows number) or ``"finite"`` (every finite verb of the third person);
    ``extra_subjects``, one tuple of ``(subject, head)`` pairs per tree (:func:`enhanced_subjects`), adds subjects
    of the enhanced graph, after each tree's basic ones. A subject and verb found twice are kept once. See the
    module's docstring for which pairs are kept.
    """
    trees = check_trees("trees", trees)
    if verbs not in VERB_KINDS:
        raise ValueError(f"verbs must be one of {VERB_KINDS} (verbs whose form shows number, or every finite verb), "
                         f"not {verbs!r}.")
    if extra_subjects is not None:
        extra_subjects = check_items("extra_subjects", extra_subjects,
                                     "one tuple of (subject, head) pairs per tree, as enhanced_subjects(path) gives")
        if len(extra_subjects) != len(trees):
            raise ValueError(f"extra_subjects has {len(extra_subjects)} entries for {len(trees)} trees; give one per "
                             "tree, read from the same file (enhanced_subjects).")
    items = []
    for index, tree in enumerate(trees):
        if len(tree.feats) != len(tree.words) or len(tree.lemmas) != len(tree.words):
            raise ValueError(f"tree {index} has no features or lemmas; read it with read_ud_trees, which keeps them.")
        basic = [(subject, head, False)
                 for subject, (head, relation) in enumerate(zip(tree.heads, tree.deprels, strict=True))
                 if relation.split(":")[0] == "nsubj"]
        extra = [] if extra_subjects is None else [(int(s), int(h), True) for s, h in extra_subjects[index]]
        if any(not (0 <= s < len(tree.words) and 0 <= h < len(tree.words)) for s, h, _ in extra):
            raise ValueError(f"extra_subjects[{index}] names a word outside tree {index}; read both from the same "
                             "file.")
        seen = set()
        for subject, head, enhanced in basic + extra:
            number = _features(tree, subject).get("Number")
            if tree.upos[subject] not in SUBJECT_UPOS or number is None or head < 0:
                continue
            verb = _agreeing_verb(tree, subject, head, verbs)
            if verb is None or verb < subject or _features(tree, verb)["Number"] != number or (subject, verb) in seen:
                continue
            seen.add((subject, verb))
            attractors = tuple(i for i in range(subject + 1, verb) if tree.upos[i] in ("NOUN", "PROPN")
                               and _features(tree, i).get("Number", number) != number)
            items.append(AgreementItem(index, tree.words, subject, verb, number, tree.upos[subject], attractors,
                                       _shows_number(tree, verb), enhanced))
    return items


def number_swaps(trees: Sequence[UDTree], items: Sequence[AgreementItem]) -> list[tuple[AgreementItem, str]]:
    """For each item whose subject is a noun seen in ``trees`` in the other number too: ``(item, other form)`` (3.2).

    The other form is the one the treebank uses for the same lemma and part of speech in the other number (the
    first seen; its first letter in the case of the subject's); items without one are left out.
    """
    trees = check_trees("trees", trees)
    forms: dict[tuple[str, str, str], str] = {}
    for tree in trees:
        for word in range(len(tree.words)):
            number = _features(tree, word).get("Number") if tree.upos[word] in ("NOUN", "PROPN") else None
            if number is not None:
                forms.setdefault((tree.lemmas[word].lower(), tree.upos[word], number), tree.words[word].lower())
    pairs = []
    for item in check_items("items", items, "a list of AgreementItem (agreement_items)"):
        check_type("each item", item, AgreementItem, "an AgreementItem (agreement_items)")
        tree = trees[item.tree]
        other = forms.get((tree.lemmas[item.subject].lower(), item.subject_upos,
                           "Plur" if item.number == "Sing" else "Sing"))
        if item.subject_upos == "PRON" or other is None or other == item.words[item.subject].lower():
            continue
        word = item.words[item.subject]
        pairs.append((item, other[0].upper() + other[1:] if word[:1].isupper() else other))
    return pairs
