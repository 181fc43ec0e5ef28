"""Entities in fiction: LitBank's entity layer, and windows that pair each mention with earlier ones (3.3).

LitBank (Bamman, Popat and Shen 2019) marks every mention of a person (PER), facility (FAC), geo-political entity
(GPE), location (LOC), vehicle (VEH) or organisation (ORG) in the first 2,000 or so words of its works, names and
common noun phrases alike ("Lord Chancellor", "the streets"), nested up to four or five deep ("the face of [the
earth]"). Its entity files (``entities/*.tsv``) hold one token a line: the word, then one BIO column per depth
(``B-PER`` opens a mention, ``I-PER`` continues it, ``O`` is outside), a blank line between sentences.
:func:`parse_entity_tsv` reads such a file, checking every line, and refuses a broken one with the line that is wrong.
Column 1 holds the innermost mentions, the last column the outermost.

The book ships the spans only (:data:`LITBANK_ENTITIES_PATH`, written by ``scripts/extract_litbank.py``): the words
are those of the coreference extract (:data:`mha.corpora.litbank.LITBANK_PATH`), which the script checks word for
word, and :func:`load_litbank_entities` joins the two again.

:func:`entity_windows` cuts a work into the same windows of whole sentences as
:func:`mha.corpora.litbank.coref_windows` and gives, in each, two things to score heads on:

* **spans**: every outermost entity mention of two words or more, as (start, end, label);
* **mention links**: every coreference mention that is an entity mention (its span is one of the entity layer's)
  and not a pronoun, with the earlier mentions of the window that could be its entity: the **candidates**, every
  earlier non-pronoun mention of the same type (a PER for a PER). A link is kept when at least one candidate
  belongs to its own chain and one does not. Candidates of one type are the same kind of phrase as the mention
  (a name or a noun phrase naming a person, say), so a head cannot pick the right one by preferring nouns.

Word indices count from 0 over the window's words; a span ``(start, end)`` includes both ends.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mha.core.validation import as_path, check_items, check_type
from mha.corpora.litbank import PRONOUNS, CorefDocument, coref_windows, load_litbank, read_utf8_file
from mha.data_files import DATA_DIRECTORY, read_verified_json

__all__ = ["ENTITY_LABELS", "LITBANK_ENTITIES_PATH", "EntityMention", "EntityDocument", "parse_entity_tsv",
           "read_entity_tsv", "entities_to_json", "load_litbank_entities", "MentionLink", "EntityWindow",
           "entity_windows"]

ENTITY_LABELS = ("PER", "FAC", "GPE", "LOC", "VEH", "ORG")
"""LitBank's six entity types (ACE's): person, facility, geo-political entity, location, vehicle, organisation."""

LITBANK_ENTITIES_PATH = DATA_DIRECTORY / "litbank" / "litbank_entities.json"
"""The entity spans of the book's 80 LitBank works (``scripts/extract_litbank.py``)."""

MAX_EXTRACT_BYTES = 4 * 2**20


@dataclass(frozen=True)
class EntityMention:
    """Words ``start`` to ``end`` (both included) of sentence ``sentence``, a mention of type ``label``;
    ``depth`` is its column (0 innermost)."""

    sentence: int
    start: int
    end: int
    label: str
    depth: int


@dataclass(frozen=True)
class EntityDocument:
    """A work's sentences (each a tuple of words) and its entity mentions, in order of (sentence, start, -end)."""

    name: str
    sentences: tuple[tuple[str, ...], ...]
    mentions: tuple[EntityMention, ...]


def _label(tag: str, where: str, column: int) -> tuple[str, str | None]:
    """('B' | 'I' | 'O', label or None) of one BIO tag."""
    if tag == "O":
        return "O", None
    prefix, _, label = tag.partition("-")
    if prefix not in ("B", "I") or label not in ENTITY_LABELS:
        raise ValueError(f"{where}: column {column + 2} holds {tag!r}; a tag is 'O', or 'B-' or 'I-' followed by one "
                         f"of {', '.join(ENTITY_LABELS)}.")
    return prefix, label


