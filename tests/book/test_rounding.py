"""mha.book.rounding: a number kept to exactly the digits its format shows, and tables and printouts rounded
without negative zeros, so that what a notebook stores is the same on every CPU."""

import pytest

from mha.book import as_shown, decimals_shown, shown


@pytest.mark.parametrize("fmt, decimals", [(".2f", 2), (".0f", 0), (".0%", 2), (".1%", 3), (".4f", 4)])
def test_decimals_shown_reads_the_prose_format(fmt, decimals):
    assert decimals_shown(fmt) == decimals


@pytest.mark.parametrize("fmt", [".3g", "d", "", "s"])
def test_formats_whose_rounding_is_not_defined_are_refused(fmt):
    with pytest.raises(ValueError, match="fixed-point, percentage or scientific"):
        as_shown(0.5, fmt)


def test_as_shown_keeps_exactly_the_digits_a_format_shows():
    assert as_shown(0.73259, ".1%") == 0.733
    assert as_shown(3.2187e-05, ".1e") == 3.2e-05
    assert as_shown(12.5, ".0f") == 12.0  # half to even, as format() itself rounds
    assert format(as_shown(0.123456, ".2f"), ".2f") == format(0.123456, ".2f")
    with pytest.raises(ValueError, match="significant digits"):
        decimals_shown(".2e")


def test_shown_rounds_and_never_keeps_negative_zero():
    import numpy as np
    import pandas as pd
    import torch

    assert shown(0.123456789, 3) == 0.123
    assert str(shown(-0.0004, 2)) == "0.0"
    assert shown(7, 2) == 7 and shown("L3H1", 2) == "L3H1"
    assert np.array_equal(shown(torch.tensor([0.12345, -0.00001]), 3), np.array([0.123, 0.0]))
    assert str(shown(np.array([-1e-9]), 2)[0]) == "0.0"
    table = pd.DataFrame({"score": [0.123456, -0.0000001], "head": ["L0H1", "L2H3"], "count": [3, 4]})
    rounded = shown(table, 2)
    assert rounded["score"].tolist() == [0.12, 0.0] and rounded["count"].tolist() == [3, 4]
    assert "-0.00" not in rounded.to_string()
    with pytest.raises(ValueError, match="whole number"):
        shown(0.5, -1)
    with pytest.raises(TypeError, match="not set"):
        shown({1.0}, 2)
