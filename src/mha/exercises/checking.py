"""The machinery behind every exercise check: call the learner's function, read its answer, compare, explain.

A check runs the learner's function on several seeded random inputs, compares
each answer with the reference, and returns a :class:`CheckResult` that is
truthy only when every case matches. Its text says what differed (shape,
dtype, values, which head) or gives one short success line, so it reads well
as the last line of a notebook cell; tests assert on ``passed``.

Whatever the learner hands in, the answer is a :class:`CheckResult`, never a traceback:

* an exception raised inside the learner's function is reported with its type, message and line; a name it
  reads that is not defined, and a newer cell that defines the function but does not parse, are reported as what
  they are (:mod:`mha.exercises.learner_errors`);
* the answer is read by one of the readers :func:`answer_array`, :func:`answer_number` and
  :func:`answer_tuple`. An answer of the wrong kind (a string, a dict, None, NaN, complex numbers, a
  wrong shape) makes them raise :class:`AnswerError`, whose message :func:`run_check` turns into the
  case's feedback; a torch tensor, even one that requires grad, is read as its values;
* every comparison fails closed: a NaN in the answer is feedback, and a non-finite *expected* value
  raises :class:`CheckBug` (NaN compares as "no difference" in ``abs(a - b) > tol``, so it would let any
  answer pass).
"""

from __future__ import annotations

import datetime
import hashlib
import math
import reprlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from mha.core.validation import check_items, check_type, check_whole_number

from .learner_errors import newer_cell_that_does_not_parse, undefined_name_feedback, where_it_failed

__all__ = ["AnswerError", "CheckBug", "CheckResult", "answer_array", "answer_number", "answer_tuple", "array_or_none",
           "compare_array", "compare_number", "describe_difference", "describe_value", "expected_array",
           "matches", "named_slip", "one_hot_attention", "random_attention_maps", "PredictionMissing",
           "PREDICTION_RECORD", "prediction_fingerprint", "require_prediction", "run_check", "scalar_difference",
           "uses_tools"]


@dataclass(frozen=True)
class CheckResult:
    """Outcome of one exercise check; ``bool(result)`` is ``result.passed``."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return self.message


class AnswerError(Exception):
    """The learner's answer is not the kind of value the exercise asks for; the message says what it is and what to
    return.

    Raised by the readers (:func:`answer_array`, :func:`answer_number`, :func:`answer_tuple`); :func:`run_check`
    turns it into the failing case's feedback, so a check's ``compare`` can read an answer without guarding it.
    """


class CheckBug(RuntimeError):
    """A check's own expected answer is not finite numbers: a bug in the check, raised rather than let any answer
    pass."""


class PredictionMissing(Exception):
    """A "Predict, then check" measurement asked for before a prediction was entered (:func:`require_prediction`)."""

    def _render_traceback_(self) -> list[str]:  # what IPython shows instead of a traceback
        return [str(self)]


def require_prediction(prediction: Any, name: str = "my_prediction") -> None:
    """Refuse to show a measurement before the learner has predicted it: each "Predict, then check" cell that
    measures starts with this call in the student edition (scripts/student_edition.py). A prediction is missing
    while it is None, ``...`` or blank text; :class:`PredictionMissing` then says what to do."""
    if prediction is None or prediction is Ellipsis or (isinstance(prediction, str) and not prediction.strip()):
        raise PredictionMissing(f"✗ No prediction yet: set {name} in the cell above (with a sentence on why, as a "
                                "comment) and run it. This cell shows the measurement only after you have predicted.")
    when = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    print(f"{PREDICTION_RECORD} {name} = {prediction_fingerprint(prediction)} at {when} (a fingerprint of your "
          "prediction, kept in this cell's output: a prediction edited after this shows in the notebook you hand "
          "in)")


PREDICTION_RECORD = "Prediction recorded:"
"""How the line :func:`require_prediction` prints begins; :mod:`mha.exercises.grading.predictions` reads it back."""


def prediction_fingerprint(prediction: Any) -> str:
    """12 hexadecimal digits of the SHA-256 of the prediction's ``repr``: the same value always gives the same
    fingerprint, an edited one (almost surely) another."""
    return hashlib.sha256(repr(prediction).encode()).hexdigest()[:12]


# --- saying what the learner handed in ----------------------------------------------------------

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 40
_short.maxlist = _short.maxtuple = 4


def _a(noun: str) -> str:
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def describe_value(value: Any) -> str:
    """A short phrase for any value, for feedback: ``a str ('abc')``, ``a torch.Tensor of shape (2, 2) that requires
    grad``."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        grad = " that requires grad" if value.requires_grad else ""
        return f"a torch.Tensor of shape {tuple(value.shape)} and dtype {str(value.dtype).removeprefix('torch.')}{grad}"
    if isinstance(value, np.ndarray):
        return f"a numpy array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, np.generic):
        return f"{_a(type(value).__name__)} ({_short.repr(value.item())})"
    if isinstance(value, (bool, int, float, complex, str, bytes)):
        return f"{_a(type(value).__name__)} ({_short.repr(value)})"
    if isinstance(value, dict):
        return f"a dict with keys {_short.repr(list(value))}"
    if isinstance(value, (tuple, list)):
        kinds = ", ".join(type(item).__name__ for item in value[:4]) + (", ..." if len(value) > 4 else "")
        return f"{_a(type(value).__name__)} of {len(value)} item{'' if len(value) == 1 else 's'} ({kinds})"
    return _a(type(value).__name__)


