"""The core math: attention and the geometry of heads, with no trained weights (chapters 1 and 2).

- :mod:`~mha.core.attention`: scaled dot-product and multi-head attention in torch, as explicit steps that return
  every head's weights (1.1 "Attention from scratch", 1.2 "Multi-head attention"; used by every model in the book).
- :mod:`~mha.core.attention_cost`: the operations and bytes of each step of one attention layer, counted from its
  shape (3.7 "One big head or many": what more heads cost).
- :mod:`~mha.core.attention_numpy`: the same math in numpy, checked equal to the torch version (1.1).
- :mod:`~mha.core.masks`: which keys each query may see: causal and padding masks (1.1).
- :mod:`~mha.core.validation`: checks at the package boundary, with errors that say how to fix the input (all);
  :mod:`~mha.core.argument_checks`: more of them in the same style (a list of one kind of item, a dtype, a device).
- :mod:`~mha.core.layouts`: the layouts of attention weights, from (layers, batch, heads, query, key) down to one
  head's (query, key) map, and word-level maps, and the check of each where it enters (all).
- :mod:`~mha.core.toy_sentences`: word vectors without a trained model, for the random-weight demos (1.2).
- :mod:`~mha.core.geometry`: QK and OV circuits, ranks, subspaces and their angles (2.1 "Each head's own subspace").
- :mod:`~mha.core.low_rank_fitting`: which patterns one head of width d_head can express, and the stored fits
  (2.2 "The low-rank bottleneck").
- :mod:`~mha.core.resampling`: the bootstrap's resamples, drawn in one place for every interval of the book (3.1-3.7,
  4.3 "Layer dependence").
- :mod:`~mha.core.survival`: Kaplan-Meier curves of a time to an event with censoring, and their restricted mean
  (3.7 "One big head or many": the steps a training run takes to solve its task).
"""
