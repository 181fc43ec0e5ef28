"""Tests for mha.lab.tiny_model: shapes, causality, seeding, head masks, config round-trips."""

from __future__ import annotations

import pytest
import torch

from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

torch.set_num_threads(1)


def small_config(**changes) -> TinyTransformerConfig:
    settings = dict(vocab_size=11, max_seq_len=9, d_model=12, n_layers=2, n_heads=3)
    settings.update(changes)
    return TinyTransformerConfig(**settings)


def some_tokens(batch: int = 2, seq: int = 7, vocab: int = 11, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))


def test_shapes_and_rows_sum_to_one():
    model = TinyTransformer(small_config())
    output = model(some_tokens())
    assert output.logits.shape == (2, 7, 11)
    assert output.attention_weights.shape == (2, 2, 3, 7, 7)  # (layers, batch, heads, seq, seq)
    torch.testing.assert_close(output.attention_weights.sum(-1), torch.ones(2, 2, 3, 7))


def test_causal_model_attends_only_backwards_and_ignores_the_future():
    model = TinyTransformer(small_config())
    tokens = some_tokens()
    weights = model(tokens).attention_weights
    assert torch.all(weights.triu(diagonal=1) == 0)
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    torch.testing.assert_close(model(changed).logits[:, :-1], model(tokens).logits[:, :-1])


def test_bidirectional_model_attends_forwards_too():
    weights = TinyTransformer(small_config(causal=False))(some_tokens()).attention_weights
    assert weights.triu(diagonal=1).sum() > 0


def test_same_seed_same_weights_and_global_rng_untouched():
    state = torch.get_rng_state()
    first, second = TinyTransformer(small_config(), seed=3), TinyTransformer(small_config(), seed=3)
    assert torch.equal(torch.get_rng_state(), state)
    for (name, a), (_, b) in zip(first.state_dict().items(), second.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    other = TinyTransformer(small_config(), seed=4)
    assert not torch.equal(first.W_E, other.W_E)
    assert not torch.equal(first.blocks[0].attention.W_Q, first.blocks[1].attention.W_Q)


def test_head_mask_removes_exactly_that_head():
    model = TinyTransformer(small_config())
    tokens = some_tokens()
    head_mask = torch.ones(2, 3)
    head_mask[1, 2] = 0
    masked = model(tokens, head_mask=head_mask).logits
    with torch.no_grad():
        rows = slice(2 * 4, 3 * 4)  # head 2's rows of W_O (d_head = 4)
        model.blocks[1].attention.W_O[rows] = 0
    torch.testing.assert_close(masked, model(tokens).logits)


def test_all_heads_masked_leaves_the_direct_path():
    model = TinyTransformer(small_config())
    tokens = some_tokens()
    logits = model(tokens, head_mask=torch.zeros(2, 3)).logits
    output_biases = sum(block.attention.b_O for block in model.blocks)
    direct = (model.W_E[tokens] + model.W_pos[:7] + output_biases) @ model.W_U
    torch.testing.assert_close(logits, direct)


def test_attention_override_replaces_one_layers_weights():
    model = TinyTransformer(small_config())
    tokens = some_tokens()

    def attend_to_first(weights: torch.Tensor) -> torch.Tensor:
        replaced = torch.zeros_like(weights)
        replaced[..., 0] = 1
        return replaced

    weights = model(tokens, attention_overrides={1: attend_to_first}).attention_weights
    assert torch.all(weights[1, ..., 0] == 1)
    torch.testing.assert_close(weights[0], model(tokens).attention_weights[0])


@pytest.mark.parametrize("use_mlp, layer_norm", [(True, False), (False, True), (True, True)])
def test_mlp_and_layer_norm_variants(use_mlp, layer_norm):
    config = small_config(use_mlp=use_mlp, layer_norm=layer_norm, d_mlp=20)
    model = TinyTransformer(config)
    output = model(some_tokens())
    assert output.logits.shape == (2, 7, 11)
    attention_only = TinyTransformer(small_config()).parameter_count()
    expected = attention_only + (2 * (12 * 20 + 20 + 20 * 12 + 12) if use_mlp else 0)
    expected += (2 * 2 * 12 * (2 if use_mlp else 1) + 2 * 12) if layer_norm else 0
    assert model.parameter_count() == expected


def test_config_round_trips_through_json():
    config = small_config(use_mlp=True, causal=False)
    assert TinyTransformerConfig.from_json(config.to_json()) == config
    assert config.d_head == 4 and config.mlp_width == 48


@pytest.mark.parametrize("changes, message", [
    (dict(n_heads=5), "not divisible"),
    (dict(n_layers=0), "at least 1"),
    (dict(d_mlp=0), "d_mlp"),
])
def test_bad_configs_say_what_is_wrong(changes, message):
    with pytest.raises(ValueError, match=message):
        small_config(**changes)


def test_from_dict_rejects_unknown_fields():
    with pytest.raises(ValueError, match="unknown"):
        TinyTransformerConfig.from_dict({**small_config().to_dict(), "dropout": 0.1})


def test_bad_inputs_say_what_is_wrong():
    model = TinyTransformer(small_config())
    with pytest.raises(ValueError, match="max_seq_len"):
        model(some_tokens(seq=10))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.full((1, 3), 11))
    with pytest.raises(ValueError, match="head_mask"):
        model(some_tokens(), head_mask=torch.ones(3))
    with pytest.raises(ValueError, match="layers"):
        model(some_tokens(), attention_overrides={2: lambda w: w})


def test_head_weights_are_that_heads_slices():
    model = TinyTransformer(small_config())
    head = model.head_weights(1, 2)
    assert head.W_Q.shape == (12, 4) and head.W_O.shape == (4, 12)
    assert torch.equal(head.W_V, model.blocks[1].attention.W_V[:, 8:12])
    with pytest.raises(ValueError, match="layer"):
        model.head_weights(2, 0)
