"""Read a Universal Dependencies treebank (CoNLL-U) into annotated sentences (chapter 3, empirical head roles).

The template corpus of :mod:`mha.corpora.templates` knows its grammar by construction;
a treebank brings real sentences annotated by people. This module turns any
CoNLL-U file into the same :class:`~mha.corpora.annotation.AnnotatedSentence` form, so
:mod:`mha.analysis.head_roles.role_table` scores heads on either without knowing which it got.

Only syntactic words are kept: multiword-token range lines (``2-3 cannot``)
and empty nodes (``6.1``) are skipped, and the remaining words are numbered
from 0 in file order. UD arcs go head -> dependent; the book's relation kinds
name their own arrow (see :mod:`mha.corpora.templates`), so each mapping below says
which end becomes the ``source``:

===================================  ==================  ===================================
UD relation (dependent's DEPREL)     kind                source -> target
===================================  ==================  ===================================
``det`` (not ``det:poss``),          ``det_noun``        dependent (determiner) -> head;
head NOUN/PROPN                                          kept only when the head is a noun
``amod``, head NOUN/PROPN            ``adj_noun``        dependent (adjective) -> head
``nsubj``, ``nsubj:*``, head VERB    ``subj_verb``       dependent (subject) -> head (verb);
                                                         copular clauses, whose UD head is
                                                         the predicate adjective or noun,
                                                         are skipped
``obj``, head VERB                   ``verb_obj``        head (verb) -> dependent (object):
                                                         reversed with respect to the UD arc
``case``, dependent UPOS ADP         ``prep_obj``        dependent (preposition) -> head
                                                         (its object noun); see below
``nmod:poss``, ``det:poss``          ``poss_noun``       dependent (possessor) -> head
``aux``, ``aux:*``, head VERB        ``aux_verb``        dependent (auxiliary) -> head
===================================  ==================  ===================================

Prepositions: UD attaches a preposition to its noun as a ``case`` dependent
(``case(table, under)``), whereas older Stanford dependencies put the noun
under the preposition (``pobj(under, table)``). Both give the same *pair*, and
we orient it preposition -> object, as the ``pobj`` arc does; ``case``
dependents that are not ADP (the possessive ``'s``, a PART) are not
prepositions and are skipped.

The book ships a small hand-annotated sample, :data:`SAMPLE_TREEBANK_PATH` (package data, :mod:`mha.data`), so
``read_conllu(SAMPLE_TREEBANK_PATH)`` works from any working directory and from an installed wheel, and the
development split of UD English-EWT, :data:`EWT_DEV_PATH`, the real text section 3.2 measures on.
:func:`split_sentences` cuts sentences at random, with a seed, into a part to choose heads on and a part to report
on.

Every reader takes one path: the file is read once, bounded in size, compared with ``data/SHA256SUMS`` when it is
one of the book's files (:func:`mha.data_files.read_verified_file`), decoded as UTF-8, and every sentence's words
checked to form one tree (ids 1..n, each HEAD a word of the sentence or 0, one root, no cycle); a problem names
the file, the sentence and its line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import conllu
import numpy as np
from conllu.exceptions import ParseException

from mha.core.argument_checks import check_items_of, check_whole_numbers
from mha.core.validation import (
    as_path,
    check_items,
    check_seed,
    check_type,
    check_whole_number,
    is_real_number,
    is_whole_number,
)
from mha.corpora.annotation import AnnotatedSentence, Relation
from mha.data_files import DATA_DIRECTORY, how_to_restore, read_verified_file

__all__ = ["NOMINAL_UPOS", "SAMPLE_TREEBANK_PATH", "EWT_DEV_PATH", "read_conllu", "parse_conllu", "relations_from_ud",
           "UDTree", "check_trees", "read_ud_trees", "split_sentences"]

SAMPLE_TREEBANK_PATH = DATA_DIRECTORY / "sample.conllu"

MAX_TREEBANK_BYTES = 64 * 2**20
"""The largest CoNLL-U file read (64 MiB; the whole of UD English-EWT is about 20 MiB)."""

EWT_DEV_PATH = DATA_DIRECTORY / "ud_english_ewt" / "en_ewt-ud-dev.conllu"
"""The development split of UD English-EWT (v2.15, 2,001 sentences of web text), the book's real annotated text.

