"""Score every head on subject-verb agreement in UD English-EWT, and patch it: data/ewt_agreement.json (3.2).

Run from the repository root:

    python -m scripts.ewt_agreement

Every subject of EWT's development split with the finite verb that agrees with it, the subjects of UD's enhanced
graph included (:func:`mha.corpora.agreement.agreement_items` with ``verbs="finite"`` and
:func:`mha.corpora.agreement.enhanced_subjects`), is scored for every head and rule
(:func:`mha.analysis.head_roles.agreement.score_agreement`); each item is marked when it is of the narrow
definition (a basic subject and a verb whose form shows number), whose items alone are patched. The sentences are
split in halves as in section 3.2
(:func:`mha.corpora.treebank.split_sentences`, seed 0); a number probe is trained on the swapped pairs
(:func:`mha.corpora.agreement.number_swaps`) of the first half
(:func:`mha.analysis.head_roles.agreement_patching.fit_number_probe`), and every head of every pair is patched
(:func:`mha.analysis.head_roles.agreement_patching.agreement_patching`), so that heads can be chosen on the first
half and reported on the second. Stored rounded to 6 decimals, with the scores of the first 20 items, which
section 3.2 recomputes to check the file against the package. Precomputed because the patched runs would take the
notebook minutes. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from mha.analysis.head_roles.agreement import score_agreement
from mha.analysis.head_roles.agreement_patching import (
    AGREEMENT_PATH,
    agreement_patching,
    fit_number_probe,
    probe_accuracy,
    probe_accuracy_by_layer,
)
from mha.corpora.agreement import agreement_items, enhanced_subjects, number_swaps
from mha.corpora.treebank import EWT_DEV_PATH, read_ud_trees, split_sentences
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

CHECK_ITEMS = 20


def main() -> int:
    torch.set_num_threads(2)
    encoder = MiniLMEncoder.load()
    trees = read_ud_trees(EWT_DEV_PATH)
    items = agreement_items(trees, verbs="finite", extra_subjects=enhanced_subjects(EWT_DEV_PATH))
    narrow = [item for item in items if item.shows_number and not item.enhanced]  # agreement_items(trees)'s
    selection, report = split_sentences(list(range(len(trees))), seed=0)
    scores = score_agreement(encoder, trees, items)
    check = score_agreement(encoder, trees, items[:CHECK_ITEMS])
    pairs = number_swaps(trees, narrow)
    chosen = set(selection)
    train = [pair for pair in pairs if pair[0].tree in chosen]
    test = [pair for pair in pairs if pair[0].tree not in chosen]
    probe = fit_number_probe(encoder, train)
    held_out = probe_accuracy(encoder, probe, test)
    by_layer = probe_accuracy_by_layer(encoder, train, test)
    patching = agreement_patching(encoder, pairs, probe)
    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "treebank": "UD English-EWT dev (v2.15)",
               "split_seed": 0, "items": "agreement_items(trees, verbs='finite', extra_subjects=enhanced_subjects)",
               "selection_sentences": sorted(int(s) for s in selection),
               "scores": scores.to_dict(decimals=6), "check": check.to_dict(decimals=6),
               "probe": {"trained_on": "both sentences of the swapped pairs of the selection sentences",
                         "held_out_accuracy": round(float(held_out), 6),
                         "held_out_accuracy_by_layer": np.round(by_layer, 6).tolist()},
               "patching": patching.to_dict(decimals=6)}
    write_recorded_json(AGREEMENT_PATH, content)  # and its sha256 in data/SHA256SUMS
    print(f"wrote {AGREEMENT_PATH}: {len(items)} items ({int(np.sum(scores.attracted))} with an attractor; "
          f"{len(narrow)} narrow, {int(np.sum(scores.attracted & scores.narrow))} with an attractor), "
          f"{len(patching.pair_ids)} pairs patched, {len(patching.left_out)} left out, held-out probe accuracy "
          f"{held_out:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
