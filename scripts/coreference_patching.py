"""Patch every head between the two halves of section 3.3's minimal pairs: data/coreference_patching.json.

Run from the repository root:

    python -m scripts.coreference_patching

For each pronoun pair of :func:`mha.corpora.templates.pronoun_pairs` whose halves have the same number of tokens,
every one of the 72 heads of all-MiniLM-L6-v2 is patched from one half into the other, both ways
(:func:`mha.analysis.coreference_and_content.coreference.pair_patching`, on :mod:`mha.pretrained.patching`), and the
move of the pronoun's final vector is stored as :class:`~mha.analysis.pair_patching.PairPatching`
rounded to 6 decimals, which section 3.3 reads with
:func:`~mha.analysis.coreference_and_content.coreference.load_pair_patching`. Precomputed because the 72 patched runs of
every pair would take the notebook several seconds; the rounding keeps the file the same on any CPU at the precision the
section shows. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.analysis.coreference_and_content.coreference import COREFERENCE_PATCHING_PATH, pair_patching
from mha.corpora.templates import pronoun_pairs
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder


def main() -> int:
    torch.set_num_threads(2)
    result = pair_patching(MiniLMEncoder.load(), pronoun_pairs())
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2",
               "readout": "cos(pronoun, first candidate) - cos(pronoun, second candidate) of the last layer's "
                          "states; difference and carried oriented so that positive follows the answer",
               **result.to_dict(decimals=6)}
    write_recorded_json(
        COREFERENCE_PATCHING_PATH, content
    )  # and its sha256 in data/SHA256SUMS, which the loader checks
    print(f"wrote {COREFERENCE_PATCHING_PATH}: {len(result.pair_ids)} pairs, left out {list(result.left_out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
