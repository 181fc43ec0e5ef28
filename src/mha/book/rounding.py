"""Numbers stored at the precision the text shows them (the book's notebooks, all chapters).

A notebook is committed with its outputs, and the test suite (nbval) re-executes it and compares what it prints
with what was stored. Float32 arithmetic agrees between CPUs only to about six significant digits: a laptop with
AVX-512 and one with AVX2 run different SIMD kernels and sum in a different order. So a number is stored the way
the reader sees it, rounded to the decimals the prose or the table shows, and never with the noise digits that
follow: :func:`shown` rounds tables, arrays and printouts, :func:`as_shown` one number to a format, and
:func:`decimals_shown` reads a format's decimals. ``tests/test_stored_numbers.py`` checks the stored outputs.
"""

from __future__ import annotations

import numbers
import re

import numpy as np

from mha.core.validation import check_whole_number

__all__ = ["as_shown", "decimals_shown", "shown"]

_FORMAT = re.compile(r"^[<>=^]?[+\- ]?,?(?:\.(?P<decimals>\d+))?(?P<kind>[fe%])$")


def _parse_format(fmt: str) -> tuple[int, str]:
    if not isinstance(fmt, str):
        raise TypeError(f"fmt must be a format string such as '.2f' or '.1%', not {type(fmt).__name__}.")
    match = _FORMAT.match(fmt)
    if match is None:
        raise ValueError(f"fmt {fmt!r} is not a fixed-point, percentage or scientific format; use one such as '.2f', "
                         "'.0f', '.1%' or '.1e', the same format the prose gives the glued name.")
    return int(match["decimals"] or (0 if match["kind"] == "%" else 6)), match["kind"]


def decimals_shown(fmt: str) -> int:
    """How many decimals of a number a fixed-point format such as ``".2f"`` or ``".1%"`` shows.

    A percentage shows two more decimals of the number than of the percentage. Scientific formats (``".1e"``)
    show significant digits rather than decimals, so they have no fixed answer and are refused here.
    """
    decimals, kind = _parse_format(fmt)
    if kind == "e":
        raise ValueError(f"fmt {fmt!r} shows significant digits, not a fixed number of decimals; use as_shown().")
    return decimals + (2 if kind == "%" else 0)


def as_shown(value: float, fmt: str) -> float:
    """``value`` rounded to exactly what ``format(value, fmt)`` shows: ``as_shown(0.73259, ".1%") == 0.733``."""
    decimals, kind = _parse_format(fmt)
    if kind == "e":
        return float(format(float(value), f".{decimals}e")) + 0.0
    return _round_scalar(value, decimals + (2 if kind == "%" else 0))


def _round_scalar(value: float, decimals: int) -> float:
    """Round half to even, and turn -0.0 into 0.0 (a tiny negative on one CPU is a tiny positive on another)."""
    return round(float(value), decimals) + 0.0


def shown(value, decimals: int):
    """``value`` rounded to ``decimals`` places, as it is stored in a notebook and shown to the reader.

    Accepts a number, a numpy array, a torch tensor (returned as a numpy array), a pandas Series or DataFrame
    (only its float columns are rounded), or a dict or list of these. Integers, booleans and text pass through
    unchanged. Negative zero becomes zero, so that ``-0.00`` never appears on one machine and ``0.00`` on another.
    """
    decimals = check_whole_number("decimals", decimals, minimum=0, meaning="digits after the decimal point")
    if isinstance(value, (bool, np.bool_, str)) or isinstance(value, numbers.Integral):
        return value
    if isinstance(value, numbers.Real):
        return _round_scalar(value, decimals)
    if isinstance(value, dict):
        return {key: shown(item, decimals) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shown(item, decimals) for item in value)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        if not np.issubdtype(value.dtype, np.floating):
            return value
        return np.round(value.astype(np.float64), decimals) + 0.0
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is a dependency of the package
        pd = None
    if pd is not None and isinstance(value, (pd.DataFrame, pd.Series)):
        if isinstance(value, pd.Series):
            return value.round(decimals) + 0.0 if pd.api.types.is_float_dtype(value.dtype) else value
        floats = [column for column, dtype in value.dtypes.items() if pd.api.types.is_float_dtype(dtype)]
        rounded = value.copy()
        rounded[floats] = value[floats].round(decimals) + 0.0
        return rounded
    raise TypeError(f"shown() rounds numbers, arrays, tensors and pandas tables, not {type(value).__name__}.")
