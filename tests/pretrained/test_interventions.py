"""Every intervention of mha.pretrained.interventions, resumed from a stored layer, equals a full run of the encoder.

Head removal (under any masks, or one head at a time), key removal and permuted attention each run on
``MiniLMEncoder.run_from_layer``; each is checked against ``encoder.trace`` with the same head mask or override.
"""

import numpy as np
import pytest
import torch

from mha.pretrained.encoder import MiniLMEncoder
from mha.pretrained.interventions import (
    as_head_masks,
    embeddings_under_masks,
    final_states_under_masks,
    final_states_without_each_head,
    key_removal_effects,
    permuted_attention,
)
from mha.pretrained.sentence_embedding import sentence_embeddings

SENTENCES = ["The trophy does not fit in the suitcase because it is too big .", "A short one ."]  # padded batch


@pytest.fixture(scope="module")
def encoder() -> MiniLMEncoder:
    return MiniLMEncoder.load()


@pytest.fixture(scope="module")
def trace(encoder):
    return encoder.trace(SENTENCES)


# ---------------------------------------------------------------- head removal


def test_masked_states_equal_full_runs_with_that_mask(encoder, trace):
    masks = np.ones((4, 6, 12), dtype=np.float32)
    masks[1, 0, 3] = 0.0                         # starts at layer 0
    masks[2, 3, [1, 7]] = 0.0                    # starts at layer 3
    masks[2, 5, 0] = 0.0
    masks[3, 5] = 0.0                            # a whole layer
    states = final_states_under_masks(encoder, trace, masks, max_sequences=3)  # forces several chunks
    real = trace.real_tokens
    for mask, final in zip(masks, states, strict=True):
        expected = encoder.trace(SENTENCES, head_mask=torch.from_numpy(mask)).hidden_states[-1]
        assert torch.allclose(final[real], expected[real], atol=1e-5)
    assert torch.equal(states[0][real], trace.hidden_states[-1][real])   # all ones: the full model, not recomputed
    assert not states[:, ~real].any()                                      # padding is not run: it holds 0
    vectors = embeddings_under_masks(encoder, trace, masks)
    assert vectors.shape == (4, 2, 384) and np.allclose(np.linalg.norm(vectors, axis=-1), 1.0, atol=1e-5)
    with pytest.raises(ValueError, match="configs, 6, 12"):
        final_states_under_masks(encoder, trace, np.ones((2, 12, 6)))
    assert as_head_masks(encoder, np.ones((6, 12))).shape == (1, 6, 12)


def test_removing_each_head_equals_a_full_run_with_a_head_mask(encoder, trace):
    states = final_states_without_each_head(encoder, trace, heads=[(3, 7), (0, 3), (3, 1), (5, 11)])
    assert list(states) == [(0, 3), (3, 7), (3, 1), (5, 11)]  # in layer order
    real = trace.real_tokens  # padding positions are not compared
    for (layer, head), final in states.items():
        expected = encoder.trace(SENTENCES, head_mask=encoder.head_mask([(layer, head)])).hidden_states[-1]
        assert torch.allclose(final[real], expected[real], atol=1e-5)
        assert not torch.allclose(final[real], trace.hidden_states[-1][real], atol=1e-5)


def test_removing_each_head_defaults_to_every_head_and_checks_them(encoder):
    states = final_states_without_each_head(encoder, encoder.trace("Two words ."))
    assert len(states) == 72 and states[(2, 5)].shape == (1, 5, 384)
    with pytest.raises(ValueError, match="layer must be a whole number in 0..5"):
        final_states_without_each_head(encoder, encoder.trace("Two words ."), heads=[(6, 0)])


# ---------------------------------------------------------------- key removal

KEY_SENTENCES = ["The cat sat on the mat .", "A dog barked ."]  # padded batch


def full_run_effect(encoder, trace, sentence, layer, head, key):
    def override(at_layer, weights, real_tokens):
        if at_layer != layer:
            return weights
        weights = weights.clone()
        weights[:, head, :, key] = 0.0
        return weights

    changed = encoder.trace(KEY_SENTENCES, attention_override=override)
    vectors = [sentence_embeddings(t.hidden_states[-1], t.real_tokens)[sentence] for t in (trace, changed)]
    return 1.0 - float(vectors[0] @ vectors[1])


def test_key_removal_effects_equal_full_runs_and_padding_is_nan(encoder):
    trace = encoder.trace(KEY_SENTENCES)
    heads = [(3, 1), (0, 2), (5, 9), (3, 4)]  # out of layer order on purpose
    effects = key_removal_effects(encoder, trace, heads)
    assert effects.shape == (2, 4, 9)
    for sentence, row, key in ((0, 1, 3), (1, 0, 0), (1, 3, 4), (0, 2, 8), (0, 0, 5)):
        layer, head = heads[row]
        assert effects[sentence, row, key] == pytest.approx(full_run_effect(encoder, trace, sentence, layer, head, key),
                                                            abs=2e-6)
    assert np.isnan(effects[1, :, 6:]).all() and not np.isnan(effects[0]).any()
    with pytest.raises(ValueError, match="layer must be a whole number in 0..5"):
        key_removal_effects(encoder, trace, [(6, 0)])
    with pytest.raises(ValueError, match="heads is empty"):
        key_removal_effects(encoder, trace, [])


# ---------------------------------------------------------------- counterfactual attention


def test_permuted_rows_keep_their_weights_and_padding_stays_empty(encoder):
    trace = encoder.trace(["The cat sat on the mat .", "A dog barked ."])
    weights = trace.attention_weights[2]  # (batch, heads, seq, seq)
    override = permuted_attention([(2, 0), (2, 5)], seed=3)
    new = override(2, weights, trace.real_tokens)
    assert torch.equal(new[:, 1], weights[:, 1])  # other heads untouched
    for head in (0, 5):
        assert torch.allclose(new[:, head].sort(-1).values, weights[:, head].sort(-1).values)
        assert not torch.allclose(new[:, head], weights[:, head])
    assert (new[1, :, :, 6:] == 0).all()  # sentence 1 has 6 real tokens
    assert torch.equal(override(3, weights, trace.real_tokens), weights)  # other layers untouched


def test_permuted_runs_are_reproducible(encoder):
    runs = [encoder.trace("The cat sat on the mat .", attention_override=permuted_attention([(1, 4)], seed=0))
            for _ in range(2)]
    assert torch.equal(runs[0].hidden_states, runs[1].hidden_states)
    other = encoder.trace("The cat sat on the mat .", attention_override=permuted_attention([(1, 4)], seed=1))
    assert not torch.equal(runs[0].hidden_states, other.hidden_states)
