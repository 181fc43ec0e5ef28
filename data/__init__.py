"""The book's stored data, installed with the package as :mod:`mha.data` (sections 2.2, 3.2 and 3.5-3.7).

This folder is the repository's ``data/``; ``pyproject.toml`` maps it into the package
(``package-dir = {"mha.data" = "data"}``), so an editable install (``pip install -e .``) reads the files here and a
wheel carries them inside ``mha/data/``. Code finds them through the package (:data:`mha.data_files.DATA_DIRECTORY`,
with :mod:`importlib.resources`), never through a path relative to the repository, so a notebook runs from any
working directory and on any machine the package is installed on (Colab, Binder, a JupyterHub).

- ``sample.conllu``: a hand-annotated treebank sample (:data:`mha.corpora.treebank.SAMPLE_TREEBANK_PATH`, 3.2).
- ``pattern_fits.json``: the stored single-head fits (:func:`mha.core.low_rank_fitting.load_pattern_fits`, 2.2).
- ``litbank/litbank_coref.json``: the words and coreference chains of 80 works of LitBank, with its licence
  (:func:`mha.corpora.litbank.load_litbank`, 3.3); ``litbank_coreference.json``: every head scored on their pronouns
  (:func:`mha.analysis.coreference_and_content.natural_coreference.load_natural_coreference`, 3.3).
- ``litbank/litbank_entities.json``: the entity spans of the same works
  (:func:`mha.corpora.litbank_entities.load_litbank_entities`, 3.3); ``litbank_entities.json``: every head scored
  on them (:func:`mha.analysis.coreference_and_content.entities.load_entity_scores`, 3.3).
- ``ewt_agreement.json``: every head scored and patched on the treebank's subject-verb pairs
  (:func:`mha.analysis.head_roles.agreement_patching.load_agreement`, 3.2).
- ``lab/``: the tiny models' checkpoints and result files with their sha256 manifest (:mod:`mha.lab.checkpoints`,
  3.5-3.7).
"""
