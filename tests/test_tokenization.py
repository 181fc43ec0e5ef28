"""Typed text the tokenizer cannot read is refused with a ValueError that says where and what to do."""

import pytest

from mha.pretrained.tokenizer import check_no_lone_surrogates, tokenize


@pytest.mark.parametrize("text, words", [
    ("hi \ud800 there", r"sentence 0 holds a broken character at position 3 \(U\+D800, after 'hi '\)"),
    (["fine.", "\udfff"], r"sentence 1 holds a broken character at position 0 \(U\+DFFF"),
    ("smile \ud83d", r"U\+D83D.*Delete it, or retype that character"),  # half an emoji
])
def test_a_lone_surrogate_is_a_clear_value_error(text, words):
    with pytest.raises(ValueError, match=words):
        tokenize(text)


def test_a_lone_surrogate_in_a_pre_split_word_names_the_word():
    with pytest.raises(ValueError, match=r"word 1 of sentence 0 holds a broken character at position 1"):
        tokenize(["ok", "b\ud800"], is_split_into_words=True)


def test_whole_characters_outside_the_basic_plane_still_tokenize():
    batch = tokenize("a smile 😀 .")
    assert batch.words[0] == ["a", "smile", "😀", "."]
    check_no_lone_surrogates("😀")  # one character, not a pair of halves: nothing to complain about
