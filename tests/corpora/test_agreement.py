"""Subjects, the verbs that agree with them and their attractors, found in UD trees (section 3.2, agreement).

Checked against a CoNLL-U snippet written by hand, whose items and attractors are worked out below.
"""

import pytest

from mha.corpora.agreement import AgreementItem, agreement_items, number_swaps
from mha.corpora.treebank import UDTree, read_ud_trees

ROWS = [
    # The key to the cabinets is lost .   (subject "key", verb "is", the attractor "cabinets" between them)
    [("The", "the", "DET", "Definite=Def|PronType=Art", 2, "det"),
     ("key", "key", "NOUN", "Number=Sing", 7, "nsubj:pass"),
     ("to", "to", "ADP", "_", 5, "case"),
     ("the", "the", "DET", "Definite=Def|PronType=Art", 5, "det"),
     ("cabinets", "cabinet", "NOUN", "Number=Plur", 2, "nmod"),
     ("is", "be", "AUX", "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", 7, "aux:pass"),
     ("lost", "lose", "VERB", "Tense=Past|VerbForm=Part|Voice=Pass", 0, "root"),
     (".", ".", "PUNCT", "_", 7, "punct")],
    # The cabinet walked .   (past tense shows no number: no item)  /  They are happy .  (copula; pronoun)
    [("The", "the", "DET", "Definite=Def|PronType=Art", 2, "det"),
     ("cabinet", "cabinet", "NOUN", "Number=Sing", 3, "nsubj"),
     ("walked", "walk", "VERB", "Mood=Ind|Number=Sing|Person=3|Tense=Past|VerbForm=Fin", 0, "root"),
     (".", ".", "PUNCT", "_", 3, "punct")],
    [("They", "they", "PRON", "Case=Nom|Number=Plur|Person=3|PronType=Prs", 3, "nsubj"),
     ("are", "be", "AUX", "Mood=Ind|Number=Plur|Person=3|Tense=Pres|VerbForm=Fin", 3, "cop"),
     ("happy", "happy", "ADJ", "Degree=Pos", 0, "root"),
     (".", ".", "PUNCT", "_", 3, "punct")],
    # Keys sleep .   (present tense, plural; "keys" is the plural of "key" seen above)
    [("Keys", "key", "NOUN", "Number=Plur", 2, "nsubj"),
     ("sleep", "sleep", "VERB", "Mood=Ind|Number=Plur|Person=3|Tense=Pres|VerbForm=Fin", 0, "root"),
     (".", ".", "PUNCT", "_", 2, "punct")],
]


@pytest.fixture
def trees(tmp_path) -> list[UDTree]:
    text = "\n".join("\n".join("\t".join([str(i), w, lemma, upos, "_", feats, str(head), rel, "_", "_"])
                               for i, (w, lemma, upos, feats, head, rel) in enumerate(rows, start=1)) + "\n"
                     for rows in ROWS)
    path = tmp_path / "tiny.conllu"
    path.write_text(text, encoding="utf-8")
    return read_ud_trees(path)


def test_the_reader_keeps_lemmas_and_features(trees):
    assert trees[0].lemmas[4] == "cabinet"
    assert trees[0].feats[5] == "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin"
    assert trees[0].feats[2] == "_"


def test_items_take_the_finite_word_that_shows_number_and_the_nouns_of_the_other_number_between(trees):
    words = [tuple(w for w, *_ in rows) for rows in ROWS]
    assert agreement_items(trees) == [
        AgreementItem(0, words[0], 1, 5, "Sing", "NOUN", (4,)),  # "is" is the passive auxiliary of "lost"
        AgreementItem(2, words[2], 0, 1, "Plur", "PRON", ()),  # "are" is the copula of "happy"
        AgreementItem(3, words[3], 0, 1, "Plur", "NOUN", ()),
    ]  # "walked" is past tense: its form shows no number


def test_swaps_take_the_other_form_from_the_treebank_and_leave_pronouns_out(trees):
    items = agreement_items(trees)
    assert number_swaps(trees, items) == [(items[0], "keys"), (items[2], "Key")]


def test_trees_without_features_are_refused():
    bare = UDTree(("Keys", "sleep"), ("NOUN", "VERB"), (1, -1), ("nsubj", "root"))
    with pytest.raises(ValueError, match="no features or lemmas; read it with read_ud_trees"):
        agreement_items([bare])
