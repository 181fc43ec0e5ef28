"""Checks at the package boundary, with errors that say what was wrong and how to fix it.

Every public function in :mod:`mha` that takes tensors from a reader calls one
of these before doing any work, so a mistake surfaces as an :class:`InputError`
that names the problem and a fix, not as a broadcasting error deep inside torch.
Internal helpers trust their inputs.

The rules for what the attention functions accept (chapter 1, "Attention from scratch"):

* **containers**: a torch tensor, a numpy array, or a nested list of numbers;
  torch functions return tensors, numpy functions return arrays;
* **numbers**: any real dtype. Whole numbers are read as floats (float64 in
  numpy, torch's default float in torch); inputs of different float precisions
  are computed in the widest; :class:`~mha.core.attention.MultiHeadAttention`
  computes in its own dtype (a float64 array going into a float32 layer becomes
  float32). Booleans are refused: a boolean q, k or v is almost always a mask
  passed in the wrong place;
* **NaN and inf**: they cannot be fixed here, and softmax spreads a NaN to every
  query that sees it, so a :class:`NonFiniteWarning` names the input (or
  parameter) that holds them. Only the output is scanned on the normal path.
* **sizes**: a call that would allocate a tensor from its arguments (a layer's
  weights, a score matrix, a mask, a table of resamples) first checks the count
  of numbers against :data:`LIMITS` with :func:`check_size`, and refuses with a
  :class:`SizeLimitError` at once rather than failing in the allocator minutes later.
"""

from __future__ import annotations

import math
import numbers
import operator
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

__all__ = ["LIMITS", "LARGEST_D_MODEL_LISTED", "InputError", "NonFiniteWarning", "SizeLimitError", "check_size",
           "check_seed", "head_counts_that_divide", "is_whole_number", "is_real_number", "is_finite_number",
           "check_whole_number", "check_finite_number", "check_share", "check_flag", "as_real_array",
           "check_real_tensor", "as_path", "check_type", "check_items", "check_head_count", "check_last_dim",
           "check_same_shape", "check_rank", "check_attention_shapes", "check_not_empty", "check_no_lone_surrogates",
           "as_tensor", "as_array", "as_float_tensors", "as_float_arrays", "warn_if_not_finite"]


class InputError(ValueError):
    """Bad input to a public function of :mod:`mha`; the message says what was wrong and how to fix it.

    It is a ``ValueError``, so code that catches ``ValueError`` keeps working.
    """


class SizeLimitError(InputError):
    """A call would allocate more than a limit in :data:`LIMITS` allows; the message names the limit and how to raise
    it."""


LIMITS: dict[str, int] = {"elements": 2**28, "layers": 256, "items": 10**6, "sentences": 2**16}
"""The largest sizes a call may allocate from its arguments; change an entry on purpose to go past it.

``"elements"``: numbers in one tensor, table or model built from a call's arguments (2**28, 1 GiB of float32).
``"layers"``: layers in one model built from a config (each layer is a module of its own, built one by one).
``"items"``: Python objects (labels, rows) one call builds one by one in a loop over a size it is given.
``"sentences"``: sentences tokenised in one batch (each is read and checked one by one before the tokenizer runs).
"""

_LIMIT_UNITS = {"elements": ("numbers", "numbers in one tensor, table or model; 2**28 is 1 GiB of float32"),
                "layers": ("layers", "layers in one model built from a config"),
                "items": ("items", "Python objects one call builds one by one"),
                "sentences": ("sentences", "sentences tokenised in one batch")}


def check_size(what: str, shape: Sequence[int], limit: str = "elements") -> int:
    """The number of entries of ``shape``, or a :class:`SizeLimitError` if it is over ``LIMITS[limit]``.

    Called before allocating, so a huge size is refused at once. ``what`` names the thing that would be built
    ("the causal mask (seq_len, seq_len)"). The product is exact (Python integers), so no size overflows past it.
    """
    count = math.prod(int(size) for size in shape)
    allowed = LIMITS[limit]
    if count > allowed:
        unit, meaning = _LIMIT_UNITS[limit]
        sizes = " x ".join(f"{int(size):,}" for size in shape) + " = " if len(shape) > 1 else ""
        raise SizeLimitError(
            f"{what} would have {sizes}{count:,} {unit}, more than the limit of {allowed:,} "
            f"(mha.core.validation.LIMITS[{limit!r}]: {meaning}). Use smaller sizes; or, if this machine has the "
            f"memory and time, raise the limit on purpose first:\n    mha.core.validation.LIMITS[{limit!r}] = {count}"
        )
    return count


