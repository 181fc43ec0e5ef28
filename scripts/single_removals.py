"""Remove each head of all-MiniLM-L6-v2 on its own from section 4.2's paraphrase triples: data/single_removals.json.

Run from the repository root:

    python -m scripts.single_removals

Each of the 72 heads is removed on its own (its output set to 0 before W_O) on the 72 sentences of the 24 triples
(:func:`mha.analysis.caveats.ablation.single_removal_effects`), and each changed model is scored against the full
one (:func:`~mha.analysis.caveats.ablation.removal_effects`) on all triples and on each half of section 4.2's split
(:func:`mha.corpora.paraphrases.split_triples`, seed 0). Section 4.2 reads the file with
:func:`~mha.analysis.caveats.ablation.load_single_removals`. Precomputed because the 72 removals take a large share
of the notebook's time. The accuracies are ratios of counts, stored exactly; the other measures are rounded to 7
significant digits, far finer than the section shows them, because it also ranks the heads by them (which head
moves the vectors most, in what order to prune). The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.analysis.caveats.ablation import SINGLE_REMOVALS_PATH, single_removal_effects
from mha.corpora.paraphrases import pair_set, split_triples
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

SPLIT_SEED = 0
EXACT = ("paraphrase vs unrelated", "paraphrase vs distractor")  # ratios of counts: the same on every CPU


def main() -> int:
    torch.set_num_threads(2)
    selection, held_out = split_triples(seed=SPLIT_SEED)
    effects = single_removal_effects(MiniLMEncoder.load(), pair_set(), {"selection": selection, "held_out": held_out})
    parts = {part: {name: [float(v) if name in EXACT else float(f"{v:.7g}") for v in values]
                    for name, values in measures.items()} for part, measures in effects.items()}
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "split_seed": SPLIT_SEED, "selection": selection,
               "held_out": held_out, "heads": "flat index layer * 12 + head; each removed on its own",
               "parts": parts}
    write_recorded_json(SINGLE_REMOVALS_PATH, content)  # and its sha256 in data/SHA256SUMS, which the loader checks
    print(f"wrote {SINGLE_REMOVALS_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
