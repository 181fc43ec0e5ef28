"""Coreference in fiction: LitBank's chains read into windows of text with pronouns and their antecedents (3.3).

LitBank (Bamman, Lewke and Mansoor 2020) marks every mention of every entity in the first 2,000 or so words of 100
English novels and stories, pronouns included, and links the mentions of one entity into a chain. Its coreference
files are in the CoNLL-2012 format: one token a line (document, part, token number, word, ..., and in the last
column the chains), a blank line between sentences, the document between ``#begin document`` and
``#end document``. The last column opens a mention of chain 7 with ``(7``, closes it with ``7)``, marks a one-word
mention ``(7)``, and joins several marks on one token with ``|``; mentions nest. :func:`parse_coref_conll` reads such
a file into a :class:`CorefDocument`, checking every line, and refuses a broken one with the line that is wrong.

The book ships an extract of 80 works, :data:`LITBANK_PATH` (``scripts/extract_litbank.py`` writes it from the
CoNLL files; its licence and attribution sit beside it), read by :func:`load_litbank`.

:func:`coref_windows` cuts a document into windows of consecutive sentences that fit the model (at most
``max_pieces`` word pieces, ``[CLS]`` and ``[SEP]`` included). In each window every third-person pronoun that is a
mention (:data:`PRONOUNS`, one word) is linked to its **antecedent: the nearest earlier mention of the same chain
inside the window**, whatever kind of mention that is (a name, a noun phrase or another pronoun); "earlier" means
that the mention ends before the pronoun. A pronoun whose chain has no earlier mention in the window (a first
mention, or one whose antecedent lies in an earlier window) gets no link and is counted in
:attr:`CorefWindow.unlinked`. Word indices count from 0 over the window's words; a span ``(start, end)`` includes
both ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mha.core.validation import as_path, check_items, check_type, check_whole_number
from mha.data_files import DATA_DIRECTORY, read_verified_file, read_verified_json

__all__ = ["PRONOUNS", "LITBANK_PATH", "Mention", "CorefDocument", "parse_coref_conll", "read_coref_conll",
           "documents_to_json", "load_litbank", "PronounLink", "CorefWindow", "coref_windows", "ANTECEDENT_KINDS",
           "antecedent_kind"]

PRONOUNS = frozenset({"he", "him", "his", "himself", "she", "her", "hers", "herself", "it", "its", "itself",
                      "they", "them", "their", "theirs", "themselves"})
"""The third-person pronouns linked to antecedents (lower case). First and second persons are left out: in fiction
they mostly name a narrator or a speaker, whose last mention is often far away or outside the text."""

ANTECEDENT_KINDS = ("nominal", "pronoun")
"""The two kinds of antecedent a pronoun link is scored on apart (:func:`antecedent_kind`): a name or noun phrase
(*Mary* ... *she*, *the old man* ... *he*), or another pronoun of :data:`PRONOUNS` (*he* ... *him*)."""

LITBANK_PATH = DATA_DIRECTORY / "litbank" / "litbank_coref.json"
"""The book's extract of LitBank: 80 works' sentences and coreference mentions (``scripts/extract_litbank.py``)."""

MAX_CONLL_BYTES = 16 * 2**20
MAX_EXTRACT_BYTES = 8 * 2**20
_MARK = re.compile(r"^\(?(\d+)\)?$")


@dataclass(frozen=True)
class Mention:
    """One mention of chain ``chain``: words ``start`` to ``end`` (both included) of sentence ``sentence``."""

    chain: int
    sentence: int
    start: int
    end: int


@dataclass(frozen=True)
class CorefDocument:
    """A document's sentences (each a tuple of words) and its mentions, in order of (sentence, start, -end)."""

    name: str
    sentences: tuple[tuple[str, ...], ...]
    mentions: tuple[Mention, ...]


def _marks(field: str, where: str) -> list[tuple[str, int]]:
    """The marks of one coreference column: ('open' | 'close' | 'single', chain) in the order they are written."""
    if field in ("", "_", "-"):
        return []
    marks = []
    for part in field.split("|"):
        match = _MARK.match(part)
        if match is None or (part.startswith("(") is False and part.endswith(")") is False):
            raise ValueError(f"{where}: the coreference column {field!r} has the mark {part!r}; a mark is '(N', "
                             "'N)' or '(N)' with N a chain number, several joined by '|' ('_' or '-' for none).")
        chain = int(match[1])
        kind = "single" if part.startswith("(") and part.endswith(")") else "open" if part.startswith("(") else "close"
        marks.append((kind, chain))
    return marks


