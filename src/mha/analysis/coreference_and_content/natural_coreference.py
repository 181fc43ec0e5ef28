"""Coreference on natural text: does a head send a pronoun's attention to its antecedent in fiction? (3.3).

The windows of :func:`mha.corpora.litbank.coref_windows` link each third-person pronoun of LitBank to its
antecedent, the nearest earlier mention of its chain. For every window we read the word-level attention maps
(:func:`mha.pretrained.word_maps.word_attention`: received summed over pieces, sent averaged, special tokens
dropped) and score every head on every pronoun, from the pronoun's ROW (query, attends from):

* **share**: the weight the pronoun sends to the words of its antecedent (a fraction of all its attention);
* **accuracy**: whether the earlier word it attends to most lies inside the antecedent;
* **chain accuracy**: whether that word lies inside any earlier mention of the pronoun's chain in the window,
  closer to Clark et al.'s (2019) test, which counted any earlier coreferent mention as right.

Rules that read no attention pick one earlier word each: the last word of the nearest earlier mention of any chain
(``nearest mention``), of the nearest earlier mention that is not a pronoun (``nearest noun phrase``), and the
word ``k`` places before the pronoun (``offset -k``, for k = 1 .. :data:`MAX_OFFSET`). Read as attention that puts
all its weight on one word, a rule's share equals its accuracy.

Every score is summed per work (:class:`NaturalCoreference`, accumulated by :class:`CoreferenceSums`), over all links
and apart by the kind of antecedent (:data:`GROUPS`; :func:`mha.corpora.litbank.antecedent_kind`): a name or noun
phrase (``"nominal"``) or another pronoun (``"pronoun"``). Most antecedents in fiction are pronouns, and a head that
finds the previous pronoun wins the pooled score, so the two tasks are scored apart. Heads can be chosen on some works
and reported on others, with bootstrap intervals that resample whole works
(:func:`mha.analysis.statistics.bootstrap_ratio_interval`): pronouns of one novel are not independent.
``scripts/litbank_coreference.py`` stores the result for all 80 works (:func:`score_windows_by_antecedent`), which
:func:`load_natural_coreference` reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mha.analysis.statistics import bootstrap_ratio_interval
from mha.core.layouts import LAYERS_HEADS_WORDS, WORDS, takes_attention
from mha.core.validation import as_path, as_real_array, check_items, check_type, check_whole_number
from mha.corpora.litbank import (
    ANTECEDENT_KINDS,
    CorefDocument,
    CorefWindow,
    PronounLink,
    antecedent_kind,
    coref_windows,
)
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.tokenizer import load_wordpieces
from mha.pretrained.word_maps import word_attention

__all__ = ["MAX_OFFSET", "GROUPS", "RULES", "piece_counter", "litbank_windows", "link_scores", "rule_hits",
           "NaturalCoreference", "CoreferenceSums", "score_windows_by_antecedent", "score_windows",
           "LITBANK_COREFERENCE_PATH", "load_natural_coreference"]

MAX_OFFSET = 20
"""The fixed-offset rules tried: the word 1, 2, ..., 20 places before the pronoun."""

GROUPS = ("all", *ANTECEDENT_KINDS)
"""The links scored: all of them, those whose antecedent is a name or noun phrase, those whose antecedent is a
pronoun (:func:`mha.corpora.litbank.antecedent_kind`)."""

RULES = ("nearest mention", "nearest noun phrase")
"""The two candidate rules; the offsets are kept apart (one per ``k``) because the best ``k`` is chosen."""


def piece_counter(encoder: MiniLMEncoder, max_pieces: int = 128) -> Callable[[str], int]:
    """``pieces(word)``: how many tokens the encoder's own tokenizer makes of a word (at least 1), remembered per
    word, for windows of at most ``max_pieces`` tokens; a window longer than the model's positions is refused here,
    before anything is traced (3.3)."""
    if not hasattr(getattr(encoder, "config", None), "max_positions"):
        raise ValueError(f"encoder should be the pretrained encoder, MiniLMEncoder.load(), got {encoder!r:.60}.")
    positions = encoder.config.max_positions
    max_pieces = check_whole_number("max_pieces", max_pieces, minimum=3, maximum=positions,
                                    meaning=f"the tokens of a window, [CLS] and [SEP] included; the model has "
                                            f"{positions} positions")
    tokenizer = load_wordpieces(encoder.model_path)
    counts: dict[str, int] = {}

    def pieces(word: str) -> int:
        if word not in counts:
            counts[word] = max(1, len(tokenizer.pieces(word)))
        return counts[word]

    return pieces


def litbank_windows(encoder: MiniLMEncoder, documents: Sequence[CorefDocument], *,
                    max_pieces: int = 128) -> list[CorefWindow]:
    """Every document cut into windows of at most ``max_pieces`` of this model's tokens (3.3).

    :func:`mha.corpora.litbank.coref_windows` with each word's pieces counted by the encoder's own tokenizer
    (:func:`piece_counter`), so that a window traced from its words (``is_split_into_words=True``) has at most
    ``max_pieces`` tokens. A window longer than the model's positions is refused before anything is traced.
    """
    pieces = piece_counter(encoder, max_pieces)
    documents = check_items("documents", documents, "a list of CorefDocument (mha.corpora.litbank.load_litbank)")
    return [window for document in documents for window in coref_windows(document, max_pieces=max_pieces,
                                                                          pieces=pieces)]


def _inside(word, spans) -> np.ndarray:
    word = np.asarray(word)
    return np.any([(start <= word) & (word <= end) for start, end in spans], axis=0)


@takes_attention(word_maps=WORDS.with_leading(6))
def link_scores(word_maps: np.ndarray, link: PronounLink) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pronoun's share, hit and chain hit for every head: (..., words, words) -> three (...) arrays (3.3).

    ``word_maps`` are one window's word-level maps (rows = query, columns = key), any leading axes (layers,
    heads). Share: the pronoun's row summed over the antecedent's columns. Hit: the column of the row's largest
    weight among the words before the pronoun (ties: the first) lies in the antecedent; chain hit: it lies in
    any earlier mention of the chain.
    """
    check_type("link", link, PronounLink, "a PronounLink of a CorefWindow")
    word_maps = as_real_array("word_maps", word_maps, meaning="(..., words, words)")
    n = word_maps.shape[-1] if word_maps.ndim else 0
    if word_maps.ndim < 2 or word_maps.shape[-2] != n or not 0 < link.pronoun < n:
        raise ValueError(f"word_maps has shape {word_maps.shape} and the pronoun is word {link.pronoun}; give "
                         "(..., words, words) maps of the window the link was made in.")
    row = word_maps[..., link.pronoun, :]  # (..., words): where the pronoun looks
    start, end = link.antecedent
    share = row[..., start:end + 1].sum(axis=-1)
    most = row[..., :link.pronoun].argmax(axis=-1)  # (...): the earlier word it attends to most
    return share, _inside(most, [link.antecedent]), _inside(most, link.chain_mentions)


