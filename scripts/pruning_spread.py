"""How many heads of all-MiniLM-L6-v2 can be pruned, over several selection/held-out splits (chapter 4.2).

Run from the repository root (about 2 minutes on 2 idle cores):

    python -m scripts.pruning_spread          # writes data/pruning_spread.json

For each of several seeded splits of the paraphrase triples
(:func:`mha.corpora.paraphrases.split_triples`), heads are pruned in steps of
4, least important first, in two orders chosen without the held-out half:
Michel et al.'s gradient importance measured on the selection half, and a
random order (seeded with the split's seed). Each pruned model is judged on
the held-out half by how well it keeps the full model's similarity ranking
(:func:`mha.analysis.caveats.ablation.held_out_pruning_curve`). Section 4.2 reads the
curves with :func:`mha.analysis.caveats.ablation.load_pruning_spread` and counts the
removable heads at several thresholds (:func:`mha.analysis.caveats.ablation.removable_at_thresholds`).
The computation is deterministic on one machine (two torch threads); the
stored correlations are rounded to 4 decimals.
"""

from __future__ import annotations

import sys
import time

import torch

from mha.analysis.caveats.ablation import PRUNING_SPREAD_PATH, held_out_pruning_curve
from mha.corpora.paraphrases import split_triples
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

SPLIT_SEEDS = (0, 1, 2, 3, 4, 5)
STEP = 4
ORDERS = ("gradient", "random")


def main() -> int:
    torch.set_num_threads(2)
    started = time.perf_counter()
    encoder = MiniLMEncoder.load()
    n_heads = encoder.config.n_layers * encoder.config.n_heads
    counts = list(range(0, n_heads + 1, STEP))
    splits = []
    for seed in SPLIT_SEEDS:
        selection, held_out = split_triples(seed=seed)
        curves = {}
        for order in ORDERS:
            curve = held_out_pruning_curve(encoder, selection, held_out, counts, order=order, seed=seed)
            curves[order] = [round(float(value), 4) for value in curve["ranking_kept"]]
        splits.append({"seed": seed, "selection": selection, "held_out": held_out, "ranking_kept": curves})
        print(f"split {seed}: " + "; ".join(f"{order} {values[::3]}" for order, values in curves.items()), flush=True)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "counts": counts, "step": STEP,
               "orders": {"gradient": "Michel et al. (2019) importance of the contrastive loss on the selection half",
                          "random": "numpy default_rng(split seed).permutation(72)"},
               "measure": "Spearman correlation of the held-out similarities (24 x 48 per half: 12 anchors x 24 "
                          "candidates) with the full model's", "splits": splits}
    write_recorded_json(PRUNING_SPREAD_PATH, content)  # and its sha256 in data/SHA256SUMS, which the loader checks
    print(f"wrote {PRUNING_SPREAD_PATH} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
