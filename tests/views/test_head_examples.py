"""Chapter 3's "find where a head does this": each head's UD English-EWT dev sentences (8 to 30 tokens, at least 5
words with a letter) with its highest and lowest score on the previous token, on [CLS], on the token itself and on
punctuation, as the site's payload carries
them (ModelHeadExplorer.page_model), against the stored per-sentence shares read straight from
data/ewt_dev_heads.safetensors and the treebank's own words."""

from __future__ import annotations

import gzip
import json

import numpy as np
from safetensors.numpy import load_file

from mha.analysis.head_roles.treebank_heads import EWT_HEADS_PATH
from mha.corpora.treebank import EWT_DEV_PATH, read_ud_trees
from mha.views.model_explorer import ModelHeadExplorer


def test_each_heads_examples_are_its_highest_and_lowest_scoring_treebank_sentences_in_a_few_kb():
    examples = ModelHeadExplorer(["The cat sat on the mat ."]).page_model()["examples"]
    stored = load_file(str(EWT_HEADS_PATH))
    tokens = stored["sentence.tokens"]
    words = [tree.words for tree in read_ud_trees(EWT_DEV_PATH)]
    assert len(words) == len(tokens) == 2001
    worded = np.array([sum(any(c.isalpha() for c in word) for word in sentence) >= 5 for sentence in words])
    readable = np.flatnonzero((tokens >= 8) & (tokens <= 30) & worded)  # 8 to 30 tokens, 5 words with letters
    assert list(examples["scores"]) == ["on the previous token", "on [CLS]", "on the token itself", "on punctuation"]
    for name, key in (("on the previous token", "content_prev_token_share"), ("on [CLS]", "cls_share"),
                      ("on the token itself", "content_same_token_share"), ("on punctuation", "punct_share")):
        found = examples["scores"][name]
        share = stored[f"sentence.{key}"].reshape(len(tokens), 72)  # (sentences, layers * heads)
        for head in range(72):
            order = readable[np.argsort(share[readable, head], kind="stable")]
            for which, sentence in (("highest", order[-1]), ("lowest", order[0])):
                text = examples["texts"][found[which][head]]
                assert text == " ".join(words[sentence]), (name, head, which)
                assert found[f"{which}_values"][head] == round(float(share[sentence, head]) * 100)
        assert all(high >= low for high, low in zip(found["highest_values"], found["lowest_values"], strict=True))
    size = len(gzip.compress(json.dumps(examples).encode()))
    print(f"examples: {len(examples['texts'])} sentences, {size} bytes compressed")
    assert size <= 10_000  # a third of a percent of a page's 3 MB
