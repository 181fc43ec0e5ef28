"""The popular story of head roles, on one famous sentence and then on real text (3.1 "A tour of all 72 heads").

Introductions to attention often run "The quick brown fox jumps over the lazy dog." through a model and find four
heads: one attends locally (*quick* to *The* and *brown*), one links the verb *jumps* to its subject *fox*, one
sends its weight to punctuation and special tokens, and one links related words (*fox* and *dog*). This module
scores every head on those four roles in that sentence (:func:`fox_role_weights`), plus punctuation alone, since a
head that parks its weight on [CLS] would otherwise pass for a punctuation head, and gives the rule that turns
a head's sentence weight and its score on real text into a verdict (:func:`role_verdict`). The real-text scores
come from :mod:`mha.analysis.head_roles.role_table`, :mod:`mha.analysis.head_roles.relations` and
:mod:`mha.analysis.coreference_and_content.relatedness`;
:func:`unit_bootstrap` puts a percentile interval over sentences on any of them.

Attention maps have shape (layers, heads, seq, seq), row = query (attends FROM), column = key (attended TO).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mha.core.argument_checks import check_items_of
from mha.core.layouts import LAYERS_HEADS, takes_attention
from mha.core.resampling import bootstrap_counts
from mha.core.validation import as_real_array, check_items, check_type, check_whole_number, is_real_number

__all__ = ["FOX_SENTENCE", "POPULAR_ROLES", "REAL_TEXT_RULES", "VERDICTS", "fox_role_weights", "real_text_role_scores",
           "role_verdict", "unit_bootstrap"]

FOX_SENTENCE = "The quick brown fox jumps over the lazy dog."

#: role -> what its sentence weight reads on the fox sentence
POPULAR_ROLES: dict[str, str] = {
    "local": "row 'quick': weight on 'the' (before it) + 'brown' (after it)",
    "subject": "row 'jumps': weight on its subject 'fox'",
    "punctuation and special": "mean over all rows of the weight on [CLS], [SEP] and '.'",
    "punctuation alone": "mean over all rows of the weight on '.', [CLS] and [SEP] left out",
    "related words": "mean of row 'fox' on 'dog' and row 'dog' on 'fox'",
}

#: role -> (what its real-text score measures, thresholds (loose, the one used, strict))
REAL_TEXT_RULES: dict[str, tuple[str, tuple[float, float, float]]] = {
    "local": ("weight of word-piece rows on the previous + next token", (0.3, 0.5, 0.7)),
    "subject": ("verb -> subject argmax accuracy minus the best fixed offset's", (0.05, 0.1, 0.2)),
    "punctuation and special": ("weight of all rows on [CLS], [SEP] and punctuation", (0.3, 0.5, 0.7)),
    "punctuation alone": ("weight of all rows on punctuation, [CLS] and [SEP] left out", (0.3, 0.5, 0.7)),
    "related words": ("distance-matched weight between two nouns, similar minus dissimilar input embeddings",
                      (0.02, 0.05, 0.1)),
}

VERDICTS = ("exists", "exists only for this sentence", "not found")


def _position(tokens: Sequence[str], token: str, start: int = 0) -> int:
    try:
        return list(tokens).index(token, start)
    except ValueError:
        raise ValueError(f"token {token!r} is not in {list(tokens)}; give the trace of FOX_SENTENCE "
                         "(lower-cased word pieces, as the uncased tokenizer writes them).") from None


@takes_attention(attention=LAYERS_HEADS)
def fox_role_weights(attention: np.ndarray, tokens: Sequence[str]) -> dict[str, np.ndarray]:
    """Every head's weight for each role of :data:`POPULAR_ROLES` on the fox sentence (3.1).

    ``attention`` is (layers, heads, seq, seq) for :data:`FOX_SENTENCE` and ``tokens`` its word pieces, with
    ``[CLS]`` and ``[SEP]``. Returns role -> (layers, heads) array of weights between 0 and 1.
    """
    attention = as_real_array("attention", attention)
    if attention.shape[-1] != len(tokens):
        raise ValueError(f"attention has shape {attention.shape} for {len(tokens)} tokens; it should be (layers, "
                         "heads, seq, seq) with seq = the number of tokens, rows = queries.")
    first_the, quick, brown = (_position(tokens, t) for t in ("the", "quick", "brown"))
    fox, jumps, dog = (_position(tokens, t) for t in ("fox", "jumps", "dog"))
    fixed = [j for j, t in enumerate(tokens) if t in ("[CLS]", "[SEP]", ".")]
    stop = [j for j, t in enumerate(tokens) if t == "."]
    return {
        "local": attention[..., quick, first_the] + attention[..., quick, brown],
        "subject": attention[..., jumps, fox],
        "punctuation and special": attention[..., fixed].sum(-1).mean(-1),  # (layers, heads)
        "punctuation alone": attention[..., stop].sum(-1).mean(-1),  # (layers, heads): a [CLS] sink scores 0 here
        "related words": (attention[..., fox, dog] + attention[..., dog, fox]) / 2,
    }


def role_verdict(sentence_weight: float, real_text_score: float, threshold: float, *,
                 sentence_threshold: float = 0.3) -> str:
    """The verdict on one role for the head that does it best on the fox sentence (3.1).

    ``"exists"`` when that head's score on real text reaches ``threshold`` (the role's own rule, stated where it
    is used); ``"exists only for this sentence"`` when it does not, but the head gives the role at least
    ``sentence_threshold`` of its weight on the sentence; ``"not found"`` otherwise.
    """
    for name, value in (("sentence_weight", sentence_weight), ("real_text_score", real_text_score),
                        ("threshold", threshold), ("sentence_threshold", sentence_threshold)):
        if not is_real_number(value):
            raise ValueError(f"{name} must be a number, got {value!r}.")
    if real_text_score >= threshold:
        return "exists"
    if sentence_weight >= sentence_threshold:
        return "exists only for this sentence"
    return "not found"


def unit_bootstrap(statistic: Callable[[np.ndarray], np.ndarray], n_units: int, *, n_resamples: int = 2000,
                   level: float = 0.95, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of any statistic of units (sentences) drawn with replacement (3.1).

    ``statistic(weights)`` takes the number of times each of the ``n_units`` units was drawn (an array
    (n_units,); all ones for the data as they are) and returns an array. It is called ``n_resamples`` times on
    the resamples of :func:`mha.core.resampling.bootstrap_counts`. Returns ``(low, high)`` at ``level``, each of the
    statistic's shape.
    """
    check_type("statistic", statistic, Callable, "a function of the units' resample counts")
    n_units = check_whole_number("n_units", n_units, minimum=2, meaning="units to resample")
    if not 0 < level < 1:
        raise ValueError(f"level must be between 0 and 1 (e.g. 0.95), got {level!r}.")
    counts = bootstrap_counts(n_units, n_resamples, seed)  # (resamples, units)
    values = np.stack([np.asarray(statistic(weights), dtype=float) for weights in counts])
    tail = (1 - level) / 2
    low, high = np.quantile(values, [tail, 1 - tail], axis=0)
    return low, high


