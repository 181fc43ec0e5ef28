"""Reading CoNLL-U into annotated sentences, with the UD -> book relation mapping (chapter 3)."""

from pathlib import Path

import pytest

from mha.corpora import treebank
from mha.corpora.templates import relation_counts
from mha.corpora.treebank import parse_conllu, read_conllu, read_ud_trees

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample.conllu"


@pytest.fixture(scope="module")
def sample():
    return read_conllu(SAMPLE)


def arrows(sentence, kind):
    return [(sentence.words[r.source], sentence.words[r.target]) for r in sentence.relations_of(kind)]


def test_sample_reads_every_sentence_with_origins(sample):
    assert len(sample) == 9
    assert sample[0].origin == "sample.conllu#sample-1"
    assert sample[0].text == "The old farmer has sold his brown horse ."


def test_each_ud_relation_maps_to_its_kind_and_direction(sample):
    first = sample[0]  # The old farmer has sold his brown horse .
    assert arrows(first, "det_noun") == [("The", "farmer")]
    assert arrows(first, "adj_noun") == [("old", "farmer"), ("brown", "horse")]
    assert arrows(first, "subj_verb") == [("farmer", "sold")]
    assert arrows(first, "aux_verb") == [("has", "sold")]
    assert arrows(first, "poss_noun") == [("his", "horse")]
    assert arrows(first, "verb_obj") == [("sold", "horse")]  # verb -> object, against the UD arc
    assert arrows(sample[1], "prep_obj") == [("in", "garden")]  # case(garden, in) becomes in -> garden


def test_subtypes_passives_and_possessive_s(sample):
    keys = sample[2]  # The keys to the old cabinets were found under the table .
    assert arrows(keys, "subj_verb") == [("keys", "found")]  # nsubj:pass
    assert arrows(keys, "aux_verb") == [("were", "found")]  # aux:pass
    assert arrows(keys, "prep_obj") == [("to", "cabinets"), ("under", "table")]
    maria = sample[3]  # Maria 's sister will visit us tomorrow .
    assert arrows(maria, "poss_noun") == [("Maria", "sister")]
    assert arrows(maria, "prep_obj") == []  # 's is a case PART, not a preposition


def test_multiword_ranges_and_empty_nodes_are_skipped(sample):
    cannot = sample[4]
    assert cannot.words == ("I", "can", "not", "find", "my", "keys", ".")
    assert arrows(cannot, "aux_verb") == [("can", "find")]
    gapping = sample[6]
    assert gapping.words == ("Sam", "ate", "an", "apple", "and", "Kim", "a", "pear", ".")  # no 6.1 "ate"
    assert arrows(gapping, "det_noun") == [("an", "apple"), ("a", "pear")]


def test_copular_subjects_are_skipped(sample):
    soup = sample[8]  # The soup in the blue pot is hot .  (nsubj(hot, soup): the head is an adjective)
    assert arrows(soup, "subj_verb") == []
    assert arrows(soup, "det_noun") == [("The", "soup"), ("the", "pot")]


def test_counts_over_the_sample(sample):
    counts = relation_counts(sample)
    assert counts == {"det_noun": 15, "adj_noun": 6, "subj_verb": 9, "verb_obj": 6, "prep_obj": 5,
                      "poss_noun": 3, "aux_verb": 5, "pron_antecedent": 0}


