"""Subjects, the verbs that agree with them and their attractors, found in UD trees (section 3.2, agreement).

Checked against a CoNLL-U snippet written by hand, whose items and attractors are worked out below.
"""

import pytest

from mha.corpora.agreement import AgreementItem, agreement_items, enhanced_subjects, number_swaps
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


# The boy eats apples and sleeps .   (UD's enhanced graph makes "boy" the subject of "sleeps" too, across "apples")
# The premise is that it sets .      ("is" agrees with "premise", "sets" with "it")
# The keys can open .                (a modal: finite, but the treebank marks no Number on it)
ENHANCED_ROWS = [
    [("The", "the", "DET", "Definite=Def|PronType=Art", 2, "det", "2:det"),
     ("boy", "boy", "NOUN", "Number=Sing", 3, "nsubj", "3:nsubj|6:nsubj"),
     ("eats", "eat", "VERB", "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", 0, "root", "0:root"),
     ("apples", "apple", "NOUN", "Number=Plur", 3, "obj", "3:obj"),
     ("and", "and", "CCONJ", "_", 6, "cc", "6:cc"),
     ("sleeps", "sleep", "VERB", "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", 3, "conj", "3:conj:and"),
     (".", ".", "PUNCT", "_", 3, "punct", "3:punct")],
    [("The", "the", "DET", "Definite=Def|PronType=Art", 2, "det", "2:det"),
     ("premise", "premise", "NOUN", "Number=Sing", 6, "nsubj", "6:nsubj"),
     ("is", "be", "AUX", "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", 6, "cop", "6:cop"),
     ("that", "that", "SCONJ", "_", 6, "mark", "6:mark"),
     ("it", "it", "PRON", "Case=Nom|Gender=Neut|Number=Sing|Person=3|PronType=Prs", 6, "nsubj", "6:nsubj"),
     ("sets", "set", "VERB", "Mood=Ind|Number=Sing|Person=3|Tense=Pres|VerbForm=Fin", 0, "root", "0:root"),
     (".", ".", "PUNCT", "_", 6, "punct", "6:punct")],
    [("The", "the", "DET", "Definite=Def|PronType=Art", 2, "det", "2:det"),
     ("keys", "key", "NOUN", "Number=Plur", 4, "nsubj", "4:nsubj"),
     ("can", "can", "AUX", "VerbForm=Fin", 4, "aux", "4:aux"),
     ("open", "open", "VERB", "VerbForm=Inf", 0, "root", "0:root"),
     (".", ".", "PUNCT", "_", 4, "punct", "4:punct")],
]


@pytest.fixture
def enhanced_path(tmp_path):
    text = "\n".join("\n".join("\t".join([str(i), w, lemma, upos, "_", feats, str(head), rel, deps, "_"])
                               for i, (w, lemma, upos, feats, head, rel, deps) in enumerate(rows, start=1)) + "\n"
                     for rows in ENHANCED_ROWS)
    path = tmp_path / "enhanced.conllu"
    path.write_text(text, encoding="utf-8")
    return path


def test_enhanced_subjects_are_the_subject_edges_the_basic_tree_lacks(enhanced_path):
    assert enhanced_subjects(enhanced_path) == [((1, 5),), (), ()]


def test_extra_subjects_add_the_conjoined_verb_across_its_object(enhanced_path):
    trees = read_ud_trees(enhanced_path)
    words = [tuple(w for w, *_ in rows) for rows in ENHANCED_ROWS]
    assert agreement_items(trees, extra_subjects=enhanced_subjects(enhanced_path)) == [
        AgreementItem(0, words[0], 1, 2, "Sing", "NOUN", ()),
        AgreementItem(0, words[0], 1, 5, "Sing", "NOUN", (3,), True, True),  # "apples" is an attractor
        AgreementItem(1, words[1], 1, 2, "Sing", "NOUN", ()),  # the copula after "premise", not "sets"
        AgreementItem(1, words[1], 4, 5, "Sing", "PRON", ()),
    ]  # the modal "can" shows no number: no item for "keys"


def test_finite_verbs_keep_the_past_tense_and_mark_it(trees):
    items = agreement_items(trees, verbs="finite")
    walked = [item for item in items if item.tree == 1]
    assert walked == [AgreementItem(1, trees[1].words, 1, 2, "Sing", "NOUN", (), False, False)]
    assert [item for item in items if item.shows_number] == agreement_items(trees)


def test_bad_options_are_refused_with_what_to_give(trees):
    with pytest.raises(ValueError, match="verbs must be one of"):
        agreement_items(trees, verbs="all")
    with pytest.raises(ValueError, match="give one per tree"):
        agreement_items(trees, extra_subjects=[()])
    with pytest.raises(ValueError, match="names a word outside tree 0"):
        agreement_items(trees, extra_subjects=[((1, 40),), (), (), ()])