def check_seed(name: str, value) -> int:
    """``value`` as an ``int`` seed in 0 .. 2**64 - 1, the range that ``torch.Generator.manual_seed`` accepts."""
    value = check_whole_number(name, value, minimum=0)
    if value >= 2**64:
        raise InputError(f"{name} = {value} is too large for a seed: it must be below 2**64. Use a smaller whole "
                         "number, e.g. 0.")
    return value


class NonFiniteWarning(UserWarning):
    """An attention result holds NaN or inf; the message names the input or parameter it came from."""


def is_whole_number(value) -> bool:
    """True for a whole number (``int``, ``np.int64``, a one-number integer array or tensor); False for booleans,
    floats (even ``2.0``), text and anything else. The test :func:`check_whole_number` makes, for code that
    collects problems (a JSON file's fields) rather than raising at the first."""
    if isinstance(value, (bool, np.bool_)) or getattr(value, "dtype", None) in (torch.bool, np.bool_):
        return False
    try:
        operator.index(value)  # int, np.int64, a one-number integer array or tensor
    except TypeError:
        return False
    return True


def is_real_number(value) -> bool:
    """True for a real number that is not NaN (``int``, ``float``, numpy's scalars); False for booleans (a flag
    passed in the wrong place), NaN, text and anything else. Bounds are the caller's to check."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        return False
    return not math.isnan(value)


def is_finite_number(value) -> bool:
    """:func:`is_real_number`, and neither NaN nor infinite: the test :func:`check_finite_number` makes."""
    return is_real_number(value) and math.isfinite(value)


def check_finite_number(name: str, value, *, minimum: float | None = None, positive: bool = False,
                        meaning: str = "") -> float:
    """``value`` as a ``float``, for a finite real number; booleans, text, complex numbers, NaN and infinity are
    refused (a learning rate of ``inf`` would run without complaint). ``positive``: above 0; ``minimum``: at or
    above it; ``meaning`` says what the number is ("BERT uses 0.02"). The one check of a real-valued setting."""
    bound = " above 0" if positive else f" of at least {minimum}" if minimum is not None else ""
    wanted = f"{name} must be a finite number{bound}{f' ({meaning})' if meaning else ''}, got {value!r}"
    if not is_finite_number(value):
        kind = (type(value).__name__ if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Complex)
                else "not finite" if isinstance(value, numbers.Real) else "a complex number")
        raise InputError(f"{wanted} ({kind}).")
    if (positive and not value > 0) or (minimum is not None and value < minimum):
        raise InputError(f"{wanted}.")
    return float(value)


def check_share(name: str, value, *, meaning: str = "") -> float:
    """``value`` as a ``float``, for a share (a fraction of attention, a probability) in 0 .. 1, give or take 1e-6 of
    rounding: NaN, infinity, complex numbers and 2.5 are refused, not read as some label. ``meaning`` as above."""
    value = check_finite_number(name, value, meaning=meaning)
    if not -1e-6 <= value <= 1 + 1e-6:
        raise InputError(f"{name} must be a share between 0 and 1{f' ({meaning})' if meaning else ''}, got {value!r}.")
    return value


def check_flag(name: str, value) -> bool:
    """``value`` for ``True`` or ``False`` only: ``"no"`` is truthy, so reading text as a flag would do the opposite
    of what was meant, and 0 or 1 could be a count passed in the wrong place."""
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} must be True or False, got {value!r} ({type(value).__name__}).")
    return bool(value)


def as_path(name: str, value) -> Path:
    """``value`` as a :class:`~pathlib.Path`, for text or an ``os.PathLike``; anything else is refused before it
    reaches the file system."""
    if isinstance(value, bytes) or not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise InputError(f"{name} should be the path of a file or a folder (text or a pathlib.Path), got "
                         f"{value!r:.60} ({type(value).__name__}).")
    return Path(value)


def check_type(name: str, value, kind: type | tuple[type, ...], what: str):
    """``value`` if it is a ``kind``; else an :class:`InputError` saying what to pass (``what``: "the pretrained
    encoder, MiniLMEncoder.load()")."""
    if not isinstance(value, kind):
        raise InputError(f"{name} should be {what}, got {value!r:.60} ({type(value).__name__}).")
    return value


def check_items(name: str, value, what: str):
    """``value`` if one can go through its items: a list, a tuple, an array of at least one axis, or another iterable
    (read into a list once); text, a dict, a number and None are refused, saying ``what`` to pass."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable) or getattr(value, "ndim", 1) == 0:
        raise InputError(f"{name} should be {what}, got {value!r:.60} ({type(value).__name__}).")
    return value if isinstance(value, (Sequence, np.ndarray, torch.Tensor)) else list(value)


def _as_real(name: str, x, meaning: str, convert: Callable):
    """``convert(name, x)``, after refusing complex numbers (never cut to their real part), ``meaning`` (the
    expected axes) added to any message."""
    try:
        dtype = x.dtype if isinstance(x, (torch.Tensor, np.ndarray)) else np.asarray(x).dtype
    except (TypeError, ValueError):
        dtype = None  # ragged: convert says so
    if x.is_complex() if isinstance(x, torch.Tensor) else dtype is not None and dtype.kind == "c":
        raise InputError(f"{name} holds complex numbers ({dtype}), but it should hold real numbers: dropping the "
                         f"imaginary part silently would give a wrong answer. Pass {name}.real if the imaginary "
                         "parts are meant to be 0.")
    try:
        return convert(name, x)
    except InputError as problem:
        raise InputError(f"{problem}{f' It should be {meaning}.' if meaning else ''}") from None


def as_real_array(name: str, x, *, meaning: str = "") -> np.ndarray:
    """``x`` (a tensor, an array, a nested list or one number) as a float64 array; booleans read as 0 and 1; complex
    numbers, text, objects and ragged lists are refused. ``meaning`` spells out the axes: "(items, heads...)"."""
    return _as_real(name, x, meaning, as_array).astype(np.float64, copy=False)


def check_real_tensor(name: str, x, *, meaning: str = "") -> torch.Tensor:
    """``x`` as a tensor of real numbers in its own dtype (an array or a nested list is converted); complex numbers,
    text and objects are refused. ``meaning`` spells out the axes, e.g. "(d_model, d_head)"."""
    return _as_real(name, x, meaning, as_tensor)


def _whole_number_range(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None:
        return f" in {minimum}..{maximum}" if maximum is not None else f" of at least {minimum}"
    return f" of at most {maximum}" if maximum is not None else ""


def check_whole_number(name: str, value, minimum: int | None = None, maximum: int | None = None, *,
                       meaning: str = "") -> int:
    """``value`` as a Python ``int``, for any whole number (``int``, ``np.int64``, ...) in ``minimum .. maximum``.

    Booleans and floats are refused, even ``2.0``: a head count or a length is counted, not measured, so a float
    usually means a division went wrong. Either bound may be None (no bound); both are inclusive. ``meaning``, if
    given, says what the number counts or why the bound holds ("positions in the sequence", "a repeat needs two
    copies"), and goes in the message: "copies must be a whole number of at least 2 (a repeat needs two copies),
    got 1." This is the one whole-number check of the package.
    """
    wanted = f"{name} must be a whole number{_whole_number_range(minimum, maximum)}{f' ({meaning})' if meaning else ''}"
    if not is_whole_number(value):
        hint = (f" Use int({value}) if that is what you meant." if isinstance(value, (float, np.floating))
                and float(value).is_integer() else "")
        raise InputError(f"{wanted}, got {value!r} ({type(value).__name__}).{hint}")
    value = operator.index(value)
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise InputError(f"{wanted}, got {value}.")
    return value


_SURROGATE = re.compile("[\ud800-\udfff]")


def check_no_lone_surrogates(text: str, where: str = "the text") -> None:
    """Raise an :class:`InputError` that says where and what to do if ``text`` holds a lone surrogate (U+D800..U+DFFF).

    A surrogate is half of a UTF-16 pair; alone it is no character at all,
    cannot be written as UTF-8 and makes the tokenizer fail. A browser can
    send one when an emoji or other character outside the Basic Multilingual
    Plane is cut in half (a paste, a deleted half). The text is not cleaned
    silently: the reader is told which character to delete or retype.
    """
    check_type("text", text, str, "text (a str)")
    found = _SURROGATE.search(text)  # one pass in C: a pasted document is checked at once
    if found is None:
        return
    position = found.start()
    context = text[max(position - 10, 0):position]  # no surrogate before the first one
    raise InputError(
        f"{where} holds a broken character at position {position} (U+{ord(found.group()):04X}, "
        f"after {context!r}): half of a UTF-16 pair, as left behind when an emoji or another "
        "character is cut in half. It is not a character, so it cannot be read. Delete it, or retype "
        "that character."
    )


_LARGEST_FACTORED = 10**10  # listing its divisors takes sqrt(d_model) = 10**5 steps: a few milliseconds
LARGEST_D_MODEL_LISTED = 10**6
"""An error message lists the head counts that divide ``d_model`` only up to this width, so it is built at once."""


def head_counts_that_divide(d_model: int) -> list[int]:
    """Every head count ``h`` for which ``d_model`` splits into equal heads of size ``d_model // h`` (chapter 1).

    Found in ``sqrt(d_model)`` steps; a ``d_model`` above 10**10 is refused rather than factored.
    """
    d_model = check_whole_number("d_model", d_model, minimum=1)
    if d_model > _LARGEST_FACTORED:
        raise InputError(f"d_model = {d_model:,} is too large to list its head counts (at most {_LARGEST_FACTORED:,});"
                         " a model that wide could not be built anyway. Use a d_model such as 64, 384 or 768.")
    small = [h for h in range(1, math.isqrt(d_model) + 1) if d_model % h == 0]
    return small + [d_model // h for h in reversed(small) if h * h != d_model]


def check_head_count(d_model: int, n_heads: int) -> int:
    """Return ``d_head = d_model // n_heads``, or raise if the heads cannot be equal.

    Multi-head attention slices ``d_model`` features into ``n_heads`` equal
    slices (chapter 1, "Multi-head attention"), so ``n_heads`` must divide it.
    Any whole number is accepted, numpy's included (e.g. from a slider).
    """
    d_model = check_whole_number("d_model", d_model, minimum=1)
    n_heads = check_whole_number("n_heads", n_heads, minimum=1)
    if d_model % n_heads:
        options = (f" ({', '.join(str(h) for h in head_counts_that_divide(d_model))})"
                   if d_model <= LARGEST_D_MODEL_LISTED else "")
        raise InputError(
            f"d_model = {d_model} is not divisible by n_heads = {n_heads}: each head needs "
            f"d_model / n_heads = {d_model / n_heads:.3g} features, which is not a whole number. "
            f"Choose a head count that divides {d_model}{options}, or change d_model."
        )
    return d_model // n_heads


def check_rank(name: str, shape: Sequence[int], allowed: Sequence[int], meaning: str) -> None:
    """Raise unless ``len(shape)`` is one of ``allowed``; ``meaning`` spells out the expected axes."""
    if len(shape) not in allowed:
        raise InputError(f"{name} has shape {tuple(shape)} ({len(shape)} dimensions), but it should be {meaning}.")


def check_last_dim(name: str, shape: Sequence[int], expected: int, meaning: str) -> None:
    """Raise unless the last axis of ``shape`` has size ``expected``."""
    if len(shape) == 0 or shape[-1] != expected:
        raise InputError(f"{name} has shape {tuple(shape)}, but its last dimension should be {meaning} = {expected}.")


def check_same_shape(name_a: str, shape_a: Sequence[int], name_b: str, shape_b: Sequence[int], why: str) -> None:
    """Raise unless two shapes are equal; ``why`` says why they must match."""
    if tuple(shape_a) != tuple(shape_b):
        raise InputError(f"{name_a} has shape {tuple(shape_a)} but {name_b} has shape {tuple(shape_b)}; {why}.")


def check_not_empty(name: str, shape: Sequence[int], axis: int, what: str) -> None:
    """Raise if axis ``axis`` of ``shape`` (the positions of a sequence) has size 0; ``what`` names them."""
    if shape[axis] == 0:
        raise InputError(f"{name} has shape {tuple(shape)}: there are no {what}. Attention needs at least one "
                         "query and one key, as softmax over no keys is 0/0; drop empty sequences first.")


def _as_shape(name: str, shape) -> tuple[int, ...]:
    """``shape`` (a ``torch.Size``, a tuple or a list of sizes) as a tuple of whole numbers of at least 0."""
    check_items(f"{name}'s shape", shape, f"a shape, a tuple of sizes such as {name}.shape")
    return tuple(check_whole_number(f"{name}'s shape[{axis}]", size, minimum=0) for axis, size in enumerate(shape))


def check_attention_shapes(q_shape: Sequence[int], k_shape: Sequence[int], v_shape: Sequence[int]) -> tuple[int, ...]:
    """Check ``q`` (..., seq_q, d_k), ``k`` (..., seq_k, d_k), ``v`` (..., seq_k, d_v); return the scores' shape.

    The scores have shape (..., seq_q, seq_k), with the leading axes of ``q``
    and ``k`` broadcast; those of ``v`` must broadcast with them too. There must
    be at least one query, one key, and one feature in each vector, and no more
    scores than ``LIMITS["elements"]`` allows.
    """
    q_shape, k_shape, v_shape = (_as_shape(name, shape) for name, shape in
                                 (("q", q_shape), ("k", k_shape), ("v", v_shape)))
    check_rank("q", q_shape, range(2, 9), "(..., seq_q, d_k)")
    check_rank("k", k_shape, range(2, 9), "(..., seq_k, d_k): one row per key, even for a single key")
    check_rank("v", v_shape, range(2, 9), "(..., seq_k, d_v): one row per value, even for a single value")
    check_last_dim("k", k_shape, q_shape[-1], "d_k, the size of each query vector")
    if k_shape[-2] != v_shape[-2]:
        raise InputError(
            f"k has shape {k_shape} and v has shape {v_shape}: they need the same "
            f"number of positions (seq_k, the second-to-last axis), because each key comes with one value."
        )
    check_not_empty("q", q_shape, -2, "queries (seq_q = 0)")
    check_not_empty("k", k_shape, -2, "keys (seq_k = 0)")
    for name, shape, size in (("q", q_shape, "d_k"), ("v", v_shape, "d_v")):
        if shape[-1] == 0:
            raise InputError(f"{name} has shape {shape}: its vectors have no features ({size} = 0). Give each "
                             "query, key and value at least one feature (the last axis).")
    try:
        lead = np.broadcast_shapes(q_shape[:-2], k_shape[:-2])
        np.broadcast_shapes(lead, v_shape[:-2])
    except ValueError:
        raise InputError(
            f"q, k and v have shapes {q_shape}, {k_shape} and {v_shape}; their leading axes (all but the last "
            "two, e.g. batch and heads) must be equal or 1. Give them the same batch size."
        ) from None
    scores_shape = (*lead, q_shape[-2], k_shape[-2])
    check_size("the attention scores (..., seq_q, seq_k)", scores_shape)
    return scores_shape


def as_tensor(name: str, x, device: torch.device | str | None = None) -> torch.Tensor:
    """``x`` (tensor, numpy array or nested list) as a tensor; raise if it is not a regular array of numbers."""
    if isinstance(x, torch.Tensor):
        return x if device is None else x.to(device)
    array = as_array(name, x)
    if any(stride < 0 for stride in array.strides) or not array.flags.writeable:
        array = array.copy()  # torch cannot view reversed (x[::-1]) or read-only (pandas' to_numpy) arrays
    return torch.as_tensor(array, device=device)


def as_array(name: str, x) -> np.ndarray:
    """``x`` as a numpy array of numbers or booleans; raise for ragged lists, strings and objects."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy()
    try:
        array = np.asarray(x)
    except (TypeError, ValueError) as problem:
        raise InputError(f"{name} could not be read as an array ({problem}). Pass a tensor, a numpy array, "
                         "or a nested list whose rows all have the same length.") from None
    if array.dtype.kind not in "biuf":
        raise InputError(f"{name} holds {array.dtype} values ({type(x).__name__}); pass numbers: a tensor, "
                         "a numpy array, or a nested list of numbers whose rows all have the same length.")
    return array


def _check_real(name: str, dtype, kind: str) -> None:
    """Raise for booleans (kind "b") and complex numbers (kind "c"); whole and real numbers are fine."""
    if kind == "b":
        raise InputError(f"{name} has dtype {dtype}, but it should hold numbers (vectors of features). If it is "
                         f"a mask, pass it as mask=...; otherwise convert it with {name}.float() (torch) or "
                         f"{name}.astype(float) (numpy).")
    if kind == "c":
        raise InputError(f"{name} has dtype {dtype}; attention is defined for real numbers. Pass {name}.real.")


def as_float_tensors(named: Mapping[str, object], dtype: torch.dtype | None = None,
                     device: torch.device | None = None) -> list[torch.Tensor]:
    """The values of ``named`` as float tensors of one dtype on one device, or an :class:`InputError`.

    Without ``dtype``, the widest float among them is used (whole numbers alone
    give torch's default float). Without ``device``, that of the given tensors,
    which must agree.
    """
    check_type("named", named, Mapping, "a dict of inputs by name, e.g. {\"q\": q}")
    tensors = {name: as_tensor(name, x) for name, x in named.items()}
    for name, t in tensors.items():
        _check_real(name, t.dtype, "b" if t.dtype == torch.bool else "c" if t.is_complex() else "f")
    if dtype is None:
        floats = [t.dtype for t in tensors.values() if t.is_floating_point()]
        dtype = torch.get_default_dtype() if not floats else floats[0]
        for other in floats[1:]:
            dtype = torch.promote_types(dtype, other)
    if device is None:
        devices = {name: t.device for name, t in tensors.items() if isinstance(named[name], torch.Tensor)}
        if len(set(devices.values())) > 1:
            where = ", ".join(f"{name} on {d}" for name, d in devices.items())
            raise InputError(f"the inputs are on different devices ({where}); move them to one with .to(device).")
        device = next(iter(devices.values()), None)
    return [t.to(dtype=dtype, device=device) for t in tensors.values()]


def as_float_arrays(named: Mapping[str, object]) -> list[np.ndarray]:
    """The values of ``named`` as numpy float arrays of one dtype: the widest float given, else float64."""
    check_type("named", named, Mapping, "a dict of inputs by name, e.g. {\"q\": q}")
    arrays = {name: as_array(name, x) for name, x in named.items()}
    for name, a in arrays.items():
        _check_real(name, a.dtype, a.dtype.kind)
    floats = [a.dtype for a in arrays.values() if a.dtype.kind == "f"]
    dtype = np.result_type(*floats) if floats else np.dtype(np.float64)
    return [a.astype(dtype, copy=False) for a in arrays.values()]


_INTERNAL = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # the mha package
             os.path.dirname(os.path.abspath(torch.__file__)))


def stacklevel_outside_package() -> int:
    """The ``stacklevel`` that points a warning at the reader's own line, however deep in :mod:`mha` (or torch)."""
    frame, level = sys._getframe(1), 1  # level 1 = the function that calls warnings.warn
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL):
        frame, level = frame.f_back, level + 1
    return level