def _how_to_fix(value: Any, one_number: bool = False) -> str:
    """A hint for the common ways of handing in the wrong kind of value (where ``one_number`` is wanted), or ''."""
    if value is None:
        return " Did your function forget its `return` statement?"
    if isinstance(value, (str, bytes)) or (isinstance(value, np.ndarray) and value.dtype.kind in "USO"):
        return " Return the numbers themselves, not text (no str(...), f-string or print)."
    if isinstance(value, dict):
        return " Return the values themselves, not a dict of them."
    if isinstance(value, (complex, np.complexfloating)) or (isinstance(value, np.ndarray) and value.dtype.kind == "c") \
            or (isinstance(value, torch.Tensor) and value.is_complex()):
        return " These are complex numbers: take the real part (.real) or the magnitude (np.abs) before returning."
    array = _numeric(value)
    if one_number and (isinstance(value, (list, tuple)) or (array is not None and array.size > 1)):
        return " Return one number, not several."
    if isinstance(value, (list, tuple)) and value:
        if any(isinstance(item, (str, bytes)) for item in value):
            return " Return the numbers themselves, not text (no str(...), f-string or print)."
        if all(isinstance(item, (np.ndarray, torch.Tensor)) for item in value):
            return " Combine the pieces into one array (np.stack or torch.stack) before returning."
        if all(isinstance(item, (int, float, np.number)) and not isinstance(item, bool) for item in value):
            return " Convert it with np.array(...) before returning."
    return ""


# --- reading an answer ------------------------------------------------------------------------------

