"""Sizes are checked against mha.core.validation.LIMITS before anything is allocated (chapter 1's boundary checks)."""

from __future__ import annotations

import pytest
import torch
from hostile import Case, run_cases

from mha.core.masks import causal_mask
from mha.core.validation import LIMITS, SizeLimitError, check_size, head_counts_that_divide
from mha.lab.tiny_model import TinyTransformer, TinyTransformerConfig

REFUSED = "SizeLimitError"


def test_check_size_refuses_one_past_the_limit_and_says_how_to_raise_it(monkeypatch):
    monkeypatch.setitem(LIMITS, "elements", 100)
    assert check_size("a thing", (10, 10)) == 100
    with pytest.raises(SizeLimitError, match=r"LIMITS\['elements'\] = 101"):
        check_size("a thing", (101,))
    with pytest.raises(SizeLimitError, match="the causal mask"):
        causal_mask(11)
    monkeypatch.setitem(LIMITS, "elements", 121)  # raised on purpose: the same call now goes through
    assert causal_mask(11).shape == (11, 11)


def test_head_counts_that_divide_agrees_with_trial_division():
    for d_model in (*range(1, 400), 384, 768, 1000, 4096, 9973, 10**4):
        assert head_counts_that_divide(d_model) == [h for h in range(1, d_model + 1) if d_model % h == 0]
    assert head_counts_that_divide(2**33)[-3:] == [2**31, 2**32, 2**33]


@pytest.mark.parametrize("fields", [{}, {"use_mlp": True, "layer_norm": True},
                                    {"use_mlp": True, "d_mlp": 7, "attention_bias": False, "n_layers": 3}])
def test_parameter_count_is_the_number_of_weights_built(fields):
    config = TinyTransformerConfig(vocab_size=11, max_seq_len=9, **fields)
    assert config.parameter_count == sum(p.numel() for p in TinyTransformer(config).parameters())