def _all_finite(name: str, x) -> bool:
    if isinstance(x, torch.Tensor):  # a finite sum is the cheap test; only a NaN, an inf or an overflow fails it
        return math.isfinite(x.detach().sum()) or bool(torch.isfinite(x).all())
    return bool(np.isfinite(x if isinstance(x, np.ndarray) and x.dtype.kind in "biufc" else as_array(name, x)).all())


def warn_if_not_finite(result, sources: Mapping[str, object] | Callable[[], Mapping[str, object]],
                       what: str = "the attention output") -> None:
    """Warn with a :class:`NonFiniteWarning` if ``result`` holds NaN or inf, naming which ``sources`` do.

    Only ``result`` is scanned unless it is not finite, so the normal path costs one sum of the output;
    ``sources`` may be a function that returns them, called only then.
    """
    if _all_finite("result", result):
        return
    sources = sources() if callable(sources) else sources
    seen: list[object] = []
    culprits = []
    for name, x in sources.items():
        if x is not None and not any(x is other for other in seen) and not _all_finite(name, x):
            culprits.append(name)
        seen.append(x)
    if culprits:
        message = (f"{what} contains NaN or inf because {' and '.join(culprits)} "
                   f"{'holds' if len(culprits) == 1 else 'hold'} NaN or inf values. Softmax and the weighted "
                   "sum spread them to every query that sees them. Find where they came from, or replace "
                   "them, e.g. with torch.nan_to_num / np.nan_to_num.")
    else:
        dtype = getattr(result, "dtype", "")
        message = (f"{what} contains NaN or inf although every input is finite: the scores overflowed {dtype}. "
                   "Scale the inputs down, or compute in float64.")
    warnings.warn(message, NonFiniteWarning, stacklevel=stacklevel_outside_package())