def _numeric(value: Any) -> np.ndarray | None:
    """``value`` as a numpy array of numbers or booleans (a torch tensor read as its values), or None for anything
    else."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dtype == torch.bfloat16:  # numpy has no bfloat16
            value = value.float()
        try:
            value = value.numpy()
        except (TypeError, RuntimeError):  # sparse, quantized, ...: not something an exercise asks for
            return None
    elif isinstance(value, (bool, int, float, np.generic)):
        value = np.asarray(value)  # an int too large for int64 becomes dtype object: rejected below
    elif not isinstance(value, np.ndarray):
        return None
    return value if value.dtype.kind in "biuf" else None


def array_or_none(value: Any) -> np.ndarray | None:
    """The learner's answer as a numpy array of numbers or booleans (torch tensors and numbers too), or None if it is
    something else. Never raises: for hints; use :func:`answer_array` to read an answer that must be an array."""
    return _numeric(value)


def _shape_phrase(shape: Sequence[int] | None, boolean: bool) -> str:
    kind = "booleans" if boolean else "numbers"
    where = f"of shape {tuple(shape)}" if shape is not None else f"of {kind}"
    return f"a numpy array (or torch tensor) {where}" + (" and dtype bool" if boolean and shape is not None else "")


def answer_array(value: Any, name: str, shape: Sequence[int] | None = None, *, boolean: bool = False) -> np.ndarray:
    """Read the learner's ``value`` as an array (of booleans with ``boolean``) of ``shape``, finite unless boolean.

    Returns the numpy array (a torch tensor is detached and copied to the CPU); raises :class:`AnswerError`
    with feedback naming ``name`` when the value is another kind of thing, has the wrong dtype or shape, or
    holds NaN or infinity.
    """
    array = _numeric(value)
    if array is None:
        raise AnswerError(f"{name} is {describe_value(value)}; it should be {_shape_phrase(shape, boolean)}."
                          f"{_how_to_fix(value)}")
    if shape is not None and array.ndim == 0 and len(shape) > 0:
        raise AnswerError(f"{name} is {describe_value(value)}, a single number; it should be "
                          f"{_shape_phrase(shape, boolean)}.")
    if shape is not None and array.shape != tuple(shape):
        hint = ""
        if sorted(array.shape) == sorted(shape):
            hint = " The same sizes in another order: check which axis is which (a transpose or a missing swap)."
        raise AnswerError(f"{name} has shape {array.shape}, expected {tuple(shape)}.{hint}")
    if boolean and array.dtype != np.bool_:
        raise AnswerError(f"{name} has dtype {array.dtype}; it should be boolean (True = may attend): build it from "
                          "a comparison, or ask for dtype=bool.")
    if not boolean and not np.isfinite(array).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(array))[0])
        where = f" (first at index {bad})" if bad else ""
        raise AnswerError(f"{name} contains NaN or infinity{where} where the answer is finite; "
                          "look for an overflow in exp, a division by zero or a mean over nothing.")
    return array


def answer_number(value: Any, what: str, *, whole: bool = False, kind: str | None = None) -> float | int:
    """Read the learner's ``value`` as one finite number (a whole one with ``whole``): a Python, numpy or torch
    scalar, or an array holding one number. Raises :class:`AnswerError` naming ``what`` otherwise; ``kind``
    words what to return ("a whole number (an int)", "one number (a float)" by default)."""
    kind = kind or ("a whole number (an int)" if whole else "one number (a float)")
    array = _numeric(value)
    if array is None or array.size != 1 or array.dtype == np.bool_:
        hint = " That is True or False; return the number itself." if array is not None and array.dtype == np.bool_ \
            else _how_to_fix(value, one_number=True)
        raise AnswerError(f"return {what} as {kind}, got {describe_value(value)}.{hint}")
    number = array.reshape(()).item()
    if not math.isfinite(number):
        raise AnswerError(f"{what} is {number}, but it should be a finite number. NaN comes from 0 / 0 or a mean over "
                          "nothing (an empty selection); infinity from a division by zero.")
    if whole and not isinstance(number, int):
        stored_as_float = float(number).is_integer()
        hint = " It is a whole number stored as a float: convert it with int(...)." if stored_as_float else ""
        raise AnswerError(f"return {what} as {kind}, got {describe_value(value)}.{hint}")
    return number


def answer_tuple(value: Any, names: Sequence[str], kind: str | None = None) -> tuple:
    """Read the learner's ``value`` as a tuple (or list) of ``len(names)`` items; raises :class:`AnswerError` otherwise.

    ``kind`` words the feedback ("three arrays"); by default "a pair", "a triple", "a tuple of n".
    """
    what = kind or {2: "a pair", 3: "a triple"}.get(len(names), f"a tuple of {len(names)}")
    if isinstance(value, (tuple, list)) and len(value) == len(names):
        return tuple(value)
    hint = " Did your function forget its `return` statement?" if value is None else ""
    raise AnswerError(f"return {what} ({', '.join(names)}), got {describe_value(value)}.{hint} "
                      f"End your function with `return {', '.join(names)}`.")


def expected_array(expected: Any) -> np.ndarray:
    """The check's own expected answer as an array; raises :class:`CheckBug` unless it is finite numbers or booleans."""
    array = np.asarray(expected)
    if array.dtype.kind not in "biuf" or not np.isfinite(array.astype(float)).all():
        raise CheckBug(f"the expected answer is not finite numbers ({_short.repr(expected)}): this is a bug in the "
                       "exercise check, not in your answer. Please report it.")
    return array


