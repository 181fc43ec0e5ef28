"""scripts/named_head_patching.py: treebank edits, the two readouts, and head patching in the tiny induction model
(section 4.1)."""

import numpy as np
import pytest
import torch
from conftest import load_script

from mha.corpora.treebank import UDTree
from mha.pretrained.encoder import MiniLMEncoder

named = load_script("named_head_patching")


@pytest.fixture(scope="module")
def encoder():
    return MiniLMEncoder.load()


def _tree(words, upos, heads, deprels, lemmas, feats):
    return UDTree(tuple(words), tuple(upos), tuple(heads), tuple(deprels), tuple(lemmas), tuple(feats))


TREES = [
    _tree(["we", "ate", "fish", "today"], ["PRON", "VERB", "NOUN", "NOUN"], [1, -1, 1, 1],
          ["nsubj", "root", "obj", "obl:tmod"], ["we", "eat", "fish", "today"],
          ["Case=Nom", "Tense=Past|VerbForm=Fin", "Number=Sing", "Number=Sing"]),
    _tree(["they", "sold", "bread"], ["PRON", "VERB", "NOUN"], [1, -1, 1], ["nsubj", "root", "obj"],
          ["they", "sell", "bread"], ["Case=Nom", "Tense=Past|VerbForm=Fin", "Number=Sing"]),
]


def test_an_edit_replaces_one_word_by_another_lemma_of_the_same_kind_and_length(encoder):
    pairs = named.edit_pairs(encoder, TREES, "obj->verb")
    assert len(pairs) == 2
    for pair in pairs:
        tree = TREES[pair.tree]
        changed = [i for i, (a, b) in enumerate(zip(pair.first, pair.second, strict=True)) if a != b]
        assert changed == [pair.edited] and tree.deprels[pair.read] == "obj" and tree.heads[pair.read] == pair.edited
        assert {pair.first[pair.edited], pair.second[pair.edited]} == {"ate", "sold"}  # the only other past verb
        lengths = encoder.tokenize([list(pair.first), list(pair.second)], is_split_into_words=True).lengths
        assert lengths[0] == lengths[1]
    verb_obj = named.edit_pairs(encoder, TREES, "verb->obj")
    for pair in verb_obj:  # another singular noun of the treebank, never the word itself
        assert pair.second[pair.edited] in {"fish", "bread", "today"} - {pair.first[pair.edited]}
        assert TREES[pair.tree].upos[pair.read] == "VERB"
    assert named.edit_pairs(encoder, TREES, "obj->verb", among=[1])[0].tree == 1
    with pytest.raises(ValueError, match="relation must be one of"):
        named.edit_pairs(encoder, TREES, "verb->verb")


def test_both_readouts_differ_by_two_times_one_minus_the_cosine_between_the_clean_sentences(encoder):
    first, second = [["we", "ate", "fish"]], [["we", "sold", "fish"]]
    trace = encoder.trace(first + second, is_split_into_words=True)
    values = named.pair_readout([2, 2])(trace, None)  # (2 readouts, 2 rows)
    fish = trace.hidden_states[-1][:, 3].double().numpy()  # [CLS] we ate fish: fish is token 3
    cos = fish[0] @ fish[1] / np.linalg.norm(fish[0]) / np.linalg.norm(fish[1])
    np.testing.assert_allclose(values[0], [1 - cos, cos - 1], atol=1e-5)
    assert values[1, 0] > 0 > values[1, 1]


def test_induction_pairs_change_one_token_to_one_never_seen():
    tokens = torch.tensor([[9, 8, 1, 2, 3, 4, 1, 2, 3, 4]])  # noise 9 8, then A = 1 2 3 4 twice
    start, period = torch.tensor([6]), torch.tensor([4])
    corrupted, query, answer, replacement = named.induction_pairs(tokens, start, period, vocab_size=12)
    assert int(query) == 7 and int(answer) == 3  # query token 2 (position 7); after the earlier 2 comes 3
    assert (corrupted != tokens).sum() == 1 and int(corrupted[0, 4]) == int(replacement)
    assert int(replacement) not in tokens.tolist()[0]
    matched, *_ = named.induction_pairs(tokens, start, period, vocab_size=12, edit="match")
    assert (matched != tokens).nonzero().tolist() == [[0, 3]]  # the earlier occurrence of the query's token
    with pytest.raises(ValueError, match="edit must be"):
        named.induction_pairs(tokens, start, period, vocab_size=12, edit="key")


def test_in_the_attention_only_model_patches_add_up_and_all_heads_carry_everything():
    from mha.lab.checkpoints import load_checkpoint
    from mha.lab.induction import held_out_batch

    model, _ = load_checkpoint(named.TINY_MODEL)
    assert not model.config.use_mlp and not model.config.layer_norm  # what makes the oracle below exact
    batch = held_out_batch(size=32)
    corrupted, query, answer, replacement = named.induction_pairs(
        batch.inputs, batch.details["repeat_start"], batch.details["period"], model.config.vocab_size)
    layer_one = [(1, head) for head in range(model.config.n_heads)]
    result = named.tiny_head_patching(model, batch.inputs, corrupted, query, answer, replacement,
                                      {"layer 1": layer_one, "all": [(0, 0), (0, 1), (0, 2), (0, 3)] + layer_one})
    carried = result["carried"]
    np.testing.assert_allclose(carried["all"], result["difference"], atol=1e-4)
    # the last layer writes straight into the logits, without a norm: its heads' effects add up
    np.testing.assert_allclose(sum(carried[f"L1H{h}"] for h in range(4)), carried["layer 1"], atol=1e-4)
    assert result["difference"].min() > 0  # the clean answer wins in the clean run and loses in the corrupted one
