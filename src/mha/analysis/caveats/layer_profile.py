"""Which layer does what: per-layer profiles of head scores on real text, and the claim about depth (4.3 "Layer
dependence").

A popular summary of BERT-style encoders says that lower layers track position and syntax and higher layers
semantics and long-range links. This module turns the head scores of :mod:`mha.analysis.head_roles.role_table` into one
profile per layer, with intervals, and states for each claimed trend whether it holds on the measured model:

* :func:`sentence_scores` scores every head on every sentence on its own (one
  :func:`~mha.analysis.head_roles.role_table.head_role_table` per sentence), keeping, for the relation columns, the hits
  and the gold pairs rather than the accuracy, so that any set of sentences can be pooled again;
* :func:`relation_accuracy` and :func:`held_out_syntactic_gain` pool those counts: each head's relation and each
  relation's fixed-offset baseline (Clark et al. 2019) are chosen on a *selection* set of sentences and the gain is
  reported on the other, *report*, set;
* the intervals come from resampling sentences with replacement, the same resamples for every layer and every
  score (:func:`mha.core.resampling.bootstrap_counts`, drawn as :func:`mha.analysis.statistics.bootstrap_interval`
  draws them), with :func:`~mha.analysis.statistics.resampled_means`,
  :func:`~mha.analysis.statistics.resampled_ratios` and :func:`~mha.analysis.statistics.percentile_interval`, which
  reads a 95% interval from them;
* :func:`word_key_distance` measures the attention distance with ``[CLS]`` and ``[SEP]`` removed as keys (each row
  renormalised over the word pieces), so that weight parked on the two ends of a sentence is not read as a long link;
* :func:`depth_trend` and :func:`trend_verdict` compare early with late layers and give a verdict, by a rule
  stated in :func:`trend_verdict`; :func:`depth_trend` also gives the rank correlation of the profile with depth
  and its interval over the same resamples (how steady the trend is);
* :func:`claim_verdict` joins the verdicts on the parts of the claim into one, by the rule it states.

:func:`selection_report_split` gives the two sets as sorted indices (:func:`mha.corpora.treebank.split_sentences`).
The notebooks of chapter 4 import those resampling tools from where they are defined, not from here.
Direction convention, as everywhere in :mod:`mha`: rows are queries (attend FROM), columns keys (attended TO).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata, spearmanr

from mha.analysis.head_roles.role_table import RELATION_DIRECTIONS, head_role_table
from mha.analysis.statistics import percentile_interval
from mha.core.resampling import bootstrap_counts
from mha.core.validation import as_real_array, check_items, check_size, check_type, check_whole_number
from mha.corpora.treebank import split_sentences
from mha.pretrained.attention_record import AttentionRecord

__all__ = [
    "BASELINE_OFFSETS",
    "LAYER_CLAIMS",
    "LayerClaim",
    "HeldOutGain",
    "SentenceScores",
    "selection_report_split",
    "sentence_scores",
    "relation_accuracy",
    "held_out_syntactic_gain",
    "word_key_distance",
    "depth_trend",
    "trend_verdict",
    "claim_table",
    "claim_verdict",
    "VERDICTS",
]

#: offsets (in words) a fixed-offset baseline may use, as in head_role_table's default
BASELINE_OFFSETS: tuple[int, ...] = tuple(k for k in range(-5, 6) if k != 0)

VERDICTS: tuple[str, ...] = ("holds", "holds with a qualifier", "fails on this model")


@dataclass(frozen=True)
class LayerClaim:
    """One trend the popular claim predicts: ``metric`` rises (``direction`` +1) or falls (-1) with depth."""

    metric: str
    direction: int
    claim: str


#: the trends the claim "lower layers: position and syntax; higher layers: semantics and long-range links" predicts
LAYER_CLAIMS: tuple[LayerClaim, ...] = (
    LayerClaim("positional share", -1, "lower layers attend by position (to the neighbouring tokens)"),
    LayerClaim("syntactic gain", -1, "lower layers follow grammatical relations"),
    LayerClaim("distance", +1, "higher layers make long-range links (attend further away)"),
    LayerClaim("entropy", +1, "higher layers integrate broadly (attention spread over more tokens)"),
    LayerClaim("related words", +1, "higher layers link words by meaning (related pairs attend to each other more)"),
)


def selection_report_split(n_items: int, *, selection_fraction: float = 0.5,
                           seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a selection set and a report set, each sorted: :func:`mha.corpora.treebank.split_sentences` of
    ``range(n_items)``, the same seeded split (section 4.3).

    Choose on the selection set (which relation a head follows, which offset is the baseline, which head is best)
    and report on the other, so that the choice is not graded on the data that made it.
    """
    n_items = check_whole_number("n_items", n_items, minimum=2, meaning="one item for each of the two sets")
    check_size("the item indices to split", (n_items,))
    selection, report = split_sentences(range(n_items), selection_fraction, seed)
    return np.sort(np.asarray(selection, dtype=int)), np.sort(np.asarray(report, dtype=int))


