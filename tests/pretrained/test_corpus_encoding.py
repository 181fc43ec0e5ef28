"""mha.pretrained.corpus_encoding: batched encoding gives each sentence the attention it gets when encoded alone."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing may be downloaded

import numpy as np
import pytest
import torch

torch.set_num_threads(1)  # two shared cores: one thread is faster than two competing

from mha.analysis.head_roles.role_table import head_role_table  # noqa: E402
from mha.corpora.templates import generate_corpus  # noqa: E402
from mha.pretrained.corpus_encoding import encode_records  # noqa: E402
from mha.pretrained.encoder import MiniLMEncoder  # noqa: E402


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder.load()


@pytest.fixture(scope="module")
def sentences():
    return generate_corpus(sentences_per_template=2, seed=3, include_pronoun_pairs=False)


@pytest.mark.slow
def test_batched_records_equal_one_sentence_at_a_time_and_keep_the_order(encoder, sentences):
    records = encode_records(encoder, sentences, batch_size=5)  # several batches of mixed lengths
    assert len(records) == len(sentences)
    for record, sentence in zip(records, sentences, strict=True):
        alone = encoder.trace(list(sentence.words), is_split_into_words=True).sentence()
        assert record.sentence is sentence
        assert record.tokens == alone.tokens and record.word_ids == alone.word_ids
        assert record.attention.shape == alone.attention.shape == (6, 12, len(alone.tokens), len(alone.tokens))
        np.testing.assert_allclose(record.attention, alone.attention, atol=1e-5)


def test_word_ids_index_the_gold_words_so_relations_can_be_scored(encoder, sentences):
    records = encode_records(encoder, sentences)
    for record in records:
        assert max(w for w in record.word_ids if w is not None) + 1 == len(record.sentence.words)
    table = head_role_table(records, min_relation_count=1)
    assert table.attrs["n_annotated"] == len(sentences)
    assert len(table) == 72


def test_plain_strings_are_encoded_without_annotation(encoder):
    texts = ["The dog sleeps.", "A much longer sentence about the old farmer and his brown horse."]
    records = encode_records(encoder, texts, batch_size=1)
    assert [r.sentence for r in records] == [None, None]
    alone = encoder.trace(texts[1]).sentence()
    np.testing.assert_allclose(records[1].attention, alone.attention, atol=1e-5)
    assert records[0].attention.dtype == np.float32


@pytest.mark.parametrize("bad, words", [
    ("one sentence", "a list"),
    ([], "empty"),
    (["fine", 3], "AnnotatedSentence or a string"),
])
def test_bad_input_is_explained(encoder, bad, words):
    with pytest.raises(ValueError, match=words):
        encode_records(encoder, bad)


def test_mixed_and_batch_size_errors(encoder, sentences):
    with pytest.raises(ValueError, match="mixes"):
        encode_records(encoder, [sentences[0], "a string"])
    with pytest.raises(ValueError, match="batch_size"):
        encode_records(encoder, sentences, batch_size=0)


def test_batches_follow_the_token_budget():
    """Sorted by length, a batch holds at most batch_size sentences and max_tokens padded tokens; a sentence longer
    than the budget is encoded alone."""
    from mha.pretrained.corpus_encoding import _batches

    lengths = [5, 40, 12, 12, 300, 7, 30, 30, 30]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches = _batches(order, lengths, batch_size=3, max_tokens=100)
    assert [i for batch in batches for i in batch] == order
    for batch in batches:
        assert len(batch) <= 3
        assert len(batch) == 1 or len(batch) * max(lengths[i] for i in batch) <= 100
    assert [4] in batches  # 300 tokens: alone


@pytest.mark.slow
def test_a_treebank_of_long_sentences_is_encoded_within_the_budget(encoder):
    """Real web text, batched by tokens: each record equals its sentence encoded alone."""
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu

    sentences = sorted(read_conllu(EWT_DEV_PATH)[:60], key=lambda s: -len(s.words))[:12]  # the longest of 60
    records = encode_records(encoder, sentences, max_tokens=256)
    for record, sentence in zip(records, sentences, strict=True):
        alone = encoder.trace(list(sentence.words), is_split_into_words=True).sentence()
        assert record.tokens == alone.tokens
        np.testing.assert_allclose(record.attention, alone.attention, atol=1e-5)
    with pytest.raises(ValueError, match="max_tokens"):
        encode_records(encoder, sentences, max_tokens=0)
