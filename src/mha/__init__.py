"""mha: the package behind the book *What each head of multi-head attention learns*.

Each module has one job; its docstring names the section that explains it. By chapter:

Chapter 1, the mechanism
    :mod:`~mha.attention` (scaled dot-product and multi-head attention, torch), :mod:`~mha.attention_numpy`
    (the same in numpy), :mod:`~mha.masks`, :mod:`~mha.validation` (boundary checks that say how to fix the
    input), :mod:`~mha.toy_sentences` (sentence vectors for random-weight demos), :mod:`~mha.heatmaps`,
    :mod:`~mha.head_explorer` (the head-count view).
Chapter 2, geometry
    :mod:`~mha.geometry` (QK/OV circuits, ranks, subspace angles), :mod:`~mha.pattern_fitting` (what one head of a
    given width can express).
Chapter 3, a pretrained model
    :mod:`~mha.tokenization`, :mod:`~mha.encoder` (all-MiniLM-L6-v2 on :mod:`~mha.attention`, with traces and
    interventions), :mod:`~mha.words` (word-level maps), :mod:`~mha.corpus` and :mod:`~mha.treebank` (sentences
    with gold relations), :mod:`~mha.corpus_attention` (batched encoding), :mod:`~mha.roles` (the head-role table),
    :mod:`~mha.relation_heads`, :mod:`~mha.head_contrasts` (paired statistics over heads, corrected for many
    heads), :mod:`~mha.coreference`, :mod:`~mha.relatedness`, :mod:`~mha.word_frequency`,
    :mod:`~mha.head_removal`, :mod:`~mha.model_explorer` (the layer / head / sentence view).
Chapter 3, the lab
    :mod:`~mha.tiny_transformer`, :mod:`~mha.tasks`, :mod:`~mha.training`, :mod:`~mha.checkpoints`,
    :mod:`~mha.circuit_scores` (previous-token, prefix-matching, copying, composition), :mod:`~mha.induction_roles`,
    :mod:`~mha.head_permutation`, :mod:`~mha.lab_explorer`.
Exercises
    :mod:`~mha.exercises`: one module of checks per chapter, built on :mod:`mha.exercises.checking`.
Every notebook
    :mod:`~mha.book` (numbers stored at the precision the text shows, and glue), :mod:`~mha.data_files` (where
    the stored results live, read without trusting them).
"""

from .attention import AttentionOutput, HeadWeights, MultiHeadAttention, head_contributions, merge_heads, scaled_dot_product_attention, split_heads
from .masks import causal_mask, padding_mask

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
