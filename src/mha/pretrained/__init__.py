"""The pretrained model: all-MiniLM-L6-v2 rebuilt on :mod:`mha.core.attention` (chapters 2 to 4).

- :mod:`~mha.pretrained.tokenizer`: text to wordpieces, each mapped back to its word (3.4 "Content and rare words").
- :mod:`~mha.pretrained.encoder`: the encoder, run whole or resumed at any layer, with head masks, and a copy with
  random weights (2.1, 2.2, 3.1-3.4, 4.1, 4.2, 4.4).
- :mod:`~mha.pretrained.traces`: what a run computed: every head's weights, queries, keys, values and outputs,
  for a batch or one sentence (3.1 "A tour of all 72 heads", 3.2-3.4, 4.1).
- :mod:`~mha.pretrained.model_files`: the model's sizes and weights read from its folder without trusting them
  (3.1 "A tour of all 72 heads").
- :mod:`~mha.pretrained.overrides`: the forms an intervention on heads takes (head masks, attention and head-output
  overrides) and the helpers that build them (4.1 "Attention is not explanation", 4.2, 3.3).
- :mod:`~mha.pretrained.word_maps`: wordpiece maps turned into word maps (3.2 "Syntax: heads that follow
  grammatical relations", 3.3, 3.4).
- :mod:`~mha.pretrained.sentence_embedding`: the model's sentence vectors, as it is used (4.1, 4.2).
- :mod:`~mha.pretrained.corpus_encoding`: a whole corpus encoded into attention records, in bounded batches
  (3.1 "A tour of all 72 heads", 3.2, 4.2), or into every head's output per word (4.4 "Probing and its limits").
- :mod:`~mha.pretrained.attention_record`: one sentence's attention for every head, with its tokens, word ids and
  gold annotation: the record that corpus encoding writes and the role table reads (3.1, 3.2, 4.2).
- :mod:`~mha.pretrained.interventions`: interventions resumed from a stored layer: heads removed (3.3
  "Coreference, honestly", 4.2 "Redundancy and pruning"), one key removed from one head, heads given other weights
  (4.1 "Attention is not explanation").
- :mod:`~mha.pretrained.patching`: activation patching, one head's output taken from another run of the same length
  (3.3 "Coreference, honestly").
- :mod:`~mha.pretrained.web_export`: the model written as small gzip parts for the pages, which run it in
  JavaScript (3.1 "A tour of all 72 heads").
"""
