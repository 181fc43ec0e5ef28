"""Erase what a probe reads from a head, inside the model, and see what changes: data/amnesic_probing.json (4.4).

Run from the repository root:

    python -m scripts.amnesic_probing

Section 4.4 ("Probing and its limits") finds the heads whose output a linear probe reads part of speech and
dependency labels from best. Decodable is not used. For each head it names (:data:`HEADS`), this script fits a LEACE
eraser (:func:`mha.analysis.caveats.probing.leace_eraser`) of the property on the head's word-level outputs of 4.4's
training sentences, and then, on held-out sentences, runs the model with that head's output erased at every token
(:meth:`mha.pretrained.encoder.MiniLMEncoder.run_from_layer` with ``head_outputs_override``), in 64-bit floats:

* **decodability**: the probe of 4.4 on the head's own output, before and after erasure (it should fall to about
  the majority class, a check that the erasure works);
* **use**: a probe of the same property on the **last layer's** word vectors (the mean of a word's pieces), fitted
  on the clean training words, scored on the held-out words of the clean run and of the erased run; and how far the
  sentence vectors move, ``1 - cos``.

The control erases as many random directions, in the same way (:func:`~mha.analysis.caveats.probing.random_eraser`,
:data:`RANDOM_DRAWS` seeds averaged). Stored per held-out sentence (correct words, words, ``1 - cos``) so that 4.4
bootstraps over sentences; rounded to 6 decimals. The sentences: 4.4's pool (the first 160 of 5 to 25 words in
EWT dev, split in halves with seed 0), its held-out half together with the next :data:`EXTRA_SENTENCES` such
sentences of the file, for power. The file's sha256 is recorded in data/SHA256SUMS.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import numpy as np
import torch

from mha.analysis.caveats.layer_profile import selection_report_split
from mha.analysis.caveats.probing import (
    AMNESIC_PROBING_PATH,
    LabelledSentence,
    fitted_probe,
    leace_eraser,
    majority_accuracy,
    random_eraser,
    read_labelled_sentences,
)
from mha.corpora.treebank import EWT_DEV_PATH
from mha.data_files import write_recorded_json
from mha.pretrained.corpus_encoding import encode_word_head_outputs
from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.sentence_embedding import sentence_embeddings
from mha.pretrained.word_maps import word_units

HEADS = {"part of speech": (1, 1), "dependency label": (2, 9)}
"""The head section 4.4 names for each property: the most selective one (its stored outputs: L1H1 and L2H9)."""
POOL_SENTENCES, EXTRA_SENTENCES = 160, 40
KEPT_LABELS = 7
RANDOM_DRAWS = 2


def eligible_sentences(path=EWT_DEV_PATH) -> list[LabelledSentence]:
    """The sentences of 5 to 25 words, in file order (4.4's pool is the first 160)."""
    return [s for s in read_labelled_sentences(path) if 5 <= len(s.words) <= 25]


def kept_labels(labels: Sequence[str], k: int = KEPT_LABELS) -> list[str]:
    """The ``k`` most frequent labels, ties broken by first appearance (as
    :func:`mha.analysis.caveats.probing.most_frequent_labels`)."""
    from collections import Counter

    return [label for label, _ in Counter(labels).most_common(k)]


def merged(labels: Sequence[str], kept: Sequence[str]) -> np.ndarray:
    return np.array([label if label in kept else "other" for label in labels], dtype=object)


def final_word_vectors(encoder: MiniLMEncoder, sentences: Sequence[Sequence[str]], layer: int | None = None,
                       head: int | None = None, eraser=None, batch: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """Last-layer word vectors (words, d_model) and sentence vectors (sentences, d_model), optionally with head
    ``(layer, head)``'s output passed through ``eraser`` at every token."""
    words, sentence_vectors = [], []
    for start in range(0, len(sentences), batch):
        part = [list(s) for s in sentences[start:start + batch]]
        trace = encoder.trace(part, is_split_into_words=True)
        if eraser is None:
            final = trace.hidden_states[-1]
        else:
            def erase(at_layer, z):
                if at_layer != layer:
                    return z
                z = z.clone()
                z[:, head] = eraser(z[:, head])
                return z
            with torch.inference_mode():
                final = encoder.run_from_layer(trace.hidden_states[layer], layer, real_tokens=trace.real_tokens,
                                               head_outputs_override=erase)
        sentence_vectors.append(sentence_embeddings(final, trace.real_tokens).numpy())
        for b in range(len(part)):
            units = word_units(trace.word_ids[b][: trace.lengths[b]])
            words.extend(final[b, list(unit)].mean(dim=0).numpy() for unit in units)
    return np.stack(words), np.concatenate(sentence_vectors)


def per_sentence(correct: np.ndarray, sentence_of_word: np.ndarray, n_sentences: int) -> list[int]:
    counts = np.bincount(sentence_of_word, weights=correct.astype(float), minlength=n_sentences)
    return counts.round().astype(int).tolist()


def main() -> int:
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    encoder = MiniLMEncoder.load(dtype=torch.float64)
    eligible = eligible_sentences()
    pool = eligible[:POOL_SENTENCES]
    train_ids, held_ids = selection_report_split(len(pool), seed=0)
    train = [pool[i] for i in train_ids]
    test = [pool[i] for i in held_ids] + eligible[POOL_SENTENCES:POOL_SENTENCES + EXTRA_SENTENCES]
    test_sentence_of_word = np.concatenate([[i] * len(s.words) for i, s in enumerate(test)])
    test_words = [s.words for s in test]

    clean_train_words, _ = final_word_vectors(encoder, [s.words for s in train])
    clean_test_words, clean_test_sentences = final_word_vectors(encoder, test_words)
    train_z = np.concatenate([f.transpose(2, 0, 1, 3) for f in encode_word_head_outputs(
        encoder, [s.words for s in train], dtype=np.float64, max_tokens=1024)])  # (words, layers, heads, d_head)
    test_z = np.concatenate([f.transpose(2, 0, 1, 3) for f in encode_word_head_outputs(
        encoder, test_words, dtype=np.float64, max_tokens=1024)])

    content = {"model": "sentence-transformers/all-MiniLM-L6-v2", "treebank": "UD English-EWT dev (v2.15)",
               "train_sentences": len(train), "test_sentences": len(test), "random_draws": RANDOM_DRAWS,
               "test_words_per_sentence": np.bincount(test_sentence_of_word).tolist(), "properties": {}}
    for task, (layer, head) in HEADS.items():
        field = "upos" if task == "part of speech" else "deprel"
        kept = kept_labels(np.concatenate([getattr(s, field) for s in pool]).tolist())
        y_train = merged(np.concatenate([getattr(s, field) for s in train]).tolist(), kept)
        y_test = merged(np.concatenate([getattr(s, field) for s in test]).tolist(), kept)
        head_train, head_test = train_z[:, layer, head], test_z[:, layer, head]
        leace = leace_eraser(head_train, y_train)
        randoms = [random_eraser(head_train, leace.rank, seed=seed) for seed in range(RANDOM_DRAWS)]

        def head_probe(features_train, features_test, y_train=y_train, y_test=y_test):
            scaler, probe = fitted_probe(features_train, y_train)
            return probe.predict(scaler.transform(features_test)) == y_test

        final_scaler, final_probe = fitted_probe(clean_train_words, y_train)

        def use(eraser, layer=layer, head=head, final_scaler=final_scaler, final_probe=final_probe, y_test=y_test):
            words, sentences = final_word_vectors(encoder, test_words, layer, head, eraser)
            correct = final_probe.predict(final_scaler.transform(words)) == y_test
            moved = 1 - (sentences * clean_test_sentences).sum(axis=1)
            return correct, moved

        clean_final = final_probe.predict(final_scaler.transform(clean_test_words)) == y_test
        leace_final, leace_moved = use(leace)
        random_runs = [use(eraser) for eraser in randoms]
        n = len(test)
        record = {
            "head": [layer, head], "labels": kept + ["other"], "erased_directions": leace.rank,
            "majority": round(majority_accuracy(y_train, y_test), 6),
            "head_probe": {
                "clean": per_sentence(head_probe(head_train, head_test), test_sentence_of_word, n),
                "leace": per_sentence(head_probe(leace(head_train), leace(head_test)), test_sentence_of_word, n),
                "random": np.mean([per_sentence(head_probe(r(head_train), r(head_test)), test_sentence_of_word, n)
                                   for r in randoms], axis=0).round(6).tolist()},
            "final_probe": {
                "clean": per_sentence(clean_final, test_sentence_of_word, n),
                "leace": per_sentence(leace_final, test_sentence_of_word, n),
                "random": np.mean([per_sentence(c, test_sentence_of_word, n) for c, _ in random_runs],
                                  axis=0).round(6).tolist()},
            "sentence_moved": {"leace": np.round(leace_moved, 6).tolist(),
                               "random": np.round(np.mean([m for _, m in random_runs], axis=0), 6).tolist()},
        }
        content["properties"][task] = record
        print(task, {k: sum(v) for k, v in record["final_probe"].items()}, flush=True)
    write_recorded_json(AMNESIC_PROBING_PATH, content)
    print(f"wrote {AMNESIC_PROBING_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
