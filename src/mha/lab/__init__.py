"""The lab: tiny transformers trained here, small enough to watch heads specialise (chapter 3, sections 3.5-3.7).

- :mod:`~mha.lab.tiny_model`: an attention-only transformer built on :mod:`mha.core.attention` (3.5-3.7).
- :mod:`~mha.lab.tasks`: synthetic tasks with known solutions: induction, two relations (3.5, 3.6, 3.7).
- :mod:`~mha.lab.training`: a deterministic CPU trainer with a logged loss curve (3.5 "Induction heads").
- :mod:`~mha.lab.checkpoints`: the trained models as safetensors files with a sha256 manifest (3.5-3.7).
- :mod:`~mha.lab.circuit_scores`: previous-token, prefix-matching, copying and composition scores (3.5, 3.6).
- :mod:`~mha.lab.induction`: which head plays which role, found by score and tested by removal (3.5, 3.6).
- :mod:`~mha.lab.timeline`: the 2-layer induction model's training recorded step by step, read back and checked
  (3.5 "Induction heads", 3.6).
- :mod:`~mha.lab.permutation`: heads reordered without changing what a layer computes (3.6 "Heads are not
  preassigned").
- :mod:`~mha.lab.head_count_sweep`: one big head or many at the same parameter count (3.7 "One big head or many").
- :mod:`~mha.lab.head_count_study`: the stored study of every head count at every learning rate, and what the
  chapter reads from it (3.7 "One big head or many").
"""
