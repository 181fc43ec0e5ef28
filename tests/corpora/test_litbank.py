"""LitBank's coreference chains read into windows, and heads scored on its pronouns (section 3.3, "On natural text").

The reader is checked against a CoNLL snippet written by hand, whose windows, links and baselines are worked out
below; the scores against attention maps written by hand; broken files against the line they name.
"""

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from mha.analysis.coreference_and_content.natural_coreference import (
    GROUPS,
    LITBANK_COREFERENCE_PATH,
    RULES,
    CoreferenceSums,
    NaturalCoreference,
    link_scores,
    load_natural_coreference,
    rule_hits,
)
from mha.analysis.statistics import bootstrap_ratio_interval
from mha.corpora.litbank import (
    LITBANK_PATH,
    Mention,
    PronounLink,
    antecedent_kind,
    coref_windows,
    documents_to_json,
    load_litbank,
    parse_coref_conll,
    read_coref_conll,
)
from mha.data_files import DATA_DIRECTORY, SHA256_LIST


def _line(number: int, word: str, marks: str = "") -> str:
    return "\t".join(["tiny", "0", str(number), word, *["_"] * 8, marks])


def _sentence(*tokens) -> list[str]:
    return [_line(i, *token) if isinstance(token, tuple) else _line(i, token) for i, token in enumerate(tokens)]


# Mary(0) saw [the old man](1) .  /  He(1) liked [her(0) dog](2) .  /  It(2) barked at him(1) .
TINY = "\n".join([
    "#begin document (tiny); part 0",
    *_sentence(("Mary", "(0)"), "saw", ("the", "(1"), "old", ("man", "1)"), "."), "",
    *_sentence(("He", "(1)"), "liked", ("her", "(2|(0)"), ("dog", "2)"), "."), "",
    *_sentence(("It", "(2)"), "barked", "at", ("him", "(1)"), "."), "",
    "#end document", "",
])


def test_the_reader_finds_every_sentence_and_mention_nested_ones_included():
    document = parse_coref_conll(TINY)
    assert document.name == "tiny"
    assert document.sentences == (("Mary", "saw", "the", "old", "man", "."), ("He", "liked", "her", "dog", "."),
                                  ("It", "barked", "at", "him", "."))
    assert set(document.mentions) == {Mention(0, 0, 0, 0), Mention(1, 0, 2, 4), Mention(1, 1, 0, 0),
                                      Mention(2, 1, 2, 3), Mention(0, 1, 2, 2), Mention(2, 2, 0, 0),
                                      Mention(1, 2, 3, 3)}
    assert document.mentions.index(Mention(2, 1, 2, 3)) < document.mentions.index(Mention(0, 1, 2, 2))  # outer first


def test_each_pronoun_links_to_the_nearest_earlier_mention_of_its_chain():
    # one window holds all 16 words (+ [CLS] and [SEP]); by hand, words 0-5, 6-10, 11-15:
    (window,) = coref_windows(parse_coref_conll(TINY), max_pieces=18)
    assert window.words[6] == "He" and window.words[8] == "her" and window.words[11] == "It"
    assert window.links == (
        # He -> the old man; nearest mention and noun phrase: "the old man", last word "man"
        PronounLink(6, (2, 4), ((2, 4),), 4, 4),
        # her -> Mary (not "her dog", which ends after it); nearest mention "He" (6), nearest noun phrase "man" (4)
        PronounLink(8, (0, 0), ((0, 0),), 6, 4),
        # It -> her dog, a noun phrase that holds a pronoun
        PronounLink(11, (8, 9), ((8, 9),), 9, 9),
        # him -> He (the nearest, a pronoun), though "the old man" is in the chain too; nearest mention "It"
        PronounLink(14, (6, 6), ((2, 4), (6, 6)), 11, 9),
    )
    assert window.unlinked == 0 and window.n_sentences == 3


def test_a_pronoun_whose_antecedent_lies_in_an_earlier_window_gets_no_link():
    first, second = coref_windows(parse_coref_conll(TINY), max_pieces=13)  # 11 words + 2: the first two sentences
    assert first.n_sentences == 2 and [link.pronoun for link in first.links] == [6, 8]
    assert second.first_sentence == 2 and second.links == () and second.unlinked == 2  # It and him


def test_windows_count_word_pieces_and_leave_out_a_sentence_too_long_for_one():
    document = parse_coref_conll(TINY)
    assert [w.first_sentence for w in coref_windows(document, max_pieces=7)] == [1, 2]  # 6 words + 2 > 7
    # two pieces a word: sentences of 12, 10 and 10 tokens; the last two fit in 22 with [CLS] and [SEP], not in 21
    assert [w.first_sentence for w in coref_windows(document, max_pieces=22, pieces=lambda word: 2)] == [0, 1]
    assert [w.first_sentence for w in coref_windows(document, max_pieces=21, pieces=lambda word: 2)] == [0, 1, 2]
    with pytest.raises(ValueError, match="max_pieces"):
        coref_windows(document, max_pieces=2)


