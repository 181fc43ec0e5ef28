"""Which head tracks each grammatical relation, and what it points at instead (3.2 "Syntax: heads that follow
grammatical relations").

:func:`mha.analysis.role_table.head_role_table` scores every head on every relation and
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
  between its two words.

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

from mha.analysis.role_table import RELATION_DIRECTIONS, SYNTACTIC_GAIN_MIN, AttentionRecord, relation_scores_long
from mha.pretrained.word_maps import word_attention

__all__ = ["best_heads", "relation_predictions", "spanning_attractor_records"]

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

    ``table`` is a :func:`mha.analysis.role_table.head_role_table`. ``relations`` are
    column prefixes of :data:`mha.analysis.role_table.RELATION_DIRECTIONS` (default: all
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

    ``records`` are :class:`~mha.analysis.role_table.AttentionRecord` objects with gold
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
            source, target = (pair.source, pair.target) if direction == "source_to_target" else (pair.target, pair.source)
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
    holds only that pair, so a :func:`mha.analysis.role_table.head_role_table` of the
    result scores subject-verb agreement across the attractor and nothing
    else. Pairs inside a relative clause, which no attractor separates, are
    dropped.
    """
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
