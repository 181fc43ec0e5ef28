"""LitBank's entity layer read and cut into windows (section 3.3, "Entities").

The reader is checked against a snippet written by hand, whose spans and mention links are worked out below, and
the shipped extract against a count of LitBank's own tags; broken files against the line they name.
"""

import hashlib
import json
from pathlib import Path

import pytest

from mha.corpora.litbank import parse_coref_conll
from mha.corpora.litbank_entities import (
    LITBANK_ENTITIES_PATH,
    EntityMention,
    MentionLink,
    entities_to_json,
    entity_windows,
    load_litbank_entities,
    parse_entity_tsv,
    read_entity_tsv,
)
from mha.data_files import DATA_DIRECTORY, SHA256_LIST

# the old man(1, PER) saw Mary(0, PER) . / Mary(0) and the man(1) left [the house(3, FAC)] . / Old Mary(0) smiled .
WORDS = [["the", "old", "man", "saw", "Mary", "."], ["Mary", "and", "the", "man", "left", "the", "house", "."],
         ["Old", "Mary", "smiled", "."]]
TAGS = [[("B-PER", "O"), ("I-PER", "O"), ("I-PER", "O"), ("O", "O"), ("B-PER", "O"), ("O", "O")],
        [("B-PER", "O"), ("O", "O"), ("B-PER", "O"), ("I-PER", "O"), ("O", "O"), ("B-FAC", "B-LOC"),
         ("I-FAC", "I-LOC"), ("O", "O")],
        [("B-PER", "O"), ("I-PER", "O"), ("O", "O"), ("O", "O")]]
TSV = "\n\n".join("\n".join("\t".join([w, *t]) + "\t" for w, t in zip(ws, ts, strict=True))
                  for ws, ts in zip(WORDS, TAGS, strict=True)) + "\n"
CHAINS = [["(1", "", "1)", "", "(0)", ""], ["(0)", "", "(1", "1)", "", "(3", "3)", ""], ["(0", "0)", "", ""]]
CONLL = "\n".join(["#begin document (tiny); part 0", *[
    "\n".join("\t".join(["tiny", "0", str(i), w, *["_"] * 8, c or "_"])
              for i, (w, c) in enumerate(zip(ws, cs, strict=True))) + "\n"
    for ws, cs in zip(WORDS, CHAINS, strict=True)], "#end document", ""])


def test_the_reader_finds_every_span_nested_ones_included():
    document = parse_entity_tsv(TSV, source="tiny")
    assert document.sentences == tuple(tuple(ws) for ws in WORDS)
    assert set(document.mentions) == {
        EntityMention(0, 0, 2, "PER", 0), EntityMention(0, 4, 4, "PER", 0), EntityMention(1, 0, 0, "PER", 0),
        EntityMention(1, 2, 3, "PER", 0), EntityMention(1, 5, 6, "FAC", 0), EntityMention(1, 5, 6, "LOC", 1),
        EntityMention(2, 0, 1, "PER", 0)}


def test_windows_hold_the_outermost_spans_and_link_mentions_to_same_type_candidates():
    entities, coreference = parse_entity_tsv(TSV, source="tiny"), parse_coref_conll(CONLL)
    (window,) = entity_windows(entities, coreference)
    # words: the old man saw Mary . | Mary(6) and the man(9) left the house(12) . | Old(14) Mary smiled .
    # "the house" is both a FAC and a LOC: one span, with the innermost column's label
    assert window.spans == ((0, 2, "PER"), (8, 9, "PER"), (11, 12, "FAC"), (14, 15, "PER"))
    # "Mary"(6) has candidates "the old man"(1) and "Mary"(0): one of each; "the man"(8-9) too; "Old Mary" has four
    assert window.links == (
        MentionLink((6, 6), "PER", ((0, 2), (4, 4)), (False, True), (False, True)),
        MentionLink((8, 9), "PER", ((0, 2), (4, 4), (6, 6)), (True, False, False), (True, False, False)),
        MentionLink((14, 15), "PER", ((0, 2), (4, 4), (6, 6), (8, 9)), (False, True, True, False),
                    (True, True, True, False)))
    # a window of one sentence each: no mention has earlier ones of its own entity and of another in its window
    assert [len(w.links) for w in entity_windows(entities, coreference, max_pieces=10)] == [0, 0, 0]


def test_broken_files_are_refused_naming_the_line():
    with pytest.raises(ValueError, match=r"tiny, line 2: 'I-LOC' continues a LOC mention in column 2"):
        parse_entity_tsv("a\tB-PER\nb\tI-LOC\n", source="tiny")
    with pytest.raises(ValueError, match=r"tiny, line 1: column 3 holds 'B-CAT'"):
        parse_entity_tsv("a\tO\tB-CAT\n", source="tiny")
    with pytest.raises(ValueError, match=r"tiny, line 2: 'no tags here' is not a word followed by tab-separated"):
        parse_entity_tsv("a\tO\nno tags here\n", source="tiny")
    with pytest.raises(ValueError, match="holds no sentences"):
        parse_entity_tsv("\n\n", source="tiny")
    with pytest.raises(ValueError, match="line 3: 'I-PER' continues a PER mention"):  # none crosses a sentence break
        parse_entity_tsv("a\tB-PER\n\nb\tI-PER\n", source="tiny")


def test_an_extract_that_does_not_fit_its_words_is_refused(tmp_path):
    entities, coreference = parse_entity_tsv(TSV, source="tiny"), parse_coref_conll(CONLL)
    content = entities_to_json([entities])
    path = tmp_path / "entities.json"
    path.write_text(json.dumps(content))
    assert load_litbank_entities(path, [coreference])[0].mentions == entities.mentions
    content["works"][0]["mentions"].append([2, 3, 4, "PER", 0])  # sentence 2 has words 0..3
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=r"mention 7: \[2, 3, 4, 'PER', 0\] points outside its work"):
        load_litbank_entities(path, [coreference])
    content["works"][0]["sentence_lengths"][0] = 5
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="sentence lengths differ from the coreference extract's"):
        load_litbank_entities(path, [coreference])
    with pytest.raises(ValueError, match="different sentences"):
        entity_windows(parse_entity_tsv("a\tO\n"), coreference)


@pytest.mark.slow
def test_the_shipped_extract_is_recorded_and_holds_every_tag_of_the_source_files():
    lines = (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
    recorded = next(line.split()[0] for line in lines if line.split()[1] == "litbank/litbank_entities.json")
    assert hashlib.sha256(LITBANK_ENTITIES_PATH.read_bytes()).hexdigest() == recorded
    documents = load_litbank_entities()
    assert len(documents) == 80
    source = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "litbank" / "entities"
    if source.is_dir():  # an independent count: every mention opens with one B- tag in LitBank's own files
        for document in documents[:5]:
            text = (source / f"{document.name}.tsv").read_text(encoding="utf-8")
            assert len(document.mentions) == text.count("\tB-")
            assert read_entity_tsv(source / f"{document.name}.tsv").mentions == document.mentions