def test_links_split_by_the_kind_of_their_antecedent():
    (window,) = coref_windows(parse_coref_conll(TINY), max_pieces=18)
    # He -> the old man, her -> Mary, It -> her dog (a noun phrase that holds a pronoun), him -> He
    assert [antecedent_kind(window, link) for link in window.links] == ["nominal", "nominal", "nominal", "pronoun"]
    with pytest.raises(ValueError, match="do not lie in order inside the window"):
        antecedent_kind(window, PronounLink(3, (4, 5), ((4, 5),), 5, 5))


def _tiny_maps() -> np.ndarray:
    """(1 layer, 2 heads, 16, 16) maps of TINY's one window: head 0 attends from He (6) most to 'old' (3), from her
    (8) to 'He' (6), from It (11) to 'her' (8) and from him (14) to 'the' (2); head 1 from every pronoun to 'Mary'."""
    maps = np.full((1, 2, 16, 16), 0.01)
    for pronoun, word in ((6, 3), (8, 6), (11, 8), (14, 2)):
        maps[0, 0, pronoun, word] = 0.5
        maps[0, 0, pronoun, pronoun + 1] = 0.9 if pronoun < 15 else 0.01  # a later word never counts
        maps[0, 1, pronoun, 0] = 0.5
    return maps


def test_sums_over_all_links_and_each_kind_of_antecedent_match_a_hand_count():
    (window,) = coref_windows(parse_coref_conll(TINY), max_pieces=18)
    sums = CoreferenceSums(("other", "tiny"), n_layers=1, n_heads=2, max_offset=3)
    sums.add_unlinked(window)
    sums.add(window, _tiny_maps())
    groups = sums.result()
    assert tuple(groups) == GROUPS
    all_links, nominal, pronoun = groups["all"], groups["nominal"], groups["pronoun"]
    assert all_links.pronouns.tolist() == [0, 4] and nominal.pronouns.tolist() == [0, 3]
    assert pronoun.pronouns.tolist() == [0, 1]
    # head 0: right for He (old in 'the old man') and It (her in 'her dog'); wrong for her (He is not Mary) and him
    # ('the' is in the chain's 'the old man', not the antecedent He); head 1 (Mary) right only for her
    assert all_links.hits[1].tolist() == [[2, 1]] and all_links.chain_hits[1].tolist() == [[3, 1]]
    assert nominal.hits[1].tolist() == [[2, 1]] and pronoun.hits[1].tolist() == [[0, 0]]
    assert pronoun.chain_hits[1].tolist() == [[1, 0]]
    # shares: head 0 gives its antecedent 0.5 + 0.01 + 0.01 for He (three words), 0.01 for her, 0.5 + 0.01 for It
    # (two words) and 0.01 for him; head 1 gives 0.01 * 3, 0.5, 0.01 * 2, 0.01
    np.testing.assert_allclose(nominal.share[1], [[0.52 + 0.01 + 0.51, 0.03 + 0.5 + 0.02]])
    np.testing.assert_allclose(pronoun.share[1], [[0.01, 0.01]])
    # nearest mention: man (He, right), He (her, wrong), dog (It, right), It (him, wrong); nearest noun phrase:
    # man, man, dog, dog: right for He and It; it can never be right where the antecedent is a pronoun
    assert nominal.rule_hits["nearest mention"].tolist() == [0, 2]
    assert nominal.rule_hits["nearest noun phrase"].tolist() == [0, 2]
    assert pronoun.rule_hits["nearest mention"].tolist() == [0, 0]
    assert pronoun.rule_hits["nearest noun phrase"].tolist() == [0, 0]
    # offsets 1, 2, 3 before He (6), her (8), It (11), him (14): words 5 4 3, 7 6 5, 10 9 8, 13 12 11
    assert nominal.offset_hits[1].tolist() == [0, 2, 2] and pronoun.offset_hits[1].tolist() == [0, 0, 0]
    for group in groups.values():
        assert group.unlinked.tolist() == [0, 0] and group.works == ("other", "tiny")
    with pytest.raises(ValueError, match="not one of the works given"):
        CoreferenceSums(("other",), 1, 2).add(window, _tiny_maps())
    with pytest.raises(ValueError, match=r"give the window's word-level maps, \(1, 2, 16, 16\)"):
        sums.add(window, _tiny_maps()[:, :, :15, :15])
    with pytest.raises(ValueError, match="distinct names"):
        CoreferenceSums(("tiny", "tiny"), 1, 2)


