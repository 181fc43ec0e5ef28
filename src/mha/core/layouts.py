"""The three layouts attention weights take in the package, and one check that an input has the one it should.

Rows are queries (attend FROM), columns keys (attended TO), everywhere (chapter 1, "Attention from scratch"). The
weights travel in three layouts:

* :data:`BATCH_HEADS` ``(batch, heads, query, key)``: one layer on a batch, as
  :class:`~mha.core.attention.MultiHeadAttention` returns them;
* :data:`LAYERS_BATCH_HEADS` ``(layers, batch, heads, query, key)``: every layer of a model on a batch, as the
  pretrained encoder's traces and the lab's tiny models return them;
* :data:`LAYERS_HEADS` ``(layers, heads, seq, seq)``: every head of a model on one sentence, as
  :class:`~mha.pretrained.attention_record.AttentionRecord` holds them and the analysis of chapters 3 and 4 reads
  them.

A public function that takes weights states their layout with :func:`takes_attention`, which checks the argument
where it enters: a tensor in another layout is refused with an :class:`~mha.core.validation.InputError` that names
the layout it looks like and how to turn it into the one wanted, before any work is done.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mha.core.validation import InputError, check_items, check_whole_number

__all__ = ["AttentionLayout", "BATCH_HEADS", "LAYERS_BATCH_HEADS", "LAYERS_HEADS", "LAYOUTS", "attention_shape",
           "check_attention_layout", "takes_attention"]


@dataclass(frozen=True)
class AttentionLayout:
    """A layout of attention weights: the names of its axes, in order, where such weights come from, and how many
    extra axes may come first (``leading``: 0 unless :meth:`with_leading` allows more)."""

    axes: tuple[str, ...]
    source: str
    leading: tuple[int, ...] = (0,)

    @property
    def name(self) -> str:
        """The layout as the docstrings write it: ``(batch, heads, query, key)``, ``(..., batch, ...)`` with leading
        axes."""
        return "(" + ", ".join(["..."] * (max(self.leading) > 0) + list(self.axes)) + ")"

    def with_leading(self, most: int) -> AttentionLayout:
        """The same layout after up to ``most`` extra axes: ``(..., batch, heads, query, key)``."""
        return replace(self, leading=tuple(range(most + 1)))


BATCH_HEADS = AttentionLayout(("batch", "heads", "query", "key"),
                              "one layer on a batch, as MultiHeadAttention returns them")
LAYERS_BATCH_HEADS = AttentionLayout(("layers", "batch", "heads", "query", "key"),
                                     "every layer on a batch, as a trace or a tiny model's output holds them")
LAYERS_HEADS = AttentionLayout(("layers", "heads", "seq", "seq"),
                               "every head on one sentence, as an AttentionRecord holds them")
LAYOUTS: tuple[AttentionLayout, ...] = (BATCH_HEADS, LAYERS_BATCH_HEADS, LAYERS_HEADS)
_LAYOUT = "one of BATCH_HEADS, LAYERS_BATCH_HEADS and LAYERS_HEADS (mha.core.layouts), or a list of them"

# how to go from the layout an input has (first) to the one wanted (second), for the error message
_CONVERSIONS: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {
    (LAYERS_BATCH_HEADS.axes, LAYERS_HEADS.axes): "take one sentence of the batch: {name}[:, b]",
    (LAYERS_BATCH_HEADS.axes, BATCH_HEADS.axes): "take one layer: {name}[layer]",
    (LAYERS_HEADS.axes, LAYERS_BATCH_HEADS.axes): "give the sentence a batch axis: {name}[:, None]",
    (BATCH_HEADS.axes, LAYERS_BATCH_HEADS.axes): "stack the layers' weights, torch.stack(per_layer), or for one layer "
                                                 "{name}[None]",
}


def attention_shape(name: str, weights) -> tuple[int, ...]:
    """The shape of ``weights`` (a tensor, an array or nested lists of numbers), or an error naming ``name``."""
    shape = getattr(weights, "shape", None)
    if shape is not None and not callable(shape):
        return tuple(int(size) for size in shape)
    if isinstance(weights, (str, bytes, Mapping)) or not isinstance(weights, Sequence):
        raise InputError(f"{name} should be attention weights (a tensor, an array or nested lists of numbers), "
                         f"not {type(weights).__name__}.")
    try:
        return tuple(int(size) for size in np.shape(np.asarray(weights, dtype=float)))
    except (TypeError, ValueError):
        raise InputError(f"{name} is a list whose rows have different lengths or hold something other than "
                         "numbers; attention weights are a rectangular array of numbers.") from None


def _looks_like(shape: tuple[int, ...], wanted: Sequence[AttentionLayout]) -> list[AttentionLayout]:
    """The other layouts ``shape`` fits: by its number of axes, and square maps for LAYERS_HEADS."""
    return [layout for layout in LAYOUTS if layout.axes not in {each.axes for each in wanted}
            and len(layout.axes) == len(shape) and not (layout is LAYERS_HEADS and shape[-1] != shape[-2])]


def check_attention_layout(name: str, weights, layout: AttentionLayout | Sequence[AttentionLayout],
                           **sizes: int) -> tuple[int, ...]:
    """The shape of ``weights`` if it has ``layout`` (or one of several), else an :class:`InputError` saying why.

    ``sizes`` pins axes by name (``heads=12``; ``seq`` pins both sides of a square map). Maps of :data:`LAYERS_HEADS`
    must be square, as one sentence's tokens are both its queries and its keys.
    """
    layouts = (layout,) if isinstance(layout, AttentionLayout) else tuple(check_items("layout", layout, _LAYOUT))
    if not layouts or not all(isinstance(each, AttentionLayout) for each in layouts):
        raise InputError(f"layout should be {_LAYOUT}, got {layout!r:.60}.")
    for axis, size in sizes.items():
        check_whole_number(axis, size, minimum=0)
    shape = attention_shape(name, weights)
    wanted = " or ".join(each.name for each in layouts)
    for candidate in layouts:
        for extra in candidate.leading:
            if len(shape) != extra + len(candidate.axes):
                continue
            axes = dict(zip(candidate.axes, shape[extra:]))  # a repeated name (seq, seq) keeps its last axis
            problems = []
            if candidate.axes[-1] == candidate.axes[-2] and shape[-1] != shape[-2]:
                problems.append(f"its last two axes ({shape[-2]}, {shape[-1]}) should be equal: one sentence's "
                                "tokens are both its queries and its keys")
            for axis, size in sizes.items():
                if axis in axes and axes[axis] != size:
                    problems.append(f"its {axis} axis has {axes[axis]} entries, but it should have {size}")
            if problems:
                raise InputError(f"{name} has shape {shape}, read as {candidate.name}; " + "; ".join(problems) + ".")
            return shape
    message = f"{name} has shape {shape} ({len(shape)} axes), but it should be attention weights {wanted}"
    missing = min(len(each.axes) for each in layouts) - len(shape)
    if missing > 0:
        index = ", ".join(["None"] * missing)
        message += f"; if it is one of them with fewer axes, add the {missing} missing in front: [{index}]"
    for other in _looks_like(shape, layouts):
        message += f". It could be {other.name}, {other.source}"
        how = next((_CONVERSIONS[(other.axes, want.axes)] for want in layouts
                    if (other.axes, want.axes) in _CONVERSIONS), None)
        if how:
            message += "; to pass it here, " + how.format(name=name)
    raise InputError(message + ".")


def takes_attention(**layouts: AttentionLayout | Sequence[AttentionLayout]) -> Callable:
    """Decorate a function to check the layout of its attention arguments on every call, before its body runs.

    ``@takes_attention(attention=LAYERS_HEADS)``: the argument ``attention`` must have that layout (or one of a
    sequence of layouts); an argument left at None is not checked. The layouts are kept on the function as
    ``__attention_layouts__`` for the docs and the tests.
    """
    for parameter, layout in layouts.items():
        if not isinstance(layout, AttentionLayout):
            check_items(parameter, layout, _LAYOUT)

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        unknown = set(layouts) - set(signature.parameters)
        if unknown:
            raise TypeError(f"{function.__qualname__} has no parameter {sorted(unknown)} to check")

        @functools.wraps(function)
        def checked(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return function(*args, **kwargs)  # Python's own message about the arguments
            for parameter, layout in layouts.items():
                if parameter in bound.arguments and bound.arguments[parameter] is not None:
                    check_attention_layout(parameter, bound.arguments[parameter], layout)
            return function(*args, **kwargs)

        checked.__attention_layouts__ = dict(layouts)
        return checked

    return decorate
