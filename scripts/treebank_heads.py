"""Every head on every sentence of UD English-EWT's development split: its guesses for the gold pairs (3.2) and its
share of attention on [CLS] (3.1).

Run from the repository root (a few minutes on 2 idle cores):

    python -m scripts.treebank_heads     # writes data/ewt_dev_heads.safetensors

All 2,001 sentences are encoded from their gold words (:func:`mha.pretrained.corpus_encoding.encode_records`), and
for every gold pair of the book's relation directions the offset of every head's guess is kept
(:func:`mha.analysis.head_roles.treebank_heads.relation_guesses`): the book's row reading for every direction, and
Clark et al.'s two variants for the one direction each is compared on (``poss_noun`` with their ``poss`` rule,
``obj_prep`` read by columns). Section 3.2 turns any half of the sentences back into per-sentence counts
(:func:`~mha.analysis.head_roles.treebank_heads.hits_from_guesses`). Beside them, per sentence, every head's
mean weight on ``[CLS]``, on punctuation, on the previous token and on the token itself (SENTENCE_SHARES_STORED),
its number of rows and of tokens
(:func:`mha.analysis.head_roles.role_table.sentence_head_scores`), so that section 3.1 can read sink heads on all
sentences and by length, and each head's view can open the sentences where a score is highest and
lowest. Offsets are stored as 8-bit integers (the script stops if one does not fit); the guesses are argmaxes, the
same on any machine up to exact ties.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import torch
from safetensors.numpy import save

from mha.analysis.head_roles.role_table import sentence_head_scores
from mha.analysis.head_roles.treebank_heads import (
    EWT_HEADS_PATH,
    SENTENCE_SHARES_STORED,
    RelationGuesses,
    relation_guesses,
)
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
from mha.data_files import record_sha256
from mha.pretrained.corpus_encoding import encode_records
from mha.pretrained.encoder import MiniLMEncoder

COUNTINGS = {"row": {"mode": "row", "clark_poss": False, "relations": None},
             "row, Clark poss": {"mode": "row", "clark_poss": True, "relations": ["poss_noun"]},
             "column": {"mode": "column", "clark_poss": False, "relations": ["obj_prep"]}}
CHUNK = 100  # sentences encoded at a time (their attention maps are dropped after counting)


def joined(parts: list[RelationGuesses], starts: list[int], n_sentences: int) -> RelationGuesses:
    """One RelationGuesses for the whole split from the chunks', their sentence indices shifted by each start."""
    first = parts[0]
    return RelationGuesses(first.relations, n_sentences,
                           np.concatenate([p.sentence + s for p, s in zip(parts, starts, strict=True)]),
                           *(np.concatenate([getattr(p, f) for p in parts])
                             for f in ("relation", "gold_offset", "guess_offset")), first.mode, first.clark_poss)


def main() -> int:
    torch.set_num_threads(2)
    started = time.perf_counter()
    encoder = MiniLMEncoder.load()
    treebank = read_conllu(EWT_DEV_PATH)
    parts = {name: [] for name in COUNTINGS}
    shares = {**{key: [] for key in SENTENCE_SHARES_STORED}, "rows": [], "tokens": []}
    starts = list(range(0, len(treebank), CHUNK))
    for start in starts:
        records = encode_records(encoder, treebank[start:start + CHUNK])
        for name, spec in COUNTINGS.items():
            parts[name].append(relation_guesses(records, **spec))
        scores = sentence_head_scores(records)  # (sentences, layers, heads) each, and rows (sentences,)
        for key in (*SENTENCE_SHARES_STORED, "rows"):
            shares[key].append(scores[key])
        shares["tokens"].append(np.array([len(r.tokens) for r in records]))
        del records
        print(f"{min(start + CHUNK, len(treebank))} of {len(treebank)} sentences "
              f"({time.perf_counter() - started:.0f} s)", flush=True)
    arrays, countings = {}, {}
    for key, (name, chunks) in enumerate(parts.items()):
        guesses = joined(chunks, starts, len(treebank))
        largest = max(int(np.abs(guesses.gold_offset).max()), int(np.abs(guesses.guess_offset).max()))
        if largest > 127:
            raise SystemExit(f"an offset of {largest} words does not fit in 8 bits; store int16 instead.")
        arrays.update({f"{key}.sentence": guesses.sentence.astype(np.int16),
                       f"{key}.relation": guesses.relation.astype(np.uint8),
                       f"{key}.gold_offset": guesses.gold_offset.astype(np.int8),
                       f"{key}.guess_offset": guesses.guess_offset.astype(np.int8)})
        countings[name] = {"key": str(key), "relations": list(guesses.relations), "n_sentences": len(treebank),
                           "mode": guesses.mode, "clark_poss": guesses.clark_poss}
        print(f"{name}: {len(guesses.sentence)} gold pairs", flush=True)
    arrays.update({f"sentence.{key}": np.concatenate(shares[key]).astype(np.float32) for key in SENTENCE_SHARES_STORED})
    arrays.update({"sentence.rows": np.concatenate(shares["rows"]).astype(np.int16),
                   "sentence.tokens": np.concatenate(shares["tokens"]).astype(np.int16)})
    metadata = {"model": "sentence-transformers/all-MiniLM-L6-v2", "text": "UD English-EWT v2.15 dev",
                "countings": json.dumps(countings)}
    EWT_HEADS_PATH.write_bytes(save(arrays, metadata=metadata))
    record_sha256()  # data/SHA256SUMS: the loader checks the file against it
    print(f"wrote {EWT_HEADS_PATH} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