def parse_entity_tsv(text: str, *, source: str = "<string>") -> EntityDocument:
    """Read one LitBank entity file (``entities/*.tsv``) into an :class:`EntityDocument` named ``source`` (3.3).

    Checks every line: a word and at least one tag column, separated by tabs (a trailing tab is allowed), every tag
    'O', 'B-TYPE' or 'I-TYPE' with a LitBank type, and an 'I-' only where the same column holds a mention of the same
    type on the word before. ``ValueError`` names ``source`` and the line otherwise.
    """
    check_type("text", text, str, "the text of a LitBank entity file")
    check_type("source", source, str, "the name of the file, for error messages")
    sentences: list[tuple[str, ...]] = []
    mentions: list[EntityMention] = []
    words: list[str] = []
    open_at: dict[int, tuple[int, str]] = {}  # column -> (start word, label) of the mention open there

    def close(column: int) -> None:
        start, label = open_at.pop(column)
        mentions.append(EntityMention(len(sentences), start, len(words) - 1, label, column))

    def end_sentence() -> None:
        for column in sorted(open_at):
            close(column)
        if words:
            sentences.append(tuple(words))
        words.clear()

    for number, line in enumerate(text.removeprefix("\ufeff").split("\n"), start=1):
        where = f"{source}, line {number}"
        line = line.rstrip("\r")
        if not line.strip():
            end_sentence()
            continue
        columns = line.split("\t")
        if columns[-1] == "":
            columns.pop()
        if len(columns) < 2 or not columns[0]:
            raise ValueError(f"{where}: {line[:60]!r} is not a word followed by tab-separated tags (B-PER, I-PER, O).")
        for column, tag in enumerate(columns[1:]):
            prefix, label = _label(tag, where, column)
            if prefix == "I":
                if column not in open_at or open_at[column][1] != label:
                    raise ValueError(f"{where}: {tag!r} continues a {label} mention in column {column + 2}, but none "
                                     f"is open there on the word before; its first word needs 'B-{label}'.")
                continue
            if column in open_at:
                close(column)
            if prefix == "B":
                open_at[column] = (len(words), label)
        for column in [c for c in open_at if c >= len(columns) - 1]:
            close(column)  # a line with fewer columns ends the mentions of the columns it lacks
        words.append(columns[0])
    end_sentence()
    if not sentences:
        raise ValueError(f"{source} holds no sentences: an entity file has one word and its tags a line.")
    mentions.sort(key=lambda m: (m.sentence, m.start, -m.end, m.depth))
    return EntityDocument(source, tuple(sentences), tuple(mentions))


def read_entity_tsv(path: str | Path) -> EntityDocument:
    """:func:`parse_entity_tsv` of the file at ``path`` (UTF-8), named after the file without its suffix (3.3)."""
    path, text = read_utf8_file(path, what="the entity file", how="Use a LitBank entity file (entities/*.tsv).")
    document = parse_entity_tsv(text, source=str(path))
    return EntityDocument(path.stem, document.sentences, document.mentions)


def entities_to_json(documents: Sequence[EntityDocument]) -> dict:
    """The spans as JSON-ready lists: ``{"works": [{"name", "sentence_lengths", "mentions": [[sentence, start, end,
    label, depth], ...]}]}``, what :func:`load_litbank_entities` reads; the words are left out (3.3)."""
    documents = check_items("documents", documents, "a list of EntityDocument (read_entity_tsv)")
    for document in documents:
        check_type("each document", document, EntityDocument, "an EntityDocument (read_entity_tsv)")
    return {"works": [{"name": d.name, "sentence_lengths": [len(s) for s in d.sentences],
                       "mentions": [[m.sentence, m.start, m.end, m.label, m.depth] for m in d.mentions]}
                      for d in documents]}


def _work_from_json(work, words: CorefDocument | None, where: str) -> EntityDocument:
    if not isinstance(work, dict) or not isinstance(work.get("name"), str):
        raise ValueError(f"{where} is not an object with a 'name', 'sentence_lengths' and 'mentions'.")
    if words is None:
        raise ValueError(f"{where} ({work['name']}) is not a work of the coreference extract, which holds its words.")
    lengths = [len(s) for s in words.sentences]
    if work.get("sentence_lengths") != lengths:
        raise ValueError(f"{where} ({work['name']}): its sentence lengths differ from the coreference extract's, so "
                         "the spans would land on other words.")
    mentions = []
    for index, mention in enumerate(work.get("mentions") or []):
        if not (isinstance(mention, list) and len(mention) == 5 and mention[3] in ENTITY_LABELS
                and all(type(mention[i]) is int for i in (0, 1, 2, 4))):
            raise ValueError(f"{where} ({work['name']}), mention {index}: {mention!r} is not [sentence, start, end, "
                             "label, depth].")
        sentence, start, end, label, depth = mention
        if not (0 <= sentence < len(lengths) and 0 <= start <= end < lengths[sentence] and depth >= 0):
            raise ValueError(f"{where} ({work['name']}), mention {index}: {mention!r} points outside its work "
                             f"({len(lengths)} sentences; a span lies within one sentence).")
        mentions.append(EntityMention(sentence, start, end, label, depth))
    return EntityDocument(work["name"], words.sentences, tuple(mentions))


