"""Heads that would link meaning: pronouns to their antecedents, related words, rare tokens (3.3 and 3.4).

- :mod:`~mha.analysis.coreference_and_content.coreference`: heads scored on pronoun minimal pairs, and patched
  between their halves (3.3 "Coreference, honestly").
- :mod:`~mha.analysis.coreference_and_content.natural_coreference`: every head scored on the pronouns of LitBank's
  fiction, against rules that read no attention, summed per work (3.3).
- :mod:`~mha.analysis.coreference_and_content.entities`: do heads attend within LitBank's entity names, or from a
  mention to its entity, against position, string match and chance (3.3 "Coreference, honestly").
- :mod:`~mha.analysis.coreference_and_content.relatedness`: do heads link related words, in a crossed design (3.4
  "Content and rare words").
- :mod:`~mha.analysis.coreference_and_content.rarity`: how rare a token is, and which heads look at the rarest
  (3.4).
"""
