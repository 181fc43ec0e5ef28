"""Every head scored over real text, and what the scores say about its role (3.1 "A tour of all 72 heads", 3.2).

- :mod:`~mha.analysis.head_roles.seeded_sentences`: treebank sentences drawn by a seed and the model's relation hits
  on them, the real inputs of the exercises' checks (3.1, 3.2, 4.1, 4.3).
- :mod:`~mha.analysis.head_roles.synthetic_scores`: one head's role-table scores on given maps and seeded synthetic
  pairs, the reference answers of the synthetic checks (3.1 "A tour of all 72 heads", 3.2).
- :mod:`~mha.analysis.head_roles.role_table`: the head-role table, every head scored over a corpus (3.1 "A tour of
  all 72 heads", 3.2, 4.2).
- :mod:`~mha.analysis.head_roles.attention_patterns`: what a head's map looks like, Kovaleva et al.'s pattern types,
  and the token classes they rest on (3.1).
- :mod:`~mha.analysis.head_roles.score_spread`: four scores of each head spread over treebank sentences, which the
  website reads a typed sentence against (3.1).
- :mod:`~mha.analysis.head_roles.long_range`: bridging heads (long-range word pairs from UD trees, against a
  distance-matched baseline and controls) and the data behind copying heads (3.1).
- :mod:`~mha.analysis.head_roles.relations`: which head tracks each grammatical relation, against positional
  baselines (3.2 "Syntax: heads that follow grammatical relations").
- :mod:`~mha.analysis.head_roles.agreement`: does the verb's attention find its subject across attractors, on
  real text, against position and the nearest noun (3.2 "Syntax: heads that follow grammatical relations").
- :mod:`~mha.analysis.head_roles.agreement_patching`: which heads carry the subject's number to the verb, by
  patching minimal pairs against a number probe (3.2).
- :mod:`~mha.analysis.head_roles.treebank_heads`: every head on all of the treebank's development split, stored once:
  its guesses for the gold pairs, with bounds on the relations where no head beats the offset (3.2), and its share
  of attention on [CLS], standardised for sentence length (3.1).
"""
