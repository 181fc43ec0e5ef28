"""Entity heads: does a head attend within an entity's span, or from a mention to its entity's other mentions? (3.3).

The seeds' list of head roles names named entities. LitBank's entity layer (:mod:`mha.corpora.litbank_entities`)
gives two tests of it on fiction, each scored for every head from word-level attention maps
(:func:`mha.pretrained.word_maps.word_attention`, rows = the word attending):

* **within a span**: for every word of an entity mention of two words or more ("the old man"), whether the other
  word it attends to most lies in the same mention (**span hit**), and the weight it sends to the mention's other
  words (**span share**). The rival is position: a rule that always takes the word ``k`` places away (``offset
  k``, ``k`` = -:data:`MAX_OFFSET` .. :data:`MAX_OFFSET`, 0 left out) lands inside short spans often.
* **mention to mention**: for every mention with earlier candidates of its own entity and of another
  (:class:`mha.corpora.litbank_entities.MentionLink`), the candidate the mention's words attend to most (each
  candidate scored by its most-attended word, the mention's rows averaged), right when it is of the same entity
  (**link hit**). Candidates are all earlier mentions of the same type, so preferring names or nouns does not
  help; the rivals are the **nearest candidate**, the nearest one that **shares a word** with the mention (else
  the nearest), and **chance** (the share of candidates of the same entity).

Every count is summed per work (:class:`EntityScores`), for choosing on some works and reporting on others with
intervals that resample whole works. ``scripts/litbank_entities.py`` stores the result, which :func:`load_entity_scores`
reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha.analysis.coreference_and_content.natural_coreference import piece_counter
from mha.analysis.statistics import bootstrap_ratio_interval
from mha.core.argument_checks import check_whole_numbers
from mha.core.layouts import WORDS, takes_attention
from mha.core.validation import as_path, as_real_array, check_items, check_type
from mha.corpora.litbank import CorefDocument
from mha.corpora.litbank_entities import EntityDocument, EntityWindow, MentionLink, entity_windows
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.word_maps import word_attention

__all__ = ["MAX_OFFSET", "OFFSETS", "LINK_RULES", "litbank_entity_windows", "span_scores", "link_scores",
           "link_rule_hits", "EntityScores", "score_entity_windows", "LITBANK_ENTITIES_SCORES_PATH",
           "load_entity_scores"]

MAX_OFFSET = 5
OFFSETS = tuple(k for k in range(-MAX_OFFSET, MAX_OFFSET + 1) if k)
"""The fixed offsets tried within spans: the word k places away, -5 .. -1 and 1 .. 5."""

LINK_RULES = ("nearest candidate", "shared word", "chance")
"""The rules that read no attention for mention links; "chance" is an expected count, not a pick."""


def litbank_entity_windows(encoder: MiniLMEncoder, entities: Sequence[EntityDocument],
                           coreference: Sequence[CorefDocument], *, max_pieces: int = 128) -> list[EntityWindow]:
    """Every work cut into windows of at most ``max_pieces`` of this model's tokens, with entity spans and mention
    links (:func:`mha.corpora.litbank_entities.entity_windows`; the same windows as 3.3's pronouns)."""
    pieces = piece_counter(encoder, max_pieces)
    entities = check_items("entities", entities, "a list of EntityDocument (load_litbank_entities)")
    words = {d.name: d for d in check_items("coreference", coreference, "a list of CorefDocument (load_litbank)")}
    missing = [e.name for e in entities if e.name not in words]
    if missing:
        raise ValueError(f"no coreference layer for {missing[:3]}; give both layers of the same works.")
    return [w for e in entities for w in entity_windows(e, words[e.name], max_pieces=max_pieces, pieces=pieces)]


@takes_attention(word_maps=WORDS.with_leading(6))
def span_scores(word_maps: np.ndarray, span: tuple[int, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the words of one span: hits, shares (words of the span, ...) and offset hits (words, offsets) (3.3).

    ``word_maps`` (..., words, words), rows = query. A word's hit: the other word its row weighs most (itself left
    out, ties to the first) lies in the span; its share: its row summed over the span's other words; offset ``k``
    hits when the word ``k`` places away lies in the span.
    """
    word_maps = as_real_array("word_maps", word_maps, meaning="(..., words, words)")
    n = word_maps.shape[-1] if word_maps.ndim >= 2 else 0
    span = tuple(check_whole_numbers("span", span, meaning="(start, end) word indices of the mention"))
    start, end = span if len(span) == 2 else (0, -1)  # any other length is refused just below
    if word_maps.ndim < 2 or word_maps.shape[-2] != n or not 0 <= start < end < n:
        raise ValueError(f"word_maps has shape {word_maps.shape} and the span is {span}; give (..., words, words) "
                         "maps of the window and a span of two words or more inside it.")
    queries = np.arange(start, end + 1)
    rows = np.moveaxis(word_maps[..., queries, :], -2, 0).copy()  # (span words, ..., words)
    others = rows.copy()
    others[np.arange(len(queries)), ..., queries] = -np.inf  # a word's own column left out
    most = others.argmax(axis=-1)  # (span words, ...)
    hits = (most >= start) & (most <= end)
    shares = rows[..., start:end + 1].sum(axis=-1) - rows[np.arange(len(queries)), ..., queries]
    targets = queries[:, None] + np.array(OFFSETS)[None, :]  # (span words, offsets)
    return hits, shares, (targets >= start) & (targets <= end)


@takes_attention(word_maps=WORDS.with_leading(6))
def link_scores(word_maps: np.ndarray, link: MentionLink) -> np.ndarray:
    """Whether each head's most-attended candidate is of the mention's own entity: (..., words, words) -> (...) (3.3).

    The mention's rows are averaged; a candidate weighs what its most-attended word gets (ties to the first).
    """
    check_type("link", link, MentionLink, "a MentionLink of an EntityWindow")
    word_maps = as_real_array("word_maps", word_maps, meaning="(..., words, words)")
    start, end = link.mention
    if word_maps.ndim < 2 or word_maps.shape[-1] != word_maps.shape[-2] or end >= word_maps.shape[-1]:
        raise ValueError(f"word_maps has shape {word_maps.shape} and the mention is {link.mention}; give "
                         "(..., words, words) maps of the window the link was made in.")
    row = word_maps[..., start:end + 1, :].mean(axis=-2)  # (..., words)
    weights = np.stack([row[..., s:e + 1].max(axis=-1) for s, e in link.candidates], axis=-1)  # (..., candidates)
    return np.asarray(link.same_entity)[weights.argmax(axis=-1)]


def link_rule_hits(link: MentionLink) -> dict[str, float]:
    """What each rule of :data:`LINK_RULES` gets right for one link: 1 or 0, and for chance the expected share."""
    check_type("link", link, MentionLink, "a MentionLink of an EntityWindow")
    shared = [i for i, s in enumerate(link.shares_word) if s]
    return {"nearest candidate": float(link.same_entity[-1]),
            "shared word": float(link.same_entity[shared[-1] if shared else -1]),
            "chance": float(np.mean(link.same_entity))}


@dataclass(frozen=True)
class EntityScores:
    """Every head's and rule's counts on LitBank's entities, summed per work (3.3).

    ``span_words`` (works,): words of multi-word spans scored; ``span_hits``, ``span_share`` (works, layers, heads);
    ``offset_hits`` (works, offsets), one column per entry of :data:`OFFSETS`. ``links`` (works,): mention links;
    ``link_hits`` (works, layers, heads); ``rule_hits``: name -> (works,) for :data:`LINK_RULES`.
    """

    works: tuple[str, ...]
    span_words: np.ndarray
    span_hits: np.ndarray
    span_share: np.ndarray
    offset_hits: np.ndarray
    links: np.ndarray
    link_hits: np.ndarray
    rule_hits: dict

    def split_works(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """A random half of the works to choose on and the other half to report on (3.3)."""
        order = np.random.default_rng(seed).permutation(len(self.works))
        return np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2:])

    def rate(self, counts, totals, works=None) -> np.ndarray:
        """``counts`` (works, ...) summed over ``works`` (default all) over ``totals`` (works,) summed likewise."""
        rows = np.arange(len(self.works)) if works is None else np.asarray(works)
        return np.asarray(counts)[rows].sum(axis=0) / np.asarray(totals)[rows].sum()

    def interval(self, counts, totals, works=None, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """95% bootstrap interval of :meth:`rate`, resampling whole works (:func:`bootstrap_ratio_interval`)."""
        rows = np.arange(len(self.works)) if works is None else np.asarray(works)
        return bootstrap_ratio_interval(np.asarray(counts)[rows], np.asarray(totals)[rows], seed=seed)

    def to_dict(self, decimals: int = 6) -> dict:
        """JSON-ready lists (shares rounded to ``decimals``), what ``scripts/litbank_entities.py`` stores."""
        return {"works": list(self.works), "offsets": list(OFFSETS), "span_words": self.span_words.tolist(),
                "span_hits": self.span_hits.astype(int).tolist(),
                "span_share": np.round(self.span_share, decimals).tolist(),
                "offset_hits": self.offset_hits.astype(int).tolist(), "links": self.links.tolist(),
                "link_hits": self.link_hits.astype(int).tolist(),
                "rule_hits": {k: np.round(v, decimals).tolist() for k, v in self.rule_hits.items()}}


def score_entity_windows(encoder: MiniLMEncoder, windows: Sequence[EntityWindow], *,
                         batch_size: int = 16) -> EntityScores:
    """Trace ``windows`` and score every head and rule on every span and mention link, summed per work (3.3)."""
    check_type("encoder", encoder, MiniLMEncoder, "the pretrained encoder, MiniLMEncoder.load()")
    windows = check_items("windows", windows, "a list of EntityWindow (litbank_entity_windows)")
    for window in windows:
        check_type("each window", window, EntityWindow, "an EntityWindow (litbank_entity_windows)")
    windows = [w for w in windows if w.spans or w.links]
    if not windows:
        raise ValueError("no window has an entity span of two words or a mention link; nothing to score.")
    config = encoder.config
    works = tuple(dict.fromkeys(w.document for w in windows))
    row = {name: i for i, name in enumerate(works)}
    heads = (len(works), config.n_layers, config.n_heads)
    span_words, links = np.zeros(len(works), dtype=int), np.zeros(len(works), dtype=int)
    span_hits, span_share, link_hits = np.zeros(heads), np.zeros(heads), np.zeros(heads)
    offset_hits = np.zeros((len(works), len(OFFSETS)))
    rules = {name: np.zeros(len(works)) for name in LINK_RULES}
    for first in range(0, len(windows), batch_size):
        batch = windows[first:first + batch_size]
        trace = encoder.trace([list(w.words) for w in batch], is_split_into_words=True)
        for index, window in enumerate(batch):
            work = row[window.document]
            maps = word_attention(trace.attention_maps(index), trace.word_ids[index][: trace.lengths[index]])
            for start, end, _ in window.spans:
                hits, shares, offsets = span_scores(maps, (start, end))
                span_words[work] += len(hits)
                span_hits[work] += hits.sum(axis=0)
                span_share[work] += shares.sum(axis=0)
                offset_hits[work] += offsets.sum(axis=0)
            for link in window.links:
                links[work] += 1
                link_hits[work] += link_scores(maps, link)
                for name, hit in link_rule_hits(link).items():
                    rules[name][work] += hit
    return EntityScores(works, span_words, span_hits, span_share, offset_hits, links, link_hits, rules)


LITBANK_ENTITIES_SCORES_PATH = DATA_DIRECTORY / "litbank_entities.json"
"""Every head scored on LitBank's entities, written by ``scripts/litbank_entities.py``."""


def load_entity_scores(path: str | Path = LITBANK_ENTITIES_SCORES_PATH, *, check: bool = False) -> EntityScores:
    """The stored :class:`EntityScores` of ``scripts/litbank_entities.py``, checked against ``data/SHA256SUMS``; a
    missing, tampered or malformed file raises ``ValueError`` saying how to restore it (3.3).

    With ``check=True``: the scores of the first work alone, which the script also computed on their own, to
    recompute and compare.
    """
    from mha.data_files import read_verified_json

    path = as_path("path", path)
    what = "the stored LitBank entity scores"
    content, how = read_verified_json(path, what=what, regenerate="python -m scripts.litbank_entities", limit=2_000_000)
    if check:
        if not isinstance(content, dict) or not isinstance(content.get("check"), dict):
            raise ValueError(f"{what} {path} is malformed: it has no 'check' scores. {how}")
        content = content["check"]
    try:
        works = tuple(str(work) for work in content["works"])
        arrays = {key: np.asarray(content[key], dtype=float) for key in
                  ("span_words", "span_hits", "span_share", "offset_hits", "links", "link_hits")}
        rules = {name: np.asarray(content["rule_hits"][name], dtype=float) for name in LINK_RULES}
        offsets = tuple(content["offsets"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{what} {path} is malformed: it needs 'works', 'offsets', per-work counts and per-head "
                         f"sums. {how}") from None
    n = len(works)
    bad = [key for key, value in (*arrays.items(), *rules.items()) if value.shape[:1] != (n,)]
    if (bad or offsets != OFFSETS or arrays["span_hits"].ndim != 3 or arrays["link_hits"].shape != arrays[
            "span_hits"].shape or arrays["offset_hits"].shape != (n, len(OFFSETS))):
        raise ValueError(f"{what} {path} does not hold one row per work of each count ({', '.join(bad) or 'shapes'}; "
                         f"heads: (works, layers, heads), offsets {list(OFFSETS)}). {how}")
    if arrays["span_words"].sum() < 1 or min(arrays["span_words"].min(), arrays["links"].min()) < 0:
        raise ValueError(f"{what} {path} counts no span words, or fewer than none in a work. {how}")
    return EntityScores(works, arrays["span_words"].astype(int), arrays["span_hits"], arrays["span_share"],
                        arrays["offset_hits"], arrays["links"].astype(int), arrays["link_hits"], rules)