Its annotations are CC BY-SA 4.0 (ShareAlike): the licence and the attribution sit beside it in
``data/ud_english_ewt/`` (``LICENSE.txt``, ``SOURCE.md``, ``README.upstream.md``), and stay with any copy.
"""
"""The book's hand-annotated CoNLL-U sample (9 sentences), in the package data; read it with :func:`read_conllu`."""

NOMINAL_UPOS = frozenset({"NOUN", "PROPN"})

_Item = TypeVar("_Item")


def relations_from_ud(heads: list[int], deprels: list[str], upos: list[str]) -> list[Relation]:
    """The book's relations from one sentence's UD tree (chapter 3, empirical head roles).

    ``heads``, ``deprels`` and ``upos`` have one entry per word, in word
    order; ``heads[i]`` is the 0-based index of word ``i``'s head, or -1 for
    the root. Returns :class:`~mha.corpora.annotation.Relation` objects (word indices,
    source -> target as the module table says), in word order of the dependent.
    """
    heads = check_whole_numbers("heads", heads, minimum=-1, meaning="each word's head, -1 for the root")
    deprels = check_items_of("deprels", deprels, str, "a word's UD relation to its head, as text")
    upos = check_items_of("upos", upos, str, "a word's UD part of speech, as text")
    if not len(heads) == len(deprels) == len(upos):
        raise ValueError(f"heads, deprels and upos have {len(heads)}, {len(deprels)} and {len(upos)} entries; give one "
                         "of each per word.")
    relations = []
    for dependent, (head, deprel, dependent_pos) in enumerate(zip(heads, deprels, upos, strict=True)):
        if head < 0:
            continue
        base = deprel.split(":")[0]
        head_pos = upos[head]
        if deprel in ("nmod:poss", "det:poss"):
            relations.append(Relation("poss_noun", dependent, head))
        elif base == "det" and head_pos in NOMINAL_UPOS:
            relations.append(Relation("det_noun", dependent, head))
        elif base == "amod" and head_pos in NOMINAL_UPOS:
            relations.append(Relation("adj_noun", dependent, head))
        elif base == "nsubj" and head_pos == "VERB":
            relations.append(Relation("subj_verb", dependent, head))
        elif base == "obj" and head_pos == "VERB":
            relations.append(Relation("verb_obj", head, dependent))  # verb -> object: against the UD arc
        elif base == "case" and dependent_pos == "ADP":
            relations.append(Relation("prep_obj", dependent, head))
        elif base == "aux" and head_pos == "VERB":
            relations.append(Relation("aux_verb", dependent, head))
    return relations


def _check_tree(heads: list[int], words: list, origin: str) -> None:
    """Raise ``ValueError`` naming the sentence and word unless ``heads`` form one tree with a single root."""

    def named(index: int) -> str:
        return f"word {words[index]['id']} ({words[index]['form']!r})"

    roots = [index for index, head in enumerate(heads) if head < 0]
    if len(roots) > 1:
        raise ValueError(
            f"{origin}: {named(roots[1])} has HEAD 0, but {named(roots[0])} is already the root; a UD sentence has "
            f"exactly one root. Set the HEAD of {named(roots[1])} to the id of the word it depends on."
        )
    if not roots:
        raise ValueError(
            f"{origin}: no word has HEAD 0, so the sentence has no root. Set the HEAD of its main word (usually the "
            "main verb) to 0."
        )
    state = [0] * len(heads)  # 0: not seen, 1: on the path being followed, 2: known to reach the root
    for start in range(len(heads)):
        path, index = [], start
        while index >= 0 and state[index] == 0:
            state[index] = 1
            path.append(index)
            index = heads[index]
        if index >= 0 and state[index] == 1:  # came back to a word on this path: a cycle
            cycle = path[path.index(index):]
            if len(cycle) == 1:
                raise ValueError(f"{origin}: {named(index)} is its own HEAD. Set its HEAD to the id of the word it "
                                 "depends on (0 for the root).")
            loop = " → ".join(named(i) for i in [*cycle, index])
            raise ValueError(
                f"{origin}: the HEAD column has a cycle: {loop} (each word's HEAD is the next word), so these "
                f"words never reach the root. "
                f"Fix the HEAD of one of them (e.g. {named(index)})."
            )
        for visited in path:
            state[visited] = 2


