"""Activation patching (mha.pretrained.patching) against transformers' BertModel with a forward hook; its properties.

The oracle is the reference model of test_encoder.py (its fixtures are shared): transformers' ``BertModel`` loaded
from the same files, in which a forward hook on ``encoder.layer[l].attention.self`` replaces one head's slice of the
context layer (the heads' outputs, concatenated, before the output projection) with that slice from the source run.
"""

import numpy as np
import pytest
import torch
from test_encoder import encoder, reference  # noqa: F401 (fixtures: our encoder and transformers' BertModel)

from mha.pretrained.patching import (
    check_patchable,
    final_states_with_each_head_patched,
    final_states_with_heads_patched,
    head_patching_effects,
)

# two pairs of the same length, padded together: the pronoun pair and a shorter one
TARGETS = ["The trophy does not fit in the suitcase because it is too big .", "The dog chased the cat ."]
SOURCES = ["The trophy does not fit in the suitcase because it is too small .", "The cat chased the dog ."]
D_HEAD = 32
TOLERANCE = 2e-4  # our encoder and transformers' differ by float32 rounding, growing through the patched layers


@pytest.fixture(scope="module")
def target(encoder):
    return encoder.trace(TARGETS)


@pytest.fixture(scope="module")
def source(encoder):
    return encoder.trace(SOURCES)


def reference_patched(reference, target, source, heads) -> torch.Tensor:
    """transformers' last hidden state of the target batch with each (layer, head) of ``heads`` taken from source."""
    def run(inputs, hooks):
        handles = [reference.encoder.layer[layer].attention.self.register_forward_hook(hook)
                   for layer, hook in hooks.items()]
        try:
            with torch.inference_mode():
                return reference(input_ids=inputs.input_ids, attention_mask=inputs.real_tokens.long(),
                                 token_type_ids=inputs.token_type_ids).last_hidden_state
        finally:
            for handle in handles:
                handle.remove()

    layers = sorted({layer for layer, _ in heads})
    recorded = {}

    def recorder(layer):
        def hook(module, args, output):
            recorded[layer] = output[0].clone()  # (batch, seq, heads * d_head): the context layer
        return hook

    def patcher(layer):
        def hook(module, args, output):
            context = output[0].clone()
            for at, head in heads:
                if at == layer:
                    columns = slice(head * D_HEAD, (head + 1) * D_HEAD)
                    context[..., columns] = recorded[layer][..., columns]
            return (context,) + tuple(output[1:])
        return hook

    run(source.inputs, {layer: recorder(layer) for layer in layers})
    return run(target.inputs, {layer: patcher(layer) for layer in layers})


def assert_close_at_real_tokens(ours, theirs, real, tolerance=TOLERANCE):
    difference = (ours[real] - theirs[real]).abs().max().item()
    assert difference <= tolerance, f"patched states differ by up to {difference:.2e}"


@pytest.mark.parametrize("head", [(0, 3), (2, 8), (5, 11)])
@pytest.mark.slow
def test_one_head_patched_equals_transformers_with_a_hook(encoder, reference, target, source, head):
    ours = final_states_with_each_head_patched(encoder, target, source, heads=[head])[head]
    theirs = reference_patched(reference, target, source, [head])
    assert_close_at_real_tokens(ours, theirs, target.real_tokens)
    # and the patch did something the comparison can see
    assert (ours[target.real_tokens] - target.hidden_states[-1][target.real_tokens]).abs().max() > 1e-3


@pytest.mark.slow
def test_heads_of_several_layers_patched_together_equal_transformers(encoder, reference, target, source):
    heads = [(1, 4), (3, 0), (3, 9), (4, 2)]
    ours = final_states_with_heads_patched(encoder, target, source, heads)
    assert_close_at_real_tokens(ours, reference_patched(reference, target, source, heads), target.real_tokens)


def test_patching_a_head_with_its_own_output_changes_nothing(encoder, target):
    states = final_states_with_each_head_patched(encoder, target, target, heads=[(0, 0), (3, 5), (5, 11)])
    real = target.real_tokens
    for final in states.values():
        assert_close_at_real_tokens(final, target.hidden_states[-1], real, tolerance=1e-5)


def test_patching_every_head_of_a_layer_reproduces_the_other_run(encoder, target):
    layer = 2
    every_head = [(layer, head) for head in range(12)]
    # the source differs from the target at this layer only: same input, different attention
    source = encoder.trace(TARGETS, attention_override=encoder.uniform_attention(every_head))
    assert (source.hidden_states[-1] - target.hidden_states[-1]).abs().max() > 1e-2
    patched = final_states_with_heads_patched(encoder, target, source, every_head)
    assert_close_at_real_tokens(patched, source.hidden_states[-1], target.real_tokens, tolerance=1e-5)


def test_patching_in_a_removed_heads_zero_output_equals_removing_it(encoder, target):
    head = (4, 7)
    removed = encoder.trace(TARGETS, head_mask=encoder.head_mask([head]))  # its output z is 0 there
    patched = final_states_with_each_head_patched(encoder, target, removed, heads=[head])[head]
    assert_close_at_real_tokens(patched, removed.hidden_states[-1], target.real_tokens, tolerance=1e-5)


@pytest.mark.slow
def test_effects_are_the_readout_of_each_patched_run_minus_the_target_run(encoder, reference, target, source):
    def readout(states):  # the first token's first feature, one number per sentence
        return states[:, 1, 0].numpy()

    effects = head_patching_effects(encoder, target, source, readout)
    assert effects.shape == (6, 12, 2)
    for layer, head in [(1, 1), (5, 0)]:
        theirs = reference_patched(reference, target, source, [(layer, head)])
        expected = theirs[:, 1, 0].numpy() - target.hidden_states[-1][:, 1, 0].numpy()
        np.testing.assert_allclose(effects[layer, head], expected, atol=TOLERANCE)
    assert np.abs(effects).max() > 1e-3


@pytest.mark.slow
def test_bad_input_gets_an_error_that_says_how_to_fix_it(encoder, target, source):
    shorter = encoder.trace(["The trophy does not fit .", "The cat chased the dog ."])
    with pytest.raises(ValueError, match="sentence 0 has 16 tokens in target but 8 in source"):
        check_patchable(encoder, target, shorter)
    with pytest.raises(ValueError, match="target has 2 sentences and source 1"):
        final_states_with_each_head_patched(encoder, target, encoder.trace(SOURCES[:1]))
    with pytest.raises(ValueError, match="head must be a whole number in 0..11"):
        final_states_with_each_head_patched(encoder, target, source, heads=[(2, 12)])
    with pytest.raises(ValueError, match="layer must be a whole number in 0..5"):
        final_states_with_heads_patched(encoder, target, source, [(6, 0)])
    with pytest.raises(ValueError, match="heads is empty"):
        final_states_with_heads_patched(encoder, target, source, [])
    with pytest.raises(ValueError, match="give an EncoderTrace"):
        check_patchable(encoder, target, source.hidden_states)
    calls = []

    def readout_that_changes_shape(states):  # one number per sentence on the first call, two afterwards
        calls.append(1)
        return states[:, 0, : min(len(calls), 2)].numpy()

    with pytest.raises(ValueError, match="same shape for every run"):
        head_patching_effects(encoder, target, source, readout_that_changes_shape)
