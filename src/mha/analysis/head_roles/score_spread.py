"""How four scores of each head spread over real sentences, to read one sentence's scores against (chapter 3,
"A tour of all 72 heads").

The website's model explorer runs all-MiniLM-L6-v2 on any sentence a reader types. Beside the map it shows four
scores of the head on show, for that sentence (:func:`mha.analysis.head_roles.role_table.sentence_head_scores` defines
them): the weight on the previous token, on [CLS], on the token itself, and the strongest link between two different
words. A score means little alone; :func:`score_spread` stores, per head, the quantiles of the same score over the
treebank sentences of section 3.1, so the page can say where the reader's sentence falls among them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from mha.analysis.head_roles.role_table import SENTENCE_SCORES, sentence_head_scores
from mha.core.validation import check_type, check_whole_number

__all__ = ["SPREAD_SCORES", "SPREAD_QUANTILES", "score_spread", "treebank_score_spread"]

SPREAD_SCORES = ("content_prev_token_share", "cls_share", "content_same_token_share", "strongest_link")
"""The scores the view reads a sentence by, in the order it shows them."""

SPREAD_QUANTILES = tuple(round(q, 2) for q in np.linspace(0.0, 1.0, 21))
"""0, 0.05, ..., 1: every twentieth of the sentences, the least and the largest included."""


def score_spread(per_sentence: dict[str, np.ndarray], names: Sequence[str] = SPREAD_SCORES,
                 quantiles: Sequence[float] = SPREAD_QUANTILES) -> dict:
    """Quantiles over sentences of each head's scores.

    ``per_sentence`` maps a score's name to its values, (sentences, layers, heads), as
    :func:`~mha.analysis.head_roles.role_table.sentence_head_scores` returns. Returns a dict of plain numbers (ready for
    JSON): ``quantiles`` (q,), ``sentences`` (how many), and ``scores``, mapping each name to nested lists (layers,
    heads, q), rounded to 4 decimals, with numpy's default (linear) quantile.
    """
    check_type("per_sentence", per_sentence, Mapping, "a dict of per-sentence scores by name")
    unknown = [name for name in names if name not in per_sentence]
    if unknown:
        raise ValueError(f"no scores named {unknown}; per_sentence has {sorted(per_sentence)}.")
    levels = np.asarray(quantiles, dtype=float)
    if levels.ndim != 1 or not levels.size or (levels < 0).any() or (levels > 1).any() or (np.diff(levels) <= 0).any():
        raise ValueError(f"quantiles must rise strictly from within 0 to 1, got {list(quantiles)}.")
    shapes = {np.shape(per_sentence[name]) for name in names}
    if len(shapes) != 1 or len(next(iter(shapes))) != 3 or next(iter(shapes))[0] < 1:
        raise ValueError(f"each score should be (sentences, layers, heads) with at least one sentence, got {shapes}.")
    spread = {name: np.round(np.quantile(np.asarray(per_sentence[name], float), levels, axis=0), 4) for name in names}
    return {"quantiles": levels.tolist(), "sentences": int(next(iter(shapes))[0]),
            "scores": {name: np.moveaxis(values, 0, -1).tolist() for name, values in spread.items()},
            "descriptions": {name: SENTENCE_SCORES[name] for name in names}}


def treebank_score_spread(encoder, n_sentences: int = 150) -> dict:
    """:func:`score_spread` over the report half of section 3.1's treebank sentences (UD English-EWT, dev split).

    The same draw as 3.1 (:func:`~mha.corpora.treebank.split_sentences`, seed 0), its first ``n_sentences``, each
    encoded from its words (:func:`~mha.pretrained.corpus_encoding.encode_records`).
    """
    from mha.corpora.treebank import EWT_DEV_PATH, read_conllu, split_sentences
    from mha.pretrained.corpus_encoding import encode_records
    from mha.pretrained.encoder import check_encoder

    encoder = check_encoder(encoder)
    n_sentences = check_whole_number("n_sentences", n_sentences, minimum=1)

    treebank = read_conllu(EWT_DEV_PATH)
    _, report_ids = split_sentences(list(range(len(treebank))), 0.5, seed=0)
    chosen = [treebank[i] for i in report_ids[:n_sentences]]
    spread = score_spread(sentence_head_scores(encode_records(encoder, chosen, max_tokens=1024)))
    spread["source"] = (f"{len(chosen)} sentences of UD English-EWT (dev split), the report half drawn in section 3.1")
    return spread
