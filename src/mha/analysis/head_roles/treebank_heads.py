"""Every head's guess for every gold pair of the whole treebank, stored once, and what a null result is worth (3.2).

Section 3.2 chooses the best head of each relation direction on one half of UD English-EWT's development split and
reports it on the other. Encoding all 2,001 sentences takes longer than a page may, so
``scripts/treebank_heads.py`` stores, for every gold pair, the offset of every head's guess
(:func:`relation_guesses`); :func:`hits_from_guesses` turns any set of sentences back into the
:class:`~mha.analysis.head_roles.relations.RelationHits` that :func:`~mha.analysis.head_roles.relations.relation_hits`
would have counted, and :func:`load_treebank_guesses` reads the file.

A gain "within noise" is not a gain of zero: :func:`gain_table_bounds` puts equivalence bounds and the smallest
detectable gain (:mod:`mha.analysis.equivalence`) on each direction's chosen head, and :func:`without_offset_rules`
separates "the best head is the offset rule" from "no head beats the rule".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from mha.analysis.equivalence import gain_bounds, ratio_standard_error
from mha.analysis.head_roles.relations import POSSESSIVE_MARKERS, RelationHits
from mha.analysis.head_roles.role_table import RELATION_DIRECTIONS
from mha.core.validation import as_path, check_items, check_type
from mha.data_files import DATA_DIRECTORY
from mha.pretrained.attention_record import AttentionRecord
from mha.pretrained.word_maps import word_attention, word_units

T = TypeVar("T")

__all__ = ["EWT_HEADS_PATH", "SENTENCE_SHARES_STORED", "RelationGuesses", "relation_guesses", "hits_from_guesses",
           "load_treebank_guesses",
           "without_offset_rules", "gain_table_bounds"]


@dataclasses.dataclass(frozen=True)
class RelationGuesses:
    """Every head's guess for every gold pair, as offsets in words from the word whose row (or column) is read.

    ``relations`` are prefixes of :data:`~mha.analysis.head_roles.role_table.RELATION_DIRECTIONS`; per pair (one
    entry per gold pair and direction): ``sentence`` (pairs,) its sentence's index, ``relation`` (pairs,) an index
    into ``relations``, ``gold_offset`` (pairs,) where the gold word is, and ``guess_offset`` (pairs, layers, heads)
    where each head's guess is. ``n_sentences`` counts every sentence, those without pairs too.
    """

    relations: tuple[str, ...]
    n_sentences: int
    sentence: np.ndarray
    relation: np.ndarray
    gold_offset: np.ndarray
    guess_offset: np.ndarray
    mode: str = "row"
    clark_poss: bool = False


def relation_guesses(records: Iterable[AttentionRecord], *, mode: str = "row", clark_poss: bool = False,
                     relations: Sequence[str] | None = None) -> RelationGuesses:
    """Each head's guess for each gold pair of ``records``, read as :func:`~.relations.relation_hits` reads it (3.2).

    ``mode``, ``clark_poss``: as in :func:`~mha.analysis.head_roles.relations.relation_hits`; ``relations``: the
    directions to keep (default all of :data:`~mha.analysis.head_roles.role_table.RELATION_DIRECTIONS`).
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    if mode not in ("row", "column"):
        raise ValueError(f"mode must be 'row' or 'column', got {mode!r}.")
    every = [prefix for prefix, _, _ in RELATION_DIRECTIONS]
    wanted = tuple(every if relations is None else relations)
    unknown = [r for r in wanted if r not in every]
    if unknown:
        raise ValueError(f"unknown relations {unknown}; choose among {', '.join(every)}.")
    directions = [(prefix, kind, direction) for prefix, kind, direction in RELATION_DIRECTIONS if prefix in wanted]
    sentence_index, relation_index, gold_offsets, guess_offsets = [], [], [], []
    for index, record in enumerate(records):
        sentence = record.sentence
        if sentence is None or not sentence.relations:
            continue
        attention = np.asarray(record.attention)  # (layers, heads, seq, seq)
        n_words = len(word_units(record.word_ids))
        if n_words != len(sentence.words):
            raise ValueError(f"record {index}: word_ids name {n_words} words but the gold sentence has "
                             f"{len(sentence.words)}; encode the gold words themselves (encode_records does).")
        words = word_attention(attention, record.word_ids)  # (layers, heads, n_words, n_words)
        words = np.where(np.eye(n_words, dtype=bool), -np.inf, words)
        guesses = words.argmax(-1) if mode == "row" else words.argmax(-2)  # (layers, heads, n_words)
        for prefix, kind, direction in directions:
            for pair in sentence.relations_of(kind):
                reader, gold = (pair.source, pair.target) if direction == "source_to_target" else (pair.target,
                                                                                                 pair.source)
                if (clark_poss and prefix == "poss_noun" and reader + 1 < n_words
                        and sentence.words[reader + 1].lower() in POSSESSIVE_MARKERS):
                    reader += 1
                sentence_index.append(index)
                relation_index.append(wanted.index(prefix))
                gold_offsets.append(gold - reader)
                guess_offsets.append(guesses[..., reader] - reader)
    shape = np.asarray(records[0].attention).shape[:2] if records else (0, 0)
    return RelationGuesses(wanted, len(records), np.array(sentence_index, dtype=np.int32),
                           np.array(relation_index, dtype=np.int32), np.array(gold_offsets, dtype=np.int32),
                           np.array(guess_offsets, dtype=np.int32).reshape(-1, *shape), mode, clark_poss)


