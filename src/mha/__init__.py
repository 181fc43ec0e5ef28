"""mha: the package behind the book *What each head of multi-head attention learns*.

The package's tree follows the book. Each subpackage's docstring maps its modules to the sections that use them,
and each module's docstring cites its section (``tests/test_package_map.py`` keeps both true).

- :mod:`mha.core`: the math with no trained weights: attention (torch and numpy), masks, boundary checks, the
  geometry of heads and low-rank fitting (chapter 1 "The mechanism", chapter 2 "The geometry of subspace
  projection").
- :mod:`mha.pretrained`: all-MiniLM-L6-v2 rebuilt on :mod:`mha.core.attention`: tokenizer, encoder, word maps,
  sentence vectors, interventions (chapters 2 to 4).
- :mod:`mha.corpora`: text with known answers: templates, a treebank reader, paraphrases (chapters 3 and 4).
- :mod:`mha.analysis`: measurements on the pretrained model, a subpackage per group of sections: head roles and
  relations, coreference and content, the caveats; and the statistics they share (chapter 3 "Empirical head
  roles", chapter 4 "Caveats").
- :mod:`mha.lab`: tiny transformers trained here: model, tasks, training, checkpoints, circuit scores, induction,
  permutation, head-count sweep (sections 3.5 to 3.7).
- :mod:`mha.views`: the interactive views and the heatmaps (chapters 1 and 3).
- :mod:`mha.exercises`: the exercises' checks, a module per pair of sections, built on :mod:`mha.exercises.checking`;
  and the grader that runs them on a submitted notebook (:mod:`mha.exercises.grading`).
- :mod:`mha.book`: what every notebook shares: numbers stored at the precision the text shows, the prose's glued
  numbers and citations, head labels, the CPU threads a notebook uses.
- :mod:`mha.data_files`: where the stored results live, read without trusting them (sections 2.2, 3.5-3.7).
- :mod:`mha.data`: the stored results themselves, package data: the repository's ``data/`` folder, which
  ``pyproject.toml`` installs as this subpackage (sections 2.2, 3.2, 3.5-3.7).
"""

from mha.core.attention import (
    AttentionOutput,
    HeadWeights,
    MultiHeadAttention,
    head_contributions,
    merge_heads,
    scaled_dot_product_attention,
    split_heads,
)
from mha.core.masks import causal_mask, padding_mask

__all__ = [
    "AttentionOutput",
    "HeadWeights",
    "MultiHeadAttention",
    "causal_mask",
    "head_contributions",
    "merge_heads",
    "padding_mask",
    "scaled_dot_product_attention",
    "split_heads",
]