@dataclass(frozen=True)
class SentenceScores:
    """Every head scored on every sentence on its own (section 4.3).

    ``values[column]`` is (sentences, layers, heads) for each requested column of
    :func:`~mha.analysis.head_roles.role_table.head_role_table`. For the relations, ``prefixes`` names the relation
    directions (column prefixes such as ``noun_det``), ``relation_hits`` (sentences, prefixes, layers, heads) counts
    the gold pairs whose row's most-attended word is the gold word, ``relation_counts`` (sentences, prefixes) the
    gold pairs, and ``offset_counts`` (sentences, prefixes, offsets) how many of them lie at each fixed offset of
    ``offsets`` in the direction read (the pairs a fixed-offset baseline gets right).
    """

    values: dict[str, np.ndarray]
    prefixes: tuple[str, ...]
    relation_hits: np.ndarray
    relation_counts: np.ndarray
    offset_counts: np.ndarray
    offsets: tuple[int, ...]

    @property
    def n_sentences(self) -> int:
        return self.relation_counts.shape[0]


def sentence_scores(records: Iterable[AttentionRecord], columns: Sequence[str] = (
        "prev_token_share", "next_token_share", "cls_share", "sep_share", "entropy_ratio", "mean_distance"),
        *, offsets: Sequence[int] = BASELINE_OFFSETS) -> SentenceScores:
    """Score every head on each sentence alone, with :func:`~mha.analysis.head_roles.role_table.head_role_table`
    (section 4.3).

    ``records`` are attention records with gold sentences (e.g. from
    :func:`mha.pretrained.corpus_encoding.encode_records` on a treebank). ``columns`` are token-level columns of
    the role table to keep per sentence. Relation scores keep their hits and counts (see :class:`SentenceScores`),
    which pool across sentences exactly as the role table pools them.
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    records = list(records)
    if not records:
        raise ValueError("records is empty; give at least one sentence's attention record.")
    columns = list(columns)
    prefixes = tuple(prefix for prefix, _, _ in RELATION_DIRECTIONS)
    offsets = tuple(int(k) for k in offsets)
    values: dict[str, list[np.ndarray]] = {column: [] for column in columns}
    hits, counts, offset_counts = [], [], []
    for index, record in enumerate(records):
        if record.sentence is None:
            raise ValueError(f"record {index} has no gold sentence; relation scores need the treebank's annotation.")
        table = head_role_table([record])
        shape = (int(table["layer"].max()) + 1, int(table["head"].max()) + 1)
        missing = [column for column in columns if column not in table.columns]
        if missing:
            raise ValueError(f"unknown columns {missing}; choose among the role table's columns, e.g. "
                             "'prev_token_share', 'cls_share', 'entropy_ratio', 'mean_distance'.")
        for column in columns:
            values[column].append(table[column].to_numpy(dtype=float).reshape(shape))
        sentence_hits, sentence_counts, sentence_offsets = [], [], []
        for prefix, kind, direction in RELATION_DIRECTIONS:
            count = int(table[f"{kind}_count"].iloc[0])
            accuracy = np.nan_to_num(table[f"{prefix}_acc"].to_numpy(dtype=float)).reshape(shape)
            sentence_hits.append(np.rint(accuracy * count))  # (layers, heads): pairs this head gets right
            sentence_counts.append(count)
            sign = 1 if direction == "source_to_target" else -1
            gaps = [sign * (r.target - r.source) for r in record.sentence.relations_of(kind)]
            sentence_offsets.append([gaps.count(k) for k in offsets])
        hits.append(sentence_hits)
        counts.append(sentence_counts)
        offset_counts.append(sentence_offsets)
    return SentenceScores(
        values={column: np.stack(stacked) for column, stacked in values.items()},  # each (sentences, layers, heads)
        prefixes=prefixes,
        relation_hits=np.array(hits, dtype=float),  # (sentences, prefixes, layers, heads)
        relation_counts=np.array(counts, dtype=float),  # (sentences, prefixes)
        offset_counts=np.array(offset_counts, dtype=float),  # (sentences, prefixes, offsets)
        offsets=offsets,
    )


def relation_accuracy(hits: np.ndarray, counts: np.ndarray,
                      offset_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pooled accuracy and best fixed-offset baseline of every relation direction (section 4.3).

    ``hits`` (sentences, prefixes, layers, heads), ``counts`` (sentences, prefixes) and ``offset_counts``
    (sentences, prefixes, offsets), as in :class:`SentenceScores`, for the sentences to pool. Returns ``accuracy``
    (prefixes, layers, heads), ``baseline`` (prefixes,): the share of pairs the best single offset gets right, and
    ``best_offset`` (prefixes,): the index of that offset (ties: the first). A relation with no pair gets NaN.
    """
    hits, counts = as_real_array("hits", hits), as_real_array("counts", counts)
    offset_counts = as_real_array("offset_counts", offset_counts)
    pairs = counts.sum(axis=0)  # (prefixes,)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = hits.sum(axis=0) / pairs[:, None, None]  # (prefixes, layers, heads)
        at_offset = offset_counts.sum(axis=0) / pairs[:, None]  # (prefixes, offsets)
    best_offset = np.nan_to_num(at_offset, nan=-1.0).argmax(axis=1)  # (prefixes,)
    baseline = at_offset[np.arange(len(pairs)), best_offset]
    return accuracy, baseline, best_offset


