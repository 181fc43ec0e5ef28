"""Head-role scores: what each head of a model attends to, over a whole corpus (chapter 3, empirical head roles).

:func:`head_role_table` reads the attention maps of every head of a model on many sentences and returns one tidy table,
one row per (layer, head), whose columns answer the questions the literature asks of a head:

* where does it look by position? previous / same / next token, the share to ``[CLS]``, ``[SEP]`` and punctuation, how
  spread out it is (entropy against uniform attention) and how far it looks (Clark et al. 2019, "What does BERT look at?
  An analysis of BERT's attention"; mean distance as in Vig and Belinkov 2019, "Analyzing the structure of attention in
  a transformer language model");
* is it positional or does it track rare tokens? (Voita et al. 2019, "Analyzing multi-head self-attention: specialized
  heads do the heavy lifting, the rest can be pruned": a head is positional when its largest weight falls on the
  previous or next token in at least 90% of cases);
* does it track grammar? for each gold relation of :mod:`mha.corpora.templates`, in both directions, how often the
  head's most-attended word is the related word, next to the best fixed-offset baseline scored the same way (Clark et
  al. 2019), and pronoun -> antecedent against a nearest-noun baseline;
* what does its map look like? a pattern label among Kovaleva et al.'s (2019, "Revealing the dark secrets of BERT")
  vertical, diagonal, vertical + diagonal, block and heterogeneous, by the rules of
  :func:`mha.analysis.head_roles.attention_patterns.pattern_label`.

Direction convention, as everywhere in :mod:`mha`: attention weights have shape (..., seq_q, seq_k); ROW = query = the
position attending FROM, COLUMN = key = the position attended TO. "Previous-token share" is the weight in row ``i`` on
column ``i - 1``: token ``i`` looking back at token ``i - 1``. A relation column named ``noun_det`` reads the noun's row
and asks whether its largest weight is on the determiner's column; ``det_noun`` reads the determiner's row.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from mha.analysis.head_roles.attention_patterns import block_segments, is_punctuation, pattern_label
from mha.core.resampling import bootstrap_counts
from mha.core.validation import as_real_array, check_items, check_share, check_type
from mha.corpora.annotation import AnnotatedSentence
from mha.corpora.baselines import SYNTACTIC_KINDS, best_offset, nearest_candidate_before
from mha.pretrained.attention_record import RecordLike, as_record, check_record
from mha.pretrained.word_maps import word_attention, word_units

__all__ = [
    "RELATION_DIRECTIONS",
    "COLUMN_DESCRIPTIONS",
    "head_role_table",
    "relation_scores_long",
    "SENTENCE_SCORES",
    "sentence_head_scores",
    "heads_above_thresholds",
]


def _reverse_name(kind: str) -> str:
    first, second = kind.split("_")
    return f"{second}_{first}"


#: (column prefix, relation kind, direction): ``det_noun`` reads the determiner's row, ``noun_det`` the noun's row
RELATION_DIRECTIONS: tuple[tuple[str, str, str], ...] = tuple(
    entry
    for kind in SYNTACTIC_KINDS
    for entry in ((kind, kind, "source_to_target"), (_reverse_name(kind), kind, "target_to_source"))
)

#: what each column of :func:`head_role_table` holds;
#: ``{relation}`` is a prefix of RELATION_DIRECTIONS, ``{kind}`` one of SYNTACTIC_KINDS
COLUMN_DESCRIPTIONS: dict[str, str] = {
    "layer": "layer index, from 0",
    "head": "head index within the layer, from 0",
    "prev_token_share": "mean weight of row i on column i-1 (token i looking at the token before it), rows 1..seq-1",
    "same_token_share": "mean weight of row i on column i (a token looking at itself)",
    "next_token_share": "mean weight of row i on column i+1 (token i looking at the token after it), rows 0..seq-2",
    "prev_token_argmax_rate": "share of rows 1..seq-1 whose largest weight is on column i-1 (Voita et al. 2019)",
    "next_token_argmax_rate": "share of rows 0..seq-2 whose largest weight is on column i+1 (Voita et al. 2019)",
    "cls_share": "mean weight, over all rows, on [CLS] columns (Clark et al. 2019)",
    "sep_share": "mean weight, over all rows, on [SEP] columns (Clark et al. 2019)",
    "punct_share": "mean weight, over all rows, on punctuation-token columns (Clark et al. 2019)",
    "entropy": "mean row entropy in nats (Clark et al. 2019)",
    "uniform_entropy": "mean entropy of uniform attention over the same rows: log(seq), or log(i+1) when causal",
    "entropy_ratio": "entropy / uniform_entropy: near 0 = each row on one key, 1 = uniform",
    "mean_distance": "mean over rows of the expected |i - j| in tokens (Vig and Belinkov 2019)",
    "vertical_share": "mean weight of content rows on fixed keys (special tokens, punctuation) with |i - j| >= 2 "
                      "(Kovaleva et al. 2019)",
    "diagonal_share": "mean weight of content rows on non-fixed keys with |i - j| <= 1 (Kovaleva et al. 2019); "
                      "fixed keys next to the query count for neither share",
    "block_share": "mean weight of content rows on content keys of their own segment, see block_segments",
    "uniform_vertical": "vertical_share of uniform attention over the same rows (chance level, the same for every "
                        "head)",
    "uniform_diagonal": "diagonal_share of uniform attention over the same rows (chance level)",
    "uniform_block": "block_share of uniform attention over the same rows (chance level)",
    "rare_token_argmax_rate": "share of content rows whose largest weight is on the sentence's least frequent token "
                              "(Voita et al. 2019)",
    "pattern": "vertical / diagonal / vertical+diagonal / block / heterogeneous, by pattern_label (Kovaleva et al. "
               "2019)",
    "positional": "prev_token_argmax_rate or next_token_argmax_rate >= 0.9 (Voita et al. 2019)",
    "{relation}_acc": "share of gold pairs where the first-named word's row has its largest word-level weight on the "
                      "second-named word (det_noun: determiner row -> noun column; noun_det: noun row -> determiner "
                      "column)",
    "{relation}_baseline_acc": "accuracy of the best fixed offset in the same direction, over the same pairs "
                               "(Clark et al. 2019)",
    "{relation}_baseline_offset": "that offset in words: the guess for the word at i is the word at i + offset",
    "{kind}_count": "number of gold pairs of this kind scored (the same for both directions)",
    "pron_antecedent_acc": "share of pronouns whose row gives the correct candidate the most weight among the "
                           "candidates",
    "pron_antecedent_baseline_acc": "accuracy of guessing the nearest candidate before the pronoun",
    "pron_antecedent_count": "number of pronoun items scored",
    "best_relation": "relation prefix (or pron_antecedent) with the largest acc - baseline_acc, among relations "
                     "with at least min_relation_count gold pairs",
    "best_relation_acc": "that relation's accuracy for this head",
    "best_relation_gain": "that relation's acc - baseline_acc: near 0 means the head does no better than a fixed "
                          "offset",
    "syntactic": "best_relation_gain >= 0.1 (after Voita et al. 2019's 10% margin over the positional baseline)",
}

POSITIONAL_ARGMAX_MIN = 0.9  # Voita et al. 2019: a positional head's maximum is at -1 or +1 in >= 90% of cases
SYNTACTIC_GAIN_MIN = 0.1  # after Voita et al. 2019: a syntactic head beats the best-offset baseline by a 10% margin


class _ScoreSums:
    """Running sums over the corpus: each score is a (layers, heads) sum and a count of what it averages over."""

    def __init__(self, shape: tuple[int, int]) -> None:
        self.shape = shape
        self.sums: dict[str, np.ndarray] = {}
        self.counts: Counter = Counter()  # rows, or relation instances, behind each sum
        self.offset_counts = {kind: Counter() for kind in SYNTACTIC_KINDS}  # gold (target - source) per kind
        self.pronoun_baseline_hits = 0

    def add(self, name: str, value: np.ndarray | float, count: int, count_name: str | None = None) -> None:
        self.sums[name] = self.sums.get(name, 0.0) + np.broadcast_to(value, self.shape)
        self.counts[count_name or name] += count

    def mean(self, name: str, count_name: str | None = None) -> np.ndarray:
        """(layers * heads,) averages, NaN when nothing was counted."""
        n = self.counts[count_name or name]
        if n == 0 or name not in self.sums:
            return np.full(self.shape[0] * self.shape[1], math.nan)
        return (np.asarray(self.sums[name], dtype=float) / n).ravel()

    def add_positions(self, attention: np.ndarray) -> None:
        """Previous / same / next-token shares and argmax rates (Clark et al. 2019; Voita et al. 2019)."""
        seq = attention.shape[-1]
        positions = np.arange(seq)
        self.add("prev_token_share", np.diagonal(attention, offset=-1, axis1=2, axis2=3).sum(-1), seq - 1)  # A[i, i-1]
        self.add("same_token_share", np.diagonal(attention, offset=0, axis1=2, axis2=3).sum(-1), seq)  # A[i, i]
        self.add("next_token_share", np.diagonal(attention, offset=1, axis1=2, axis2=3).sum(-1), seq - 1)  # A[i, i+1]
        top_key = attention.argmax(-1)  # (layers, heads, seq): the key each query attends to most
        self.add("prev_token_argmax_rate", (top_key[..., 1:] == positions[1:] - 1).sum(-1), seq - 1)
        self.add("next_token_argmax_rate", (top_key[..., :-1] == positions[:-1] + 1).sum(-1), seq - 1)

    def add_fixed_tokens(self, attention: np.ndarray, is_cls: np.ndarray, is_sep: np.ndarray,
                         is_punct: np.ndarray) -> None:
        """Weight on [CLS], [SEP] and punctuation columns, over all rows (Clark et al. 2019)."""
        seq = attention.shape[-1]
        for name, key_mask in (("cls_share", is_cls), ("sep_share", is_sep), ("punct_share", is_punct)):
            self.add(name, attention[..., key_mask].sum(axis=(-1, -2)), seq)  # (layers, heads, seq, keys) summed

    def add_spread(self, attention: np.ndarray, distance: np.ndarray, causal: bool) -> None:
        """Row entropy next to uniform attention's, and the expected distance |i - j| (Clark et al. 2019)."""
        seq = attention.shape[-1]
        row_entropy = -(attention * np.log(np.where(attention > 0, attention, 1.0))).sum(-1)  # (layers, heads, seq)
        self.add("entropy", row_entropy.sum(-1), seq)
        self.add("uniform_entropy", np.log(np.arange(1, seq + 1)).sum() if causal else seq * math.log(seq), seq)
        self.add("mean_distance", (attention * distance).sum(axis=(-1, -2)), seq)

    def add_patterns(self, attention: np.ndarray, distance: np.ndarray, content: np.ndarray, fixed: np.ndarray,
                     segments: np.ndarray, causal: bool) -> None:
        """Vertical / diagonal / block shares of content rows and their uniform chance level (Kovaleva et al. 2019)."""
        seq = attention.shape[-1]
        n_content = int(content.sum())
        content_rows = attention[..., content, :]  # (layers, heads, n_content, seq)
        uniform_rows = (np.tril(np.ones((seq, seq))) if causal else np.ones((seq, seq)))[content]  # (n_content, seq)
        uniform_rows /= uniform_rows.sum(-1, keepdims=True)
        key_sets = {  # each (n_content, seq): which keys count for the share
            # a fixed token right next to the query fits both patterns, so it counts for neither
            "diagonal": (distance[content] <= 1) & ~fixed[None, :],  # previous, same, next
            "vertical": (distance[content] >= 2) & fixed[None, :],  # fixed tokens off the diagonal
            "block": (segments[content][:, None] == segments[None, :]) & content[None, :],  # own segment
        }
        for name, keys in key_sets.items():
            self.add(f"{name}_share", (content_rows * keys).sum(axis=(-1, -2)), n_content)
            self.add(f"uniform_{name}", (uniform_rows * keys).sum(), n_content)

    def add_rare_tokens(self, attention: np.ndarray, content: np.ndarray, frequency: np.ndarray) -> None:
        """Share of content rows whose maximum is on the sentence's least frequent token (Voita et al. 2019)."""
        frequency = np.where(content, frequency, np.inf)
        rarest = content & (frequency == frequency.min())  # (seq,)
        top_key = attention[..., content, :].argmax(-1)  # (layers, heads, n_content)
        self.add("rare_token_argmax_rate", rarest[top_key].sum(-1), int(content.sum()))

    def add_relations(self, words: np.ndarray, sentence: AnnotatedSentence) -> None:
        """Most-attended-word accuracy per relation and direction, on a word-level map (Clark et al. 2019)."""
        top_word = words.argmax(-1)  # (layers, heads, n_words): the word each word attends to most
        for relation in sentence.relations:
            if relation.kind == "pron_antecedent":
                continue  # scored among the candidates by add_pronoun
            self.offset_counts[relation.kind][relation.target - relation.source] += 1
            self.add(f"{relation.kind}_acc", top_word[..., relation.source] == relation.target, 1, relation.kind)
            self.add(f"{_reverse_name(relation.kind)}_acc", top_word[..., relation.target] == relation.source, 0,
                     relation.kind)  # the same instance, counted once

    def add_pronoun(self, words: np.ndarray, sentence: AnnotatedSentence) -> None:
        """Does the pronoun's row give the antecedent the most weight among the candidates?"""
        candidates = np.array(sentence.candidates)
        pick = candidates[words[..., sentence.pronoun, candidates].argmax(-1)]  # (layers, heads)
        self.add("pron_antecedent_acc", pick == sentence.antecedent, 1, "pron_antecedent")
        self.pronoun_baseline_hits += nearest_candidate_before(sentence) == sentence.antecedent


