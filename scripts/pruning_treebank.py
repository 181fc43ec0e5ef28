"""How many heads of all-MiniLM-L6-v2 can be pruned, judged on real sentences (chapter 4.2).

Run from the repository root (set OMP_NUM_THREADS=1 on a shared machine; the ``--design`` option recomputes one
design and keeps the other's curves from the stored file):

    python -m scripts.pruning_treebank                      # writes data/pruning_treebank.json: both designs
    python -m scripts.pruning_treebank --design documents   # only the document design's curves recomputed

The sentences are UD English-EWT's development split (5 to 40 words each), judged in two designs of pairs:

* ``splits`` (the "random pairs" design): sentences drawn one by one from the whole treebank; nearly every pair of
  them is unrelated (different documents);
* ``document_splits`` (the "documents" design): the treebank, in its own order, is cut into runs of consecutive
  whole documents, and the selection and the report are two different runs
  (:func:`mha.analysis.caveats.pruning_fidelity.document_split`), so the judged pairs mix related sentences (one
  document, one source) with unrelated ones; its resamples draw documents.

For each of several seeded splits of them into a selection half and a report half
(:func:`mha.corpora.treebank.split_sentences`, of sentences or of runs of documents), heads are pruned in
steps of 4, least important first, in three orders chosen without the report half: Michel et al.'s gradient
importance of the self-retrieval loss on selection sentences, the book's earlier order (the same importance, of
the contrastive loss on all 24 hand-written paraphrase triples; random-pairs design only), and a random order
(seeded with the split's seed).
Each pruned model is judged on report sentences by its fidelity to the full model: the Spearman correlation of its
cosine similarities over every pair of report sentences with the full model's
(:func:`mha.analysis.caveats.pruning_fidelity.fidelity_pruning_curve`), until the curve first falls below 0.75,
well under every threshold read. Resampling the report sentences gives the spread of each removable count. No
labelled sentence-pair set (SICK, STS-B) ships in a package of the registries this book installs from with a
licence that allows shipping it, so fidelity is the only measure. Section 4.2 reads the file with
:func:`mha.analysis.caveats.pruning_fidelity.load_pruning_treebank`. The computation is deterministic on one
machine and thread count (torch uses OMP_NUM_THREADS threads, two if it is unset); stored correlations are rounded
to 4 decimals, and each split also stores what its judged pairs are like (:func:`pair_statistics`).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

from mha.analysis.caveats.ablation import head_mask_gradients, michel_importance, removable_at_thresholds
from mha.analysis.caveats.pruning_fidelity import (
    PRUNING_TREEBANK_PATH,
    document_split,
    embeddings_in_length_chunks,
    fidelity_pruning_curve,
    load_pruning_treebank,
    pairwise_similarities,
    resampled_removable,
    treebank_document,
)
from mha.corpora.paraphrases import contrastive_loss, pair_set, similarity_scores
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu, split_sentences
from mha.data_files import write_recorded_json
from mha.pretrained.encoder import MiniLMEncoder

SPLIT_SEEDS = (0, 1, 2)
STEP = 4
WORDS = (5, 40)                 # sentences of 5 to 40 words
N_SELECTION, N_REPORT = 100, 100  # sentences that choose the order; sentences that judge it (4,950 pairs)
THRESHOLDS = (0.85, 0.90, 0.95)
STOP_BELOW = 0.75               # each curve is judged until it first falls below this, well under every threshold
COUNTS = list(range(0, 73, STEP))
ORDERS = ("gradient", "triples", "random")
DOCUMENT_ORDERS = ("gradient", "random")  # the documents design: the order chosen on other documents, and chance
DESIGNS = ("pairs", "documents")
N_RESAMPLES = 200


def triples_order(encoder: MiniLMEncoder) -> np.ndarray:
    """The order section 4.2 used on its hand-written triples: gradient importance of their contrastive loss."""
    pairs = pair_set()
    gradients = head_mask_gradients(encoder, encoder.tokenize(pairs.sentences),
                                    lambda vectors: contrastive_loss(similarity_scores(vectors)))
    return np.argsort(michel_importance(gradients).ravel(), kind="stable")


def split_sentence_ids(kept: list[int], seed: int) -> tuple[list[int], list[int]]:
    """The treebank sentences (indices) that choose the order and those that judge it, for one split."""
    selection, report = split_sentences(kept, 0.5, seed=seed)
    return selection[:N_SELECTION], report[:N_REPORT]


def document_sentence_ids(treebank: list, kept: list[int], seed: int) -> tuple[list[int], list[int]]:
    """The same for the documents design: two runs of consecutive whole documents' sentences, sharing no document."""
    selection, report = document_split([treebank_document(treebank[i].origin) for i in kept], N_SELECTION, N_REPORT,
                                       seed=seed)
    return [kept[i] for i in selection], [kept[i] for i in report]


