"""Inputs that used to give a wrong answer without a word are refused, each with a message that names the fix.

Complex numbers lost their imaginary part, an empty mask gave NaN, an all-padding sentence pooled to 0, an
infinite learning rate or scale was taken, a head of -1 was drawn as "head -1", and ``truncate="no"`` truncated.
"""

import math

import numpy as np
import pytest
import torch

from mha.core.validation import (
    InputError,
    as_real_array,
    check_finite_number,
    check_flag,
    check_real_tensor,
    is_finite_number,
)

COMPLEX = "holds complex numbers .* Pass .*\\.real"


def test_column_means_refuses_complex_attention():
    from mha.analysis.caveats.ablation import column_means

    attention = np.full((2, 3, 3), 1 / 3) + 1j
    with pytest.raises(InputError, match="attention " + COMPLEX):
        column_means(attention)
    assert np.allclose(column_means(attention.real), 1 / 3)


def test_paired_t_refuses_complex_differences():
    from mha.analysis.statistics import paired_t

    differences = np.arange(12.0).reshape(4, 3) + 1j
    with pytest.raises(InputError, match="differences " + COMPLEX):
        paired_t(differences)


def test_qk_circuit_refuses_complex_weights():
    from mha.core.geometry import qk_circuit

    W = torch.randn(6, 2, dtype=torch.complex64)
    with pytest.raises(InputError, match="W_Q " + COMPLEX):
        qk_circuit(W, W.real)
    with pytest.raises(InputError, match="W_K " + COMPLEX):
        qk_circuit(W.real, W)


def _logits_targets():
    generator = torch.Generator().manual_seed(0)
    return torch.randn(2, 5, 7, generator=generator), torch.randint(0, 7, (2, 5), generator=generator)


@pytest.mark.parametrize("metric", ["masked_accuracy", "masked_cross_entropy"])
def test_an_empty_loss_mask_is_refused_not_nan(metric):
    from mha.lab import tasks

    logits, targets = _logits_targets()
    with pytest.raises(InputError, match="scores no position .* Score at least one position"):
        getattr(tasks, metric)(logits, targets, torch.zeros(2, 5, dtype=torch.bool))
    one = torch.zeros(2, 5, dtype=torch.bool)
    one[1, 3] = True
    assert math.isfinite(float(getattr(tasks, metric)(logits, targets, one)))


def test_mean_pool_refuses_a_sentence_of_padding_only():
    from mha.pretrained.sentence_embedding import mean_pool

    hidden = torch.randn(3, 4, 8)
    real = torch.tensor([[True, True, False, False], [False] * 4, [True] * 4])
    with pytest.raises(InputError, match="sentence 1 of the batch has no real token"):
        mean_pool(hidden, real)
    real[1, 0] = True
    assert torch.allclose(mean_pool(hidden, real)[1], hidden[1, 0])


@pytest.mark.parametrize("rate", [math.inf, math.nan, -1e-3, 0.0])
def test_training_config_refuses_a_learning_rate_that_is_not_a_positive_finite_number(rate):
    from mha.lab.training import TrainingConfig

    with pytest.raises(InputError, match="learning_rate must be a finite number above 0"):
        TrainingConfig(learning_rate=rate)
    assert TrainingConfig(learning_rate=2e-3).learning_rate == 2e-3


@pytest.mark.parametrize("std", [math.inf, math.nan, 0.0, "0.02"])
def test_with_random_weights_refuses_a_scale_that_is_not_a_positive_finite_number(std):
    from mha.pretrained.encoder import MiniLMEncoder

    with pytest.raises(InputError, match="std must be a finite number above 0 \\(BERT uses 0.02\\)"):
        MiniLMEncoder.load().with_random_weights(0, std=std)


def test_a_view_refuses_a_negative_head():
    from mha.views.random_layer_explorer import RandomLayerExplorer

    explorer = RandomLayerExplorer(n_heads=4)
    with pytest.raises(InputError, match="head must be a whole number of at least 0 .*counted from 0.*got -1"):
        explorer.view_data(sentence="the cat sat", heads=4, head=-1)
    assert "showing head 3" in explorer.view_data(sentence="the cat sat", heads=4, head=3).message
    explorer.head_slider.value = 0
    assert explorer.refresh()


@pytest.mark.parametrize("flag", ["truncate", "is_split_into_words"])
@pytest.mark.parametrize("value", ["no", "False", 0, None])
def test_tokenize_takes_only_true_or_false_as_a_flag(flag, value):
    from mha.pretrained.tokenizer import tokenize

    with pytest.raises(InputError, match=f"{flag} must be True or False, got {value!r}"):
        tokenize("the cat sat", **{flag: value})


def test_the_shared_checks_refuse_what_the_functions_refuse():
    assert [is_finite_number(v) for v in (1, 2.5, np.float32(3), math.inf, math.nan, True, 1j, "1")] == [
        True, True, True, False, False, False, False, False]
    assert check_finite_number("x", np.int64(3), positive=True) == 3.0
    with pytest.raises(InputError, match="x must be a finite number of at least 0, got -1.0"):
        check_finite_number("x", -1.0, minimum=0)
    with pytest.raises(InputError, match=r"got 1j \(a complex number\)"):
        check_finite_number("x", 1j)
    assert check_flag("flag", np.True_) is True
    assert as_real_array("x", [[1, 2], [3, 4]]).dtype == np.float64
    with pytest.raises(InputError, match="x " + COMPLEX):
        as_real_array("x", [1j, 2])
    with pytest.raises(InputError, match="could not be read as an array .* It should be \\(items,\\)"):
        as_real_array("x", [[1], [1, 2]], meaning="(items,)")
    assert check_real_tensor("x", np.ones((2, 2), dtype=np.float32)).dtype == torch.float32


LOADERS = ["mha.corpora.treebank.read_conllu", "mha.lab.checkpoints.read_manifest",
           "mha.analysis.caveats.ablation.load_pruning_spread", "mha.core.low_rank_fitting.load_pattern_fits",
           "mha.pretrained.model_files.read_model_folder", "mha.pretrained.tokenizer.load_tokenizer"]


OWN_FILE_BY_DEFAULT = ("load_pattern_fits", "load_tokenizer")  # for these, None asks for the book's own file


@pytest.mark.parametrize("loader, path", [(loader, path) for loader in LOADERS for path in (3, None, b"data", "")
                                          if not (path is None and loader.endswith(OWN_FILE_BY_DEFAULT))])
def test_every_loader_refuses_a_path_that_is_not_one(loader, path):
    import importlib

    module, name = loader.rsplit(".", 1)
    with pytest.raises(InputError, match="should be the path of a file or a folder"):
        getattr(importlib.import_module(module), name)(path)


def test_a_function_that_runs_a_model_names_the_model_it_needs():
    from mha.lab.circuit_scores import k_composition_scores
    from mha.pretrained.sentence_embedding import embed

    with pytest.raises(InputError, match=r"encoder should be the pretrained encoder, MiniLMEncoder.load\(\), got 'x'"):
        embed("x", ["the cat sat"])
    with pytest.raises(InputError, match="model should be a TinyTransformer: one you trained, or one loaded with"):
        k_composition_scores(None)
    with pytest.raises(InputError, match="log should be the TrainingLog that train returned"):
        from mha.lab.training import steepest_drop

        steepest_drop({"rows": []})