@dataclass(frozen=True)
class HeldOutGain:
    """What :func:`held_out_syntactic_gain` measured (section 4.3).

    ``relation`` (layers, heads) names each head's relation direction, chosen on the selection sentences, where
    its gain was ``selection_gain`` (layers, heads); ``gain`` (layers, heads) is that relation's gain on the report
    sentences and ``resampled`` (resamples, layers, heads) the same in each bootstrap resample of them.
    """

    relation: np.ndarray
    selection_gain: np.ndarray
    gain: np.ndarray
    resampled: np.ndarray


def held_out_syntactic_gain(scores: SentenceScores, selection: np.ndarray, report: np.ndarray, *,
                            min_count: int = 10, n_resamples: int = 1000, seed: int = 0) -> HeldOutGain:
    """Each head's gain over the fixed-offset baseline, chosen on ``selection`` and measured on ``report`` (4.3).

    On the selection sentences each head gets the relation direction with the largest accuracy minus baseline
    (among those with at least ``min_count`` gold pairs there), and each relation its best offset. On the report
    sentences the gain of that relation, over that offset, is measured. The report sentences are resampled
    ``n_resamples`` times (:func:`bootstrap_counts`). Returns a :class:`HeldOutGain`.
    """
    selection, report = np.asarray(selection), np.asarray(report)
    if len(selection) == 0 or len(report) == 0:
        raise ValueError("selection and report each need at least one sentence.")
    if np.intersect1d(selection, report).size:
        raise ValueError("selection and report share sentences; choose on one set and report on another.")
    accuracy, baseline, best_offset = relation_accuracy(
        scores.relation_hits[selection], scores.relation_counts[selection], scores.offset_counts[selection])
    eligible = scores.relation_counts[selection].sum(axis=0) >= min_count  # (prefixes,)
    if not eligible.any():
        raise ValueError(f"no relation has {min_count} gold pairs in the selection sentences; lower min_count.")
    gain = np.where(eligible[:, None, None], accuracy - baseline[:, None, None], -np.inf)  # (prefixes, layers, heads)
    choice = gain.argmax(axis=0)  # (layers, heads): index of each head's relation

    def report_gain(weights: np.ndarray) -> np.ndarray:
        """weights (resamples, report sentences) -> gain (resamples, layers, heads) of each head's relation."""
        hits = np.einsum("rn,nplh->rplh", weights, scores.relation_hits[report])  # (resamples, prefixes, L, H)
        pairs = weights @ scores.relation_counts[report]  # (resamples, prefixes)
        at_offset = np.einsum("rn,np->rp", weights,
                              scores.offset_counts[report][:, np.arange(len(best_offset)), best_offset])
        with np.errstate(invalid="ignore", divide="ignore"):
            accuracy_r = hits / pairs[:, :, None, None]
            baseline_r = at_offset / pairs  # (resamples, prefixes): the selection's offset, scored on the report set
        gains = accuracy_r - baseline_r[:, :, None, None]
        return np.take_along_axis(gains, choice[None, None], axis=1)[:, 0]  # (resamples, layers, heads)

    return HeldOutGain(relation=np.array(scores.prefixes, dtype=object)[choice],
                       selection_gain=np.take_along_axis(gain, choice[None], axis=0)[0],
                       gain=report_gain(np.ones((1, len(report))))[0],
                       resampled=report_gain(bootstrap_counts(len(report), n_resamples, seed)))