def test_missing_file_and_bad_content_raise_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no CoNLL-U file"):
        read_conllu(tmp_path / "missing.conllu")
    broken = tmp_path / "broken.conllu"
    broken.write_text("1\tThe\tthe\tDET\tDT\t_\tnot-a-number\tdet\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="broken.conllu is not valid CoNLL-U"):
        read_conllu(broken)
    with pytest.raises(ValueError, match="10 tab-separated columns"):
        parse_conllu("1\tThe\n\n")
    with pytest.raises(ValueError, match="holds no CoNLL-U sentences"):
        parse_conllu("# only a comment\n\n")
    with pytest.raises(ValueError, match="not a word of the sentence"):
        parse_conllu("1\tHi\thi\tINTJ\tUH\t_\t7\tdiscourse\t_\t_\n\n")
    binary = tmp_path / "binary.conllu"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_conllu(binary)


def conllu_sentence(sent_id, words):
    """CoNLL-U for one sentence of (form, head) pairs, ids from 1."""
    lines = [f"# sent_id = {sent_id}"]
    lines += [f"{i}\t{form}\t{form.lower()}\tNOUN\tNN\t_\t{head}\t{'root' if head == 0 else 'dep'}\t_\t_"
              for i, (form, head) in enumerate(words, start=1)]
    return "\n".join(lines) + "\n\n"


def test_a_byte_order_mark_is_accepted(tmp_path):
    text = SAMPLE.read_text(encoding="utf-8")
    with_mark = tmp_path / "with_bom.conllu"
    with_mark.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    read = read_conllu(with_mark)
    assert [s.words for s in read] == [s.words for s in read_conllu(SAMPLE)]
    assert read[0].origin == "with_bom.conllu#sample-1"
    assert parse_conllu("\ufeff" + conllu_sentence("bom", [("Hi", 0)]))[0].words == ("Hi",)


@pytest.mark.parametrize("words, pattern", [
    ([("Dogs", 2), ("bark", 0), ("loudly", 0)],
     r"<string>#s1: word 3 \('loudly'\) has HEAD 0, but word 2 \('bark'\) is already the root"),
    ([("Dogs", 2), ("bark", 0), ("very", 4), ("loudly", 5), ("now", 3)],
     r"<string>#s1: the HEAD column has a cycle: word 3 \('very'\) → word 4 \('loudly'\) → word 5 \('now'\) → "
     r"word 3 \('very'\)"),
    ([("Dogs", 2), ("bark", 0), ("loudly", 3)], r"<string>#s1: word 3 \('loudly'\) is its own HEAD"),
    ([("Dogs", 2), ("bark", 1)], r"<string>#s1: no word has HEAD 0, so the sentence has no root"),
])
def test_heads_that_do_not_form_one_tree_are_refused_naming_sentence_and_word(words, pattern):
    good = conllu_sentence("s0", [("Dogs", 2), ("bark", 0)])
    with pytest.raises(ValueError, match=pattern):
        parse_conllu(good + conllu_sentence("s1", words))


def test_text_that_is_not_a_string_is_explained():
    with pytest.raises(ValueError, match="decode bytes as UTF-8 first"):
        parse_conllu(b"1\tHi\thi\tINTJ\tUH\t_\t0\troot\t_\t_\n\n")
    with pytest.raises(ValueError, match="must be a string, got NoneType"):
        parse_conllu(None)


@pytest.mark.slow
def test_the_ewt_dev_split_ships_with_its_licence_and_attribution():
    """The real treebank the book measures on (UD English-EWT, dev split; CC BY-SA 4.0, ShareAlike) is package data,
    with its licence and attribution beside it, and reads as 2,001 annotated sentences."""
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu

    folder = EWT_DEV_PATH.parent
    assert "Attribution-ShareAlike 4.0" in (folder / "LICENSE.txt").read_text()
    assert "ShareAlike" in (folder / "SOURCE.md").read_text() and (folder / "README.upstream.md").exists()
    sentences = read_conllu(EWT_DEV_PATH)
    assert len(sentences) == 2001
    assert sum(len(sentence.words) for sentence in sentences) > 25_000


def test_split_sentences_is_a_seeded_partition():
    from mha.corpora.treebank import split_sentences

    items = list(range(10))
    first, second = split_sentences(items, 0.3, seed=1)
    assert len(first) == 3 and len(second) == 7 and sorted(first + second) == items
    assert split_sentences(items, 0.3, seed=1) == (first, second)
    assert split_sentences(items, 0.3, seed=2) != (first, second)
    for fraction in (0, 1, 1.5, "half", True):
        with pytest.raises(ValueError, match="fraction"):
            split_sentences(items, fraction)
    with pytest.raises(ValueError, match="each part needs"):
        split_sentences([1], 0.5)
    with pytest.raises(TypeError, match="list of sentences"):
        split_sentences("abc", 0.5)


def test_a_file_read_twice_is_parsed_once_and_a_changed_file_again(tmp_path, monkeypatch):
    """read_conllu and read_ud_trees of one file share its parse (3.1, 3.2 and 3.4 read both); a file whose text
    changed is parsed anew, and a read cut short by ``limit`` keeps nothing."""
    parses = []
    parse = treebank._parse_blocks
    monkeypatch.setattr(treebank, "_parse_blocks", lambda text, source: parses.append(source) or parse(text, source))
    monkeypatch.setattr(treebank, "_LAST_WHOLE_PARSE", {})
    copy = tmp_path / "copy.conllu"
    copy.write_text(SAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    assert len(read_ud_trees(copy, limit=2)) == 2 and parses == ["copy.conllu"]
    sentences, trees = read_conllu(copy), read_ud_trees(copy)
    assert read_conllu(copy) == sentences and read_ud_trees(copy) == trees and len(parses) == 2
    assert [s.words for s in sentences] == [t.words for t in trees]
    first = trees[0].words[0]
    copy.write_text(copy.read_text(encoding="utf-8").replace(f"\t{first}\t", "\tChanged\t", 1), encoding="utf-8")
    assert read_ud_trees(copy)[0].words[0] == "Changed" and len(parses) == 3


@pytest.mark.slow
def test_the_columns_read_are_conllus_own_reading_of_them():
    """The short way for plain numbers and the three columns kept as text (treebank._FIELD_PARSERS) change nothing
    the book reads: conllu's default parsers are the oracle, on every word of the EWT dev split and the sample, and
    on IDs and HEADs that only conllu's own parsers take or refuse."""
    import conllu
    from conllu.exceptions import ParseException

    from mha.corpora.treebank import EWT_DEV_PATH

    read = ("id", "form", "lemma", "upos", "head", "deprel", "feats")
    for path in (EWT_DEV_PATH, SAMPLE):
        text = path.read_text(encoding="utf-8")
        ours = conllu.parse(text, field_parsers=treebank._FIELD_PARSERS)
        theirs = conllu.parse(text)
        assert len(ours) == len(theirs) >= 9
        assert [[tuple(t[f] for f in read) for t in s] for s in ours] == \
            [[tuple(t[f] for f in read) for t in s] for s in theirs]
    for word_id, head in [("7", "12"), ("1", "0"), ("1", "-3"), ("1-2", "_"), ("3.1", "_"), ("0", "_")]:
        line = f"{word_id}\tword\tword\tNOUN\t_\t_\t{head}\tdep\t_\t_\n\n"
        assert [dict(t) for t in conllu.parse(line, field_parsers=treebank._FIELD_PARSERS)[0]] == \
            [{**t, "xpos": "_", "deps": "_", "misc": "_"} for t in conllu.parse(line)[0]], (word_id, head)
    for word_id, head in [("01", "0"), ("²", "0"), ("a", "0"), ("1", "01"), ("1", "²"), ("1", "x")]:
        line = f"{word_id}\tword\tword\tNOUN\t_\t_\t{head}\tdep\t_\t_\n\n"
        for parsers in (None, treebank._FIELD_PARSERS):
            with pytest.raises(ParseException):
                conllu.parse(line, field_parsers=parsers)