@pytest.mark.slow
def test_size_limits_refuse_before_allocating_in_a_capped_process():
    setup = """
        import numpy as np, torch, mha
        from mha.core.masks import causal_mask, padding_mask
        from mha.core.geometry import random_subspace_angles
        from mha.core import attention_numpy
        from mha.analysis.statistics import bootstrap_interval, sign_flip_signs, held_out_best
        from mha.core.resampling import bootstrap_counts
        from mha.lab.tasks import InductionTask, CopyBackTask
        from mha.lab.tiny_model import TinyTransformerConfig, TinyTransformer
        from mha.lab.head_count_study import HeadCountStudy
        from mha.pretrained.encoder import MiniLMEncoder
        from mha.core.validation import check_head_count
        from mha.views.random_layer_explorer import RandomLayerExplorer
        small = mha.MultiHeadAttention(8, 2)
        encoder = MiniLMEncoder.load()  # loaded here, with its tokenizer: the time limit is the refusal's alone
        encoder.tokenize("warm")
    """
    cases = [
        Case("wide layer", "mha.MultiHeadAttention(50_000, 1)", REFUSED, "LIMITS['elements']"),
        Case("indivisible huge d_model", "mha.MultiHeadAttention(10**12 + 1, 2)", "InputError",
             "is not divisible by n_heads = 2"),
        Case("head counts of a huge d_model", "mha.core.validation.head_counts_that_divide(10**30)", "InputError",
             "too large to list"),
        Case("forward on a million tokens", "small(torch.zeros(1, 10**6, 8))", REFUSED, "attention weights"),
        Case("sdpa on a million keys", "mha.scaled_dot_product_attention(torch.zeros(1, 8), torch.zeros(10**6, 8),"
             " torch.zeros(10**6, 8)); mha.scaled_dot_product_attention(torch.zeros(10**5, 8), "
             "torch.zeros(10**5, 8), torch.zeros(10**5, 8))", REFUSED, "attention scores"),
        Case("numpy multi-head on a long sequence", "attention_numpy.multi_head_attention(np.zeros((1, 20000, 4)), "
             "*[np.eye(4)] * 4, 2)", REFUSED, "attention weights"),
        Case("causal mask", "causal_mask(10**6)", REFUSED, "the causal mask"),
        Case("padding mask", "padding_mask([1], seq_len=10**10)", REFUSED, "the padding mask"),
        Case("seed past 2**64", "mha.MultiHeadAttention(8, 2, seed=2**70)", "InputError", "below 2**64"),
        Case("encoder trace batch x length", "encoder.trace(['a ' * 500] * 64)", REFUSED,
             "attention weights of every layer"),
        Case("bootstrap resamples", "bootstrap_interval(np.ones((10, 3)), n_resamples=10**9)", REFUSED,
             "n_resamples"),
        Case("bootstrap counts", "bootstrap_counts(100, n_resamples=10**9)", REFUSED, "the bootstrap resamples"),
        Case("sign flips", "sign_flip_signs(100, n_permutations=10**9)", REFUSED, "table of signs"),
        Case("held-out splits", "held_out_best(np.ones((10, 3)), n_splits=10**9)", REFUSED, "held-out splits"),
        Case("random subspace pairs", "random_subspace_angles(64, 8, n_pairs=10**9)", REFUSED, "n_pairs"),
        Case("induction task sample", "InductionTask(vocab_size=10**9, seq_len=10**6).sample(1000, 0)", REFUSED,
             "a batch of this task"),
        Case("induction task distinct tokens", "InductionTask(vocab_size=10**9, seq_len=64, distinct_tokens=True)"
             ".sample(1000, 0)", REFUSED, "a batch of this task"),
        Case("copy task sample", "CopyBackTask(vocab_size=5, seq_len=10**7).sample(10**3, 0)", REFUSED,
             "a batch of this task"),
        Case("tiny transformer width x vocabulary", "TinyTransformerConfig(vocab_size=2**20, max_seq_len=8, "
             "d_model=2**14)", REFUSED, "parameters"),
        Case("tiny transformer layers", "TinyTransformerConfig(vocab_size=8, max_seq_len=8, n_layers=10**6)",
             REFUSED, "LIMITS['layers']"),
        Case("tiny transformer indivisible huge width", "TinyTransformerConfig(vocab_size=8, max_seq_len=8, "
             "d_model=10**12 + 1, n_heads=2)", "InputError", "is not divisible"),
        Case("tiny transformer seed", "TinyTransformer(TinyTransformerConfig(vocab_size=8, max_seq_len=8), "
             "seed=2**70)", "InputError", "below 2**64"),
        Case("head-count study of a huge d_model", "HeadCountStudy(head_counts=(1,), learning_rates=(0.1,), "
             "seeds=(0,), thresholds=(0.9,), min_steps=1, max_steps=2, runs=(), controls={}, "
             "d_model=10**12 + 1).check(2)", "ValueError", "does not divide d_model"),
        Case("head count of a huge d_model", "check_head_count(10**12 + 1, 2)", "InputError", "is not divisible"),
        Case("random-layer explorer of a huge indivisible d_model",
             "RandomLayerExplorer(d_model=10**12 + 1, n_heads=2).view_data(sentence='a b', heads=2, head=0)",
             "InputError", "is not divisible"),
        Case("random-layer explorer of a huge d_model",
             "RandomLayerExplorer(d_model=10**12).view_data(sentence='a b', heads=2, head=0)", REFUSED, "LIMITS"),
        Case("random-layer explorer's page payload of a huge d_model",
             "RandomLayerExplorer(d_model=10**12).site_payload()", REFUSED, "LIMITS"),
    ]
    assert run_cases(setup, cases) == []


def test_limits_leave_the_book_sizes_alone():
    layer = TinyTransformer(TinyTransformerConfig(vocab_size=64, max_seq_len=128, n_layers=2))
    assert layer(torch.zeros(4, 128, dtype=torch.long)).logits.shape == (4, 128, 64)
