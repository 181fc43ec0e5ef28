"""The template corpus: deterministic, large enough, with gold relations that point at the right words (chapter 3)."""

import pytest

from mha.corpora import templates as corpus_module
from mha.corpora.annotation import RELATION_KINDS, AnnotatedSentence, Relation
from mha.corpora.templates import (
    ADJECTIVES,
    AUXILIARIES,
    DETERMINERS,
    NOUNS,
    PERSONAL_PRONOUNS,
    POSSESSIVE_PRONOUNS,
    PREPOSITIONS,
    TEMPLATE_NAMES,
    VERBS,
    generate_corpus,
    pronoun_pairs,
    relation_counts,
)

SINGULAR_NOUNS = {
    pair[0]
    for group in (corpus_module.PEOPLE_AND_ANIMALS, corpus_module.THINGS, corpus_module.PLACES)
    for pair in group
}
SINGULAR_VERBS = {pair[0] for pair in corpus_module.INTRANSITIVE_PRESENT}


@pytest.fixture(scope="module")
def corpus():
    return generate_corpus()


@pytest.mark.slow
def test_same_seed_same_corpus_and_different_seed_differs(corpus):
    assert generate_corpus(seed=0) == corpus
    other = generate_corpus(seed=1)
    assert [s.text for s in other] != [s.text for s in corpus]
    assert len(other) == len(corpus)


def test_default_corpus_is_large_and_covers_every_kind_and_template(corpus):
    assert len(corpus) >= 500
    counts = relation_counts(corpus)
    assert all(counts[kind] > 0 for kind in RELATION_KINDS), counts
    assert {s.origin for s in corpus} == set(TEMPLATE_NAMES) | {"pronoun_pair"}
    assert len({s.text for s in corpus}) == len(corpus)  # no duplicates


def test_sizes_follow_the_argument():
    assert len(generate_corpus(3, include_pronoun_pairs=False)) == 3 * len(TEMPLATE_NAMES)
    with pytest.raises(ValueError, match="sentences_per_template"):
        generate_corpus(-1)


def lower(sentence, index):
    return sentence.words[index].lower()


def test_relations_point_at_sensible_words(corpus):
    expected = {
        "det_noun": (DETERMINERS, NOUNS),
        "adj_noun": (ADJECTIVES, NOUNS),
        "subj_verb": (NOUNS, VERBS),
        "verb_obj": (VERBS, NOUNS),
        "prep_obj": (PREPOSITIONS, NOUNS),
        "poss_noun": (POSSESSIVE_PRONOUNS + tuple(NOUNS), NOUNS),
        "aux_verb": (AUXILIARIES, VERBS),
    }
    for sentence in corpus:
        for r in sentence.relations:
            assert 0 <= r.source < len(sentence.words) and 0 <= r.target < len(sentence.words)
            if r.kind == "pron_antecedent":
                assert lower(sentence, r.source) in PERSONAL_PRONOUNS
                continue
            sources, targets = expected[r.kind]
            assert lower(sentence, r.source) in sources, (r, sentence.text)
            assert lower(sentence, r.target) in targets or r.target in sentence.candidates, (r, sentence.text)


def test_structural_facts_of_the_templates(corpus):
    for sentence in corpus:
        assert sentence.words[-1] == "."
        assert sentence.words[0][0].isupper()
        for r in (
            sentence.relations_of("det_noun") + sentence.relations_of("adj_noun") + sentence.relations_of("aux_verb")
        ):
            assert r.source < r.target  # English puts these before their noun / verb
        for r in sentence.relations_of("verb_obj") + sentence.relations_of("prep_obj"):
            assert r.source < r.target
        for i, word in enumerate(sentence.words[:-1]):  # a / an agree with the next word
            if word.lower() == "a":
                assert sentence.words[i + 1][0] not in "aeiou"
            if word.lower() == "an":
                assert sentence.words[i + 1][0] in "aeiou"


def test_attractor_items_put_a_noun_between_subject_and_verb(corpus):
    attractor_items = [s for s in corpus if s.origin.startswith("attractor")]
    assert len(attractor_items) >= 100
    for sentence in attractor_items:
        main = max(sentence.relations_of("subj_verb"), key=lambda r: r.target - r.source)
        assert main.source < sentence.attractor < main.target
        assert sentence.words[sentence.attractor].lower() in NOUNS
        # the attractor disagrees in number with the subject, and the verb agrees with the subject
        subject, attractor = lower(sentence, main.source), lower(sentence, sentence.attractor)
        assert (subject in SINGULAR_NOUNS) != (attractor in SINGULAR_NOUNS), sentence.text
        assert (subject in SINGULAR_NOUNS) == (lower(sentence, main.target) in SINGULAR_VERBS), sentence.text


def test_pronoun_pairs_differ_by_one_word_and_flip_the_answer():
    items = pronoun_pairs()
    assert len(items) >= 30
    pairs = {}
    for item in items:
        pairs.setdefault(item.pair_id, []).append(item)
    assert len(pairs) >= 15 and all(len(p) == 2 for p in pairs.values())
    for first, second in pairs.values():
        assert len(first.words) == len(second.words)
        differing = [i for i, (a, b) in enumerate(zip(first.words, second.words, strict=True)) if a != b]
        assert len(differing) == 1
        assert first.candidates == second.candidates and len(first.candidates) == 2
        assert first.pronoun == second.pronoun
        assert {first.antecedent, second.antecedent} == set(first.candidates)
        for item in (first, second):
            (relation,) = item.relations_of("pron_antecedent")
            assert (relation.source, relation.target) == (item.pronoun, item.antecedent)
            assert all(c < item.pronoun for c in item.candidates)


def test_the_trophy_pair():
    by_text = {item.text: item for item in pronoun_pairs()}
    big = by_text["The trophy does not fit in the suitcase because it is too big ."]
    small = by_text["The trophy does not fit in the suitcase because it is too small ."]
    assert big.words[big.pronoun] == "it"
    assert big.words[big.antecedent] == "trophy"
    assert small.words[small.antecedent] == "suitcase"


def test_annotations_are_validated():
    with pytest.raises(ValueError, match="unknown relation kind"):
        Relation("subject", 0, 1)
    with pytest.raises(ValueError, match="itself"):
        Relation("det_noun", 1, 1)
    with pytest.raises(ValueError, match="outside"):
        AnnotatedSentence(("the", "dog"), (Relation("det_noun", 0, 2),))
    with pytest.raises(ValueError, match="candidates"):
        AnnotatedSentence(("it", "fell"), (), pronoun=0, candidates=(1,), antecedent=0)
    from_lists = AnnotatedSentence(["the", "dog"], [Relation("det_noun", 0, 1)])
    from_tuples = AnnotatedSentence(("the", "dog"), (Relation("det_noun", 0, 1),))
    assert from_lists == from_tuples and hash(from_lists) == hash(from_tuples)