def load_litbank_entities(path: str | Path = LITBANK_ENTITIES_PATH,
                          documents: Sequence[CorefDocument] | None = None) -> list[EntityDocument]:
    """The entity spans of the book's LitBank extract, joined to the words of ``documents`` (by default
    :func:`mha.corpora.litbank.load_litbank`), checked against ``data/SHA256SUMS`` and span by span (3.3).

    A missing, tampered or malformed file, or one whose sentences do not match the words, raises ``ValueError``
    saying what is wrong and how to restore it.
    """
    path = as_path("path", path)
    words = {d.name: d for d in (load_litbank() if documents is None else documents)}
    what = "the LitBank entity extract"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.extract_litbank", limit=MAX_EXTRACT_BYTES)
    works = content.get("works") if isinstance(content, dict) else None
    if not isinstance(works, list) or not works:
        raise ValueError(f"{what} {path} has no list of 'works'. {how}")
    return [_work_from_json(work, words.get(work.get("name")) if isinstance(work, dict) else None,
                            f"{what} {path}, work {index}") for index, work in enumerate(works)]


@dataclass(frozen=True)
class MentionLink:
    """A mention of a window and the earlier mentions it could refer to (3.3, "Entities").

    ``mention``: its span; ``label``: its type; ``candidates``: the spans of the earlier non-pronoun mentions of the
    same type in the window, in order of their last word; ``same_entity``: for each candidate, whether it belongs
    to the mention's own chain; ``shares_word``: whether it shares a word with the mention (lower case), the cue a
    string-matching rule would follow.
    """

    mention: tuple[int, int]
    label: str
    candidates: tuple[tuple[int, int], ...]
    same_entity: tuple[bool, ...]
    shares_word: tuple[bool, ...]


@dataclass(frozen=True)
class EntityWindow:
    """Consecutive sentences of one work, with their entity spans and mention links (3.3, "Entities").

    ``spans``: the outermost entity mentions of two words or more, as (start, end, label); ``links``: one
    :class:`MentionLink` per mention with a candidate of its own entity and one of another.
    """

    document: str
    first_sentence: int
    n_sentences: int
    words: tuple[str, ...]
    spans: tuple[tuple[int, int, str], ...]
    links: tuple[MentionLink, ...]


def _outermost(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    return [s for s in spans if not any(o != s and o[0] <= s[0] and s[1] <= o[1] for o in spans)]


def _window(entities: EntityDocument, coreference: CorefDocument, sentences: range) -> EntityWindow:
    offsets, words = {}, []
    for s in sentences:
        offsets[s] = len(words)
        words.extend(entities.sentences[s])
    typed: dict[tuple[int, int], str] = {}  # span -> label; of two mentions on one span, the innermost's
    for m in entities.mentions:
        if m.sentence in offsets:
            typed.setdefault((offsets[m.sentence] + m.start, offsets[m.sentence] + m.end), m.label)
    spans = _outermost(sorted({(start, end, label) for (start, end), label in typed.items() if end > start}))
    lower = [w.lower() for w in words]
    mentions = sorted({(offsets[m.sentence] + m.start, offsets[m.sentence] + m.end, m.chain)
                       for m in coreference.mentions if m.sentence in offsets}, key=lambda m: (m[1], m[0]))
    mentions = [(s, e, c) for s, e, c in mentions if (s, e) in typed and not (s == e and lower[s] in PRONOUNS)]
    links = []
    for start, end, chain in mentions:
        label = typed[(start, end)]
        earlier = [(s, e, c) for s, e, c in mentions if e < start and typed[(s, e)] == label]
        same = tuple(c == chain for _, _, c in earlier)
        if any(same) and not all(same):
            own = set(lower[start:end + 1])
            links.append(MentionLink((start, end), label, tuple((s, e) for s, e, _ in earlier), same,
                                     tuple(bool(own & set(lower[s:e + 1])) for s, e, _ in earlier)))
    return EntityWindow(entities.name, sentences.start, len(sentences), tuple(words), tuple(spans), tuple(links))


def entity_windows(entities: EntityDocument, coreference: CorefDocument, *, max_pieces: int = 128,
                   pieces: Callable[[str], int] = lambda word: 1) -> list[EntityWindow]:
    """Cut a work into the windows of :func:`mha.corpora.litbank.coref_windows` (whole sentences, at most
    ``max_pieces`` tokens with ``[CLS]`` and ``[SEP]``), each with its entity spans and mention links (3.3).

    ``entities`` and ``coreference`` are the two layers of the same work, with the same sentences.
    """
    check_type("entities", entities, EntityDocument, "an EntityDocument (load_litbank_entities)")
    check_type("coreference", coreference, CorefDocument, "a CorefDocument (mha.corpora.litbank.load_litbank)")
    if entities.sentences != coreference.sentences:
        raise ValueError(f"the entity layer of {entities.name!r} and the coreference layer of {coreference.name!r} "
                         "have different sentences; give the two layers of the same work.")
    return [_window(entities, coreference, range(w.first_sentence, w.first_sentence + w.n_sentences))
            for w in coref_windows(coreference, max_pieces=max_pieces, pieces=pieces)]
