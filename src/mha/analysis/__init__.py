"""Measurements on the pretrained model: what its heads attend to, and whether it matters (chapters 3 and 4).

One subpackage per group of sections, and the tools they share:

- :mod:`~mha.analysis.head_roles`: every head scored over a corpus, its pattern type, bridging heads and the
  grammatical relations it tracks (3.1 "A tour of all 72 heads", 3.2 "Syntax: heads that follow grammatical
  relations").
- :mod:`~mha.analysis.coreference_and_content`: pronouns in minimal pairs and in LitBank's fiction, related words
  and rare tokens (3.3 "Coreference, honestly", 3.4 "Content and rare words").
- :mod:`~mha.analysis.caveats`: what reading maps leaves out: vector norms, mixing across layers, ablation and
  pruning, layer profiles and probes (chapter 4 "Caveats").
- :mod:`~mha.analysis.popular_story`: the popular story of head roles on "The quick brown fox ..." and its verdicts
  on real text, drawing on all three (3.1, 3.4).
- :mod:`~mha.analysis.pair_patching`: minimal pairs under activation patching, how much of each pair's difference
  every head's output carries (3.2, 3.3 "Coreference, honestly").
- :mod:`~mha.analysis.statistics`: paired differences per head, corrected for testing 72 heads, bootstrap intervals
  of pooled shares over sentences, and the power of a test that found nothing (3.2, 3.3, 3.4, 4.3).
- :mod:`~mha.analysis.p_value_adjustment`: Bonferroni and Holm adjustments for many tests (the background page "A
  statistics toolkit for reading heads").
- :mod:`~mha.analysis.equivalence`: what a result that found nothing rules out: equivalence bounds and the smallest
  detectable effect (3.2, 4.2).

The subpackages import :mod:`~mha.analysis.statistics`, and ``coreference_and_content`` and ``caveats`` import
``head_roles``; nothing imports upward (``.importlinter``).
"""