def _words_and_heads(tokens: conllu.TokenList, origin: str) -> tuple[list, list[int]]:
    """The syntactic words of one parsed sentence and each one's head index (-1 for the root), checked to be a tree.

    Ranges and empty nodes are skipped; the word ids must run 1..n, each HEAD must be 0 or one of them, and the
    heads must form one tree (:func:`_check_tree`). ``ValueError`` naming ``origin`` and the word otherwise.
    """
    words = [t for t in tokens if isinstance(t["id"], int)]  # ranges and empty nodes have tuple ids
    if not words:
        raise ValueError(f"{origin}: the sentence has no word lines (only comments, ranges or empty nodes).")
    for number, t in enumerate(words, start=1):
        missing = [f for f in ("form", "upos", "head", "deprel") if f not in t]
        if missing:
            raise ValueError(
                f"{origin}: word {t['id']} has no {', '.join(missing)} column; a CoNLL-U word line needs 10 "
                "tab-separated columns (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)."
            )
        if t["id"] != number:
            problem = "appears twice" if t["id"] < number else f"comes where word {number} should"
            raise ValueError(f"{origin}: word id {t['id']} ({t['form']!r}) {problem}; the word ids of a sentence "
                             f"run 1, 2, 3, ... without gaps or repeats. Renumber the words and their HEADs.")
    heads = []
    for t in words:
        head = t["head"]
        if head is None:
            raise ValueError(f"{origin}: word {t['id']} ({t['form']!r}) has no HEAD; use 0 for the root.")
        if not is_whole_number(head) or not 0 <= head <= len(words):
            raise ValueError(
                f"{origin}: word {t['id']} ({t['form']!r}) points to head {head!r}, which is not a word of the "
                f"sentence; a HEAD is the id of another word (1..{len(words)}), or 0 for the root."
            )
        heads.append(head - 1)  # word ids run 1..n, so the head's index is its id - 1; the root's is -1
    _check_tree(heads, words, origin)
    return words, heads


def _checked_words_and_heads(tokens: conllu.TokenList, origin: str, line: int) -> tuple[list, list[int]]:
    """:func:`_words_and_heads`, with the line the sentence starts on added to any error."""
    try:
        return _words_and_heads(tokens, origin)
    except ValueError as error:
        raise ValueError(f"{error} (The sentence starts at line {line}.)") from None


def _sentence_from_tokenlist(tokens: conllu.TokenList, origin: str, line: int) -> AnnotatedSentence:
    """One parsed CoNLL-U sentence, starting at ``line`` of its file -> AnnotatedSentence."""
    words, heads = _checked_words_and_heads(tokens, origin, line)
    relations = relations_from_ud(heads, [t["deprel"] for t in words], [t["upos"] for t in words])
    return AnnotatedSentence(tuple(t["form"] for t in words), tuple(relations), origin=origin)


_LAST_WHOLE_PARSE: dict[tuple[str, str], tuple] = {}
"""The last text parsed to its end, keyed by (text, source): read_conllu and read_ud_trees of one file (3.1, 3.2, 3.4
read both) parse it once. One text at most; its parsed sentences are only read, never changed."""


def _parsed_sentences(text: str, source: str) -> Iterator[tuple[conllu.TokenList, str, int]]:
    """Each sentence of CoNLL-U ``text`` parsed, with its origin (``source#sent_id``) and the line it starts on.

    Sentences are the blocks between blank lines; each is parsed on its own, so an error names its first line. A
    text parsed to its end is kept (:data:`_LAST_WHOLE_PARSE`) and not parsed again.
    """
    whole = _LAST_WHOLE_PARSE.get((text, source))
    if whole is not None:
        yield from whole
        return
    parsed = []
    for sentence in _parse_blocks(text, source):
        parsed.append(sentence)
        yield sentence
    _LAST_WHOLE_PARSE.clear()
    _LAST_WHOLE_PARSE[text, source] = tuple(parsed)


def _whole_number_or(parse):
    """conllu's parser of an ID or HEAD column, with a short way for the usual plain number (ASCII digits, no leading
    zero), which gives what ``parse`` gives; anything else goes to ``parse``, which checks it."""
    def parsed(columns: list[str], index: int):
        value = columns[index]
        if value.isascii() and value.isdigit() and (value == "0" or value[0] != "0"):
            return int(value)
        return parse(value)
    return parsed


