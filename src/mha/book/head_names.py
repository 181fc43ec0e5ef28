"""One name for a head everywhere in the book, in code, prose, tables and figures: ``L3H1`` for head 1 of layer 3,
both counted from 0 (all chapters). The notation page (``chapters/notation.md``) lists this with the book's other
conventions, and ``tests/test_book.py`` checks that no other spelling appears."""

from __future__ import annotations

import re

from mha.core.validation import check_size, check_whole_number

__all__ = ["head_label", "head_labels", "label_heads", "parse_head_label"]

_HEAD_LABEL = re.compile(r"^L(?P<layer>\d+)H(?P<head>\d+)$")


def _index(value, what: str) -> int:
    """A layer or head index: a whole number >= 0 (a numpy or torch integer is fine, a bool or a float is not)."""
    return check_whole_number(what, value, minimum=0, meaning="counted from 0")


def head_label(layer: int, head: int) -> str:
    """The book's one name for a head: ``head_label(3, 1) == "L3H1"``, head 1 of layer 3, both counted from 0.

    Use it for every head a notebook prints, glues, tabulates or puts in a figure, so that the prose, the tables and
    the figures spell heads the same way. See the notation page, ``chapters/notation.md``.
    """
    return f"L{_index(layer, 'layer')}H{_index(head, 'head')}"


def parse_head_label(label: str) -> tuple[int, int]:
    """``(layer, head)`` from a label made by :func:`head_label`: ``parse_head_label("L3H1") == (3, 1)``."""
    match = _HEAD_LABEL.match(label) if isinstance(label, str) else None
    if match is None:
        raise ValueError(f"{label!r} is not a head label; write a head as 'L3H1' (layer 3, head 1, both from 0), "
                         "with no space, as head_label(3, 1) does.")
    return int(match["layer"]), int(match["head"])


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """Every head's label in flat order, ``layer * n_heads + head``: ``head_labels(2, 2) == ["L0H0", "L0H1", "L1H0",
    "L1H1"]``. Index it with a flat head index, such as the argmax of a (layers * heads,) array. At most
    ``LIMITS["items"]`` labels (:data:`mha.core.validation.LIMITS`)."""
    n_layers, n_heads = _index(n_layers, "n_layers"), _index(n_heads, "n_heads")
    check_size("the head labels (n_layers, n_heads)", (n_layers, n_heads), limit="items")
    return [head_label(layer, head) for layer in range(n_layers) for head in range(n_heads)]


def label_heads(table, layer: str = "layer", head: str = "head"):
    """A pandas table with its ``layer`` and ``head`` columns (or index levels) replaced by one ``head`` of labels.

    ``label_heads(table)`` turns columns ``layer = 3, head = 1`` into one column ``head = "L3H1"``, in the place of
    the layer column; a table indexed by ``(layer, head)`` gets one index ``head`` of labels instead. The other
    columns and the row order are kept; the table passed in is not changed.
    """
    import pandas as pd

    if not isinstance(table, pd.DataFrame):
        raise TypeError(f"label_heads() relabels a pandas DataFrame, not {type(table).__name__}.")
    names = list(table.index.names)
    if layer in names and head in names:
        labels = [head_label(l, h) for l, h in zip(table.index.get_level_values(layer),
                                                   table.index.get_level_values(head), strict=True)]
        others = [name for name in names if name not in (layer, head)]
        relabelled = table.copy()
        if others:
            relabelled.index = pd.MultiIndex.from_arrays(
                [table.index.get_level_values(name) for name in others] + [labels], names=others + ["head"])
        else:
            relabelled.index = pd.Index(labels, name="head")
        return relabelled
    if layer in table.columns and head in table.columns:
        labels = [head_label(l, h) for l, h in zip(table[layer], table[head], strict=True)]
        relabelled = table.drop(columns=[head])
        relabelled[layer] = labels
        return relabelled.rename(columns={layer: "head"})
    raise ValueError(f"label_heads() needs a {layer!r} and a {head!r} column, or index levels with those names; "
                     f"this table has columns {list(table.columns)} and index {names}.")
