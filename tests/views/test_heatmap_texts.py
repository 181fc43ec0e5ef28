"""The numbers a view's table shows (mha.views.heatmaps.weight_texts) are the weights, or a dash where there is
none: never an integer cast of NaN. Oracle: Python's own two-decimal formatting of the weight."""

from __future__ import annotations

import numpy as np
import pytest

from mha.core.validation import InputError
from mha.views.heatmaps import MISSING_WEIGHT, weight_hundredths, weight_texts


def test_a_missing_or_infinite_weight_is_a_dash_and_the_others_are_their_two_decimals():
    weights = [[float("nan"), 0.254], [float("inf"), -float("inf")], [0.999, 0.0]]
    assert weight_texts(weights) == [[MISSING_WEIGHT, "0.25"], [MISSING_WEIGHT, MISSING_WEIGHT], ["1.00", "0.00"]]
    assert MISSING_WEIGHT == "\u2014"
    assert weight_texts([float("nan")]) == ["\u2014"]


def test_weight_texts_agree_with_two_decimal_formatting_signs_included():
    weights = np.random.default_rng(0).uniform(-3, 3, size=(40, 7)).round(6)  # away from .xx5 ties
    assert weight_texts(weights) == [[f"{w:.2f}".replace("-0.00", "0.00") for w in row] for row in weights]


def test_weight_hundredths_refuses_what_has_no_hundredths_and_complex_numbers():
    with pytest.raises(InputError, match=r"holds nan at \(1, 0\).*weight_texts shows such a weight as a dash"):
        weight_hundredths([[0.1, 0.2], [float("nan"), 0.3]])
    with pytest.raises(InputError, match="complex"):
        weight_texts([0.5 + 1j])