# --- comparing ------------------------------------------------------------------------------------

def _within(got: np.ndarray, expected: np.ndarray, atol: float, rtol: float = 0.0) -> bool:
    """The one tolerance test behind every comparison: same shape and |got - expected| <= atol + rtol |expected|
    everywhere. Fails closed: a NaN on either side is never within."""
    if np.shape(got) != np.shape(expected):
        return False
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    return bool(np.all(np.abs(got - expected) <= atol + rtol * np.abs(expected)))


def describe_difference(name: str, got: Any, expected: Any, *, atol: float = 1e-6,
                        head_axis: int | None = None) -> str | None:
    """``None`` if ``got`` matches ``expected`` within ``atol``, else one sentence saying how it differs.

    With ``head_axis`` set, a value mismatch also says which heads differ. An answer of the wrong kind gets
    :func:`answer_array`'s feedback; a non-finite ``expected`` raises :class:`CheckBug`.
    """
    expected = expected_array(expected)
    boolean = expected.dtype == np.bool_
    try:
        got_array = answer_array(got, name, expected.shape, boolean=boolean)
    except AnswerError as error:
        return str(error)
    if boolean:
        wrong = np.argwhere(got_array != expected)
        if len(wrong):
            where = tuple(int(i) for i in wrong[0])
            transposed = got_array.ndim >= 2 and np.array_equal(np.swapaxes(got_array, -1, -2), expected)
            hint = " It is the transpose of the answer: rows are queries, columns are keys." if transposed else ""
            return (f"{name} differs in {len(wrong)} of {expected.size} entries, first at index {where}: "
                    f"got {bool(got_array[where])}, expected {bool(expected[where])}.{hint}")
        return None
    if _within(got_array, expected, atol):
        return None
    got_array, expected = got_array.astype(float), expected.astype(float)
    if expected.ndim == 0:
        return f"{name}: got {float(got_array):.4g}, expected {float(expected):.4g}."
    difference = np.abs(got_array - expected)
    where = tuple(int(i) for i in np.unravel_index(np.argmax(difference), difference.shape))
    message = (f"{name} has the right shape {expected.shape} but wrong values: the largest difference is "
               f"{difference[where]:.3g} at index {where} (got {got_array[where]:.4g}, expected "
               f"{expected[where]:.4g}).")
    if head_axis is not None:
        other_axes = tuple(a for a in range(difference.ndim) if a != head_axis % difference.ndim)
        per_head = difference.max(axis=other_axes)
        wrong_heads = [h for h, d in enumerate(per_head) if d > atol]
        right_heads = [h for h, d in enumerate(per_head) if d <= atol]
        message += f" Heads that differ: {wrong_heads}"
        message += f"; heads that match: {right_heads}." if right_heads else " (all of them)."
    return message


def matches(got: Any, expected: Any, atol: float = 1e-6) -> bool:
    """Whether ``got`` has ``expected``'s shape and values; False (never an error) for an unreadable or NaN answer.

    For naming a slip, not for passing an answer: that is :func:`describe_difference`'s job."""
    got = array_or_none(got)
    if got is None or (got.dtype == np.bool_) != (np.asarray(expected).dtype == np.bool_):  # True is no number here
        return False
    return _within(got, expected, atol, rtol=1e-5)


