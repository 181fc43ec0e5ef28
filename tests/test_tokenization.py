"""Typed text the tokenizer cannot read, or that cannot fit the model, is refused with a ValueError that says why."""

import pytest
from hostile import Case, run_cases

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


# ---------------------------------------------------------------- a linear tokenizer

TRICKY = [
    "The cat sat on the mat.", "Zürich's café — naïve!", "don't  stop\tme\nnow", "北京欢迎你 and 東京",
    "a smile 😀 and 👍🏽 .", "zero\u200bwidth a\u200bb", "accent ab\u0301cd İstanbul", "ctrl a\x1cb \x85x",
    "nbsp\u00a0here\u202fthere", "___ --- !!! ...", "e-mail: x@y.org, 3.14 (pi) [1] {2}", "ﬁne ½ ² Ⅻ",
    "longwordthatwillbesplitintomanywordpiecesbythetokenizer ok", "ʰmodifier ǅ digraph", "\u0301 alone \u0300",
    "tab\t\tand  spaces   ", "©®™ symbols only", "x" * 150 + " tail",
]


def test_word_spans_are_the_tokenizers_own_word_to_chars():
    from mha.pretrained.tokenizer import _word_spans, load_tokenizer

    for text in TRICKY:
        encoding = load_tokenizer()([text], verbose=False).encodings[0]
        n_words = 1 + max(w for w in encoding.word_ids if w is not None)
        assert _word_spans(encoding) == [encoding.word_to_chars(w) for w in range(n_words)], text


def test_the_early_count_never_exceeds_the_real_number_of_wordpieces():
    from mha.pretrained.tokenizer import _fewest_tokens, load_tokenizer

    tokenizer = load_tokenizer()
    for text in TRICKY + [" ".join(TRICKY), "!" * 40, "a" * 40, "a!" * 40]:
        real = len(tokenizer(text, verbose=False).input_ids) - 2  # without [CLS] and [SEP]
        assert _fewest_tokens(text, 10**6) <= real, text
    assert _fewest_tokens("a " * 10**6, 2048) == 2048  # it stops counting at the stop


def test_a_pasted_document_is_refused_at_once_in_a_capped_process():
    setup = """
        import torch
        from mha.pretrained.tokenizer import tokenize
        tokenize("warm up")  # the tokenizer loads once, outside the timed cases
    """
    too_long = "more than 2,048 tokens long"
    rows = [  # name, call, what it must say
        ("a million words", "tokenize('a ' * 10**6)", too_long),
        ("a million marks", "tokenize('!' * 10**6)", too_long),
        ("a document second in a batch", "tokenize(['fine', 'word. ' * 10**5])", "sentence 1 is more than 2,048"),
        ("a million pre-split words", "tokenize([['w'] * 10**6], is_split_into_words=True)", too_long),
        ("just too long, counted exactly", "tokenize('word ' * 600)", "602 tokens long"),
    ]
    cases = [Case(name, call, "ValueError", words) for name, call, words in rows]
    # the character check is mha.core.validation's, whose errors are InputError (a ValueError)
    cases.append(Case("a surrogate at the end of a long text", "tokenize('a' * 10**6 + '\\ud800')", "InputError",
                      "position 1000000"))
    assert run_cases(setup, cases, per_case_seconds=1.0) == []
