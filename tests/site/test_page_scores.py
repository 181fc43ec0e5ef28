"""What the website's chapter-3 view computes itself for a sentence run in the page (views.js, its scores.js module),
against the package: word units and their labels (mha.pretrained.word_maps), word-level maps, and the four scores
a sentence is read by (mha.analysis.head_roles.role_table.sentence_head_scores), on real tokenisations of treebank
sentences."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import pytest

from mha.analysis.head_roles.role_table import sentence_head_scores
from mha.analysis.head_roles.score_spread import SPREAD_SCORES
from mha.corpora.treebank import EWT_DEV_PATH, read_conllu
from mha.pretrained.attention_record import AttentionRecord
from mha.pretrained.tokenizer import tokenize
from mha.pretrained.word_maps import word_attention, word_strings
from mha.views.widget import web_file

NODE_SCRIPT = """
require(process.argv[1]);
const parts = globalThis.mhaViews.parts;
const cases = JSON.parse(require("fs").readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(cases.map(({tokens, weights}) => {
  const n = tokens.length;
  const words = parts.wordsOf(tokens);
  return {ids: words.ids, labels: words.labels, scores: parts.sentenceScores(Float64Array.from(weights), n, words.ids),
          merged: Array.from(parts.wordWeights(Float64Array.from(weights), n, words.units))};
})));
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    """Twelve treebank sentences as the model's tokenizer splits them, each with a random row-stochastic map."""
    node = shutil.which("node")
    assert node, "the page's computations are checked under Node.js (apt install nodejs)"
    sentences = [" ".join(sentence.words) for sentence in read_conllu(EWT_DEV_PATH)[40:52]]
    rng = np.random.default_rng(0)
    made = []
    for sentence in sentences:
        batch = tokenize(sentence)
        tokens = batch.tokens[0]
        word_ids = batch.word_ids[0]
        logits = rng.normal(size=(len(tokens), len(tokens))) * 3
        weights = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
        made.append({"tokens": tokens, "word_ids": word_ids, "weights": weights})
    sent = [{"tokens": case["tokens"], "weights": case["weights"].ravel().tolist()} for case in made]
    views_js = tmp_path_factory.mktemp("page_scores") / "views.js"  # the script the site serves
    views_js.write_text(web_file("views.js"), encoding="utf-8")
    result = subprocess.run([node, "-e", NODE_SCRIPT, str(views_js)], input=json.dumps(sent), capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    return list(zip(made, json.loads(result.stdout), strict=True))


def test_word_units_and_labels_match_the_package(cases):
    for case, page in cases:
        expected_ids = [-1 if word is None else word for word in case["word_ids"]]
        assert page["ids"] == expected_ids, case["tokens"]
        assert page["labels"] == word_strings(case["tokens"], case["word_ids"], keep_special=True)


def test_word_level_maps_match_the_package(cases):
    for case, page in cases:
        expected = word_attention(case["weights"], case["word_ids"], keep_special=True)
        assert np.allclose(np.reshape(page["merged"], expected.shape), expected, atol=1e-12)


def test_the_four_scores_match_the_package(cases):
    for case, page in cases:
        record = AttentionRecord(case["weights"][None, None], case["tokens"], case["word_ids"])
        expected = sentence_head_scores([record])
        for name in SPREAD_SCORES:
            assert page["scores"][name] == pytest.approx(float(expected[name][0, 0, 0]), abs=1e-12), name
