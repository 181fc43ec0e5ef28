"""More checks at the package boundary, beside :mod:`mha.core.validation` and in its style: a list whose items must
all be of one kind, a list of whole numbers, a torch float dtype, a device, a list of (layer, head) pairs.

Each refuses a wrong argument with an :class:`~mha.core.validation.InputError` that names it, says what to pass, and
comes before any work: a function that takes "a list of AnnotatedSentence" names the first item that is not one
rather than failing deep inside on an ``AttributeError``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from mha.core.validation import InputError, check_items, check_type, check_whole_number

__all__ = ["check_items_of", "check_whole_numbers", "check_float_dtype", "check_device", "check_head_pairs"]


def check_items_of(name: str, value, kind: type | tuple[type, ...], what: str):
    """``value`` (as :func:`~mha.core.validation.check_items` returns it) if its every item is a ``kind``; else an
    :class:`~mha.core.validation.InputError` naming the first item that is not one (``name[i]``). ``what`` names one
    item and where it comes from ("an AnnotatedSentence, e.g. from generate_corpus()"). Text, a dict, a number and
    None are refused as the list itself."""
    items = check_items(name, value, f"a list of items, each {what}")
    for index, item in enumerate(items):
        check_type(f"{name}[{index}]", item, kind, what)
    return items


def check_float_dtype(name: str, dtype) -> torch.dtype:
    """``dtype`` if it is a torch floating-point dtype (``torch.float32``, ``torch.float64``, ...); whole-number,
    boolean and complex dtypes, numpy's and anything else are refused."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise InputError(f"{name} should be a torch float dtype such as torch.float32 or torch.float64, got "
                         f"{dtype!r:.60} ({type(dtype).__name__}).")
    return dtype


def check_device(name: str, device) -> torch.device | None:
    """``device`` as a :class:`torch.device` (from text such as ``"cpu"`` or ``"cuda:0"``, or a device), or None
    for None; anything else, or text that names no device, is refused."""
    if device is None or isinstance(device, torch.device):
        return device
    if isinstance(device, str):
        try:
            return torch.device(device)
        except RuntimeError:
            pass
    raise InputError(f"{name} should be a device such as 'cpu' or torch.device('cuda'), or None, got "
                     f"{device!r:.60} ({type(device).__name__}).")


def check_head_pairs(name: str, heads, n_layers: int | None = None,
                     n_heads: int | None = None) -> list[tuple[int, int]]:
    """``heads`` as a list of ``(layer, head)`` pairs of whole numbers of at least 0, below ``n_layers`` and
    ``n_heads`` where they are given; else an :class:`~mha.core.validation.InputError` naming the pair."""
    checked = []
    for pair in check_items(name, heads, "a list of (layer, head) pairs, e.g. [(0, 3), (5, 11)]"):
        if isinstance(pair, (str, bytes)) or not isinstance(pair, Sequence) or len(pair) != 2:
            raise InputError(f"{name} are given as (layer, head) pairs, e.g. [(0, 3), (5, 11)]; got {pair!r:.60}.")
        layer = check_whole_number("layer", pair[0], 0, None if n_layers is None else n_layers - 1,
                                   meaning=f"in the pair {pair!r}")
        head = check_whole_number("head", pair[1], 0, None if n_heads is None else n_heads - 1,
                                  meaning=f"in the pair {pair!r}")
        checked.append((layer, head))
    return checked


def check_whole_numbers(name: str, values, minimum: int | None = None, maximum: int | None = None, *,
                        meaning: str = "") -> list[int]:
    """``values`` (a list, a tuple or a one-axis array) as a list of Python ints, each a whole number in
    ``minimum .. maximum`` (:func:`~mha.core.validation.check_whole_number`, each named ``name[i]``); ``meaning`` says
    what the numbers count, for the message."""
    values = check_items(name, values, f"a list of whole numbers{f' ({meaning})' if meaning else ''}")
    return [check_whole_number(f"{name}[{index}]", value, minimum, maximum, meaning=meaning)
            for index, value in enumerate(values)]
