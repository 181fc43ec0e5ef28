"""Text with known answers: the sentences the book measures heads on (chapters 3 and 4).

- :mod:`~mha.corpora.annotation`: a sentence with gold word-to-word relations, the form every corpus is read into
  (3.1 "A tour of all 72 heads", 3.2, 3.3).
- :mod:`~mha.corpora.baselines`: guesses that read no attention (a fixed offset, the nearest candidate), scored
  on the gold relations (3.2 "Syntax: heads that follow grammatical relations", 3.3, 4.2).
- :mod:`~mha.corpora.templates`: seeded template sentences with gold word-to-word relations and pronoun minimal
  pairs, for controlled contrasts (3.1 "A tour of all 72 heads", 3.2, 3.3 "Coreference, honestly", 3.4, 4.2).
- :mod:`~mha.corpora.treebank`: Universal Dependencies treebanks (CoNLL-U) read into annotated sentences
  (3.2 "Syntax: heads that follow grammatical relations").
- :mod:`~mha.corpora.agreement`: subjects with the verb forms that agree with them and the attractor nouns between,
  found in a treebank, and minimal pairs with the subject's number swapped (3.2 "Syntax: heads that follow
  grammatical relations").
- :mod:`~mha.corpora.litbank`: LitBank's coreference chains in fiction, cut into windows that link each pronoun to
  its antecedent (3.3 "Coreference, honestly").
- :mod:`~mha.corpora.litbank_entities`: LitBank's entity spans in fiction, and windows that pair each mention with
  the earlier mentions of its type (3.3 "Coreference, honestly", "Entities").
- :mod:`~mha.corpora.paraphrases`: the model's own task in miniature, paraphrases among look-alikes
  (4.1 "Attention is not explanation", 4.2 "Redundancy and pruning").
"""
