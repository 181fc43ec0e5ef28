"""Subject-verb agreement in a treebank: each subject with the verb form that agrees with it, and its attractors (3.2).

In English a verb agrees in number with its subject ("the key *is*", "the keys *are*") where its form shows number:
the present tense of the third person and *was*/*were*. An **attractor** is a noun between the subject and the
verb whose number differs from the subject's ("the key to the *cabinets* is"); a reader who took the nearest noun
for the subject would be misled by it (Linzen, Dupoux and Goldberg 2016).

:func:`agreement_items` finds them in UD trees read with :func:`mha.corpora.treebank.read_ud_trees` (UD English-EWT
marks ``Number`` on nouns, pronouns and finite verbs). For every ``nsubj`` or ``nsubj:pass`` that is a noun, proper
noun or pronoun with a ``Number``, the **verb** is the finite word that agrees with it: its head, or when the head
is not finite (a participle, or the predicate of a copula), the head's first finite ``aux`` or ``cop`` dependent;
it is kept when it is of the third person, shows number (present tense, or a form of *be*), agrees with the subject
and comes after it. The words between them that are nouns of the other number are its attractors.

:func:`number_swaps` makes minimal pairs for patching: the same sentence with the subject in the other number,
taking the other form from the same treebank (a noun seen in both numbers with the same lemma), so no form is
invented; the verb is left as it was, so one sentence of each pair does not agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mha.core.validation import check_items, check_type
from mha.corpora.treebank import UDTree, check_trees

__all__ = ["SUBJECT_UPOS", "AgreementItem", "agreement_items", "number_swaps"]

SUBJECT_UPOS = frozenset({"NOUN", "PROPN", "PRON"})
"""The parts of speech of the subjects kept; attractors are nouns and proper nouns."""


@dataclass(frozen=True)
class AgreementItem:
    """A subject and the verb form that agrees with it in one sentence, word indices from 0 (3.2).

    ``tree``: the sentence's index in the list given to :func:`agreement_items`; ``number``: the subject's,
    ``"Sing"`` or ``"Plur"``; ``attractors``: the nouns between subject and verb of the other number.
    """

    tree: int
    words: tuple[str, ...]
    subject: int
    verb: int
    number: str
    subject_upos: str
    attractors: tuple[int, ...]


def _features(tree: UDTree, word: int) -> dict[str, str]:
    field = tree.feats[word]
    return {} if field == "_" else dict(part.split("=", 1) for part in field.split("|") if "=" in part)


def _shows_number(tree: UDTree, word: int) -> bool:
    features = _features(tree, word)
    return (features.get("VerbForm") == "Fin" and features.get("Person") == "3" and "Number" in features
            and (features.get("Tense") == "Pres" or tree.lemmas[word].lower() == "be"))


def _agreeing_verb(tree: UDTree, head: int) -> int | None:
    if _shows_number(tree, head):
        return head
    finite = [i for i, (h, rel) in enumerate(zip(tree.heads, tree.deprels))
              if h == head and rel.split(":")[0] in ("aux", "cop") and _features(tree, i).get("VerbForm") == "Fin"]
    return finite[0] if finite and _shows_number(tree, finite[0]) else None


def agreement_items(trees: Sequence[UDTree]) -> list[AgreementItem]:
    """Every subject with the verb that agrees with it, in ``trees`` read with their features (3.2).

    ``trees`` come from :func:`mha.corpora.treebank.read_ud_trees`, which reads lemmas and features; see the
    module's docstring for which pairs are kept.
    """
    trees = check_trees("trees", trees)
    items = []
    for index, tree in enumerate(trees):
        if len(tree.feats) != len(tree.words) or len(tree.lemmas) != len(tree.words):
            raise ValueError(f"tree {index} has no features or lemmas; read it with read_ud_trees, which keeps them.")
        for subject, (head, relation) in enumerate(zip(tree.heads, tree.deprels)):
            number = _features(tree, subject).get("Number")
            if (relation.split(":")[0] != "nsubj" or tree.upos[subject] not in SUBJECT_UPOS or number is None
                    or head < 0):
                continue
            verb = _agreeing_verb(tree, head)
            if verb is None or verb < subject or _features(tree, verb)["Number"] != number:
                continue
            attractors = tuple(i for i in range(subject + 1, verb) if tree.upos[i] in ("NOUN", "PROPN")
                               and _features(tree, i).get("Number", number) != number)
            items.append(AgreementItem(index, tree.words, subject, verb, number, tree.upos[subject], attractors))
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