def hits_from_guesses(guesses: RelationGuesses, sentences: npt.ArrayLike | None = None, *,
                      offsets: Sequence[int] = tuple(range(-5, 6))) -> RelationHits:
    """The per-sentence counts of :func:`~.relations.relation_hits` for ``sentences`` (indices; default all) (3.2).

    Row ``i`` of the result is sentence ``sentences[i]``, so ``hits_from_guesses(g, part)`` for a part of a
    :func:`~mha.corpora.treebank.split_sentences` split counts exactly what ``relation_hits`` of that part's records
    counts.
    """
    check_type("guesses", guesses, RelationGuesses, "the stored guesses of one counting, e.g. "
               "load_treebank_guesses()[\"row\"]")
    chosen = np.arange(guesses.n_sentences) if sentences is None else np.asarray(sentences, dtype=int)
    if chosen.ndim != 1 or (chosen.size and (chosen.min() < 0 or chosen.max() >= guesses.n_sentences)):
        raise ValueError(f"sentences must be indices in 0..{guesses.n_sentences - 1}.")
    offsets = tuple(int(k) for k in offsets if k != 0)
    row_of = np.full(guesses.n_sentences, -1)
    row_of[chosen] = np.arange(len(chosen))
    keep = row_of[guesses.sentence] >= 0
    rows, relation = row_of[guesses.sentence[keep]], guesses.relation[keep]
    gold, guess = guesses.gold_offset[keep], guesses.guess_offset[keep]  # (pairs,), (pairs, layers, heads)
    layers_heads = guesses.guess_offset.shape[1:]
    n_rel = len(guesses.relations)
    pairs = np.zeros((len(chosen), n_rel), dtype=np.int32)
    hits = np.zeros((len(chosen), n_rel, *layers_heads), dtype=np.int32)
    offset_hits = np.zeros((len(chosen), n_rel, len(offsets)), dtype=np.int32)
    guess_at_offset = np.zeros((len(chosen), n_rel, *layers_heads, len(offsets)), dtype=np.int16)
    np.add.at(pairs, (rows, relation), 1)
    np.add.at(hits, (rows, relation), (guess == gold[:, None, None]).astype(np.int32))
    for i, k in enumerate(offsets):
        np.add.at(offset_hits[..., i], (rows, relation), (gold == k).astype(np.int32))
        np.add.at(guess_at_offset[..., i], (rows, relation), (guess == k).astype(np.int16))
    return RelationHits(guesses.relations, offsets, pairs, hits, offset_hits, guess_at_offset, guesses.mode,
                        guesses.clark_poss)