def parse_coref_conll(text: str, *, source: str = "<string>") -> CorefDocument:
    """Read one CoNLL-2012 coreference document (LitBank's ``coref/*.conll``) into a :class:`CorefDocument` (3.3).

    Checks every line: the ``#begin document`` header first and ``#end document`` last (a file cut short lacks
    it), at least 5 tab-separated columns on a token line (word in the 4th, chains in the last), token numbers
    0, 1, 2, ... within each sentence, well-formed marks, every closing mark matching an open mention of its chain
    in the same sentence, and no mention left open at the end of a sentence. ``ValueError`` names ``source`` and
    the line otherwise.
    """
    check_type("text", text, str, "the text of a CoNLL coreference file")
    check_type("source", source, str, "the name of the file, for error messages")
    lines = text.removeprefix("\ufeff").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or not lines[0].startswith("#begin document"):
        raise ValueError(f"{source}, line 1: a CoNLL coreference file starts with '#begin document (NAME); part 0', "
                         f"found {lines[0][:60] if lines else ''!r}.")
    name = lines[0].removeprefix("#begin document").strip().strip("();").split(")")[0].strip() or source
    sentences: list[tuple[str, ...]] = []
    mentions: list[Mention] = []
    words: list[str] = []
    open_mentions: dict[int, list[tuple[int, int]]] = {}  # chain -> stack of (start word, line)
    ended = False

    def close_sentence(line: int) -> None:
        left = [(chain, start_line) for chain, stack in open_mentions.items() for _, start_line in stack]
        if left:
            chain, start_line = left[0]
            raise ValueError(f"{source}, line {start_line}: a mention of chain {chain} opens here but is not closed "
                             f"by the end of its sentence (line {line}); add '{chain})' on its last word.")
        if words:
            sentences.append(tuple(words))
        words.clear()
        open_mentions.clear()

    for number, line in enumerate(lines[1:], start=2):
        where = f"{source}, line {number}"
        if ended:
            if line.strip():
                raise ValueError(f"{where}: text after '#end document'; a file holds one document.")
            continue
        if line.startswith("#end document"):
            close_sentence(number)
            ended = True
            continue
        if line.startswith("#"):
            raise ValueError(f"{where}: {line[:40]!r} inside the document; only '#end document' may follow the header.")
        if not line.strip():
            close_sentence(number)
            continue
        columns = line.split("\t")
        if len(columns) < 5:
            raise ValueError(f"{where}: {len(columns)} tab-separated columns; a token line needs at least 5 "
                             "(document, part, token number, word, ..., coreference).")
        if columns[2] != str(len(words)):
            raise ValueError(f"{where}: token number {columns[2]!r} where {len(words)} was expected; tokens are "
                             "numbered 0, 1, 2, ... within each sentence, and sentences are separated by a blank line.")
        if not columns[3]:
            raise ValueError(f"{where}: the word column (the 4th) is empty.")
        position = len(words)
        words.append(columns[3])
        for kind, chain in _marks(columns[-1].strip(), where):
            if kind == "open":
                open_mentions.setdefault(chain, []).append((position, number))
            elif kind == "single":
                mentions.append(Mention(chain, len(sentences), position, position))
            else:
                stack = open_mentions.get(chain)
                if not stack:
                    raise ValueError(f"{where}: '{chain})' closes a mention of chain {chain} that is not open in "
                                     f"this sentence; add '({chain}' on its first word.")
                start, _ = stack.pop()
                mentions.append(Mention(chain, len(sentences), start, position))
    if not ended:
        raise ValueError(f"{source} ends at line {len(lines)} without '#end document': the file is cut short or "
                         "not a CoNLL coreference file.")
    if not sentences:
        raise ValueError(f"{source} holds no sentences.")
    mentions.sort(key=lambda m: (m.sentence, m.start, -m.end, m.chain))
    return CorefDocument(name, tuple(sentences), tuple(mentions))


def read_utf8_file(path: str | Path, *, what: str, how: str) -> tuple[Path, str]:
    """``(path, text)`` of one of LitBank's files (UTF-8, at most 16 MiB); an error names the file and the line of a
    byte that UTF-8 cannot read (3.3)."""
    path = as_path("path", path)
    data = read_verified_file(path, what=what, how=how, limit=MAX_CONLL_BYTES)
    try:
        return path, data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: a byte that UTF-8 cannot read; save the file as UTF-8.") from None


