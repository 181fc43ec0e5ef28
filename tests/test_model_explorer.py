"""The chapter-3 view of the pretrained model: correct maps, clear messages, nothing lost, HTML escaped."""

import re

import numpy as np
import pytest

from mha.pretrained.encoder import MiniLMEncoder
from mha.views.model_explorer import (CACHED_SENTENCES, TYPE_YOUR_OWN, ModelHeadExplorer, sentence_attention,
                                 strongest_link)

SENTENCES = ["The keys to the cabinet are on the table .", "The trophy does not fit in the suitcase because it is too big ."]


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder.load()


def test_token_maps_are_the_encoders_weights(encoder):
    labels, attention = sentence_attention(encoder, SENTENCES[0])
    traced = encoder.trace(SENTENCES[0]).sentence()
    assert labels == traced.tokens and labels[0] == "[CLS]" and labels[-1] == "[SEP]"
    np.testing.assert_array_equal(attention, traced.attention)


def test_word_maps_merge_pieces_and_rows_still_sum_to_one(encoder):
    labels, attention = sentence_attention(encoder, "Unbelievably tiresome .", word_level=True)
    assert labels == ["[CLS]", "unbelievably", "tiresome", ".", "[SEP]"]
    assert attention.shape == (6, 12, 5, 5)
    np.testing.assert_allclose(attention.sum(-1), 1.0, atol=1e-5)


def test_explorer_follows_layer_head_and_sentence(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    first = bytes(explorer.image.value)
    explorer.layer_slider.value, explorer.head_slider.value = 2, 7
    assert "L2H7" in explorer.message.value and bytes(explorer.image.value) != first
    explorer.sentence_menu.value = SENTENCES[1]
    assert explorer.sentence == SENTENCES[1]


def test_typing_switches_to_the_typed_sentence_and_escapes_html(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    explorer.own_sentence.value = "<script>alert('x')</script> the cat sat"
    assert explorer.sentence_menu.value == TYPE_YOUR_OWN
    assert "<script" not in explorer.message.value
    assert explorer.refresh()


@pytest.mark.parametrize("typed, words", [("   ", "empty"), ("word " * 60, "Shorten it")])
def test_bad_typed_sentences_are_explained_and_the_last_map_stays(encoder, typed, words):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = bytes(explorer.image.value)
    explorer.own_sentence.value = typed
    assert words in explorer.message.value
    assert bytes(explorer.image.value) == good
    assert explorer.own_sentence.value == typed  # the reader's text is kept


def test_explorer_needs_sentences(encoder):
    with pytest.raises(ValueError, match="at least one sentence"):
        ModelHeadExplorer([], encoder=encoder)


@pytest.mark.parametrize("typed", ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>"])
def test_html_typed_by_the_reader_is_shown_as_text_never_run(encoder, typed, monkeypatch):
    import mha.views.model_explorer

    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    monkeypatch.setattr(mha.views.model_explorer, "strongest_link", lambda weights: (1, 2))  # the link "<" -> "img"/"script"
    explorer.own_sentence.value = typed + " the cat sat"
    assert explorer.refresh()
    message = explorer.message.value
    assert "<img" not in message and "<script" not in message
    assert "<code>&lt;</code> → <code>" in message
    assert set(re.findall(r"<\s*/?\s*([A-Za-z]+)", message)) <= {"code"}  # only the view's own markup


def test_a_lone_surrogate_is_explained_and_the_last_map_stays(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = bytes(explorer.image.value)
    explorer.own_sentence.value = "a smile \ud83d cut in half"
    assert "Cannot draw this" in explorer.message.value and "broken character" in explorer.message.value
    assert bytes(explorer.image.value) == good


@pytest.mark.parametrize("word_level", [False, True])
def test_a_one_word_sentence_reports_no_link_rather_than_a_self_link(encoder, word_level):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder, word_level=word_level)
    explorer.own_sentence.value = "hi"
    assert explorer.refresh()
    assert "only one" in explorer.message.value and "no link between two different" in explorer.message.value
    assert "→" not in explorer.message.value
    explorer.own_sentence.value = "hi there"
    assert "Strongest link between two different" in explorer.message.value


def test_strongest_link_skips_special_units_and_the_diagonal():
    weights = np.array([[0.1, 0.2, 0.3, 0.4], [0.0, 0.9, 0.1, 0.0], [0.5, 0.2, 0.3, 0.0], [1.0, 0.0, 0.0, 0.0]])
    assert strongest_link(weights) == (2, 1)
    assert strongest_link(weights[:3, :3]) is None  # [CLS] word [SEP]


def test_the_cache_of_typed_sentences_is_a_small_lru(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    assert explorer.cache_size == CACHED_SENTENCES
    explorer.cache_size = 3
    for count in range(6):
        explorer.own_sentence.value = f"sentence number {count} ."
        assert len(explorer._cache) <= 3
        if count == 2:
            explorer.sentence_menu.value = SENTENCES[0]  # shown again: moves to the most recent end
            explorer.sentence_menu.value = TYPE_YOUR_OWN
    assert [sentence for sentence, _ in explorer._cache] == ["sentence number 3 .", "sentence number 4 .",
                                                            "sentence number 5 ."]
    explorer.own_sentence.value = "sentence number 4 ."
    assert list(explorer._cache)[-1] == ("sentence number 4 .", False)  # a hit becomes the most recent


def test_an_unexpected_error_is_a_message_not_a_dead_view(encoder, monkeypatch):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = bytes(explorer.image.value)

    def broken(*args, **kwargs):
        raise RuntimeError("the encoder fell over")
    monkeypatch.setattr(explorer.encoder, "trace", broken)
    explorer.own_sentence.value = "something new"
    assert "unexpected RuntimeError (the encoder fell over)" in explorer.message.value
    assert bytes(explorer.image.value) == good