EWT_HEADS_PATH = DATA_DIRECTORY / "ewt_dev_heads.safetensors"
SENTENCE_SHARES_STORED = ("cls_share", "punct_share", "content_prev_token_share", "content_same_token_share")
"""The per-sentence scores of every head that the treebank file keeps (names of
:data:`~mha.analysis.head_roles.role_table.SENTENCE_SCORES`): 3.1's sink heads, and each head's examples in the view."""
"""Every head's guess for every gold pair of UD English-EWT dev, written by ``scripts/treebank_heads.py``."""

_FIELDS = ("sentence", "relation", "gold_offset", "guess_offset")


def load_treebank_guesses(path: str | Path = EWT_HEADS_PATH) -> dict[str, RelationGuesses]:
    """The stored guesses, by counting (``"row"``, ``"row, Clark poss"``, ``"column"``), checked (section 3.2).

    Read from ``path`` (default: the book's file), checked against ``data/SHA256SUMS`` and its arrays checked
    against each other: a missing, tampered or malformed file raises ``ValueError`` with the command that
    regenerates it.
    """
    from mha.data_files import parse_json

    def read(arrays: dict[str, np.ndarray], metadata: dict) -> dict[str, RelationGuesses]:
        countings = parse_json(metadata["countings"], what="the countings of", path=path, how="")
        result = {}
        for name, spec in countings.items():
            fields = {field: arrays[f"{spec['key']}.{field}"] for field in _FIELDS}
            guesses = RelationGuesses(tuple(spec["relations"]), int(spec["n_sentences"]),
                                      *(fields[field].astype(np.int32) for field in _FIELDS),
                                      spec["mode"], bool(spec["clark_poss"]))
            n = len(guesses.sentence)
            if not (guesses.relation.shape == guesses.gold_offset.shape == (n,) and guesses.guess_offset.ndim == 3
                    and len(guesses.guess_offset) == n and guesses.relation.max(initial=0) < len(guesses.relations)
                    and guesses.sentence.max(initial=0) < guesses.n_sentences):
                raise ValueError("arrays of different lengths")
            result[name] = guesses
        return result

    return _read_stored_heads(path, "the stored guesses of every head on the treebank's gold pairs", read)