def rule_hits(link: PronounLink, max_offset: int = MAX_OFFSET) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """What each rule gets right for one pronoun: name -> (hit, chain hit) (3.3).

    ``"nearest mention"`` and ``"nearest noun phrase"`` give booleans; ``"offset"`` gives two boolean arrays
    (max_offset,), entry ``k - 1`` for the word ``k`` places before the pronoun (a miss before the window's start).
    """
    check_type("link", link, PronounLink, "a PronounLink of a CorefWindow")
    max_offset = check_whole_number("max_offset", max_offset, minimum=1, maximum=512)
    picks = {"nearest mention": np.array([link.nearest_mention]),
             "nearest noun phrase": np.array([-1 if link.nearest_noun_phrase is None else link.nearest_noun_phrase]),
             "offset": link.pronoun - np.arange(1, max_offset + 1)}
    return {name: (_inside(word, [link.antecedent]) & (word >= 0), _inside(word, link.chain_mentions) & (word >= 0))
            for name, word in picks.items()}


@dataclass(frozen=True)
class NaturalCoreference:
    """Every head's and every rule's scores on LitBank's pronouns, summed per work (3.3, "On natural text").

    ``pronouns`` (works,): linked pronouns per work; ``unlinked`` (works,): pronoun mentions without an
    antecedent in their window. ``share``, ``hits``, ``chain_hits`` (works, layers, heads): summed over each work's
    pronouns. ``rule_hits`` and ``rule_chain_hits``: name -> (works,) for :data:`RULES`; ``offset_hits`` and
    ``offset_chain_hits`` (works, max_offset), column ``k - 1`` for the word ``k`` places before the pronoun.
    """

    works: tuple[str, ...]
    pronouns: np.ndarray
    unlinked: np.ndarray
    share: np.ndarray
    hits: np.ndarray
    chain_hits: np.ndarray
    rule_hits: dict
    rule_chain_hits: dict
    offset_hits: np.ndarray
    offset_chain_hits: np.ndarray

    def _rows(self, works) -> np.ndarray:
        return np.arange(len(self.works)) if works is None else np.asarray(works)

    def pooled(self, counts, works=None) -> np.ndarray:
        """``counts`` (works, ...) summed over ``works`` (default all) and divided by their pronouns."""
        rows = self._rows(works)
        return np.asarray(counts)[rows].sum(axis=0) / self.pronouns[rows].sum()

    def interval(self, counts, works=None, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """95% bootstrap interval of :meth:`pooled`, resampling whole works (:func:`bootstrap_ratio_interval`)."""
        rows = self._rows(works)
        return bootstrap_ratio_interval(np.asarray(counts)[rows], self.pronouns[rows], seed=seed)

    def split_works(self, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """A random half of the works to choose on and the other half to report on (3.3)."""
        order = np.random.default_rng(seed).permutation(len(self.works))
        return np.sort(order[: len(order) // 2]), np.sort(order[len(order) // 2:])

    def to_dict(self, decimals: int = 6) -> dict:
        """The result as JSON-ready lists (shares rounded to ``decimals``), what ``scripts/litbank_coreference.py``
        stores."""
        return {"works": list(self.works), "pronouns": self.pronouns.tolist(), "unlinked": self.unlinked.tolist(),
                "share": np.round(self.share, decimals).tolist(), "hits": self.hits.astype(int).tolist(),
                "chain_hits": self.chain_hits.astype(int).tolist(),
                "rule_hits": {k: np.asarray(v).astype(int).tolist() for k, v in self.rule_hits.items()},
                "rule_chain_hits": {k: np.asarray(v).astype(int).tolist() for k, v in self.rule_chain_hits.items()},
                "offset_hits": self.offset_hits.astype(int).tolist(),
                "offset_chain_hits": self.offset_chain_hits.astype(int).tolist()}


class CoreferenceSums:
    """Running per-work sums of every head's and rule's scores, over all links and over each kind of antecedent (3.3).

    ``add(window, word_maps)`` scores every link of one window (:func:`link_scores`, :func:`rule_hits`) and adds each
    to the sums of ``"all"`` and of its kind (:func:`mha.corpora.litbank.antecedent_kind`: ``"nominal"`` or
    ``"pronoun"``); ``add_unlinked`` counts a window's pronouns without a link. ``result()`` returns one
    :class:`NaturalCoreference` per group, :data:`GROUPS`, over the same works (in the order given), each with the
    same ``unlinked``. Nothing is kept but the sums, so windows can be traced a batch at a time.
    """

    def __init__(self, works: Sequence[str], n_layers: int, n_heads: int, max_offset: int = MAX_OFFSET) -> None:
        self.works = tuple(check_items("works", works, "the names of the works, in order"))
        if not all(isinstance(name, str) for name in self.works) or len(set(self.works)) != len(self.works):
            raise ValueError(f"works should be distinct names (strings) of the works, got {works!r:.80}.")
        n_layers = check_whole_number("n_layers", n_layers, minimum=1, maximum=1024)
        n_heads = check_whole_number("n_heads", n_heads, minimum=1, maximum=1024)
        self.max_offset = check_whole_number("max_offset", max_offset, minimum=1, maximum=512)
        self._row = {name: i for i, name in enumerate(self.works)}
        n, shape = len(self.works), (len(self.works), n_layers, n_heads)
        self._unlinked = np.zeros(n, dtype=int)
        self._sums = {group: {"pronouns": np.zeros(n, dtype=int), "share": np.zeros(shape), "hits": np.zeros(shape),
                              "chain_hits": np.zeros(shape), "rules": np.zeros((len(RULES), 2, n)),
                              "offsets": np.zeros((n, 2, self.max_offset))} for group in GROUPS}

    def _work(self, window: CorefWindow) -> int:
        check_type("window", window, CorefWindow, "a CorefWindow (litbank_windows)")
        if window.document not in self._row:
            raise ValueError(f"window of {window.document!r}, which is not one of the works given: {self.works!r:.80}")
        return self._row[window.document]

    def add_unlinked(self, window: CorefWindow) -> None:
        """Count the window's pronouns that have no antecedent in it."""
        self._unlinked[self._work(window)] += window.unlinked

    @takes_attention(word_maps=LAYERS_HEADS_WORDS)
    def add(self, window: CorefWindow, word_maps: np.ndarray) -> None:
        """Add the scores of every link of ``window``, read from its word-level maps (layers, heads, words, words)."""
        work = self._work(window)
        word_maps = as_real_array("word_maps", word_maps, meaning="(layers, heads, words, words)")
        expected = (*self._sums["all"]["share"].shape[1:], len(window.words), len(window.words))
        if word_maps.shape != expected:
            raise ValueError(f"word_maps has shape {word_maps.shape}; give the window's word-level maps, {expected} "
                             "(layers, heads, words, words).")
        for link in window.links:
            scores = link_scores(word_maps, link)
            picked = rule_hits(link, self.max_offset)
            for group in ("all", antecedent_kind(window, link)):
                sums = self._sums[group]
                for key, value in zip(("share", "hits", "chain_hits"), scores, strict=True):
                    sums[key][work] += value
                sums["pronouns"][work] += 1
                for index, name in enumerate(RULES):
                    sums["rules"][index, :, work] += [picked[name][0][0], picked[name][1][0]]
                sums["offsets"][work] += np.stack(picked["offset"])

    def result(self) -> dict[str, NaturalCoreference]:
        """``{group: NaturalCoreference}`` for ``"all"``, ``"nominal"`` and ``"pronoun"``."""
        return {group: NaturalCoreference(
            self.works, sums["pronouns"].copy(), self._unlinked.copy(), sums["share"].copy(), sums["hits"].copy(),
            sums["chain_hits"].copy(), {name: sums["rules"][i, 0].copy() for i, name in enumerate(RULES)},
            {name: sums["rules"][i, 1].copy() for i, name in enumerate(RULES)}, sums["offsets"][:, 0].copy(),
            sums["offsets"][:, 1].copy()) for group, sums in self._sums.items()}


def score_windows_by_antecedent(encoder: MiniLMEncoder, windows: Sequence[CorefWindow], *, batch_size: int = 16,
                                max_offset: int = MAX_OFFSET) -> dict[str, NaturalCoreference]:
    """Trace ``windows`` once and score every head and rule on every pronoun link, summed per work, over all links
    and apart for links whose antecedent is a name or noun phrase and for those whose antecedent is a pronoun (3.3).

    Returns ``{"all": ..., "nominal": ..., "pronoun": ...}`` (:class:`CoreferenceSums`). The windows with a pronoun
    link are traced from their words (``is_split_into_words=True``) ``batch_size`` at a time; a window longer than
    the model's positions is refused by the encoder. Works keep their order of first appearance; ``unlinked`` counts
    the pronouns of every window.
    """
    check_type("encoder", encoder, MiniLMEncoder, "the pretrained encoder, MiniLMEncoder.load()")
    windows = check_items("windows", windows, "a list of CorefWindow (litbank_windows)")
    for window in windows:
        check_type("each window", window, CorefWindow, "a CorefWindow (litbank_windows)")
    if not any(w.links for w in windows):
        raise ValueError("no window has a pronoun linked to an antecedent; nothing to score.")
    sums = CoreferenceSums(tuple(dict.fromkeys(w.document for w in windows)), encoder.config.n_layers,
                           encoder.config.n_heads, max_offset)
    for window in windows:
        sums.add_unlinked(window)
    windows = [w for w in windows if w.links]  # only these need tracing
    for first in range(0, len(windows), batch_size):
        batch = windows[first:first + batch_size]
        trace = encoder.trace([list(w.words) for w in batch], is_split_into_words=True)
        for index, window in enumerate(batch):
            word_ids = trace.word_ids[index][: trace.lengths[index]]
            sums.add(window, word_attention(trace.attention_maps(index), word_ids))  # (layers, heads, words, words)
    return sums.result()


def score_windows(encoder: MiniLMEncoder, windows: Sequence[CorefWindow], *, batch_size: int = 16,
                  max_offset: int = MAX_OFFSET) -> NaturalCoreference:
    """Every head and rule scored on every pronoun link of ``windows``, summed per work: the ``"all"`` group of
    :func:`score_windows_by_antecedent` (3.3)."""
    return score_windows_by_antecedent(encoder, windows, batch_size=batch_size, max_offset=max_offset)["all"]


LITBANK_COREFERENCE_PATH = DATA_DIRECTORY / "litbank_coreference.json"
"""Every head scored on LitBank's pronouns, written by ``scripts/litbank_coreference.py``."""


def load_natural_coreference(path: str | Path = LITBANK_COREFERENCE_PATH, *, check: bool = False,
                             antecedent: str = "all") -> NaturalCoreference | tuple[int, NaturalCoreference]:
    """The stored :class:`NaturalCoreference` of ``scripts/litbank_coreference.py``, checked against
    ``data/SHA256SUMS``; a missing, tampered or malformed file raises ``ValueError`` saying how to restore it (3.3).

    ``antecedent`` chooses the links (:data:`GROUPS`): ``"all"``, ``"nominal"`` (antecedent a name or noun phrase)
    or ``"pronoun"`` (antecedent a pronoun). With ``check=True``: the index of the window the script also scored on
    its own (in the order of :func:`litbank_windows` over all works) and its scores, to recompute and compare.
    """
    from mha.data_files import read_verified_json

    if antecedent not in GROUPS:
        raise ValueError(f"antecedent is {antecedent!r}; choose one of {GROUPS}.")
    path = as_path("path", path)
    what = "the stored LitBank coreference scores"
    content, how = read_verified_json(path, what=what,
                                      regenerate="python -m scripts.litbank_coreference", limit=4_000_000)
    try:
        if check:
            window = int(content["check"]["window"])
            content = content["check"]
        if antecedent != "all":
            content = content["by_antecedent"][antecedent]
    except (KeyError, TypeError):
        raise ValueError(f"{what} {path} is malformed: it has no 'check' window or no scores by antecedent "
                         f"({antecedent!r}). {how}") from None
    result = _from_content(content, what, path, how)
    return (window, result) if check else result


def _from_content(content, what: str, path, how: str) -> NaturalCoreference:
    try:
        works = tuple(str(work) for work in content["works"])
        arrays = {key: np.asarray(content[key], dtype=float) for key in
                  ("pronouns", "unlinked", "share", "hits", "chain_hits", "offset_hits", "offset_chain_hits")}
        rules = {key: {name: np.asarray(content[key][name], dtype=float) for name in RULES}
                 for key in ("rule_hits", "rule_chain_hits")}
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{what} {path} is malformed: it needs 'works', per-work counts and per-head sums. {how}"
                         ) from None
    n = len(works)
    bad = [key for key, value in arrays.items() if value.shape[:1] != (n,)]
    bad += [f"{key}[{name!r}]" for key, value in rules.items() for name in RULES if value[name].shape != (n,)]
    if bad or arrays["share"].ndim != 3 or arrays["hits"].shape != arrays["share"].shape:
        raise ValueError(f"{what} {path} has {n} works but {', '.join(bad) or 'share and hits'} do not have one row "
                         f"per work (heads: (works, layers, heads)). {how}")
    if arrays["pronouns"].min() < 0:
        raise ValueError(f"{what} {path} counts fewer than no pronouns in a work. {how}")
    return NaturalCoreference(works, arrays["pronouns"].astype(int), arrays["unlinked"].astype(int), arrays["share"],
                              arrays["hits"], arrays["chain_hits"], rules["rule_hits"], rules["rule_chain_hits"],
                              arrays["offset_hits"], arrays["offset_chain_hits"])