def head_role_table(
    records: Iterable[RecordLike],
    *,
    cls_token: str = "[CLS]",
    sep_token: str = "[SEP]",
    continuation_prefix: str = "##",
    offsets: Sequence[int] = tuple(range(-5, 6)),
    causal: bool = False,
    ignore_self: bool = False,
    token_counts: Mapping[str, int] | None = None,
    min_relation_count: int = 10,
) -> pd.DataFrame:
    """Score every head of a model over a corpus: one tidy row per (layer, head) (chapter 3, empirical head roles).

    ``records`` yields :class:`~mha.pretrained.attention_record.AttentionRecord` objects (or mappings / objects
    with ``attention`` (layers, heads, seq, seq), ``tokens``, ``word_ids`` and
    optional ``sentence``), one sentence each. Token scores average over
    every query row of every sentence; relation scores use word-level maps
    (:func:`mha.pretrained.word_maps.word_attention`, special tokens dropped; with
    ``ignore_self`` a word's own column is excluded from its argmax) and
    fixed-offset baselines over ``offsets``. Ties in an argmax go to the
    earliest position. ``token_counts`` (token -> corpus frequency) defines
    rare tokens, by default the records' own counts; ``causal`` makes the
    uniform reference of row ``i`` spread over keys ``0..i``;
    ``min_relation_count`` is the fewest gold pairs a relation needs to
    compete for ``best_relation``. Returns a DataFrame of layers * heads rows
    whose columns :data:`COLUMN_DESCRIPTIONS` describes (relation columns
    once per prefix of :data:`RELATION_DIRECTIONS`), with ``attrs`` holding
    ``n_sentences``, ``n_annotated`` and ``n_tokens``.
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    records = [as_record(item, i) for i, item in enumerate(records)]
    if not records:
        raise ValueError("records is empty; give at least one sentence's attention to score the heads.")
    offsets = [k for k in offsets if k != 0]
    if token_counts is None:
        token_counts = Counter(t for r in records for t, w in zip(r.tokens, r.word_ids, strict=True) if w is not None)

    sums: _ScoreSums | None = None
    n_annotated = n_tokens = 0
    for index, record in enumerate(records):
        attention = check_record(record, index, sums.shape if sums else None)  # (layers, heads, seq, seq)
        sums = sums or _ScoreSums(attention.shape[:2])
        seq = attention.shape[-1]
        n_tokens += seq
        tokens, word_ids = list(record.tokens), list(record.word_ids)
        content = np.array([w is not None for w in word_ids])  # (seq,): real word pieces, not special tokens
        is_punct = content & np.array([is_punctuation(t, continuation_prefix) for t in tokens])
        distance = np.abs(np.arange(seq)[:, None] - np.arange(seq)[None, :])  # (seq_q, seq_k): |i - j|

        # 1-5: token-level scores, every head at once
        sums.add_positions(attention)
        sums.add_fixed_tokens(attention, np.array([t == cls_token for t in tokens]),
                              np.array([t == sep_token for t in tokens]), is_punct)
        sums.add_spread(attention, distance, causal)
        sums.add_patterns(attention, distance, content, ~content | is_punct,
                          block_segments(tokens, word_ids, sep_token=sep_token), causal)
        sums.add_rare_tokens(attention, content, np.array([token_counts.get(t, 0) for t in tokens], dtype=float))

        # 6-7: relations on the word-level map (sum over a word's columns, mean over its rows)
        sentence = record.sentence
        if sentence is None:
            continue
        n_words = len(word_units(word_ids))
        if n_words != len(sentence.words):
            raise ValueError(
                f"record {index}: word_ids name {n_words} words but the gold sentence has {len(sentence.words)} "
                f"({sentence.text!r}); tokenize the gold words themselves (e.g. is_split_into_words=True) so the "
                "word ids index sentence.words."
            )
        n_annotated += 1
        words = word_attention(attention, word_ids)  # (layers, heads, n_words, n_words)
        if ignore_self:
            words = np.where(np.eye(n_words, dtype=bool), -np.inf, words)
        sums.add_relations(words, sentence)
        if sentence.pronoun is not None and sentence.candidates and sentence.antecedent is not None:
            sums.add_pronoun(words, sentence)

    frame = pd.DataFrame(_table_columns(sums, offsets, min_relation_count))
    frame.attrs.update(n_sentences=len(records), n_annotated=n_annotated, n_tokens=n_tokens)
    return frame


def _table_columns(sums: _ScoreSums, offsets: Sequence[int],
                   min_relation_count: int) -> dict[str, np.ndarray | list[str]]:
    """Averages, baselines and labels: the columns of :func:`head_role_table`, in order."""
    n_layers, n_heads = sums.shape
    n_rows = n_layers * n_heads
    layer, head = np.meshgrid(np.arange(n_layers), np.arange(n_heads), indexing="ij")
    table: dict[str, np.ndarray | list[str]] = {"layer": layer.ravel(), "head": head.ravel()}
    for name in ("prev_token_share", "same_token_share", "next_token_share", "prev_token_argmax_rate",
                 "next_token_argmax_rate", "cls_share", "sep_share", "punct_share", "entropy", "uniform_entropy"):
        table[name] = sums.mean(name)
    table["entropy_ratio"] = table["entropy"] / table["uniform_entropy"]
    for name in ("mean_distance", "vertical_share", "diagonal_share", "block_share", "uniform_vertical",
                 "uniform_diagonal", "uniform_block", "rare_token_argmax_rate"):
        table[name] = sums.mean(name)
    table["pattern"] = [
        pattern_label(v, d, b, uniform_vertical=uv, uniform_diagonal=ud, uniform_block=ub)
        for v, d, b, uv, ud, ub in zip(*(table[name] for name in (
            "vertical_share", "diagonal_share", "block_share", "uniform_vertical", "uniform_diagonal", "uniform_block",
    )), strict=True)
    ]
    most_positional = np.maximum(table["prev_token_argmax_rate"], table["next_token_argmax_rate"])
    table["positional"] = most_positional >= POSITIONAL_ARGMAX_MIN

    gains = {}  # relation prefix -> (layers * heads,) accuracy minus its baseline
    for prefix, kind, direction in RELATION_DIRECTIONS:
        n = sums.counts[kind]
        sign = 1 if direction == "source_to_target" else -1
        oriented = Counter({sign * k: v for k, v in sums.offset_counts[kind].items()})
        baseline, offset = best_offset(oriented, n, offsets)
        table[f"{prefix}_acc"] = sums.mean(f"{prefix}_acc", kind)
        table[f"{prefix}_baseline_acc"] = np.full(n_rows, baseline)
        table[f"{prefix}_baseline_offset"] = np.full(n_rows, offset)
        if direction == "target_to_source":
            table[f"{kind}_count"] = np.full(n_rows, n)
        if n >= min_relation_count:
            gains[prefix] = table[f"{prefix}_acc"] - baseline
    n_pronouns = sums.counts["pron_antecedent"]
    pronoun_baseline = sums.pronoun_baseline_hits / n_pronouns if n_pronouns else math.nan
    table["pron_antecedent_acc"] = sums.mean("pron_antecedent_acc", "pron_antecedent")
    table["pron_antecedent_baseline_acc"] = np.full(n_rows, pronoun_baseline)
    table["pron_antecedent_count"] = np.full(n_rows, n_pronouns)
    if n_pronouns >= min_relation_count:
        gains["pron_antecedent"] = table["pron_antecedent_acc"] - pronoun_baseline

    if gains:
        names = list(gains)
        gain_matrix = np.stack([gains[name] for name in names], axis=1)  # (layers * heads, relations)
        best = np.where(np.isnan(gain_matrix), -np.inf, gain_matrix).argmax(axis=1)
        table["best_relation"] = [names[b] for b in best]
        table["best_relation_acc"] = np.array([table[f"{names[b]}_acc"][row] for row, b in enumerate(best)])
        table["best_relation_gain"] = gain_matrix[np.arange(n_rows), best]
    else:
        table["best_relation"] = [None] * n_rows
        table["best_relation_acc"] = np.full(n_rows, math.nan)
        table["best_relation_gain"] = np.full(n_rows, math.nan)
    table["syntactic"] = table["best_relation_gain"] >= SYNTACTIC_GAIN_MIN
    return table


def relation_scores_long(table: pd.DataFrame) -> pd.DataFrame:
    """The relation columns of :func:`head_role_table` in long form (chapter 3, empirical head roles).

    One row per (layer, head, relation direction) with columns ``layer``,
    ``head``, ``relation`` (the column prefix, e.g. ``noun_det``: the noun's
    row, the determiner's column), ``kind``, ``direction``, ``acc``,
    ``baseline_acc``, ``baseline_offset``, ``gain`` (acc - baseline_acc) and
    ``count``; pronoun rows have direction ``"pronoun_to_candidates"`` and a
    NaN offset. Handy for plotting heads against their baselines.
    """
    check_type("table", table, pd.DataFrame, "the table of head_role_table(records)")
    parts = []
    for prefix, kind, direction in RELATION_DIRECTIONS:
        parts.append(pd.DataFrame({
            "layer": table["layer"], "head": table["head"], "relation": prefix, "kind": kind, "direction": direction,
            "acc": table[f"{prefix}_acc"], "baseline_acc": table[f"{prefix}_baseline_acc"],
            "baseline_offset": table[f"{prefix}_baseline_offset"].astype(float), "count": table[f"{kind}_count"],
        }))
    parts.append(pd.DataFrame({
        "layer": table["layer"], "head": table["head"], "relation": "pron_antecedent", "kind": "pron_antecedent",
        "direction": "pronoun_to_candidates", "acc": table["pron_antecedent_acc"],
        "baseline_acc": table["pron_antecedent_baseline_acc"], "baseline_offset": math.nan,
        "count": table["pron_antecedent_count"],
    }))
    long = pd.concat(parts, ignore_index=True)
    long["gain"] = long["acc"] - long["baseline_acc"]
    columns = ["layer", "head", "relation", "kind", "direction", "acc", "baseline_acc", "baseline_offset", "gain",
               "count"]
    return long[columns]


#: what each array of :func:`sentence_head_scores` holds, per sentence and head. A name that starts ``content_``
#: averages the content rows only (word pieces, not [CLS] or [SEP]); the pooled table's ``prev_token_share``,
#: ``same_token_share`` and ``next_token_share`` (:data:`COLUMN_DESCRIPTIONS`) average the rows of [CLS] and [SEP]
#: too.
SENTENCE_SCORES: dict[str, str] = {
    "cls_share": "mean over all rows of the weight on [CLS]",
    "sep_share": "mean over all rows of the weight on [SEP]",
    "punct_share": "mean over all rows of the weight on punctuation tokens",
    "special_share": "cls_share + sep_share + punct_share: the fixed tokens a head can park its weight on",
    "content_same_token_share": "mean over content rows of the weight a word piece puts on itself (copying, 3.1)",
    "content_same_token_argmax_rate": "share of content rows whose largest weight is on the token itself",
    "content_neighbour_share": "mean over content rows of the weight on the previous plus the next token",
    "content_prev_token_share": "mean over content rows of the weight on the token just before (a previous-token "
                                "head, 3.1)",
    "strongest_link": "the largest weight from one word's piece to a piece of a different word ([CLS], [SEP] left out)",
    "rows": "(sentences,) number of rows (tokens, [CLS] and [SEP] included): the weight of an all-rows score",
    "content_rows": "(sentences,) number of content rows: the weight of a content-row score",
}


def sentence_head_scores(records: Iterable[RecordLike], *, cls_token: str = "[CLS]", sep_token: str = "[SEP]",
                         continuation_prefix: str = "##") -> dict[str, np.ndarray]:
    """Token-level scores of every head, one value per sentence (3.1 "A tour of all 72 heads").

    :func:`head_role_table` pools the rows of all sentences; to put a bootstrap interval over sentences on a
    score, each sentence needs its own value. Returns a dict, keyed as :data:`SENTENCE_SCORES` describes, of
    arrays (sentences, layers, heads), and ``rows`` and ``content_rows`` (sentences,), the number of rows each
    sentence's score averages: weighting by them gives back the pooled means of :func:`head_role_table`.
    "Content rows" are the rows of real word pieces (not [CLS] or [SEP]).
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    records = [as_record(item, i) for i, item in enumerate(records)]
    if not records:
        raise ValueError("records is empty; give at least one sentence's attention to score the heads.")
    scores: dict[str, list[np.ndarray]] = {name: [] for name in SENTENCE_SCORES}
    shape = None
    for index, record in enumerate(records):
        attention = check_record(record, index, shape)  # (layers, heads, seq, seq)
        shape = attention.shape[:2]
        seq = attention.shape[-1]
        tokens = list(record.tokens)
        content = np.array([w is not None for w in record.word_ids])  # (seq,)
        if not content.any():
            raise ValueError(f"record {index} has no word pieces (every word id is None); give real sentences.")
        is_punct = content & np.array([is_punctuation(t, continuation_prefix) for t in tokens])
        for name, key_mask in (("cls_share", np.array([t == cls_token for t in tokens])),
                               ("sep_share", np.array([t == sep_token for t in tokens])), ("punct_share", is_punct)):
            scores[name].append(attention[..., key_mask].sum(-1).mean(-1))  # (layers, heads)
        scores["special_share"].append(scores["cls_share"][-1] + scores["sep_share"][-1] + scores["punct_share"][-1])
        diagonal = np.diagonal(attention, axis1=-2, axis2=-1)  # (layers, heads, seq): A[i, i]
        scores["content_same_token_share"].append(diagonal[..., content].mean(-1))
        scores["content_same_token_argmax_rate"].append((attention.argmax(-1) == np.arange(seq))[..., content].mean(-1))
        neighbours = np.zeros_like(diagonal)
        neighbours[..., 1:] += np.diagonal(attention, offset=-1, axis1=-2, axis2=-1)  # row i, column i - 1
        neighbours[..., :-1] += np.diagonal(attention, offset=1, axis1=-2, axis2=-1)  # row i, column i + 1
        scores["content_neighbour_share"].append(neighbours[..., content].mean(-1))
        previous = np.zeros_like(diagonal)
        previous[..., 1:] = np.diagonal(attention, offset=-1, axis1=-2, axis2=-1)  # row i, column i - 1
        scores["content_prev_token_share"].append(previous[..., content].mean(-1))
        words = np.array([-1 if w is None else w for w in record.word_ids])  # (seq,)
        between = content[:, None] & content[None, :] & (words[:, None] != words[None, :])  # (seq, seq)
        scores["strongest_link"].append(np.where(between, attention, 0.0).max(axis=(-2, -1)) if between.any()
                                        else np.zeros(attention.shape[:2]))
        scores["rows"].append(np.array(seq))
        scores["content_rows"].append(np.array(content.sum()))
    return {name: np.stack(values) for name, values in scores.items()}


def heads_above_thresholds(per_sentence: np.ndarray, thresholds: Sequence[float], *, rows=None,
                           n_resamples: int = 2000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """How many heads have a mean score at or above each threshold, with a bootstrap interval (3.1).

    ``per_sentence`` is (sentences, heads...) as from :func:`sentence_head_scores`; a head's score is its mean
    over sentences, weighted by ``rows`` (sentences,) when given (each sentence's number of rows, so that the
    score is the pooled mean over rows, as in :func:`head_role_table`). Sentences are resampled with replacement
    (the same resample for every head and threshold), ``n_resamples`` times
    (:func:`mha.core.resampling.bootstrap_counts`), and the count recomputed on each. Returns a
    DataFrame with one row per threshold: ``threshold``, ``heads`` (the count on all sentences), ``low`` and
    ``high`` (the percentile interval of the count at ``level``).
    """
    values = as_real_array("per_sentence", per_sentence)
    if values.ndim < 2 or values.shape[0] < 2:
        raise ValueError(f"per_sentence has shape {values.shape}; it should be (sentences, heads...) with at least "
                         "two sentences to resample.")
    thresholds = as_real_array("thresholds", thresholds)
    if thresholds.ndim != 1 or len(thresholds) == 0:
        raise ValueError("thresholds must be a non-empty list of numbers, e.g. (0.3, 0.5, 0.7).")
    if not 0 < check_share("level", level, meaning="the interval's confidence, e.g. 0.95") < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    flat = values.reshape(values.shape[0], -1)  # (sentences, heads)
    weights = np.ones(len(flat)) if rows is None else as_real_array("rows", rows)
    if weights.shape != (len(flat),) or (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f"rows must be one non-negative count per sentence, shape ({len(flat)},), not "
                         f"{weights.shape}; use sentence_head_scores(...)['rows'] or ['content_rows'].")
    multiplicity = bootstrap_counts(len(flat), n_resamples, seed)  # (resamples, sentences): times each is drawn
    resampled_weights = multiplicity * weights  # (resamples, sentences)
    means = resampled_weights @ flat / resampled_weights.sum(1, keepdims=True)  # (resamples, heads)
    counts = (means[:, None, :] >= thresholds[None, :, None]).sum(-1)  # (resamples, thresholds)
    tail = (1 - level) / 2
    low = np.quantile(counts, tail, axis=0, method="lower")  # counts are whole numbers: round outwards
    high = np.quantile(counts, 1 - tail, axis=0, method="higher")
    pooled = weights @ flat / weights.sum()  # (heads,)
    observed = (pooled[None, :] >= thresholds[:, None]).sum(-1)
    return pd.DataFrame({"threshold": thresholds, "heads": observed, "low": low.astype(int), "high": high.astype(int)})