def _read_stored_heads(path: str | Path, what: str, read: Callable[[dict[str, np.ndarray], dict], T]) -> T:
    """The treebank file's arrays and metadata, checked against ``data/SHA256SUMS``, handed to ``read``; a missing,
    tampered or malformed file (``read`` raising) becomes ``ValueError`` with the command that regenerates it."""
    from safetensors import SafetensorError
    from safetensors.numpy import load

    from mha.data_files import how_to_restore, parse_json, read_verified_file

    path = as_path("path", path)
    how = how_to_restore("python -m scripts.treebank_heads", path)
    data = read_verified_file(path, what=what, how=how, limit=64 * 2**20)
    try:
        header_length = int.from_bytes(data[:8], "little")
        metadata = parse_json(data[8:8 + header_length], what=f"the header of {what}", path=path, how=how)
        metadata = metadata.get("__metadata__", {})
        return read(load(data), metadata)
    except (SafetensorError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{what} {path} are malformed ({error}). {how}") from None


def without_offset_rules(selection: RelationHits, *, at_offset_min: float = 0.9) -> RelationHits:
    """``selection`` with every head that is an offset rule in disguise made unchoosable, per direction (3.2).

    A head is an offset rule for a direction when at least ``at_offset_min`` of its guesses on ``selection`` land at
    that direction's best offset there (chosen as :func:`~.relations.select_and_report` chooses it). Its hits are set
    to -1, so :func:`~.relations.select_and_report` picks the best head that is *not* the rule: the test of "no head
    beats the rule", apart from "the best head is the rule". Decided on ``selection`` alone.
    """
    from mha.analysis.head_roles.relations import _best_offset_index

    check_type("selection", selection, RelationHits, "the counts of the selection half, a RelationHits (e.g. "
               "hits_from_guesses(guesses, part))")
    hits = selection.hits.copy()
    for r in range(len(selection.relations)):
        total = selection.pairs[:, r].sum()
        if total == 0:
            continue
        k = _best_offset_index(selection.offset_hits[:, r].sum(axis=0), selection.offsets)
        at_offset = selection.guess_at_offset[:, r, ..., k].sum(axis=0) / total  # (layers, heads)
        hits[:, r][:, at_offset >= at_offset_min] = -1
    return dataclasses.replace(selection, hits=hits)


def gain_table_bounds(report: RelationHits, chosen, margin: float, *, alpha: float = 0.05,
                      power: float = 0.8):
    """Equivalence bounds and power for each row of a :func:`~.relations.select_and_report` table (3.2).

    ``chosen`` names, per direction, the head and the offset chosen on the selection half; ``report`` holds the
    counts they were reported on. For each row: ``se`` (:func:`ratio_standard_error` of the gain over report
    sentences), the TOST interval ``tost_low``/``tost_high`` (1 - 2 alpha), ``bound`` (the smallest margin the TOST
    would establish: the larger of |tost_low| and |tost_high|), ``equivalent`` (within +-``margin``), ``test_p``,
    ``detectable`` (the smallest gain found with probability ``power``), and ``verdict``:

    * "below the offset" or "beats the offset" when the two-sided test at ``alpha`` rejects a gain of 0, the
      latter qualified "by less than the margin" when the TOST's upper test also rejects a gain of ``margin`` or more;
    * "no gain as large as the margin" when it does not reject 0 and the TOST establishes equivalence;
    * "inconclusive" when neither test decides;
    * "the head is the offset rule" when it guesses what the offset guesses on every report pair (a gain of 0 by
      identity, which no test can bound).
    """
    import pandas as pd

    check_type("report", report, RelationHits, "the counts of the report half, a RelationHits (e.g. "
               "hits_from_guesses(guesses, part))")
    check_type("chosen", chosen, pd.DataFrame, "the table of select_and_report(selection, report)")
    rows = []
    for row in chosen.itertuples():
        r = report.relations.index(row.relation)
        k = report.offsets.index(row.baseline_offset)
        difference = report.hits[:, r, row.layer, row.head] - report.offset_hits[:, r, k]  # (sentences,)
        se = float(ratio_standard_error(difference, report.pairs[:, r]))
        if se == 0:  # the head guesses what the offset guesses on every pair: a gain of 0 by identity, not by test
            rows.append({"relation": row.relation, "gain": row.gain, "se": 0.0, "tost_low": np.nan,
                         "tost_high": np.nan, "bound": np.nan, "equivalent": False, "test_p": np.nan,
                         "detectable": np.nan, "verdict": "the head is the offset rule"})
            continue
        bounds = gain_bounds(row.gain, se, margin, alpha=alpha, power=power)
        significant = float(bounds["test_p"]) < alpha
        if significant and row.gain < 0:
            verdict = "below the offset"
        elif significant:
            verdict = "beats the offset" + (" by less than the margin" if float(bounds["high"]) < margin else "")
        elif bool(bounds["equivalent"]):
            verdict = "no gain as large as the margin"
        else:
            verdict = "inconclusive"
        rows.append({"relation": row.relation, "gain": row.gain, "se": se, "tost_low": float(bounds["low"]),
                     "tost_high": float(bounds["high"]),
                     "bound": max(abs(float(bounds["low"])), abs(float(bounds["high"]))),
                     "equivalent": bool(bounds["equivalent"]), "test_p": float(bounds["test_p"]),
                     "detectable": float(bounds["detectable"]), "verdict": verdict})
    return pd.DataFrame(rows)


def load_treebank_sentence_shares(path: str | Path = EWT_HEADS_PATH) -> dict[str, np.ndarray]:
    """Per sentence of the stored treebank: every head's scores of :data:`SENTENCE_SHARES_STORED` (3.1).

    Returns each of them (sentences, layers, heads), as
    :func:`~mha.analysis.head_roles.role_table.sentence_head_scores` gives it (a mean over the sentence's rows, or
    its content rows), ``rows`` (sentences,) and ``tokens`` (sentences,), its length in tokens with ``[CLS]`` and
    ``[SEP]``. Checked as :func:`load_treebank_guesses` checks the file.
    """
    def read(arrays: dict[str, np.ndarray], metadata: dict) -> dict[str, np.ndarray]:
        shares = {key: arrays[f"sentence.{key}"] for key in (*SENTENCE_SHARES_STORED, "rows", "tokens")}
        n = len(shares["rows"])
        first = shares[SENTENCE_SHARES_STORED[0]]
        if not (all(shares[key].shape == first.shape for key in SENTENCE_SHARES_STORED) and first.ndim == 3
                and len(first) == n == len(shares["tokens"]) and (shares["rows"] > 0).all()):
            raise ValueError("arrays of different lengths")
        return {key: value.astype(np.float64) if key in SENTENCE_SHARES_STORED else value.astype(np.int64)
                for key, value in shares.items()}

    return _read_stored_heads(path, "the stored attention shares of every head on the treebank's sentences", read)


def length_standardised_shares(per_sentence: npt.ArrayLike, rows: npt.ArrayLike, lengths: npt.ArrayLike,
                               edges: Sequence[int], *, n_resamples: int = 2000, level: float = 0.95,
                               seed: int = 0) -> dict[str, np.ndarray]:
    """Every head's share pooled within length bands, and their plain mean: a share standardised for length (3.1).

    ``per_sentence`` (sentences, heads...) is a score averaged over each sentence's ``rows`` (sentences,), as from
    :func:`~mha.analysis.head_roles.role_table.sentence_head_scores`; ``lengths`` (sentences,) sorts the sentences
    into bands ``edges[i] < length <= edges[i + 1]``. A band's share is pooled over its rows; the standardised share
    gives every band the same weight, so it does not move when a corpus has more short or more long sentences.
    Intervals: percentile bootstrap at ``level``, sentences resampled within each band (``n_resamples``,
    ``seed``). Returns ``bands`` (bands, heads...), ``bands_low``, ``bands_high``, ``standardised`` (heads...),
    ``low``, ``high`` and ``sentences`` (bands,).
    """
    from mha.analysis.statistics import percentile_interval, resampled_ratios
    from mha.core.resampling import bootstrap_counts

    values = np.asarray(per_sentence, dtype=float)
    rows = np.asarray(rows, dtype=float)
    lengths = np.asarray(lengths)
    if values.ndim < 2 or rows.shape != (len(values),) or lengths.shape != (len(values),):
        raise ValueError(f"per_sentence {values.shape}, rows {rows.shape} and lengths {lengths.shape} need one entry "
                         "per sentence on their first axis.")
    edges = list(edges)
    if len(edges) < 2 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise ValueError(f"edges must be at least two increasing lengths, e.g. (0, 15, 30, 512), got {edges}.")
    weighted = values * rows.reshape((-1,) + (1,) * (values.ndim - 1))  # (sentences, heads...): the rows' sum
    bands, resampled, counts = [], [], []
    for band, (low_edge, high_edge) in enumerate(zip(edges, edges[1:], strict=False)):
        inside = (lengths > low_edge) & (lengths <= high_edge)
        if inside.sum() < 2:
            raise ValueError(f"the band ({low_edge}, {high_edge}] holds {int(inside.sum())} sentences; each band needs "
                             "at least 2 to resample. Choose wider bands.")
        bands.append(weighted[inside].sum(0) / rows[inside].sum())
        draws = bootstrap_counts(int(inside.sum()), n_resamples, seed + band)
        resampled.append(resampled_ratios(weighted[inside], rows[inside], draws))  # (resamples, heads...)
        counts.append(int(inside.sum()))
    resampled = np.stack(resampled)  # (bands, resamples, heads...)
    bands_low, bands_high = percentile_interval(np.moveaxis(resampled, 0, 1), level)
    low, high = percentile_interval(resampled.mean(axis=0), level)
    return {"bands": np.stack(bands), "bands_low": bands_low, "bands_high": bands_high,
            "standardised": np.mean(bands, axis=0), "low": low, "high": high, "sentences": np.array(counts)}