def named_slip(got: Any, slips: dict[str, tuple[Any, str]], atol: float = 1e-6) -> str | None:
    """The hint of the slip in ``slips`` (a name -> (the answer that slip gives, its hint)) whose answer ``got`` is,
    or None; when slips with different hints give that same answer, all their hints, since it does not say which
    was made. A number or an array matches within ``atol`` (NaN where the slip's answer has NaN too), True or False
    only itself; never an error. For naming a wrong answer, after it failed the comparison with the right one."""
    check_type("slips", slips, dict, "a dict of slip name -> (the answer that slip gives, its hint)")
    hints = list(dict.fromkeys(hint for value, hint in slips.values() if _is_slip_answer(got, value, atol)))
    if len(hints) > 1:
        return "Several slips give exactly this answer: " + " Or: ".join(hints)
    return hints[0] if hints else None


def _is_slip_answer(got: Any, slip_value: Any, atol: float) -> bool:
    if isinstance(slip_value, (bool, np.bool_)):
        return isinstance(got, (bool, np.bool_)) and bool(got) == bool(slip_value)
    slip_array, got_array = array_or_none(slip_value), array_or_none(got)
    if slip_array is None or got_array is None or slip_array.shape != got_array.shape:
        return False
    if slip_array.dtype.kind == "f" and got_array.dtype.kind == "f":  # NaN where the slip's answer has NaN too
        both_nan = np.isnan(slip_array) & np.isnan(got_array)
        slip_array, got_array = np.where(both_nan, 0.0, slip_array), np.where(both_nan, 0.0, got_array)
    return matches(got_array, slip_array, atol=atol)


def compare_number(got: Any, want: float, slips: dict[str, tuple[float, str]], what: str,
                   atol: float = 1e-6) -> str | None:
    """None when ``got`` is ``want``; else what differs, naming a known slip when ``got`` matches one.

    ``slips`` maps a name to ``(the value that slip gives, the hint to show)``.
    """
    want = float(expected_array(want))
    try:
        value = answer_number(got, what)
    except AnswerError as error:
        return str(error)
    if _within(value, want, atol):
        return None
    hint = named_slip(value, slips, atol)
    return f"you returned {value:.4g} for {what}, expected {want:.4g}." + (f" {hint}" if hint else "")


def scalar_difference(name: str, got: Any, expected: float) -> str | None:
    """:func:`compare_number` without slips, for an answer that should be one number."""
    return compare_number(got, expected, {}, name)


def compare_array(got: Any, want: np.ndarray, slips: dict[str, tuple[np.ndarray, str]], name: str,
                  head_axis: int | None = None, atol: float = 1e-6) -> str | None:
    """None when ``got`` matches ``want``; else what differs, naming a known slip when ``got`` matches one."""
    problem = describe_difference(name, got, want, atol=atol, head_axis=head_axis)
    if problem is None:
        return None
    hint = named_slip(got, slips, atol)
    if hint is None:
        return problem
    if not np.isfinite(array_or_none(got).astype(float)).all():  # the slip explains the NaN: no hunt for an overflow
        problem = f"{name} contains NaN or infinity where the answer is finite."
    return f"{problem} {hint}"


# --- test inputs ----------------------------------------------------------------------------------