def word_key_distance(records: Iterable[AttentionRecord]) -> np.ndarray:
    """Expected attention distance, in tokens, with ``[CLS]`` and ``[SEP]`` removed as keys: (sentences, layers, heads).

    For each record (one sentence, ``attention`` (layers, heads, seq, seq)), the columns of the special tokens
    (``word_ids`` None) are dropped and each row's remaining weight is renormalised to sum to 1; the score is the
    mean over all rows (the special tokens' rows included, as in the role table's ``mean_distance``) of the
    expected ``|i - j|`` under that renormalised row. Positions stay those of the full token sequence. Section 4.3.
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    if not records:
        raise ValueError("records is empty: pass at least one attention record (encode_records(encoder, sentences)).")
    distances = []
    for index, record in enumerate(records):
        attention = as_real_array(f"records[{index}].attention", record.attention, meaning="(layers, heads, seq, seq)")
        words = np.array([w is not None for w in record.word_ids])  # (seq,): the keys kept
        if attention.ndim != 4 or attention.shape[-1] != len(words) or not words.any():
            raise ValueError(f"record {index}: attention {attention.shape} should be (layers, heads, seq, seq) with "
                             f"seq = {len(words)} tokens, at least one of them a word piece.")
        seq = len(words)
        distance = np.abs(np.arange(seq)[:, None] - np.arange(seq)[None, words])  # (seq queries, word keys)
        kept = attention[..., words]  # (layers, heads, seq, word keys)
        with np.errstate(invalid="ignore", divide="ignore"):
            rows = (kept * distance).sum(-1) / kept.sum(-1)  # (layers, heads, seq): renormalised expectation
        distances.append(np.nanmean(rows, axis=-1))  # a row with no weight on any word (never in practice) skipped
    return np.stack(distances)  # (sentences, layers, heads)


def depth_trend(layer_values, resampled, *, early: Sequence[int] = (0, 1), late: Sequence[int] = (4, 5),
                level: float = 0.95) -> dict[str, float]:
    """How a per-layer score changes with depth: late minus early layers, with an interval, and a rank correlation.

    ``layer_values`` (layers,) is the score of each layer, ``resampled`` (resamples, layers) the same score in
    each bootstrap resample. Returns ``difference`` (mean of the ``late`` layers minus mean of the ``early``
    ones), its percentile interval ``low`` and ``high``, ``rank_correlation``: Spearman's correlation of the
    layer values with the layer index (+1: rises at every layer; -1: falls at every layer), and ``rank_low`` and
    ``rank_high``: the percentile interval of that correlation over the resamples, each resample's layer values
    ranked on their own (ties: average ranks). Section 4.3.
    """
    layer_values = as_real_array("layer_values", layer_values)
    resampled = as_real_array("resampled", resampled)
    n_layers = layer_values.shape[0] if layer_values.ndim else 0
    if layer_values.ndim != 1 or resampled.ndim != 2 or resampled.shape[1] != n_layers:
        raise ValueError(f"layer_values {layer_values.shape} should be (layers,) and resampled {resampled.shape} "
                         "(resamples, layers).")
    early, late = list(early), list(late)
    if not early or not late or set(early) & set(late) or not all(0 <= l < n_layers for l in early + late):
        raise ValueError(f"early {early} and late {late} must be non-empty, disjoint lists of layers in "
                         f"0..{n_layers - 1}.")
    difference = layer_values[late].mean() - layer_values[early].mean()
    low, high = percentile_interval(resampled[:, late].mean(axis=1) - resampled[:, early].mean(axis=1), level)
    rank_correlation = float(spearmanr(np.arange(n_layers), layer_values)[0])
    ranks = rankdata(resampled, axis=1) - (n_layers + 1) / 2  # (resamples, layers), centred
    depth = np.arange(n_layers) - (n_layers - 1) / 2
    with np.errstate(invalid="ignore", divide="ignore"):  # a resample whose layers all tie has no correlation
        resampled_rank = ranks @ depth / (np.linalg.norm(ranks, axis=1) * np.linalg.norm(depth))
    rank_low, rank_high = percentile_interval(resampled_rank[np.isfinite(resampled_rank)], level)
    return {"difference": float(difference), "low": float(low), "high": float(high),
            "rank_correlation": rank_correlation, "rank_low": float(rank_low), "rank_high": float(rank_high)}


def trend_verdict(low: float, high: float, rank_correlation: float, direction: int, *,
                  min_rank_correlation: float = 0.8) -> str:
    """The verdict on a claimed trend, by a stated rule (section 4.3).

    ``low`` and ``high`` bound the late-minus-early difference (:func:`depth_trend`), ``direction`` is the claimed
    sign (+1: rises with depth, -1: falls). The claim **holds** when the whole interval lies on the claimed side
    of 0 and the layer values follow the claimed direction at least as closely as ``min_rank_correlation``
    (Spearman, sign-adjusted); it **holds with a qualifier** when the interval is on the claimed side but the
    profile is not that orderly (a peak in the middle, one layer against the trend); otherwise it **fails on this
    model** (the interval includes 0 or lies on the other side).
    """
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 (rises with depth) or -1 (falls with depth), got {direction!r}.")
    if not low <= high:
        raise ValueError(f"low ({low}) must not be above high ({high}).")
    on_claimed_side = low > 0 if direction == 1 else high < 0
    if not on_claimed_side:
        return VERDICTS[2]
    return VERDICTS[0] if direction * rank_correlation >= min_rank_correlation else VERDICTS[1]


def claim_table(profiles: dict[str, tuple[np.ndarray, np.ndarray]], claims: Sequence[LayerClaim] = LAYER_CLAIMS, *,
                early: Sequence[int] = (0, 1), late: Sequence[int] = (4, 5),
                min_rank_correlation: float = 0.8) -> pd.DataFrame:
    """One row per claim: the per-layer values, the late-minus-early difference with its interval, the verdict.

    ``profiles[metric]`` is ``(layer_values (layers,), resampled (resamples, layers))`` for each claim's
    ``metric``. Section 4.3.
    """
    check_type("profiles", profiles, Mapping, "a dict of (values, resampled) by metric")
    rows = []
    for claim in claims:
        if claim.metric not in profiles:
            raise ValueError(f"no profile for {claim.metric!r}; profiles has {sorted(profiles)}.")
        values, resampled = profiles[claim.metric]
        trend = depth_trend(values, resampled, early=early, late=late)
        row = {"metric": claim.metric, "claim": claim.claim,
               **{f"layer {layer}": float(v) for layer, v in enumerate(values)},
               "late - early": trend["difference"], "95% low": trend["low"], "95% high": trend["high"],
               "rank correlation": trend["rank_correlation"], "rank 95% low": trend["rank_low"],
               "rank 95% high": trend["rank_high"],
               "verdict": trend_verdict(trend["low"], trend["high"], trend["rank_correlation"], claim.direction,
                                        min_rank_correlation=min_rank_correlation)}
        rows.append(row)
    return pd.DataFrame(rows)


def claim_verdict(parts: Mapping[str, str], untested: Sequence[str] = ()) -> tuple[str, str | None]:
    """One verdict on a claim made of parts, from each tested part's verdict, by a stated rule (section 4.3).

    ``parts`` maps each tested part of the claim (e.g. ``"position"``) to its verdict (one of :data:`VERDICTS`);
    ``untested`` names the parts the measurements do not test as the claim states them. The claim **fails on this
    model** when any tested part fails (the qualifier names those parts); it **holds** when every part is tested
    and holds; otherwise it **holds with a qualifier**, which names the parts that hold only with a qualifier and
    those not tested. Returns ``(verdict, qualifier)`` for :func:`mha.book.glue_verdict`.
    """
    check_type("parts", parts, Mapping, "a dict of verdicts by part of the claim")
    if not parts:
        raise ValueError("parts is empty; give the verdict of at least one tested part of the claim.")
    unknown = {name: verdict for name, verdict in parts.items() if verdict not in VERDICTS}
    if unknown:
        raise ValueError(f"verdicts {unknown} are not among {VERDICTS}; give each part's trend_verdict.")
    untested = list(check_items("untested", untested, "a list of the parts not tested")) if untested else []

    def listed(names: list[str]) -> str:
        return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]

    failing = [name for name, verdict in parts.items() if verdict == VERDICTS[2]]
    if failing:
        return VERDICTS[2], f"{listed(failing)} {'fails' if len(failing) == 1 else 'fail'}"
    qualified = [name for name, verdict in parts.items() if verdict == VERDICTS[1]]
    if not qualified and not untested:
        return VERDICTS[0], None
    clauses = ([f"{listed(qualified)} {'holds' if len(qualified) == 1 else 'hold'} only with a qualifier"]
               if qualified else []) + ([f"{listed(untested)} not tested"] if untested else [])
    return VERDICTS[1], "; ".join(clauses)