def read_coref_conll(path: str | Path) -> CorefDocument:
    """:func:`parse_coref_conll` of the file at ``path`` (UTF-8, at most 16 MiB), naming the file in any error (3.3)."""
    path, text = read_utf8_file(path, what="the coreference file",
                                how="Use a CoNLL-2012 coreference file, such as LitBank's coref/*.conll.")
    return parse_coref_conll(text, source=str(path))


def documents_to_json(documents: Sequence[CorefDocument]) -> dict:
    """The documents as JSON-ready lists: ``{"works": [{"name", "sentences", "mentions": [[chain, sentence, start,
    end], ...]}]}``, what :func:`load_litbank` reads (3.3)."""
    documents = check_items("documents", documents, "a list of CorefDocument (parse_coref_conll, load_litbank)")
    for document in documents:
        check_type("each document", document, CorefDocument, "a CorefDocument (parse_coref_conll, load_litbank)")
    return {"works": [{"name": d.name, "sentences": [list(s) for s in d.sentences],
                       "mentions": [[m.chain, m.sentence, m.start, m.end] for m in d.mentions]} for d in documents]}


def _document_from_json(work, where: str) -> CorefDocument:
    if not isinstance(work, dict) or not isinstance(work.get("name"), str):
        raise ValueError(f"{where} is not an object with a 'name', 'sentences' and 'mentions'.")
    sentences = work.get("sentences")
    if (not isinstance(sentences, list) or not sentences
            or not all(isinstance(s, list) and s and all(isinstance(w, str) and w for w in s) for s in sentences)):
        raise ValueError(f"{where} ({work['name']}): 'sentences' must be a non-empty list of non-empty lists of words.")
    mentions = []
    for index, mention in enumerate(work.get("mentions") or []):
        if not (isinstance(mention, list) and len(mention) == 4 and all(type(v) is int for v in mention)):
            raise ValueError(f"{where} ({work['name']}), mention {index}: {mention!r} is not [chain, sentence, start, "
                             "end] of whole numbers.")
        chain, sentence, start, end = mention
        if not (chain >= 0 and 0 <= sentence < len(sentences) and 0 <= start <= end < len(sentences[sentence])):
            raise ValueError(f"{where} ({work['name']}), mention {index}: {mention!r} points outside its document "
                             f"({len(sentences)} sentences; a span lies within one sentence).")
        mentions.append(Mention(chain, sentence, start, end))
    return CorefDocument(work["name"], tuple(tuple(s) for s in sentences), tuple(mentions))


def load_litbank(path: str | Path = LITBANK_PATH) -> list[CorefDocument]:
    """The book's LitBank extract (:data:`LITBANK_PATH`), checked against ``data/SHA256SUMS`` and mention by mention.

    A missing, tampered or malformed file raises ``ValueError`` saying what is wrong and how to restore it (3.3).
    """
    path = as_path("path", path)
    what = "the LitBank extract"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.extract_litbank", limit=MAX_EXTRACT_BYTES)
    works = content.get("works") if isinstance(content, dict) else None
    if not isinstance(works, list) or not works:
        raise ValueError(f"{what} {path} has no list of 'works'. {how}")
    return [_document_from_json(work, f"{what} {path}, work {index}") for index, work in enumerate(works)]


@dataclass(frozen=True)
class PronounLink:
    """A pronoun of a window and its antecedent, in the window's word indices (3.3, "On natural text").

    ``pronoun``: the pronoun's word; ``antecedent``: the span (start, end) of the nearest earlier mention of its
    chain; ``chain_mentions``: the spans of every earlier mention of its chain in the window (the antecedent
    among them); ``nearest_mention`` and ``nearest_noun_phrase``: the last word of the nearest earlier mention of
    any chain, and of the nearest one that is not a pronoun (None if there is none), which the baselines pick.
    """

    pronoun: int
    antecedent: tuple[int, int]
    chain_mentions: tuple[tuple[int, int], ...]
    nearest_mention: int
    nearest_noun_phrase: int | None


