"""Which head tracks each grammatical relation, and what it points at instead (3.2 "Syntax: heads that follow
grammatical relations").

:func:`mha.analysis.head_roles.role_table.head_role_table` scores every head on every relation and
direction. This module reads those scores the way the syntax section of
chapter 3 does, and looks inside one head's guesses:

* :func:`best_heads` picks, for each relation and direction, the head whose
  most-attended word is most often the gold word, puts the best fixed-offset
  baseline in the same direction beside it (Clark et al. 2019, "What does
  BERT look at?"), and flags heads that do no better than that offset;
  optionally it re-scores the chosen heads on a second, held-out table, so
  the choice of head is not graded on the data that chose it;
* :func:`relation_predictions` lists one head's guess for every gold pair
  of one relation and direction, with offsets and (for agreement sentences)
  the attractor noun, so one can ask *where* a head looks when it is wrong;
* :func:`spanning_attractor_records` keeps, in subject-verb agreement
  sentences, only the subject -> verb pair that has the attractor noun
  between its two words;
* :func:`relation_hits` counts, sentence by sentence, how many gold pairs
  every head and every fixed offset gets right (fast: one argmax per head and
  sentence), with Clark et al.'s two variants as options: the column argmax
  of their reverse ("transpose") mode, and their ``poss`` rule that reads the
  row of the possessive ``'s``;
* :func:`select_and_report` chooses the best head and offset on one part of
  the sentences and reports them on another, with bootstrap 95% intervals
  over sentences for the accuracy and the gain.

Direction convention, as everywhere in :mod:`mha`: ROW = query = the word
attending FROM, COLUMN = key = the word attended TO. The relation ``obj_verb``
reads the object's row and asks whether its largest weight is on the verb's
column; ``verb_obj`` reads the verb's row.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from mha.analysis.head_roles.role_table import RELATION_DIRECTIONS, SYNTACTIC_GAIN_MIN, relation_scores_long
from mha.analysis.statistics import bootstrap_ratio_interval
from mha.core.validation import check_items
from mha.pretrained.attention_record import AttentionRecord
from mha.pretrained.word_maps import word_attention, word_units

__all__ = ["best_heads", "relation_predictions", "spanning_attractor_records", "RelationHits", "relation_hits",
           "select_and_report", "POSSESSIVE_MARKERS"]

_PREFIXES = {prefix: (kind, direction) for prefix, kind, direction in RELATION_DIRECTIONS}


def _reads(prefix: str) -> str:
    first, second = prefix.split("_")
    return f"{first} row -> {second} column"


def best_heads(
    table: pd.DataFrame,
    *,
    relations: Sequence[str] | None = None,
    held_out: pd.DataFrame | None = None,
    gain_min: float = SYNTACTIC_GAIN_MIN,
) -> pd.DataFrame:
    """The best head for each relation and direction, next to its fixed-offset baseline (section 3.2).

    ``table`` is a :func:`mha.analysis.head_roles.role_table.head_role_table`. ``relations`` are
    column prefixes of :data:`mha.analysis.head_roles.role_table.RELATION_DIRECTIONS` (default: all
    of them, in that order); relations with no gold pair are skipped. For
    each, the head with the highest accuracy wins (ties: the earliest layer,
    then head). Returns one row per relation with ``relation``, ``reads``
    (which row and column), ``layer``, ``head``, ``acc``, ``baseline_acc``,
    ``baseline_offset`` (in words: the guess for the word at i is i +
    offset), ``gain`` (acc - baseline_acc), ``count`` (gold pairs) and
    ``offset_only``: True when the gain is below ``gain_min``, i.e. the head
    does no better than always looking a fixed number of words away. With
    ``held_out`` (a role table of the same model on other sentences) the
    chosen heads are also scored there: ``held_out_acc``,
    ``held_out_baseline_acc`` and ``held_out_gain``.
    """
    relations = [p for p, _, _ in RELATION_DIRECTIONS] if relations is None else list(relations)
    unknown = [r for r in relations if r not in _PREFIXES]
    if unknown:
        raise ValueError(f"unknown relations {unknown}; choose among {', '.join(_PREFIXES)}.")
    scores = relation_scores_long(table)
    held = relation_scores_long(held_out).set_index(["relation", "layer", "head"]) if held_out is not None else None
    rows = []
    for prefix in relations:
        candidates = scores[(scores["relation"] == prefix) & (scores["count"] > 0)]
        if candidates.empty:
            continue
        best = candidates.sort_values(["acc", "layer", "head"], ascending=[False, True, True], kind="stable").iloc[0]
        row = {
            "relation": prefix, "reads": _reads(prefix), "layer": int(best["layer"]), "head": int(best["head"]),
            "acc": float(best["acc"]), "baseline_acc": float(best["baseline_acc"]),
            "baseline_offset": int(best["baseline_offset"]), "gain": float(best["gain"]), "count": int(best["count"]),
            "offset_only": bool(best["gain"] < gain_min),
        }
        if held is not None:
            other = held.loc[(prefix, row["layer"], row["head"])]
            row.update(held_out_acc=float(other["acc"]), held_out_baseline_acc=float(other["baseline_acc"]),
                       held_out_gain=float(other["gain"]))
        rows.append(row)
    return pd.DataFrame(rows)


def relation_predictions(
    records: Iterable[AttentionRecord],
    layer: int,
    head: int,
    relation: str,
    *,
    ignore_self: bool = False,
) -> pd.DataFrame:
    """One head's guess for every gold pair of one relation and direction (section 3.2).

    ``records`` are :class:`~mha.pretrained.attention_record.AttentionRecord` objects with gold
    sentences (others are skipped); ``relation`` is a column prefix such as
    ``"verb_subj"`` (the verb's row: which word does it attend to most?).
    The map is merged to words as in :func:`mha.pretrained.word_maps.word_attention`
    (special tokens dropped); with ``ignore_self`` a word's own column cannot
    be its guess, as in Clark et al. (2019). Returns one row per gold pair
    with ``record`` (index in ``records``), ``origin``, ``from_word`` (the
    row read), ``gold_word``, ``predicted_word``, ``correct``,
    ``gold_offset`` and ``predicted_offset`` (in words, relative to
    ``from_word``), ``weight_on_gold``, and, when the sentence names an
    attractor noun, ``attractor``, ``predicted_attractor`` and
    ``weight_on_attractor`` (else -1, False and NaN).
    """
    if relation not in _PREFIXES:
        raise ValueError(f"unknown relation {relation!r}; choose among {', '.join(_PREFIXES)}.")
    kind, direction = _PREFIXES[relation]
    rows = []
    for index, record in enumerate(records):
        sentence = record.sentence
        pairs = [] if sentence is None else sentence.relations_of(kind)
        if not pairs:
            continue
        attention = np.asarray(record.attention)
        if not (0 <= layer < attention.shape[0] and 0 <= head < attention.shape[1]):
            raise ValueError(f"(layer, head) = ({layer}, {head}) is outside the model's "
                             f"{attention.shape[0]} layers x {attention.shape[1]} heads.")
        words = word_attention(attention[layer, head], record.word_ids)  # (n_words, n_words), rows attend FROM
        ranked = np.where(np.eye(len(words), dtype=bool), -np.inf, words) if ignore_self else words
        for pair in pairs:
            forward = direction == "source_to_target"
            source, target = (pair.source, pair.target) if forward else (pair.target, pair.source)
            predicted = int(ranked[source].argmax())  # ties: the earliest word
            attractor = -1 if sentence.attractor is None else int(sentence.attractor)
            rows.append({
                "record": index, "origin": sentence.origin, "from_word": source, "gold_word": target,
                "predicted_word": predicted, "correct": predicted == target,
                "gold_offset": target - source, "predicted_offset": predicted - source,
                "weight_on_gold": float(words[source, target]),
                "attractor": attractor, "predicted_attractor": predicted == attractor,
                "weight_on_attractor": float(words[source, attractor]) if attractor >= 0 else float("nan"),
            })
    columns = ["record", "origin", "from_word", "gold_word", "predicted_word", "correct", "gold_offset",
               "predicted_offset", "weight_on_gold", "attractor", "predicted_attractor", "weight_on_attractor"]
    return pd.DataFrame(rows, columns=columns)


def spanning_attractor_records(records: Iterable[AttentionRecord]) -> list[AttentionRecord]:
    """Agreement sentences reduced to the subject -> verb pair that crosses the attractor (section 3.2).

    Keeps the records whose gold sentence names an ``attractor`` and has a
    ``subj_verb`` pair with the attractor strictly between subject and verb
    ("The teacher near the *windows* sleeps"); each kept record's sentence
    holds only that pair, so a :func:`mha.analysis.head_roles.role_table.head_role_table` of the
    result scores subject-verb agreement across the attractor and nothing
    else. Pairs inside a relative clause, which no attractor separates, are
    dropped.
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    kept = []
    for record in records:
        sentence = record.sentence
        if sentence is None or sentence.attractor is None:
            continue
        spanning = tuple(r for r in sentence.relations_of("subj_verb")
                         if min(r.source, r.target) < sentence.attractor < max(r.source, r.target))
        if spanning:
            kept.append(dataclasses.replace(record, sentence=dataclasses.replace(sentence, relations=spanning)))
    return kept


#: the tokens Clark et al. (2019) treat as the possessive marker in their ``poss`` rule
POSSESSIVE_MARKERS = frozenset({"'s", "s'", "'", "’s", "’"})


@dataclasses.dataclass(frozen=True)
class RelationHits:
    """Per-sentence counts behind every head's accuracy on every relation direction (section 3.2).

    ``relations`` are prefixes of :data:`~mha.analysis.head_roles.role_table.RELATION_DIRECTIONS`; ``pairs`` (sentences,
    relations) counts the gold pairs of each sentence; ``hits`` (sentences, relations, layers, heads) how many of
    them each head gets right; ``offset_hits`` (sentences, relations, offsets) how many the guess "the word
    ``offset`` positions away" gets right; ``guess_at_offset`` (sentences, relations, layers, heads, offsets) how
    many of each head's guesses land at each offset, right or wrong (an offset rule in disguise puts them all at
    one). ``mode`` is ``"row"`` or ``"column"``, ``clark_poss`` whether Clark et al.'s ``poss`` rule was used.
    """

    relations: tuple[str, ...]
    offsets: tuple[int, ...]
    pairs: np.ndarray
    hits: np.ndarray
    offset_hits: np.ndarray
    guess_at_offset: np.ndarray
    mode: str = "row"
    clark_poss: bool = False

    def __len__(self) -> int:
        return self.pairs.shape[0]

    def subset(self, sentences) -> RelationHits:
        """The same counts for some sentences only (an index array or a boolean mask)."""
        index = np.asarray(sentences)
        return dataclasses.replace(self, pairs=self.pairs[index], hits=self.hits[index],
                                   offset_hits=self.offset_hits[index], guess_at_offset=self.guess_at_offset[index])

    def accuracy(self) -> np.ndarray:
        """(relations, layers, heads) pooled accuracy over all sentences (NaN where a relation has no pair)."""
        total = self.pairs.sum(axis=0).astype(float)  # (relations,)
        with np.errstate(divide="ignore", invalid="ignore"):
            return self.hits.sum(axis=0) / total[:, None, None]


def relation_hits(
    records: Iterable[AttentionRecord],
    *,
    mode: str = "row",
    clark_poss: bool = False,
    offsets: Sequence[int] = tuple(range(-5, 6)),
) -> RelationHits:
    """Count, per sentence, the gold pairs each head and each fixed offset gets right (section 3.2).

    Each record's attention (layers, heads, seq, seq) is merged to words
    (:func:`mha.pretrained.word_maps.word_attention`: pieces' columns summed, rows averaged, ``[CLS]``/``[SEP]``
    dropped) and a word's own column is excluded, as in Clark et al. (2019). For a relation direction such as
    ``obj_verb`` the *guess for the object* is

    * ``mode="row"`` (the book's reading): the word the object's row attends to most (row argmax);
    * ``mode="column"`` (Clark et al.'s reverse, "transpose", mode): the word whose row sends the most weight
      to the object's column (column argmax). It asks which query picks the object out, a different statistic.

    With ``clark_poss`` the ``poss_noun`` direction reads, when the possessor is followed by a possessive marker
    (:data:`POSSESSIVE_MARKERS`), the marker's guess instead of the possessor's, as Clark et al.'s code does for
    ``poss`` ("where 's attends", not attention to it). The baseline's guess for the word at ``i`` is ``i + k``
    for each ``k`` of ``offsets`` (0 dropped). Records without a gold sentence count as sentences without pairs.
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    if mode not in ("row", "column"):
        raise ValueError(f"mode must be 'row' (the word's row argmax) or 'column' (Clark et al.'s reverse mode, the "
                         f"argmax over queries of the word's column), got {mode!r}.")
    offsets = tuple(int(k) for k in offsets if k != 0)
    if not offsets:
        raise ValueError("offsets must hold at least one non-zero offset, e.g. range(-5, 6).")
    prefixes = tuple(prefix for prefix, _, _ in RELATION_DIRECTIONS)
    offset_index = {k: i for i, k in enumerate(offsets)}
    records = list(records)
    if not records:
        raise ValueError("records is empty; encode some sentences first (mha.pretrained.corpus_encoding).")
    shape = np.asarray(records[0].attention).shape[:2]
    pairs = np.zeros((len(records), len(prefixes)), dtype=np.int32)
    hits = np.zeros((len(records), len(prefixes), *shape), dtype=np.int32)
    offset_hits = np.zeros((len(records), len(prefixes), len(offsets)), dtype=np.int32)
    guess_at_offset = np.zeros((len(records), len(prefixes), *shape, len(offsets)), dtype=np.int16)
    for index, record in enumerate(records):
        sentence = record.sentence
        if sentence is None or not sentence.relations:
            continue
        attention = np.asarray(record.attention)
        if attention.ndim != 4 or attention.shape[:2] != shape:
            raise ValueError(f"record {index}: attention has shape {attention.shape}; every record needs "
                             f"(layers, heads, seq, seq) with the same {shape} layers and heads.")
        n_words = len(word_units(record.word_ids))
        if n_words != len(sentence.words):
            raise ValueError(f"record {index}: word_ids name {n_words} words but the gold sentence has "
                             f"{len(sentence.words)}; encode the gold words themselves (encode_records does).")
        words = word_attention(attention, record.word_ids)  # (layers, heads, n_words, n_words), rows attend FROM
        words = np.where(np.eye(n_words, dtype=bool), -np.inf, words)  # a word cannot be its own guess
        guesses = words.argmax(-1) if mode == "row" else words.argmax(-2)  # (layers, heads, n_words)
        for r, (prefix, kind, direction) in enumerate(RELATION_DIRECTIONS):
            kind_pairs = sentence.relations_of(kind)
            if not kind_pairs:
                continue
            readers, golds = [], []
            for pair in kind_pairs:
                reader, gold = (pair.source, pair.target) if direction == "source_to_target" else (pair.target,
                                                                                                 pair.source)
                if (clark_poss and prefix == "poss_noun" and reader + 1 < n_words
                        and sentence.words[reader + 1].lower() in POSSESSIVE_MARKERS):
                    reader += 1  # Clark et al.: score where the possessive marker attends
                readers.append(reader)
                golds.append(gold)
            readers, golds = np.array(readers), np.array(golds)
            pairs[index, r] = len(readers)
            hits[index, r] = (guesses[..., readers] == golds).sum(-1)
            for k, count in zip(*np.unique(golds - readers, return_counts=True), strict=True):
                if int(k) in offset_index:
                    offset_hits[index, r, offset_index[int(k)]] = count
            guessed = guesses[..., readers] - readers  # (layers, heads, pairs): the offset of each guess
            for k, i in offset_index.items():
                guess_at_offset[index, r, ..., i] = (guessed == k).sum(-1)
    return RelationHits(prefixes, offsets, pairs, hits, offset_hits, guess_at_offset, mode, clark_poss)


def _best_offset_index(offset_hits: np.ndarray, offsets: Sequence[int]) -> int:
    """The offset with the most hits; ties: smallest |offset|, then the negative one (as the role table)."""
    order = sorted(range(len(offsets)), key=lambda i: (abs(offsets[i]), offsets[i]))
    return max(order, key=lambda i: offset_hits[i])


def select_and_report(
    selection: RelationHits,
    report: RelationHits,
    *,
    relations: Sequence[str] | None = None,
    n_resamples: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Choose each relation's best head and offset on ``selection``, report them on ``report`` (section 3.2).

    Both are :func:`relation_hits` of the same model on different sentences (see
    :func:`mha.corpora.treebank.split_sentences`). For each relation direction with gold pairs in both parts, the
    head with the highest pooled accuracy on ``selection`` is chosen (ties: the earliest layer, then head), and so
    is the fixed offset (ties: smallest |offset|, then negative). On ``report`` the table gives that head's
    accuracy ``acc``, the offset's ``baseline_acc`` and the ``gain`` (acc - baseline_acc, on the same pairs), each
    with a percentile bootstrap interval over report sentences (``*_low``, ``*_high``: ``n_resamples``, ``level``,
    ``seed``; one resample shared by the accuracy, the baseline and the gain). ``within_noise`` is True when the
    gain's interval includes 0. Also ``selection_acc`` (the chosen head's accuracy where it was chosen, inflated
    by the choice), ``at_offset`` (share of the head's report guesses that land at the baseline's offset) and
    ``count`` (report pairs).
    """
    if selection.relations != report.relations or selection.offsets != report.offsets:
        raise ValueError("selection and report were counted with different relations or offsets; count both with "
                         "relation_hits and the same arguments.")
    if selection.mode != report.mode or selection.clark_poss != report.clark_poss:
        raise ValueError("selection and report were counted in different modes; use the same mode and clark_poss.")
    wanted = list(selection.relations) if relations is None else list(relations)
    unknown = [r for r in wanted if r not in selection.relations]
    if unknown:
        raise ValueError(f"unknown relations {unknown}; choose among {', '.join(selection.relations)}.")
    n_heads = selection.hits.shape[3]
    rows = []
    for prefix in wanted:
        r = selection.relations.index(prefix)
        chosen_pairs, report_pairs = selection.pairs[:, r], report.pairs[:, r]  # (sentences,)
        if chosen_pairs.sum() == 0 or report_pairs.sum() == 0:
            continue
        selection_acc = selection.hits[:, r].sum(axis=0).ravel() / chosen_pairs.sum()  # (layers * heads,)
        flat = int(np.argmax(selection_acc))  # ties: the first, i.e. earliest layer, then head
        layer, head = divmod(flat, n_heads)
        k = _best_offset_index(selection.offset_hits[:, r].sum(axis=0), selection.offsets)
        head_hits = report.hits[:, r, layer, head].astype(float)  # (sentences,)
        base_hits = report.offset_hits[:, r, k].astype(float)
        counts = np.stack([head_hits, base_hits, head_hits - base_hits], axis=1)  # (sentences, 3)
        low, high = bootstrap_ratio_interval(counts, report_pairs, n_resamples=n_resamples, level=level, seed=seed)
        total = report_pairs.sum()
        acc, baseline = head_hits.sum() / total, base_hits.sum() / total
        rows.append({
            "relation": prefix, "reads": _reads(prefix), "layer": layer, "head": head,
            "selection_acc": float(selection_acc[flat]), "acc": float(acc), "acc_low": float(low[0]),
            "acc_high": float(high[0]), "baseline_offset": int(selection.offsets[k]), "baseline_acc": float(baseline),
            "baseline_low": float(low[1]), "baseline_high": float(high[1]), "gain": float(acc - baseline),
            "gain_low": float(low[2]), "gain_high": float(high[2]),
            "within_noise": bool(low[2] <= 0 <= high[2]),
            "at_offset": float(report.guess_at_offset[:, r, layer, head, k].sum() / total),
            "count": int(total),
        })
    return pd.DataFrame(rows)
