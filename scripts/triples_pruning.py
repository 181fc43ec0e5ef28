"""Prune heads of all-MiniLM-L6-v2 in four orders chosen on section 4.2's selection triples: data/triples_pruning.json.

Run from the repository root (after scripts/single_removals.py, whose file gives two of the orders):

    python -m scripts.triples_pruning

The orders are chosen on the selection half of the seed-0 split of the paraphrase triples
(:func:`mha.corpora.paraphrases.split_triples`): Michel et al.'s gradient importance of the contrastive loss
(:func:`mha.analysis.caveats.ablation.head_mask_gradients`, :func:`~mha.analysis.caveats.ablation.michel_importance`),
the vector change and the loss change of each head removed on its own (read with
:func:`~mha.analysis.caveats.ablation.load_single_removals`), and three random orders (seeds 0 to 2). Each is judged
on the held-out half, every 8 heads (:func:`~mha.analysis.caveats.ablation.pruning_curves`). Section 4.2 reads the file
with :func:`~mha.analysis.caveats.ablation.load_triples_pruning`. Precomputed because the gradients and the pruned runs
take a large share of the notebook's time. The accuracies are ratios of counts, stored exactly; the importance and
the other measures are rounded to 7 significant digits, far finer than the section shows them, because it also ranks
heads by the importance. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from mha.analysis.caveats.ablation import (
    TRIPLES_PRUNING_PATH,
    head_mask_gradients,
    load_single_removals,
    michel_importance,
    pruning_curves,
)
from mha.corpora.paraphrases import contrastive_loss, pair_set, similarity_scores, split_triples
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

SPLIT_SEED = 0
STEP = 8
RANDOM_SEEDS = (0, 1, 2)
EXACT = ("paraphrase vs unrelated", "paraphrase vs distractor")  # ratios of counts: the same on every CPU


def rounded(values, exact: bool = False) -> list:
    return [float(v) if exact else float(f"{v:.7g}") for v in np.ravel(values)]


def main() -> int:
    torch.set_num_threads(2)
    encoder = MiniLMEncoder.load()
    n_all = encoder.config.n_layers * encoder.config.n_heads
    selection, held_out = split_triples(seed=SPLIT_SEED)
    gradients = head_mask_gradients(encoder, encoder.tokenize(pair_set(selection).sentences),
                                    lambda vectors: contrastive_loss(similarity_scores(vectors)))  # (36, layers, heads)
    importance = np.array([rounded(row) for row in michel_importance(gradients)])  # (layers, heads), as stored
    single = load_single_removals()["selection"]
    orders = {"gradient importance (Michel et al.)": np.argsort(importance.ravel(), kind="stable"),
              "single removal: vector change": np.argsort(single["vector change (1 - cos)"], kind="stable"),
              "single removal: loss change": np.argsort(-single["loss change"], kind="stable")}
    for seed in RANDOM_SEEDS:
        orders[f"random (seed {seed})"] = np.random.default_rng(seed).permutation(n_all)
    counts = list(range(0, n_all + 1, STEP))
    curves = pruning_curves(encoder, held_out, orders, counts)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "split_seed": SPLIT_SEED, "selection": selection,
               "held_out": held_out, "heads": "flat index layer * 12 + head, pruned first first",
               "importance": importance.tolist(), "counts": counts,
               "orders": {name: [int(i) for i in order] for name, order in orders.items()},
               "curves": {name: {measure: rounded(values, measure in EXACT) for measure, values in curve.items()}
                          for name, curve in curves.items()}}
    write_recorded_json(TRIPLES_PRUNING_PATH, content)  # and its sha256 in data/SHA256SUMS, which the loader checks
    print(f"wrote {TRIPLES_PRUNING_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
