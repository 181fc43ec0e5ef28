"""Remove every head in turn from section 3.3's minimal pairs: data/coreference_removal.json.

Run from the repository root:

    python -m scripts.coreference_removal

For the pronoun pairs of :func:`mha.corpora.templates.pronoun_pairs`, each of the 72 heads of all-MiniLM-L6-v2 is
removed in turn, and the change of the mean lean of the pronoun's final vector toward its antecedent is stored
(:func:`mha.analysis.coreference_and_content.coreference.lean_change_without_each_head`), rounded to 6 decimals, which
section 3.3 reads with
:func:`~mha.analysis.coreference_and_content.coreference.load_lean_change_without_each_head`. Precomputed because the
72 reruns take a large share of the notebook's time; the rounding keeps the file the same on any CPU at the precision
the section shows. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.analysis.coreference_and_content.coreference import COREFERENCE_REMOVAL_PATH, lean_change_without_each_head
from mha.corpora.templates import pronoun_pairs
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder


def main() -> int:
    torch.set_num_threads(2)
    change = lean_change_without_each_head(MiniLMEncoder.load(), pronoun_pairs())  # (layers, heads)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2",
               "readout": "mean over pairs of cos(pronoun, correct) - cos(pronoun, other) of the last layer's states, "
                          "averaged over each pair's halves; change: with the head removed minus the full model",
               "change": [[round(float(value), 6) for value in row] for row in change]}
    write_recorded_json(COREFERENCE_REMOVAL_PATH, content)  # and its sha256 in data/SHA256SUMS, which the loader checks
    print(f"wrote {COREFERENCE_REMOVAL_PATH}: {change.shape} heads")
    return 0


if __name__ == "__main__":
    sys.exit(main())
