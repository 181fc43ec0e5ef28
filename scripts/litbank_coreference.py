"""Score every head on LitBank's pronouns: data/litbank_coreference.json (section 3.3, "On natural text").

Run from the repository root:

    python -m scripts.litbank_coreference

The 80 works of the book's LitBank extract (:func:`mha.corpora.litbank.load_litbank`) are cut into windows of
consecutive sentences of at most 128 tokens
(:func:`mha.analysis.coreference_and_content.natural_coreference.litbank_windows`), every window is traced through
all-MiniLM-L6-v2, and every head and rule is scored on every third-person pronoun that has an antecedent in its window
(:func:`mha.analysis.coreference_and_content.natural_coreference.score_windows_by_antecedent`). The sums per work are
stored as :class:`~mha.analysis.coreference_and_content.natural_coreference.NaturalCoreference` (shares rounded to 6
decimals), over all links and, under ``by_antecedent``, apart for links whose antecedent is a name or noun phrase
(``nominal``) and for those whose antecedent is a pronoun (``pronoun``), with the scores of the first window that has
links of both kinds, which section 3.3 recomputes to check the file against the package. Precomputed because tracing
all the windows would take the notebook minutes. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import torch

from mha.analysis.coreference_and_content.natural_coreference import (
    LITBANK_COREFERENCE_PATH,
    litbank_windows,
    score_windows_by_antecedent,
)
from mha.corpora.litbank import ANTECEDENT_KINDS, antecedent_kind, load_litbank
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

MAX_PIECES = 128


def main() -> int:
    torch.set_num_threads(2)
    encoder = MiniLMEncoder.load()
    documents = load_litbank()
    windows = litbank_windows(encoder, documents, max_pieces=MAX_PIECES)
    groups = score_windows_by_antecedent(encoder, windows)
    result = groups["all"]
    # the first window with a link of each kind, so that the check covers both kinds
    check_index = next(index for index, window in enumerate(windows)
                       if {antecedent_kind(window, link) for link in window.links} == set(ANTECEDENT_KINDS))
    check = score_windows_by_antecedent(encoder, [windows[check_index]])
    sentences = sum(len(document.sentences) for document in documents)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "max_pieces": MAX_PIECES,
               "windows": len(windows), "sentences": sentences,
               "sentences_in_windows": sum(window.n_sentences for window in windows),
               **result.to_dict(decimals=6),
               "by_antecedent": {kind: groups[kind].to_dict(decimals=6) for kind in ANTECEDENT_KINDS},
               "check": {"window": check_index, **check["all"].to_dict(decimals=6),
                         "by_antecedent": {kind: check[kind].to_dict(decimals=6) for kind in ANTECEDENT_KINDS}}}
    write_recorded_json(LITBANK_COREFERENCE_PATH, content)  # and its sha256 in data/SHA256SUMS
    print(f"wrote {LITBANK_COREFERENCE_PATH}: {len(windows)} windows, {int(result.pronouns.sum())} pronouns "
          f"linked ({int(groups['nominal'].pronouns.sum())} to a name or noun phrase, "
          f"{int(groups['pronoun'].pronouns.sum())} to a pronoun), {int(result.unlinked.sum())} without an "
          "antecedent in their window")
    return 0


if __name__ == "__main__":
    sys.exit(main())
