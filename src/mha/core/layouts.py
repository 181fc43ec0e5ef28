"""The layouts attention weights take in the package, and one check that an input has the one it should.

Rows are queries (attend FROM), columns keys (attended TO), everywhere (chapter 1, "Attention from scratch"). Token
weights travel in five layouts:

* :data:`BATCH_HEADS` ``(batch, heads, query, key)``: one layer on a batch, as
  :class:`~mha.core.attention.MultiHeadAttention` returns them;
* :data:`LAYERS_BATCH_HEADS` ``(layers, batch, heads, query, key)``: every layer of a model on a batch, as the
  pretrained encoder's traces and the lab's tiny models return them;
* :data:`LAYERS_HEADS` ``(layers, heads, seq, seq)``: every head of a model on one sentence, as
  :class:`~mha.pretrained.attention_record.AttentionRecord` holds them and the analysis of chapters 3 and 4 reads
  them;
* :data:`HEADS` ``(heads, query, key)``: every head of one layer on one sequence, e.g. ``attention_weights[layer,
  b]`` of a trace;
* :data:`QUERY_KEY` ``(query, key)``: one head's map on one sequence, e.g. ``attention[layer, head]`` of a record,
  or a target pattern of chapter 2.

Word-level maps, which :func:`~mha.pretrained.word_maps.word_attention` makes from token maps by merging each word's
pieces, take two more: :data:`WORDS` ``(words, words)`` for one head and :data:`LAYERS_HEADS_WORDS` ``(layers, heads,
words, words)`` for every head on one sentence. A function that reads the last axes only, whatever comes before,
takes a layout :meth:`~AttentionLayout.with_leading` extra axes: ``(..., query, key)``.

A public function that takes weights states their layout with :func:`takes_attention`, which checks the argument
where it enters: a tensor in another layout is refused with an :class:`~mha.core.validation.InputError` that names
the layout it looks like and how to turn it into the one wanted, before any work is done. A function that takes a
list of maps checks each with :func:`check_attention_layout`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mha.core.validation import InputError, check_items, check_whole_number

__all__ = ["AttentionLayout", "BATCH_HEADS", "HEADS", "LAYERS_BATCH_HEADS", "LAYERS_HEADS", "LAYERS_HEADS_WORDS",
           "LAYOUTS", "QUERY_KEY", "WORDS", "attention_shape", "check_attention_layout", "takes_attention"]


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
HEADS = AttentionLayout(("heads", "query", "key"), "every head of one layer on one sequence, e.g. a trace's "
                        "attention_weights[layer, b]")
QUERY_KEY = AttentionLayout(("query", "key"), "one head's map on one sequence, e.g. a record's attention[layer, "
                            "head] or a target pattern")
WORDS = AttentionLayout(("words", "words"), "one head's word-level map, as word_attention merges a token map")
LAYERS_HEADS_WORDS = AttentionLayout(("layers", "heads", "words", "words"),
                                     "every head on one sentence's words, as word_attention(record.attention, "
                                     "word_ids) gives them")
LAYOUTS: tuple[AttentionLayout, ...] = (BATCH_HEADS, LAYERS_BATCH_HEADS, LAYERS_HEADS, HEADS, QUERY_KEY, WORDS,
                                        LAYERS_HEADS_WORDS)
_LAYOUT = ("one of BATCH_HEADS, LAYERS_BATCH_HEADS, LAYERS_HEADS, HEADS, QUERY_KEY, WORDS and LAYERS_HEADS_WORDS "
           "(mha.core.layouts), or a list of them")

# how to go from the layout an input has (first) to the one wanted (second), for the error message
_CONVERSIONS: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {
    (LAYERS_BATCH_HEADS.axes, LAYERS_HEADS.axes): "take one sentence of the batch: {name}[:, b]",
    (LAYERS_BATCH_HEADS.axes, BATCH_HEADS.axes): "take one layer: {name}[layer]",
    (LAYERS_HEADS.axes, LAYERS_BATCH_HEADS.axes): "give the sentence a batch axis: {name}[:, None]",
    (BATCH_HEADS.axes, LAYERS_BATCH_HEADS.axes): "stack the layers' weights, torch.stack(per_layer), or for one layer "
                                                 "{name}[None]",
    (LAYERS_BATCH_HEADS.axes, LAYERS_HEADS_WORDS.axes): "take one sentence and merge its pieces into words: "
                                                        "word_attention({name}[:, b], word_ids)",
}
_INDEX = {"layers": "layer", "batch": "b", "heads": "head"}  # how the docstrings name one entry of a leading axis


def _conversion(have: AttentionLayout, want: AttentionLayout) -> str | None:
    """How to turn weights in layout ``have`` into layout ``want``, for the error message: a way listed above, or
    one entry of each leading axis that ``want`` does not have (both token-level, or both word-level)."""
    if (have.axes, want.axes) in _CONVERSIONS:
        return _CONVERSIONS[(have.axes, want.axes)]
    cut = len(have.axes) - len(want.axes)
    if cut <= 0 or have.axes[cut:-2] != want.axes[:-2] or ("words" in have.axes) != ("words" in want.axes):
        return None
    index = ", ".join(_INDEX.get(axis, ":") for axis in have.axes[:cut])
    return f"pick one entry of its {' and '.join(have.axes[:cut])} axes: {{name}}[{index}]"


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
    """The other layouts ``shape`` fits: by its number of axes, square maps where the layout's are square, and the
    word-level layouts only where a word-level one is wanted (a token map of the same shape is far likelier)."""
    words = any("words" in each.axes for each in wanted)
    return [layout for layout in LAYOUTS if layout.axes not in {each.axes for each in wanted}
            and len(layout.axes) == len(shape) and (words or "words" not in layout.axes)
            and not (layout.axes[-1] == layout.axes[-2] and shape[-1] != shape[-2])]


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
            # a repeated name (seq, seq) keeps its last axis
            axes = dict(zip(candidate.axes, shape[extra:], strict=True))
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
    most = max(len(each.axes) + max(each.leading) for each in layouts)
    if len(shape) > most and any(max(each.leading) for each in layouts):
        message += f", at most {most} axes in all"
    missing = min(len(each.axes) for each in layouts) - len(shape)
    if missing > 0:
        index = ", ".join(["None"] * missing)
        message += f"; if it is one of them with fewer axes, add the {missing} missing in front: [{index}]"
    for other in _looks_like(shape, layouts):
        message += f". It could be {other.name}, {other.source}"
        how = next((way for want in layouts if (way := _conversion(other, want))), None)
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