def test_link_scores_match_a_hand_calculation():
    link = PronounLink(3, (0, 1), ((0, 1), (2, 2)), 2, None)
    maps = np.zeros((1, 2, 5, 5))
    maps[0, 0, 3] = [0.1, 0.2, 0.5, 0.1, 0.1]  # most on word 2: in the chain, not the antecedent
    maps[0, 1, 3] = [0.4, 0.1, 0.2, 0.05, 0.25]  # most on word 0 among earlier words (4 comes after the pronoun)
    share, hit, chain_hit = link_scores(maps, link)
    np.testing.assert_allclose(share, [[0.3, 0.5]])
    assert hit.tolist() == [[False, True]] and chain_hit.tolist() == [[True, True]]


def test_rules_pick_one_earlier_word_each():
    link = PronounLink(3, (0, 1), ((0, 1), (2, 2)), 2, None)
    picked = rule_hits(link, max_offset=4)
    assert picked["nearest mention"][0].tolist() == [False] and picked["nearest mention"][1].tolist() == [True]
    assert picked["nearest noun phrase"][0].tolist() == [False] and picked["nearest noun phrase"][1].tolist() == [False]
    # offsets 1..4 pick words 2, 1, 0 and none (before the window)
    assert picked["offset"][0].tolist() == [False, True, True, False]
    assert picked["offset"][1].tolist() == [True, True, True, False]


def test_pooled_scores_and_intervals_resample_whole_works():
    hits = np.array([[[3.0]], [[1.0]], [[0.0]]])  # (works, layers, heads)
    pronouns = np.array([4, 2, 2])
    result = NaturalCoreference(("a", "b", "c"), pronouns, np.zeros(3, int), hits / 2, hits, hits,
                                {name: np.zeros(3) for name in RULES}, {name: np.zeros(3) for name in RULES},
                                np.zeros((3, 2)), np.zeros((3, 2)))
    assert result.pooled(result.hits)[0, 0] == pytest.approx(4 / 8)
    assert result.pooled(result.hits, [0, 2])[0, 0] == pytest.approx(3 / 6)
    low, high = result.interval(result.hits, seed=3)
    expected = bootstrap_ratio_interval(hits, pronouns, seed=3)
    np.testing.assert_allclose([low, high], expected)
    selection, report = result.split_works(seed=0)
    assert sorted([*selection, *report]) == [0, 1, 2] and len(selection) == 1


def _refused(text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_coref_conll(text, source="bad.conll")


def test_broken_files_are_refused_naming_the_line():
    lines = TINY.split("\n")
    _refused("\n".join(lines[1:]), r"line 1: a CoNLL coreference file starts with '#begin document")
    _refused("\n".join(lines[:10]), r"bad.conll ends at line 10 without '#end document'")  # cut short
    _refused(TINY.replace("\t(1)\n", "\t1)\n", 1), r"line 9: '1\)' closes a mention of chain 1 that is not open")
    _refused(TINY.replace("man\t" + "\t".join(["_"] * 8) + "\t1)", "man\t" + "\t".join(["_"] * 8) + "\t"),
             r"line 4: a mention of chain 1 opens here but is not closed by the end of its sentence \(line 8\)")
    _refused(TINY.replace("\t(0)\n", "\t(x)\n", 1), r"line 2: .* has the mark '\(x\)'")
    _refused(TINY.replace("tiny\t0\t1\tsaw", "tiny\t0\t7\tsaw"), r"line 3: token number '7' where 1 was expected")
    _refused(TINY.replace("tiny\t0\t1\tsaw\t" + "\t".join(["_"] * 8) + "\t", "tiny\t0\t1\tsaw"),
             r"line 3: 4 tab-separated columns")
    _refused(TINY + "more text\n", r"text after '#end document'")


def test_a_file_is_read_and_errors_name_it(tmp_path):
    path = tmp_path / "tiny.conll"
    path.write_text(TINY, encoding="utf-8")
    assert read_coref_conll(path) == parse_coref_conll(TINY)
    path.write_bytes(TINY.encode("utf-8").replace(b"Mary", b"M\xffry"))
    with pytest.raises(ValueError, match=r"tiny.conll, line 2: a byte that UTF-8 cannot read"):
        read_coref_conll(path)
    with pytest.raises(ValueError, match="is missing"):
        read_coref_conll(tmp_path / "absent.conll")


def test_an_extract_with_a_mention_outside_its_document_is_refused(tmp_path):
    content = documents_to_json([parse_coref_conll(TINY)])
    path = tmp_path / "extract.json"
    path.write_text(json.dumps(content))
    assert load_litbank(path)[0].mentions == parse_coref_conll(TINY).mentions
    content["works"][0]["mentions"].append([3, 2, 4, 5])  # sentence 2 has words 0..4
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match=r"mention 7: \[3, 2, 4, 5\] points outside its document"):
        load_litbank(path)


