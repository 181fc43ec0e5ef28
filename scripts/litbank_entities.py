"""Score every head on LitBank's entities: data/litbank_entities.json (section 3.3).

Run from the repository root:

    python -m scripts.litbank_entities

The 80 works of the book's LitBank extract (:func:`mha.corpora.litbank.load_litbank` and
:func:`mha.corpora.litbank_entities.load_litbank_entities`) are cut into the windows of 3.3's pronouns, at most 128
tokens each (:func:`mha.analysis.coreference_and_content.entities.litbank_entity_windows`); every window is traced
through all-MiniLM-L6-v2 and every head and rule scored on every word of a multi-word entity span and every mention
link (:func:`mha.analysis.coreference_and_content.entities.score_entity_windows`). The sums per work are stored
(shares rounded to 6 decimals), with the scores of the first work alone, which section 3.3 recomputes to check the
file against the package. Precomputed because tracing every window would take the notebook minutes. The file's
sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.analysis.coreference_and_content.entities import (
    LITBANK_ENTITIES_SCORES_PATH,
    litbank_entity_windows,
    score_entity_windows,
)
from mha.corpora.litbank import load_litbank
from mha.corpora.litbank_entities import load_litbank_entities
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

MAX_PIECES = 128


def main() -> int:
    torch.set_num_threads(2)
    encoder = MiniLMEncoder.load()
    documents = load_litbank()
    entities = load_litbank_entities(documents=documents)
    windows = litbank_entity_windows(encoder, entities, documents, max_pieces=MAX_PIECES)
    result = score_entity_windows(encoder, windows)
    check = score_entity_windows(encoder, [w for w in windows if w.document == windows[0].document])
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "max_pieces": MAX_PIECES, "windows": len(windows),
               **result.to_dict(decimals=6), "check": check.to_dict(decimals=6)}
    write_recorded_json(LITBANK_ENTITIES_SCORES_PATH, content)  # and its sha256 in data/SHA256SUMS
    print(f"wrote {LITBANK_ENTITIES_SCORES_PATH}: {len(windows)} windows, {int(result.span_words.sum())} span words, "
          f"{int(result.links.sum())} mention links")
    return 0


if __name__ == "__main__":
    sys.exit(main())