def random_attention_maps(rng: np.random.Generator, shape: tuple[int, ...], *, sharpness: float = 2.0,
                          causal: bool = False, diagonal_boost: float = 0.0) -> np.ndarray:
    """Attention-like test inputs: positive rows summing to 1, shape (..., n, n).

    ``sharpness`` scales the random scores (larger = peakier rows); ``causal`` zeroes every key after its
    query; ``diagonal_boost`` adds to each row's own column.
    """
    check_type("rng", rng, np.random.Generator, "a numpy Generator, e.g. np.random.default_rng(0)")
    seq = check_items("shape", shape, "a shape such as (2, 5, 5)")[-1]
    scores = rng.normal(scale=sharpness, size=shape) + diagonal_boost * np.eye(seq)
    if causal:
        scores = np.where(np.tril(np.ones((seq, seq), dtype=bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def one_hot_attention(targets) -> np.ndarray:
    """(seq, seq) map whose row i puts all its weight on column targets[i]."""
    targets = check_items("targets", targets, "one column index per row, e.g. [0, 0, 1]")
    seq = len(targets)
    columns = [check_whole_number(f"targets[{row}]", target, 0, seq - 1, meaning="a column of the (seq, seq) map")
               for row, target in enumerate(targets)]
    weights = np.zeros((seq, seq))
    weights[np.arange(seq), columns] = 1.0
    return weights


# --- running a check -----------------------------------------------------------------------------

def run_check(function: Callable, cases: Iterable[tuple[str, tuple, dict, Any]],
              compare: Callable[[Any, Any], str | None], what: str) -> CheckResult:
    """Call ``function(*args, **kwargs)`` for each case and compare with its expected answer.

    ``cases`` yields ``(label, args, kwargs, expected)``, the label describing
    the input in words (shapes, options) for the feedback; ``compare(got, expected)``
    returns ``None`` or a description of the difference, and may raise
    :class:`AnswerError` (from the ``answer_*`` readers) to say the answer is of
    the wrong kind. ``what`` names the task in the success line.

    Every outcome caused by the learner is a :class:`CheckResult`: an error raised in their
    function, an answer of the wrong kind, even one ``compare`` did not foresee. Only
    :class:`CheckBug` (the check's own expected answer is broken) is raised.
    """
    name = getattr(function, "__name__", "your function")
    if not callable(function):
        return CheckResult(False, f"✗ Expected a function, got {describe_value(function)}: pass the function itself, "
                                  "without calling it.")
    broken_cell = newer_cell_that_does_not_parse(name)
    if broken_cell:
        return CheckResult(False, broken_cell)
    count = 0
    for count, (label, args, kwargs, expected) in enumerate(cases, start=1):
        try:
            got = function(*args, **kwargs)
        except NotImplementedError:
            return CheckResult(False, f"✗ Not attempted yet: {name} raises NotImplementedError. "
                                      "Replace that line with your code and run the cell again.")
        except AnswerError as error:  # an answer the grader's isolated run could not read (grading.sandbox)
            return CheckResult(False, f"✗ Case {count} ({label}): {error}")
        except Exception as error:  # the learner's bug, reported rather than raised
            if isinstance(error, NameError) and not isinstance(error, UnboundLocalError) and \
                    isinstance(getattr(error, "name", None), str):
                return CheckResult(False, undefined_name_feedback(error, function, name, count, label))
            if isinstance(error, SyntaxError) and getattr(error, "lineno", None):  # code the function compiles itself
                return CheckResult(False, f"✗ {name} met a syntax error on case {count} ({label}) at line "
                                          f"{error.lineno}: {error.msg}. Fix that code and run the cell again.")
            text = f": {error}" if str(error) else " (with no message)"
            return CheckResult(False, f"✗ {name} raised {type(error).__name__} on case {count} ({label}){text}"
                                      f"{where_it_failed(error, function)}. Fix that error and run the cell again.")
        try:
            problem = compare(got, expected)
        except AnswerError as error:
            problem = str(error)
        except CheckBug:
            raise
        except Exception as error:  # an answer of a kind no reader foresaw: still feedback, never a traceback
            problem = (f"{name} returned {describe_value(got)}, which the check could not read "
                       f"({type(error).__name__}: {error}). Return the kind of value the exercise asks for; if it "
                       "already does, this is a bug in the check: please report it.")
        if problem is not None:
            return CheckResult(False, f"✗ Case {count} ({label}): {problem}")
    return CheckResult(True, f"✓ {name} {what}: it matches the reference on all {count} test cases.")


def uses_tools(*modules: str) -> Callable[[Callable], Callable]:
    """Declare the modules of the book's package a check's learner function may import and use (a real-model
    exercise: ``@uses_tools("mha.pretrained.encoder")`` over the check lets ``from mha.pretrained.encoder import
    MiniLMEncoder``). Sets ``check.tools``; the grader then runs those imports, lets the function use their names and
    lets its process read a copy of only those modules and what they import (:mod:`mha.exercises.grading.tools`).
    A check may pass them ``MiniLMEncoder.load()``, which crosses to that process as a call to ``load()`` there."""
    def declare(check: Callable) -> Callable:
        check.tools = tuple(modules)
        return check
    return declare
