"""The chapter-1 random-layer explorer: answers quickly, explains bad input, keeps the last good map, escapes HTML."""

import numpy as np
import pytest

from mha.core.toy_sentences import MAX_TOKENS, embed_tokens, split_into_tokens
from mha.views.random_layer_explorer import DEFAULT_SENTENCE, RandomLayerExplorer, head_attention_maps


def assert_shows(explorer, sentence, n_heads, head):
    """The explorer's last good map is head ``head`` of ``head_attention_maps(sentence, n_heads)``."""
    tokens, weights = head_attention_maps(sentence, n_heads)
    drawn = explorer.current.attention_map
    assert drawn.title.startswith(f"head {head} of {n_heads} ") and drawn.query_labels == tokens
    np.testing.assert_array_equal(drawn.weights, weights[head])


def test_maps_have_one_row_per_token_and_rows_sum_to_one():
    tokens, weights = head_attention_maps("The cat sat on the mat .", n_heads=4)
    assert tokens == ["The", "cat", "sat", "on", "the", "mat", "."]
    assert weights.shape == (4, 7, 7)
    np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-6)


def test_maps_are_reproducible_and_depend_on_the_head_count():
    _, a = head_attention_maps("a b c d", 2)
    _, b = head_attention_maps("a b c d", 2)
    _, c = head_attention_maps("a b c d", 4)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[0], c[0])


def test_same_word_same_vector_plus_position():
    vectors = embed_tokens(["dog", "Dog", "cat"], 8)[0]
    assert not np.allclose(vectors[0], vectors[2])
    difference_of_positions = embed_tokens(["dog", "dog"], 8)[0]
    np.testing.assert_allclose(
        vectors[1] - vectors[0], difference_of_positions[1] - difference_of_positions[0], atol=1e-6
    )


@pytest.mark.parametrize("sentence, words", [("", "empty"), ("   ", "empty"), (42, "must be text"),
                                             (" ".join(["word"] * (MAX_TOKENS + 1)), "shorten it")])
def test_bad_sentences_are_explained(sentence, words):
    with pytest.raises(ValueError, match=words):
        split_into_tokens(sentence)


def test_explorer_reports_a_head_count_that_does_not_divide_and_keeps_the_last_map():
    explorer = RandomLayerExplorer(n_heads=4)
    good = explorer.current
    assert_shows(explorer, DEFAULT_SENTENCE, 4, 0)
    explorer.heads_slider.value = 5
    assert "not divisible by n_heads = 5" in explorer.message.value
    assert "1, 2, 3, 4, 6, 8, 12, 24" in explorer.message.value
    assert explorer.current is good  # nothing lost
    explorer.heads_slider.value = 8
    assert "8 heads × d_head = 3" in explorer.message.value
    assert explorer.head_slider.max == 7
    assert_shows(explorer, DEFAULT_SENTENCE, 8, 0)


def test_explorer_head_slider_follows_the_head_count():
    explorer = RandomLayerExplorer(n_heads=12)
    explorer.head_slider.value = 11
    explorer.heads_slider.value = 3
    assert explorer.head_slider.max == 2 and explorer.head_slider.value == 2
    assert "showing head 2" in explorer.message.value
    assert_shows(explorer, DEFAULT_SENTENCE, 3, 2)


def test_explorer_escapes_html_typed_by_the_reader():
    explorer = RandomLayerExplorer()
    explorer.sentence_box.value = "<img src=x onerror=alert(1)> hello"
    assert "<img" not in explorer.message.value
    assert "&lt; | img" in explorer.message.value
    assert_shows(explorer, "<img src=x onerror=alert(1)> hello", 4, 0)
    explorer.sentence_box.value = ""
    assert "empty" in explorer.message.value
    assert explorer.sentence_box.value == ""  # the reader's text is left as typed


def test_every_head_count_redraws_the_maps():
    # How fast each update is belongs to the benchmark (scripts/bench_views.py, budget 50 ms), not to a timed test.
    explorer = RandomLayerExplorer()
    pictures = {}
    for n_heads in (1, 2, 3, 4, 6, 8, 12, 2, 4):
        explorer.heads_slider.value = n_heads
        assert explorer.last_refresh_seconds is not None
        assert_shows(explorer, DEFAULT_SENTENCE, n_heads, 0)
        pictures[n_heads] = explorer.current.attention_map.weights.tobytes()
    assert len(set(pictures.values())) == 7, "each head count should draw its own maps"


HOSTILE = ["<img src=x onerror=alert(1)>", "<script>alert('x')</script>"]


@pytest.mark.parametrize("typed", HOSTILE)
def test_html_typed_by_the_reader_is_shown_as_text_never_run(typed):
    explorer = RandomLayerExplorer()
    explorer.sentence_box.value = typed + " and some words"
    assert explorer.refresh()
    assert "<img" not in explorer.message.value and "<script" not in explorer.message.value
    assert "&lt;" in explorer.message.value and "&gt;" in explorer.message.value


def test_a_lone_surrogate_is_explained_and_the_last_map_stays():
    explorer = RandomLayerExplorer()
    good = explorer.current
    explorer.sentence_box.value = "a broken \ud800 character"
    assert "Cannot draw this" in explorer.message.value
    assert "broken character at position 9 (U+D800" in explorer.message.value
    assert explorer.current is good


def test_an_unexpected_error_is_a_message_not_a_dead_view(monkeypatch):
    import mha.views.random_layer_explorer

    explorer = RandomLayerExplorer()
    good = explorer.current

    def broken(*args, **kwargs):
        raise TypeError("<b>surprise</b>")
    monkeypatch.setattr(mha.views.random_layer_explorer, "head_attention_maps", broken)
    assert explorer.refresh() is False
    assert "Cannot draw this" in explorer.message.value and "unexpected TypeError" in explorer.message.value
    assert "&lt;b&gt;surprise" in explorer.message.value and explorer.current is good