_FIELD_PARSERS = {
    "id": _whole_number_or(conllu.parser.parse_id_value),
    "head": _whole_number_or(conllu.parser.parse_int_value),
    # read as they are written: nothing in the book reads them, and conllu's parsers of these never refuse a value
    "xpos": lambda columns, index: columns[index],
    "deps": lambda columns, index: columns[index],
    "misc": lambda columns, index: columns[index],
}
"""How the columns are read: conllu's own parsers, with the short way for plain numbers, and three columns the book
does not read kept as text (together, reading the EWT dev split takes about half the time)."""


def _parse_blocks(text: str, source: str) -> Iterator[tuple[conllu.TokenList, str, int]]:
    """:func:`_parsed_sentences`, parsing each time."""
    number, line, block, block_start = 0, 0, [], 1
    for line, content in enumerate([*text.split("\n"), ""], start=1):
        if content.strip():
            if not block:
                block_start = line
            block.append(content)
            continue
        if not block:
            continue
        try:
            parsed = [s for s in conllu.parse("\n".join(block) + "\n\n", field_parsers=_FIELD_PARSERS) if len(s) > 0]
        except ParseException as error:
            raise ValueError(f"{source} is not valid CoNLL-U at the sentence of line {block_start}: "
                             f"{str(error).rstrip('.')}. Each word line needs 10 tab-separated columns.") from error
        block = []
        for sentence in parsed:
            number += 1
            origin = f"{source}#{sentence.metadata.get('sent_id') or number}"
            yield sentence, origin, block_start


def _treebank_text(path: str | Path) -> tuple[Path, str]:
    """The text of CoNLL-U file ``path``: read once, bounded, verified when it is one of the book's, UTF-8."""
    path = as_path("path", path)
    if not path.is_file() and not path.exists():
        raise FileNotFoundError(
            f"no CoNLL-U file at {path} (resolved to {path.resolve()}); check the path, or download a treebank "
            "from https://universaldependencies.org. The book's treebanks are SAMPLE_TREEBANK_PATH and EWT_DEV_PATH."
        )
    how = how_to_restore("git checkout -- data/", path)
    data = read_verified_file(path, what="the CoNLL-U file", how=how, limit=MAX_TREEBANK_BYTES)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        hint = " (it starts with a UTF-16 byte-order mark)" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else ""
        raise ValueError(f"{path} is not UTF-8 text{hint}: line {line} holds a byte that UTF-8 cannot read "
                         f"({error.reason}, byte {error.start}). CoNLL-U files are UTF-8; convert it, e.g. with "
                         f"iconv -t UTF-8.") from None
    return path, text.removeprefix("\ufeff")  # the byte-order mark some editors write at the start of UTF-8 files


def parse_conllu(text: str, *, source: str = "<string>") -> list[AnnotatedSentence]:
    """Parse CoNLL-U text into :class:`~mha.corpora.annotation.AnnotatedSentence` objects (chapter 3, empirical head
    roles).

    ``source`` names the text in error messages and in each sentence's
    ``origin`` (``"<source>#<sent_id>"``, or ``"<source>#<n>"`` counting from
    1 when a sentence has no ``sent_id``). Relations follow the mapping in
    the module docstring. Raises ``ValueError`` naming the source when the
    text is not valid CoNLL-U or holds no sentence, and naming the sentence and
    the word when a sentence's HEAD column is not a tree (a second root, no
    root, a cycle). A leading UTF-8 byte-order mark is ignored.
    """
    if not isinstance(text, str):
        raise ValueError(f"CoNLL-U text must be a string, got {type(text).__name__}; decode bytes as UTF-8 first, "
                         "or read a file with read_conllu(path).")
    sentences = [_sentence_from_tokenlist(tokens, origin, line)
                 for tokens, origin, line in _parsed_sentences(text.removeprefix("\ufeff"), source)]
    if not sentences:
        raise ValueError(f"{source} holds no CoNLL-U sentences (word lines separated by blank lines).")
    return sentences