def _recorded(name: str) -> str:
    lines = (DATA_DIRECTORY / SHA256_LIST).read_text().splitlines()
    return next(line.split()[0] for line in lines if line.split()[1] == name)


def test_the_shipped_extract_is_the_recorded_one_with_its_licence():
    assert hashlib.sha256(LITBANK_PATH.read_bytes()).hexdigest() == _recorded("litbank/litbank_coref.json")
    assert (LITBANK_PATH.parent / "LICENSE.txt").read_text().startswith("LitBank is licensed under a Creative Commons")
    documents = load_litbank()
    assert len(documents) == 80 and len({d.name for d in documents}) == 80


def test_the_extract_keeps_the_words_and_chains_of_the_source_files():
    source = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "litbank" / "coref"
    if not source.is_dir():
        pytest.skip("LitBank's own files are not beside the repository")
    name = "1023_bleak_house"
    original = read_coref_conll(source / f"{name}.conll")
    extracted = next(d for d in load_litbank() if d.name == name)
    assert extracted.sentences == original.sentences and extracted.mentions == original.mentions


def test_the_stored_scores_are_the_recorded_ones_and_add_up():
    assert hashlib.sha256(LITBANK_COREFERENCE_PATH.read_bytes()).hexdigest() == _recorded("litbank_coreference.json")
    result = load_natural_coreference()
    assert len(result.works) == 80
    assert (result.hits <= result.pronouns[:, None, None]).all() and (result.chain_hits >= result.hits).all()
    assert (result.share <= result.pronouns[:, None, None] + 1e-6).all()
    for name in RULES:
        assert (result.rule_chain_hits[name] >= result.rule_hits[name]).all()


def test_the_stored_kinds_of_antecedent_partition_the_links():
    result = load_natural_coreference()
    nominal, pronoun = (load_natural_coreference(antecedent=kind) for kind in ("nominal", "pronoun"))
    assert nominal.works == pronoun.works == result.works
    np.testing.assert_array_equal(nominal.pronouns + pronoun.pronouns, result.pronouns)
    np.testing.assert_array_equal(nominal.hits + pronoun.hits, result.hits)
    np.testing.assert_array_equal(nominal.offset_hits + pronoun.offset_hits, result.offset_hits)
    np.testing.assert_allclose(nominal.share + pronoun.share, result.share, atol=3e-6)
    # the nearest noun phrase picks the last word of a mention that is not a pronoun: on a pronoun antecedent it can
    # land only where a longer mention ends on that pronoun ('the man himself'), which is rare
    assert pronoun.rule_hits["nearest noun phrase"].sum() < 0.02 * pronoun.pronouns.sum()
    assert 0 < nominal.pronouns.sum() < result.pronouns.sum()
    with pytest.raises(ValueError, match="choose one of"):
        load_natural_coreference(antecedent="names")


def test_a_window_longer_than_the_models_positions_is_refused_before_anything_is_traced():
    from types import SimpleNamespace

    from mha.analysis.coreference_and_content.natural_coreference import litbank_windows

    encoder = SimpleNamespace(config=SimpleNamespace(max_positions=512))  # read before any tokenizer is loaded
    with pytest.raises(ValueError, match=r"max_pieces must be a whole number in 3\.\.512 \(the tokens of a window"):
        litbank_windows(encoder, [parse_coref_conll(TINY)], max_pieces=513)


@pytest.mark.parametrize("max_pieces, said", [(True, r"True \(bool\)"), (128.0, r"128\.0 \(float\)\. Use int"),
                                              (2, "2"), (np.int64(513), "513")])
def test_a_window_size_is_a_whole_number_of_tokens_numpy_ones_included(monkeypatch, max_pieces, said):
    from types import SimpleNamespace

    from mha.analysis.coreference_and_content import natural_coreference

    monkeypatch.setattr(natural_coreference, "load_wordpieces",
                        lambda path: SimpleNamespace(pieces=lambda word: list(word)))  # no tokenizer is read
    encoder = SimpleNamespace(config=SimpleNamespace(max_positions=512), model_path="unused")
    assert natural_coreference.piece_counter(encoder, np.int64(128))("cat") == 3
    with pytest.raises(ValueError, match=rf"max_pieces must be a whole number in 3\.\.512 .*got {said}"):
        natural_coreference.piece_counter(encoder, max_pieces)


def test_a_malformed_or_unrecorded_score_file_is_refused(tmp_path):
    content = json.loads(LITBANK_COREFERENCE_PATH.read_text())
    index, check = load_natural_coreference(check=True)
    assert index == content["check"]["window"] and check.pronouns.sum() >= 1
    del content["hits"]
    path = tmp_path / "scores.json"
    path.write_text(json.dumps(content))
    with pytest.raises(ValueError, match="is malformed: it needs 'works'"):
        load_natural_coreference(path)
