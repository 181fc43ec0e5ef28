"""What attention maps leave out, measured: norms, mixing, ablation, depth and probes (chapter 4 "Caveats").

- :mod:`~mha.analysis.caveats.norms`: attention weights next to the size of the vectors they weight (4.1
  "Attention is not explanation").
- :mod:`~mha.analysis.caveats.attention_flow`: how much of a position's vector still comes from its own token (4.1).
- :mod:`~mha.analysis.caveats.ablation`: how much each head matters: mask builders, gradient importance, pruning
  curves, attention's column means (4.2 "Redundancy and pruning", 4.1).
- :mod:`~mha.analysis.caveats.pruning_fidelity`: pruning judged on real sentences, by how faithfully the pruned
  model keeps the full model's similarities over every pair of them (4.2).
- :mod:`~mha.analysis.caveats.layer_profile`: per-layer profiles of the head scores on real text, with intervals,
  and a verdict on each trend the popular claim about depth predicts (4.3 "Layer dependence").
- :mod:`~mha.analysis.caveats.probing`: linear probes on each head's output, with control tasks, a majority-class
  baseline and a model of random weights (4.4 "Probing and its limits").
"""