def read_conllu(path: str | Path) -> list[AnnotatedSentence]:
    """Read a CoNLL-U file into :class:`~mha.corpora.annotation.AnnotatedSentence` objects (chapter 3, empirical head
    roles).

    Any UD treebank works (UTF-8 text, with or without a byte-order mark); the
    book ships a sample, :data:`SAMPLE_TREEBANK_PATH`.
    Returns one sentence per CoNLL-U sentence, words numbered from 0 without
    multiword-token ranges or empty nodes. Raises ``FileNotFoundError`` when
    the file is missing and ``ValueError`` when it is not UTF-8, fails its
    sha256, or a sentence cannot be parsed or is not a tree (naming the sentence and its line).
    """
    path, text = _treebank_text(path)
    return parse_conllu(text, source=path.name)


@dataclass(frozen=True)
class UDTree:
    """One sentence's words with their UD annotation, words numbered from 0 (3.1, 3.4, 4.4).

    ``heads[i]`` is the index of word ``i``'s head, -1 for the root; ``deprels[i]`` its relation to that head;
    ``lemmas[i]`` its lemma and ``feats[i]`` its morphological features as UD writes them (``Number=Sing|Person=3``,
    ``_`` for none), empty tuples when not read.
    """

    words: tuple[str, ...]
    upos: tuple[str, ...]
    heads: tuple[int, ...]
    deprels: tuple[str, ...]
    lemmas: tuple[str, ...] = ()
    feats: tuple[str, ...] = ()


def check_trees(name: str, trees) -> Sequence[UDTree]:
    """``trees`` if it is a list of :class:`UDTree` objects; else an error naming the first item that is not one."""
    trees = check_items(name, trees, "a list of UDTrees, e.g. read_ud_trees(path)")
    for index, tree in enumerate(trees):
        check_type(f"{name}[{index}]", tree, UDTree, "a UDTree, as read_ud_trees(path) returns them")
    return trees


def read_ud_trees(path: str | Path, *, limit: int | None = None) -> list[UDTree]:
    """The first ``limit`` sentences (all by default) of a CoNLL-U file as :class:`UDTree` objects (3.1, 3.4, 4.4).

    Multiword-token ranges and empty nodes are skipped and the words numbered from 0, as in :func:`read_conllu`, so
    the ``i``-th tree and the ``i``-th annotated sentence of the same file have the same words. Raises
    ``FileNotFoundError`` when there is no file.
    """
    if limit is not None:
        limit = check_whole_number("limit", limit, minimum=1, meaning="trees to read; or None for every tree")
    path, text = _treebank_text(path)
    trees: list[UDTree] = []
    for tokens, origin, line in _parsed_sentences(text, path.name):
        words, heads = _checked_words_and_heads(tokens, origin, line)
        trees.append(UDTree(words=tuple(t["form"] for t in words), upos=tuple(t["upos"] for t in words),
                            heads=tuple(heads), deprels=tuple(t["deprel"] for t in words),
                            lemmas=tuple(t["lemma"] for t in words),
                            feats=tuple("|".join(f"{k}={v}" for k, v in t["feats"].items()) if t["feats"] else "_"
                                        for t in words)))
        if len(trees) == limit:
            break
    return trees


def split_sentences(sentences: Sequence[_Item], fraction: float = 0.5,
                    seed: int = 0) -> tuple[list[_Item], list[_Item]]:
    """Split sentences (or their attention records) at random into a selection part and a report part (section 3.2).

    Choosing the best of 72 heads on the sentences one reports on flatters the winner; the honest protocol chooses
    on one part and reports on the other. The first part holds ``round(fraction * len(sentences))`` items, the second
    the rest; the permutation comes from ``np.random.default_rng(seed)``, so the same seed gives the same split on
    every machine. Both parts keep that random order, so the first ``n`` items of a part are a random sample of it
    (encode a few hundred instead of all). Works on any sequence: sentences, records, indices.
    """
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence):
        raise TypeError(f"sentences must be a list of sentences or records, not {type(sentences).__name__}.")
    if not is_real_number(fraction) or not 0 < fraction < 1:
        raise ValueError(f"fraction must be a number strictly between 0 and 1 (the share in the first part), "
                         f"got {fraction!r}.")
    seed = check_seed("seed", seed)
    n_first = round(float(fraction) * len(sentences))
    if len(sentences) < 2 or not 0 < n_first < len(sentences):
        raise ValueError(f"cannot split {len(sentences)} sentences with fraction {fraction}: each part needs at least "
                         "one sentence.")
    order = np.random.default_rng(int(seed)).permutation(len(sentences))
    return [sentences[i] for i in order[:n_first]], [sentences[i] for i in order[n_first:]]