def pruned_curve(encoder: MiniLMEncoder, treebank: list, selection: list[int], report: list[int], seed: int,
                 name: str, groups: list[str] | None = None) -> dict:
    """One order's curve on one split, as stored: its order, fidelity and resampled removable counts."""
    order = {"gradient": "gradient", "random": "random"}.get(name)
    curve = fidelity_pruning_curve(encoder, [treebank[i].text for i in selection], [treebank[i].text for i in report],
                                   COUNTS, order=triples_order(encoder) if order is None else order, seed=seed,
                                   stop_below=STOP_BELOW)
    counts = curve["counts"].tolist()
    resampled = resampled_removable(counts, curve["pruned"], curve["full"], THRESHOLDS, n_resamples=N_RESAMPLES,
                                    seed=seed, groups=groups)  # (resamples, thresholds)
    return {
        "order": [int(i) for i in curve["order"]],
        "similarity_kept": [round(float(v), 4) for v in curve["similarity_kept"]],
        "vector_kept": [round(float(v), 4) for v in curve["vector_kept"]],
        "removable": [int(v) for v in removable_at_thresholds(counts, curve["similarity_kept"], THRESHOLDS)[0]],
        "removable_resampled": {  # the counts themselves, so the interval is of counts that occurred
            "2.5%": [int(v) for v in np.percentile(resampled, 2.5, axis=0, method="lower")],
            "97.5%": [int(v) for v in np.percentile(resampled, 97.5, axis=0, method="higher")]},
    }


def pair_statistics(encoder: MiniLMEncoder, treebank: list, report: list[int]) -> dict:
    """What the judged pairs are like: the full model's mean cosine over them, over the pairs within one document,
    how many such pairs there are, and how many documents the report sentences come from."""
    full, _ = embeddings_in_length_chunks(encoder, [treebank[i].text for i in report])
    documents = [treebank_document(treebank[i].origin) for i in report]
    rows, columns = np.triu_indices(len(report), k=1)
    same = np.array([documents[a] == documents[b] for a, b in zip(rows, columns, strict=True)])
    similarity = pairwise_similarities(full)
    return {"mean_cosine": round(float(similarity.mean()), 4), "same_document_pairs": int(same.sum()),
            "mean_cosine_same_document": round(float(similarity[same].mean()), 4) if same.any() else None,
            "report_documents": len(set(documents))}


def design_splits(encoder: MiniLMEncoder, treebank: list, kept: list[int], design: str, started: float) -> list[dict]:
    """Every split of one design, as stored."""
    splits = []
    for seed in SPLIT_SEEDS:
        if design == "pairs":
            (selection, report), names, groups = split_sentence_ids(kept, seed), ORDERS, None
        else:
            (selection, report), names = document_sentence_ids(treebank, kept, seed), DOCUMENT_ORDERS
            groups = [treebank_document(treebank[i].origin) for i in report]
        orders = {}
        for name in names:
            orders[name] = pruned_curve(encoder, treebank, selection, report, seed, name, groups)
            print(f"{design}, split {seed}, {name}: removable {orders[name]['removable']} at {THRESHOLDS} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
        splits.append({"seed": seed, "selection": selection, "report": report,
                       **pair_statistics(encoder, treebank, report), "orders": orders})
    return splits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--design", choices=("both", *DESIGNS), default="both",
                        help="recompute one design only, keeping the other's curves from the stored file")
    design = parser.parse_args(argv).design
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))  # two threads unless told fewer
    started = time.perf_counter()
    encoder = MiniLMEncoder.load()
    treebank = read_conllu(EWT_DEV_PATH)
    kept = [i for i, sentence in enumerate(treebank) if WORDS[0] <= len(sentence.words) <= WORDS[1]]
    stored = None if design == "both" else load_pruning_treebank()
    by_design = {}
    for name, key in zip(DESIGNS, ("splits", "document_splits"), strict=True):
        if design in ("both", name):
            by_design[key] = design_splits(encoder, treebank, kept, name, started)
        else:  # kept from the stored file; the pair statistics are cheap and recomputed
            by_design[key] = [{**split, **pair_statistics(encoder, treebank, split["report"])}
                              for split in stored[key]]
    write_recorded_json(PRUNING_TREEBANK_PATH, stored_content(len(kept), by_design["splits"],
                                                              by_design["document_splits"]))
    print(f"wrote {PRUNING_TREEBANK_PATH} in {time.perf_counter() - started:.0f} s")
    return 0


def stored_content(n_sentences: int, splits: list[dict], document_splits: list[dict]) -> dict:
    """What data/pruning_treebank.json holds: the settings, and per design and split its sentences and curves."""
    return {
        "model": "sentence-transformers/all-MiniLM-L6-v2", "text": "UD English-EWT dev, sentences of 5 to 40 words",
        "sentences": n_sentences, "counts": COUNTS, "step": STEP, "thresholds": list(THRESHOLDS),
        "stop_below": STOP_BELOW, "n_selection": N_SELECTION, "n_report": N_REPORT, "n_resamples": N_RESAMPLES,
        "orders": {"gradient": "Michel et al. (2019) importance of the self-retrieval loss on the selection sentences",
                   "triples": "Michel et al. importance of the contrastive loss on the 24 hand-written triples",
                   "random": "numpy default_rng(split seed).permutation(72)"},
        "designs": {"splits": "random pairs: sentences drawn one by one from the treebank (split_sentences), "
                              "judged over every pair of the report sentences",
                    "document_splits": "documents: the treebank in its own order cut into runs of consecutive whole "
                                       "documents of at least n_report sentences (document_split); selection and "
                                       "report are the first sentences of two different runs; resamples draw "
                                       "documents"},
        "measure": "Spearman correlation of the pruned model's cosine similarities over every pair of report "
                   "sentences with the full model's, judged until it first falls below stop_below; vector_kept: "
                   "mean cosine of a sentence's pruned and full vectors",
        "splits": splits, "document_splits": document_splits,
    }


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
