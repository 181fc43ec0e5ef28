"""Typed text the tokenizer cannot read, or that cannot fit the model, is refused with a ValueError that says why."""

import pytest
from hostile import Case, run_cases

from mha.core.validation import check_no_lone_surrogates
from mha.pretrained.tokenizer import tokenize


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


TOO_LONG = "more than 2,048 tokens long"
PASTED_DOCUMENTS = [  # name, call, the error, what it must say
    ("a million words", "tokenize('a ' * 10**6)", "ValueError", TOO_LONG),
    ("a million marks", "tokenize('!' * 10**6)", "ValueError", TOO_LONG),
    ("a document second in a batch", "tokenize(['fine', 'word. ' * 10**5])", "ValueError",
     "sentence 1 is more than 2,048"),
    ("a million pre-split words", "tokenize([['w'] * 10**6], is_split_into_words=True)", "ValueError", TOO_LONG),
    # the character check is mha.core.validation's, whose errors are InputError (a ValueError)
    ("a surrogate at the end of a long text", "tokenize('a' * 10**6 + '\\ud800')", "InputError", "position 1000000"),
]


def tokens_produced(monkeypatch) -> list[int]:
    """A spy on the wordpiece tokenizer, the work that grows with the text: the tokens it produces for each sentence
    it is given, appended to the list returned."""
    from mha.pretrained.tokenizer import Wordpieces

    produced, encode = [], Wordpieces.encode

    def counting_encode(self, sentences, is_split_into_words):
        encodings = encode(self, sentences, is_split_into_words)
        produced.extend(len(encoding.ids) for encoding in encodings)
        return encodings

    monkeypatch.setattr(Wordpieces, "encode", counting_encode)
    return produced


@pytest.mark.parametrize("call, error, words", [row[1:] for row in PASTED_DOCUMENTS],
                         ids=[row[0] for row in PASTED_DOCUMENTS])
def test_a_pasted_document_is_refused_before_the_tokenizer_reads_it(monkeypatch, call, error, words):
    """"At once" is the work skipped, not a time: the length check counts at most 4 x 512 tokens' worth of text and
    refuses, so the tokenizer produces no token at all, whatever the document's size."""
    produced = tokens_produced(monkeypatch)
    with pytest.raises(ValueError, match=words) as refused:
        eval(call, {"tokenize": tokenize})
    assert type(refused.value).__name__ == error
    assert produced == [], f"the tokenizer read the document ({sum(produced):,} tokens) before it was refused"


def test_text_just_too_long_is_tokenised_once_to_give_its_exact_length(monkeypatch):
    """Under 4 x 512 counted tokens, the text is tokenised, once, for the exact length the message gives."""
    produced = tokens_produced(monkeypatch)
    with pytest.raises(ValueError, match="602 tokens long"):
        tokenize("word " * 600)
    assert produced == [602]


def test_a_pasted_document_is_refused_within_a_memory_cap():
    """The same documents in a child whose address space is capped (tests/hostile.py): refused without allocating
    what the document's tokens would take."""
    setup = """
        import torch
        from mha.pretrained.tokenizer import tokenize
        tokenize("warm up")  # the tokenizer loads once, before the cases
    """
    cases = [Case(*row) for row in PASTED_DOCUMENTS]
    assert run_cases(setup, cases) == []


# ---------------------------------------------------------------- the tokenizer without transformers

def test_wordpieces_give_what_the_transformers_tokenizer_gives_on_the_treebank_and_on_random_text():
    """load_wordpieces reads tokenizer.json with the tokenizers library alone; transformers' own tokenizer of the
    same folder is the oracle, on every sentence of the treebank (raw and pre-split) and on random text from across
    the basic plane: the same ids, pieces, word of each piece and characters of each piece."""
    import random

    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
    from mha.pretrained.tokenizer import load_tokenizer, load_wordpieces

    oracle, wordpieces = load_tokenizer(), load_wordpieces()
    words = [list(sentence.words) for sentence in read_conllu(EWT_DEV_PATH)]
    rng = random.Random(0)
    noise = ["".join(chr(rng.randrange(0x20, 0xD800)) for _ in range(rng.randrange(1, 30))) for _ in range(500)]
    for batch, split in (([" ".join(w) for w in words], False), (words, True), ([*TRICKY, *noise], False)):
        expected = oracle(batch, is_split_into_words=split, add_special_tokens=True, verbose=False).encodings
        got = wordpieces.encode(batch, is_split_into_words=split)
        differ = [index for index, (a, b) in enumerate(zip(expected, got, strict=True))
                  if (a.ids, a.tokens, list(a.word_ids), a.offsets) != (b.ids, b.tokens, list(b.word_ids), b.offsets)]
        assert differ == [], f"{len(differ)} inputs tokenised differently, the first: {batch[differ[0]]!r}"
    assert (wordpieces.model_max_length, wordpieces.pad_token, wordpieces.pad_token_id) == \
        (oracle.model_max_length, oracle.pad_token, oracle.pad_token_id)
    for word in ["unaffable", "Zwölf", "don't", "ﬁx", "x" * 150]:
        assert wordpieces.pieces(word) == oracle.tokenize(word)
    assert wordpieces.vocabulary() == oracle.get_vocab() and len(wordpieces.vocabulary()) == oracle.vocab_size


def test_wordpieces_neither_truncate_nor_pad_as_the_model_folders_file_asks():
    """The model's tokenizer.json truncates to 128 and pads to 128; tokenize checks lengths and pads itself."""
    from mha.pretrained.tokenizer import load_wordpieces

    long, short = load_wordpieces().encode(["word " * 300, "one"], is_split_into_words=False)
    assert (len(long.ids), len(short.ids)) == (302, 3)


def test_a_missing_or_broken_tokenizer_file_or_a_foreign_tokenizer_gets_a_clear_message(tmp_path):
    import shutil

    from mha.core.validation import InputError
    from mha.pretrained.tokenizer import default_model_path, load_wordpieces

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "vocab.txt").write_text("[PAD]\n[UNK]\n")
    with pytest.raises(InputError, match="has no tokenizer.json"):
        load_wordpieces(folder)
    (folder / "tokenizer.json").write_text('{"version": "1.0", "model": ')  # cut short
    shutil.copy(default_model_path() / "tokenizer_config.json", folder)
    with pytest.raises(InputError, match="could not be read.*Reinstall"):
        load_wordpieces(folder)
    with pytest.raises(InputError, match="tokenizer should be a Wordpieces"):
        tokenize("a cat", tokenizer="bert-base-uncased")


def test_tokenizing_with_the_encoder_leaves_transformers_unimported():
    """A notebook that only traces sentences does not pay for importing transformers."""
    import subprocess
    import sys

    code = ("import sys\nfrom mha.pretrained.encoder import MiniLMEncoder\n"
            "MiniLMEncoder.load().trace(['The cat sat on the mat .'])\nprint('transformers' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert found.returncode == 0, found.stderr[-2000:]
    assert found.stdout.strip() == "False"
