"""The chapter-3 view of the pretrained model: correct maps, clear messages, nothing lost, HTML escaped."""

import re

import numpy as np
import pytest

from mha.pretrained.encoder import MiniLMEncoder
from mha.views.heatmaps import weight_hundredths
from mha.views.model_explorer import (
    CACHED_SENTENCES,
    TYPE_YOUR_OWN,
    ModelHeadExplorer,
    sentence_attention,
    strongest_link,
)
from mha.views.payloads import decode_payload, stored_weights

SENTENCES = [
    "The keys to the cabinet are on the table .",
    "The trophy does not fit in the suitcase because it is too big .",
]


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


def assert_shows(explorer, encoder, sentence, layer, head, word_level=False):
    """The explorer's last good map is the encoder's own map of ``sentence`` at (layer, head)."""
    labels, attention = sentence_attention(encoder, sentence, word_level=word_level)
    drawn = explorer.current.attention_map
    assert drawn.title == f"L{layer}H{head}" and drawn.query_labels == labels and drawn.key_labels == labels
    np.testing.assert_array_equal(drawn.weights, attention[layer, head])


def test_explorer_follows_layer_head_and_sentence(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    assert_shows(explorer, encoder, SENTENCES[0], 0, 0)
    explorer.layer_slider.value, explorer.head_slider.value = 2, 7
    assert "L2H7" in explorer.message.value
    assert_shows(explorer, encoder, SENTENCES[0], 2, 7)
    explorer.sentence_menu.value = SENTENCES[1]
    assert explorer.sentence == SENTENCES[1]
    assert_shows(explorer, encoder, SENTENCES[1], 2, 7)
    explorer.word_level.value = True
    assert_shows(explorer, encoder, SENTENCES[1], 2, 7, word_level=True)


def test_typing_switches_to_the_typed_sentence_and_escapes_html(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    explorer.own_sentence.value = "<script>alert('x')</script> the cat sat"
    assert explorer.sentence_menu.value == TYPE_YOUR_OWN
    assert "<script" not in explorer.message.value
    assert explorer.refresh()
    assert_shows(explorer, encoder, "<script>alert('x')</script> the cat sat", 0, 0)


@pytest.mark.parametrize("typed, words", [("   ", "empty"), ("word " * 511, "513 tokens long")])
def test_bad_typed_sentences_are_explained_and_the_last_map_stays(encoder, typed, words):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = explorer.current
    explorer.own_sentence.value = typed
    assert words in explorer.message.value
    assert explorer.current is good
    assert_shows(explorer, encoder, SENTENCES[0], 0, 0)
    assert explorer.own_sentence.value == typed  # the reader's text is kept


def test_explorer_needs_sentences(encoder):
    with pytest.raises(ValueError, match="at least one sentence"):
        ModelHeadExplorer([], encoder=encoder)


@pytest.mark.parametrize("typed", ["<img src=x onerror=alert(1)>", "<script>alert(1)</script>"])
def test_html_typed_by_the_reader_is_shown_as_text_never_run(encoder, typed, monkeypatch):
    import mha.views.model_explorer

    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    monkeypatch.setattr(
        mha.views.model_explorer, "strongest_link", lambda weights: (1, 2)
    )  # the link "<" -> "img"/"script"
    explorer.own_sentence.value = typed + " the cat sat"
    assert explorer.refresh()
    message = explorer.message.value
    assert "<img" not in message and "<script" not in message
    assert "<code>&lt;</code> → <code>" in message
    assert set(re.findall(r"<\s*/?\s*([A-Za-z]+)", message)) <= {"code"}  # only the view's own markup


def test_a_lone_surrogate_is_explained_and_the_last_map_stays(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = explorer.current
    explorer.own_sentence.value = "a smile \ud83d cut in half"
    assert "Cannot draw this" in explorer.message.value and "broken character" in explorer.message.value
    assert explorer.current is good


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
    good = explorer.current

    def broken(*args, **kwargs):
        raise RuntimeError("the encoder fell over")
    monkeypatch.setattr(explorer.encoder, "trace", broken)
    explorer.own_sentence.value = "something new"
    assert "unexpected RuntimeError (the encoder fell over)" in explorer.message.value
    assert explorer.current is good
    assert explorer.typed_sentences == []  # a sentence the model could not read is not added to the view's menu


# --- in Jupyter: the view drawn by views.js, and the box to type a sentence under it ---------------------------


def sentence_control(payload: dict) -> dict:
    return next(control for control in payload["controls"] if control["name"] == "sentence")


def published(explorer: ModelHeadExplorer) -> dict:
    return decode_payload(explorer.view_widget.payload)


@pytest.mark.slow
def test_a_typed_sentence_joins_the_menu_of_the_view_on_screen(encoder):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder, layer=3, head=5)
    assert explorer.own_sentence in explorer.widget.children and explorer.typing_problem in explorer.widget.children
    assert sentence_control(published(explorer))["values"] == SENTENCES
    typed = "My <b>own</b> sentence , typed ."
    explorer.own_sentence.value = typed
    assert explorer.typed_sentences == [typed] and explorer.typing_problem.value == ""
    payload = published(explorer)
    control = sentence_control(payload)
    assert control["values"] == [*SENTENCES, typed] and control["values"][control["start"]] == typed
    assert TYPE_YOUR_OWN not in control["values"]
    # the view opens on the typed sentence, at the layer and head shown, with the encoder's own weights
    opening = payload["drawn"][payload["views"]["|".join(str(c["start"]) for c in payload["controls"])]]
    labels, attention = sentence_attention(encoder, typed)
    assert payload["strings"][opening["map"]["title"]] == "L3H5"
    assert payload["strings"][opening["map"]["rows"]] == labels
    np.testing.assert_array_equal(stored_weights(payload, opening["map"]), weight_hundredths(attention[3, 5]))
    message = payload["strings"][opening["message"]]
    assert message.startswith("L3H5: ") and set(re.findall(r"<\s*/?\s*([A-Za-z]+)", message)) <= {"code"}
    # a second sentence joins after the first; typing the first again, or a menu sentence, adds nothing
    explorer.own_sentence.value = "Another one ."
    for again in (typed, SENTENCES[1]):
        explorer.own_sentence.value = again
        assert explorer.typed_sentences == [typed, "Another one ."]
        control = sentence_control(published(explorer))
        assert control["values"] == [*SENTENCES, typed, "Another one ."]
        assert control["values"][control["start"]] == again


@pytest.mark.parametrize("typed, words", [("   ", "the sentence is empty"), ("<i>word</i> " * 70, "Shorten it")])
@pytest.mark.slow
def test_a_sentence_that_cannot_be_drawn_leaves_the_view_on_screen_as_it_was(encoder, typed, words):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    assert explorer.widget.children[0] is explorer.view_widget  # on screen: typing now sends the view payloads
    explorer.own_sentence.value = "A good one first ."
    sent = explorer.view_widget.payload
    explorer.own_sentence.value = typed
    problem = explorer.typing_problem.value
    assert problem.startswith("<b style='color:#b35806'>Cannot draw this:</b> ") and words in problem
    assert set(re.findall(r"<\s*/?\s*([A-Za-z]+)", problem)) <= {"b"} and problem == explorer.message.value
    assert explorer.typed_sentences == ["A good one first ."]
    assert explorer.view_widget.payload == sent
    explorer.own_sentence.value = "A good one again ."  # the next good sentence clears the problem
    assert explorer.typing_problem.value == "" and explorer.typed_sentences[-1] == "A good one again ."


def test_the_payload_runs_each_sentence_once_per_level_and_changes_nothing(encoder, monkeypatch):
    """The website's payload reads every sentence at both levels from the model once each (the cache holds the
    sentence being written), and leaves the explorer as it was."""
    import mha.views.model_explorer as model_explorer

    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    explorer._cache.clear()
    calls = []
    real = model_explorer.sentence_attention
    monkeypatch.setattr(
        model_explorer,
        "sentence_attention",
        lambda enc, sentence, **kw: calls.append((sentence, kw["word_level"])) or real(enc, sentence, **kw),
    )
    explorer.site_payload()
    assert sorted(calls) == sorted((sentence, level) for sentence in SENTENCES for level in (False, True))
    assert explorer.cache_size == CACHED_SENTENCES


# --- a text longer than the window: any length the model takes, drawn MAX_VIEW_TOKENS units at a time ----------

WORDS = "the cat sat on a mat while my old dog ran to her house by the sea and it was very cold".split()


def text_of(tokens: int) -> str:
    """A text of ``tokens`` wordpieces with [CLS] and [SEP]: common words, each one piece, cycled."""
    return " ".join(WORDS[i % len(WORDS)] for i in range(tokens - 2))


@pytest.fixture(scope="module")
def reference(encoder):
    """transformers' own BERT on the installed pretrained files, with the weights computed as written
    (eager attention): the oracle for every map."""
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(str(encoder.model_path), attn_implementation="eager", local_files_only=True)
    return AutoTokenizer.from_pretrained(str(encoder.model_path), local_files_only=True), model.eval()


def reference_attention(reference, text: str) -> tuple[list[str], np.ndarray]:
    """transformers' tokens and weights (layers, heads, n, n) of one text."""
    import torch

    tokenizer, model = reference
    inputs = tokenizer(text, return_tensors="pt")
    with torch.inference_mode():
        attentions = model(**inputs, output_attentions=True).attentions  # layers x (1, heads, n, n)
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0].tolist())
    return tokens, torch.cat(attentions).numpy()


