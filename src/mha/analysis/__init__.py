"""Measurements on the pretrained model: what its heads attend to, and whether it matters (chapters 3 and 4).

- :mod:`~mha.analysis.role_table`: the head-role table, every head scored over a corpus (3.1 "A tour of all 72
  heads", 3.2, 4.2).
- :mod:`~mha.analysis.attention_patterns`: what a head's map looks like, Kovaleva et al.'s pattern types, and the
  token classes they rest on (3.1 "A tour of all 72 heads").
- :mod:`~mha.analysis.score_spread`: four scores of each head spread over treebank sentences, which the website reads
  a typed sentence against (3.1 "A tour of all 72 heads").
- :mod:`~mha.analysis.long_range`: bridging heads (long-range word pairs from UD trees, against a distance-matched
  baseline and controls) and the data behind copying heads (3.1 "A tour of all 72 heads").
- :mod:`~mha.analysis.popular_story`: the popular story of head roles on "The quick brown fox ..." and its verdicts
  on real text (3.1, 3.4).
- :mod:`~mha.analysis.relations`: which head tracks each grammatical relation, against positional baselines
  (3.2 "Syntax: heads that follow grammatical relations").
- :mod:`~mha.analysis.statistics`: paired differences per head, corrected for testing 72 heads, bootstrap intervals
  of pooled shares over sentences, and the power of a test that found nothing (3.2, 3.3, 3.4).
- :mod:`~mha.analysis.p_value_adjustment`: Bonferroni and Holm adjustments for many tests (the background page "A
  statistics toolkit for reading heads").
- :mod:`~mha.analysis.coreference`: heads scored on pronoun minimal pairs, and patched between their halves (3.3
  "Coreference, honestly").
- :mod:`~mha.analysis.natural_coreference`: every head scored on the pronouns of LitBank's fiction, against rules
  that read no attention, summed per work (3.3 "Coreference, honestly").
- :mod:`~mha.analysis.relatedness`: do heads link related words, in a crossed design (3.4 "Content and rare words").
- :mod:`~mha.analysis.rarity`: how rare a token is, and which heads look at the rarest (3.4).
- :mod:`~mha.analysis.ablation`: how much each head matters: mask builders, gradient importance, pruning curves,
  attention's column means (4.2 "Redundancy and pruning", 4.1).
- :mod:`~mha.analysis.norms`: attention weights next to the size of the vectors they weight
  (4.1 "Attention is not explanation").
- :mod:`~mha.analysis.attention_flow`: how much of a position's vector still comes from its own token (4.1).
- :mod:`~mha.analysis.layer_profile`: per-layer profiles of the head scores on real text, with intervals, and a
  verdict on each trend the popular claim about depth predicts (4.3 "Layer dependence").
- :mod:`~mha.analysis.probing`: linear probes on each head's output, with control tasks, a majority-class baseline
  and a model of random weights (4.4 "Probing and its limits").
"""