def real_text_role_scores(records, trees, embeddings: np.ndarray,
                          vocabulary: dict[str, int]) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """Every head's score on each role of :data:`POPULAR_ROLES`, on real sentences, as resamplable statistics (3.1).

    ``records`` are the encoded treebank sentences (:func:`mha.pretrained.corpus_encoding.encode_records`, gold
    :class:`~mha.corpora.annotation.AnnotatedSentence` attached) and ``trees`` their
    :class:`~mha.corpora.treebank.UDTree` objects, in the same order; ``embeddings`` (vocabulary, d_model)
    and ``vocabulary`` give the words' input embeddings. Returns role -> ``statistic(weights)``, where ``weights``
    (sentences,) counts how often each sentence is drawn (all ones for the data as they are, see
    :func:`unit_bootstrap`) and the result is (layers, heads). What each score measures is
    :data:`REAL_TEXT_RULES`: "local" and "punctuation and special" are pooled shares
    (:func:`mha.analysis.head_roles.role_table.sentence_head_scores`); "subject" is the verb row's argmax accuracy on
    its subject minus that of the fixed offset that is right most often in these sentences
    (:func:`mha.analysis.head_roles.relations.relation_hits`); "related words" compares noun pairs whose input
    embeddings are more similar than the median pair with the rest, each pair's weight (both directions averaged) taken
    minus the head's mean weight at the same distance (:func:`mha.analysis.head_roles.long_range.distance_baseline`).
    """
    records = check_items("records", records, "a list of attention records, e.g. encode_records(encoder, sentences)")
    from mha.analysis.coreference_and_content.relatedness import noun_pairs, pair_cosines, word_input_vectors
    from mha.analysis.head_roles.long_range import distance_baseline, pair_lifts
    from mha.analysis.head_roles.relations import relation_hits
    from mha.analysis.head_roles.role_table import sentence_head_scores
    from mha.corpora.treebank import check_trees
    from mha.pretrained.attention_record import AttentionRecord
    from mha.pretrained.word_maps import word_attention

    records = list(check_items_of("records", records, AttentionRecord, "an attention record, e.g. from "
                                  "encode_records(encoder, sentences)"))
    trees = list(check_trees("trees", trees))
    if len(records) != len(trees) or len(records) < 2:
        raise ValueError(f"give at least two records and one tree per record, got {len(records)} records and "
                         f"{len(trees)} trees.")
    for index, (record, tree) in enumerate(zip(records, trees, strict=True)):
        if record.sentence is None or tuple(record.sentence.words) != tuple(tree.words):
            raise ValueError(f"record {index} and tree {index} do not have the same words; encode the treebank's "
                             "annotated sentences (read_conllu) and read the trees (read_ud_trees) from one file.")
    scores = sentence_head_scores(records)  # each (sentences, layers, heads)
    hits = relation_hits(records)
    subject = hits.relations.index("verb_subj")  # the verb's row, looking for its subject
    offset = int(np.argmax(hits.offset_hits[:, subject].sum(axis=0)))
    subject_hits = hits.hits[:, subject] - hits.offset_hits[:, subject, offset][:, None, None]  # (sentences, L, H)
    subject_pairs = hits.pairs[:, subject].astype(float)
    maps = [word_attention(r.attention, r.word_ids) for r in records]  # (layers, heads, words, words) each
    baseline = distance_baseline(maps)
    nouns = noun_pairs(trees)
    if len(nouns) < 4:
        raise ValueError("these sentences hold fewer than 4 noun pairs; give more sentences.")
    cosines = pair_cosines(nouns, [word_input_vectors(r.tokens, r.word_ids, embeddings, vocabulary) for r in records])
    _, back = pair_lifts(maps, nouns, baseline, "second_to_first")
    _, ahead = pair_lifts(maps, nouns, baseline, "first_to_second")
    noun_lift = (back + ahead) / 2  # (pairs, layers, heads)
    similar = cosines >= np.median(cosines)
    noun_sentence = np.array([pair.sentence for pair in nouns])

    def pooled(name: str, rows: str) -> Callable[[np.ndarray], np.ndarray]:
        def statistic(weights: np.ndarray) -> np.ndarray:
            counts = weights * scores[rows]  # (sentences,)
            return np.einsum("s,slh->lh", counts, scores[name]) / counts.sum()
        return statistic

    def subject_gain(weights: np.ndarray) -> np.ndarray:
        return np.einsum("s,slh->lh", weights, subject_hits) / max((weights * subject_pairs).sum(), 1.0)

    def related_gap(weights: np.ndarray) -> np.ndarray:
        drawn = weights[noun_sentence]  # (pairs,): how often each pair's sentence was drawn
        close, far = drawn * similar, drawn * ~similar
        return (np.einsum("p,plh->lh", close, noun_lift) / max(close.sum(), 1.0)
                - np.einsum("p,plh->lh", far, noun_lift) / max(far.sum(), 1.0))

    return {"local": pooled("content_neighbour_share", "content_rows"), "subject": subject_gain,
            "punctuation and special": pooled("special_share", "rows"), "punctuation alone": pooled("punct_share",
                                                                                                    "rows"),
            "related words": related_gap}