@pytest.mark.slow
@pytest.mark.parametrize("tokens, first_query, first_key", [(62, 22, 5), (512, 300, 472)])
def test_a_long_text_is_drawn_a_window_at_a_time_with_transformers_weights(encoder, reference, tokens,
                                                                            first_query, first_key):
    text = text_of(tokens)
    labels, attention = reference_attention(reference, text)
    assert len(labels) == tokens
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder, layer=4, head=9)
    assert explorer.widget.children[0] is explorer.view_widget  # on screen: typing now sends the view payloads
    query_slider, key_slider = explorer.window_sliders["query"], explorer.window_sliders["key"]
    assert query_slider.layout.display == "none"  # the menu's short sentence fits: no window to move
    explorer.own_sentence.value = text
    assert explorer.typing_problem.value == "" and explorer.typed_sentences == [text]
    assert query_slider.max == key_slider.max == tokens - 40 and query_slider.layout.display is None
    query_slider.value, key_slider.value = first_query, first_key
    rows, columns = slice(first_query, first_query + 40), slice(first_key, first_key + 40)
    expected = attention[4, 9, rows, columns]  # (40, 40)
    drawn = explorer.current.attention_map
    assert drawn.query_labels == [f"{i} {labels[i]}" for i in range(first_query, first_query + 40)]
    assert drawn.key_labels == [f"{i} {labels[i]}" for i in range(first_key, first_key + 40)]
    np.testing.assert_allclose(drawn.weights, expected, atol=1e-5)
    assert f"The map has {tokens} rows and columns; shown: queries {first_query} to {first_query + 39}" in (
        explorer.message.value)
    # what views.js draws in Jupyter: the window's labels, and each cell's weight in the hundredths it shows
    payload = published(explorer)
    opening = payload["drawn"][payload["views"]["|".join(str(c["start"]) for c in payload["controls"])]]
    assert payload["strings"][opening["map"]["rows"]] == drawn.query_labels
    assert payload["strings"][opening["map"]["columns"]] == drawn.key_labels
    shown = stored_weights(payload, opening["map"]).astype(float)
    assert shown.shape == (40, 40) and np.abs(shown - 100 * expected).max() <= 0.5 + 1e-3
    # views.js moves between the menu's sentences without the kernel: the sliders stay while the menu holds a long one
    explorer.sentence_menu.value = SENTENCES[0]
    assert query_slider.max == tokens - 40 and query_slider.layout.display is None


def test_a_text_longer_than_the_model_takes_is_refused_before_the_model_runs(encoder, monkeypatch):
    explorer = ModelHeadExplorer(SENTENCES, encoder=encoder)
    good = explorer.current
    runs = []
    real_forward = type(encoder).forward
    monkeypatch.setattr(type(encoder), "forward", lambda self, *a, **kw: runs.append(1) or real_forward(self, *a, **kw))
    explorer.own_sentence.value = text_of(513)
    assert runs == []  # refused by the tokenizer: the encoder never ran
    problem = explorer.typing_problem.value
    assert "513 tokens long" in problem and "512 positions" in problem and "Shorten it" in problem
    assert explorer.current is good and explorer.typed_sentences == []
    explorer.own_sentence.value = text_of(30)  # and the model still runs on the next text
    assert runs == [1] and explorer.typing_problem.value == ""