@dataclass(frozen=True)
class CorefWindow:
    """Consecutive sentences of one document that fit the model, with their pronoun links (3.3).

    ``words`` are the window's words; ``first_sentence`` the document's index of its first sentence and
    ``n_sentences`` how many it holds; ``links`` one :class:`PronounLink` per pronoun with an antecedent in the
    window; ``unlinked`` how many pronoun mentions have none there.
    """

    document: str
    first_sentence: int
    n_sentences: int
    words: tuple[str, ...]
    links: tuple[PronounLink, ...]
    unlinked: int


def _is_pronoun(words: Sequence[str], start: int, end: int) -> bool:
    return start == end and words[start].lower() in PRONOUNS


def antecedent_kind(window: CorefWindow, link: PronounLink) -> str:
    """``"pronoun"`` if the link's antecedent is one word of :data:`PRONOUNS`, else ``"nominal"`` (a name or a noun
    phrase, however short; *her dog* is nominal), the split of :data:`ANTECEDENT_KINDS` (3.3).

    The same test decides which mentions the nearest-noun-phrase rule may pick, so that rule is right on a link whose
    antecedent is a pronoun only where a longer mention ends on that pronoun (*the man himself*).
    """
    check_type("window", window, CorefWindow, "a CorefWindow (coref_windows)")
    check_type("link", link, PronounLink, "a PronounLink of the window")
    start, end = link.antecedent
    if not 0 <= start <= end < link.pronoun < len(window.words):
        raise ValueError(f"the link's antecedent {link.antecedent} and pronoun {link.pronoun} do not lie in order "
                         f"inside the window's {len(window.words)} words; give a link of that window.")
    return "pronoun" if _is_pronoun(window.words, start, end) else "nominal"


def _window(document: CorefDocument, sentences: range) -> CorefWindow:
    offsets, words = {}, []
    for s in sentences:
        offsets[s] = len(words)
        words.extend(document.sentences[s])
    spans = [(offsets[m.sentence] + m.start, offsets[m.sentence] + m.end, m.chain)
             for m in document.mentions if m.sentence in offsets]
    links, unlinked = [], 0
    for start, end, chain in spans:
        if not _is_pronoun(words, start, end):
            continue
        earlier = sorted((e, s, c) for s, e, c in spans if e < start)  # ends before the pronoun; nearest last
        same = [(s, e) for e, s, c in earlier if c == chain]
        if not same:
            unlinked += 1
            continue
        # nearest: the latest end; among mentions ending on the same word, the innermost (latest start)
        noun_phrases = [e for e, s, c in earlier if not _is_pronoun(words, s, e)]
        links.append(PronounLink(start, same[-1], tuple(same), earlier[-1][0],
                                 noun_phrases[-1] if noun_phrases else None))
    return CorefWindow(document.name, sentences.start, len(sentences), tuple(words), tuple(links), unlinked)


def coref_windows(document: CorefDocument, *, max_pieces: int = 128,
                  pieces: Callable[[str], int] = lambda word: 1) -> list[CorefWindow]:
    """Cut ``document`` into windows of whole consecutive sentences, none longer than ``max_pieces`` (3.3).

    ``pieces(word)`` is how many tokens the model's tokenizer makes of a word (one each by default); a window
    holds as many sentences as fit in ``max_pieces`` tokens with ``[CLS]`` and ``[SEP]``, the next window starts
    at the next sentence, and a sentence too long for a window on its own is left out. Windows do not overlap, so
    each pronoun is counted once.
    """
    check_type("document", document, CorefDocument, "a CorefDocument (parse_coref_conll, load_litbank)")
    max_pieces = check_whole_number("max_pieces", max_pieces, minimum=3, meaning="tokens per window, [CLS] and [SEP] "
                                    "included")
    if not callable(pieces):
        raise ValueError(f"pieces should be a function from a word to its number of tokens, got {pieces!r:.60}.")

    def counted(word: str) -> int:
        return check_whole_number(f"pieces({word!r})", pieces(word), minimum=1, meaning="the tokens of a word")

    lengths = [sum(counted(word) for word in sentence) for sentence in document.sentences]
    windows, start = [], 0
    while start < len(lengths):
        stop, used = start, 2  # [CLS] and [SEP]
        while stop < len(lengths) and used + lengths[stop] <= max_pieces:
            used += lengths[stop]
            stop += 1
        if stop == start:  # this sentence alone is too long
            start += 1
            continue
        windows.append(_window(document, range(start, stop)))
        start = stop
    return windows
