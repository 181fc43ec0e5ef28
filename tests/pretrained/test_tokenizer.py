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
    # one run of ideographs is one piece to the early count, but each ideograph is a token
    ("a million CJK characters", "tokenize('中' * 10**6)", "ValueError", "1,000,000 characters long"),
    ("a batch one past the limit", "tokenize(['a'] * (2**16 + 1))", "SizeLimitError",
     "65,537 sentences, more than the limit of 65,536"),
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

    def counting_piece(self, piece, is_split_into_words):
        encoding = encode_piece(self, piece, is_split_into_words)
        produced.append(len(encoding.ids))
        return encoding

    encode_piece = Wordpieces.encode_piece
    monkeypatch.setattr(Wordpieces, "encode", counting_encode)
    monkeypatch.setattr(Wordpieces, "encode_piece", counting_piece)
    return produced


def characters_read(monkeypatch) -> list[int]:
    """A spy on the pieces a truncated sentence is read in: the characters of each (words: their characters and one
    space each), appended to the list returned; whole sentences given to the tokenizer count as one piece each."""
    from mha.pretrained.tokenizer import Wordpieces

    read, encode, encode_piece = [], Wordpieces.encode, Wordpieces.encode_piece

    def size(text) -> int:
        return len(text) if isinstance(text, str) else sum(len(word) + 1 for word in text)

    def counting_encode(self, sentences, is_split_into_words):
        read.extend(size(sentence) for sentence in sentences)
        return encode(self, sentences, is_split_into_words)

    def counting_piece(self, piece, is_split_into_words):
        read.append(size(piece))
        return encode_piece(self, piece, is_split_into_words)

    monkeypatch.setattr(Wordpieces, "encode", counting_encode)
    monkeypatch.setattr(Wordpieces, "encode_piece", counting_piece)
    return read


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


def test_the_character_bound_is_what_510_wordpieces_can_hold(monkeypatch):
    """A text that fits has at most 510 wordpieces of at most 100 characters (a longer word is one [UNK]) with a space
    between each: (512 - 2) * 101 = 51,510 characters. One space more is refused before any tokenising, though it
    would be a single token: a text padded out with whitespace is refused, not read."""
    from mha.pretrained.tokenizer import load_wordpieces

    assert load_wordpieces().backend.model.max_input_chars_per_word == 100  # the tokenizer's own longest word
    produced = tokens_produced(monkeypatch)
    assert tokenize("a" + " " * 51_509).tokens == [["[CLS]", "a", "[SEP]"]]
    assert produced == [3]
    with pytest.raises(ValueError, match=r"51,511 characters long.*at most 51,510 \(510 wordpieces of at most 100 "):
        tokenize("a" + " " * 51_510)
    assert produced == [3], "the text over the bound was tokenised"


TRUNCATED = [  # name, text, is_split_into_words
    ("a million words", "word " * 10**6, False),
    ("a million CJK characters", "中" * 10**6, False),
    ("a million pre-split words", ["word"] * 10**6, True),
    ("words of many pieces", "unaffable Zwölf don't " * 10**5, False),
]


@pytest.mark.parametrize("text, split", [row[1:] for row in TRUNCATED], ids=[row[0] for row in TRUNCATED])
def test_truncation_reads_only_the_start_of_a_long_text(monkeypatch, text, split):
    """truncate=True reads the text in pieces of about 2,048 characters until more than 510 wordpieces are read, and
    never the rest (a spy counts the characters tokenised): at most two pieces here, whatever the text's length. The
    tokens are those of transformers' own truncation of the same text (cut to the first 20,000 characters, whole
    words, for the oracle's sake), words and character offsets included."""
    import warnings

    from mha.pretrained.tokenizer import load_tokenizer

    read = characters_read(monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = tokenize(text, is_split_into_words=split, truncate=True)
    assert sum(read) <= 2 * 2048 + 16, f"{sum(read):,} characters tokenised, in {len(read)} pieces"
    assert len(caught) == 1 and "the rest of the sentence was not read" in str(caught[0].message)
    start = text[:5000] if split else text[:20_000]
    expected = load_tokenizer()(start, is_split_into_words=split, truncation=True, max_length=512, verbose=False)
    assert batch.input_ids[0].tolist() == expected.input_ids
    assert batch.word_ids[0] == expected.word_ids()
    if not split:
        n_words = 1 + max(w for w in batch.word_ids[0] if w is not None)
        assert batch.words[0] == [start[slice(*expected.word_to_chars(w))] for w in range(n_words)]


def test_reading_in_pieces_gives_what_reading_whole_gives():
    """The pieces are cut after whitespace, ASCII punctuation or a CJK ideograph, where the tokenizer always ends a
    word; with pieces as small as one character, the ids, pieces, word of each piece and characters of each piece
    are those of tokenising the text whole, on tricky text, random text from across the basic plane and the
    treebank (raw and pre-split)."""
    import random

    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
    from mha.pretrained.tokenizer import _read_start, load_wordpieces

    wordpieces = load_wordpieces()
    rng = random.Random(1)
    noise = ["".join(chr(rng.randrange(0x20, 0xD800)) for _ in range(rng.randrange(1, 60))) for _ in range(300)]
    words = [list(sentence.words) for sentence in read_conllu(EWT_DEV_PATH)][:300]
    for batch, split in (([*TRICKY, *noise, " ".join(TRICKY)], False), ([" ".join(w) for w in words], False),
                         (words, True)):
        for sentence, whole in zip(batch, wordpieces.encode(batch, is_split_into_words=split), strict=True):
            for size in (1, 3, 50):
                read = _read_start(wordpieces, sentence, split, 10**6, size)
                assert read.complete and (read.ids, read.tokens, read.word_ids, read.offsets) == \
                    (whole.ids, whole.tokens, list(whole.word_ids), whole.offsets), (sentence, size)


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
