"""The checks of mha.core.argument_checks: what they let through unchanged, and the argument each refusal names."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha.core.argument_checks import (
    check_device,
    check_float_dtype,
    check_head_pairs,
    check_items_of,
    check_whole_numbers,
)
from mha.core.validation import InputError


def test_a_list_of_one_kind_passes_unchanged_and_the_first_wrong_item_is_named():
    words = ["the", "cat"]
    assert check_items_of("words", words, str, "a word") is words
    with pytest.raises(InputError, match=r"words\[1\] should be a word, got 3 \(int\)"):
        check_items_of("words", ["the", 3, None], str, "a word")
    for not_a_list in ("the cat", None, {"a": 1}, 3):
        with pytest.raises(InputError, match="words should be a list of items"):
            check_items_of("words", not_a_list, str, "a word")


def test_whole_numbers_come_back_as_python_ints_within_their_bounds():
    got = check_whole_numbers("counts", np.array([0, 3, 7]), minimum=0)
    assert got == [0, 3, 7] and all(type(n) is int for n in got)
    for bad, where in (([1, 2.5], r"counts\[1\]"), ([True], r"counts\[0\]"), ([-1], r"counts\[0\]")):
        with pytest.raises(InputError, match=where):
            check_whole_numbers("counts", bad, minimum=0)


def test_only_a_torch_float_dtype_passes():
    assert check_float_dtype("dtype", torch.float16) is torch.float16
    for bad in (torch.int64, torch.bool, torch.complex64, np.float32, "float32", None):
        with pytest.raises(InputError, match="dtype should be a torch float dtype"):
            check_float_dtype("dtype", bad)


def test_a_device_is_read_from_text_and_nonsense_is_refused():
    assert check_device("device", "cpu") == torch.device("cpu") and check_device("device", None) is None
    for bad in ("not a device", 3.5, True):
        with pytest.raises(InputError, match="device should be a device"):
            check_device("device", bad)


def test_head_pairs_are_checked_against_the_model_when_its_size_is_given():
    assert check_head_pairs("heads", [(0, 3), [5, np.int64(11)]], n_layers=6, n_heads=12) == [(0, 3), (5, 11)]
    assert check_head_pairs("heads", [(40, 70)]) == [(40, 70)]  # no sizes: only whole numbers of at least 0
    with pytest.raises(InputError, match="head must be a whole number in 0..11"):
        check_head_pairs("heads", [(0, 12)], n_layers=6, n_heads=12)
    for bad in ([(0,)], ["03"], [(0, 1, 2)]):
        with pytest.raises(InputError, match=r"\(layer, head\) pairs"):
            check_head_pairs("heads", bad)
