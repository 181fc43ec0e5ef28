"""What to say when the learner's code fails before it answers: where it failed, a name that is not defined, a cell
that does not parse. :func:`mha.exercises.checking.run_check` uses these for every check, in the notebook and in the
grader (:mod:`mha.exercises.grading.submission`, :mod:`mha.exercises.grading.sandbox`), so both say the same thing.

* :func:`where_it_failed`: the line of the learner's own code an error came from;
* :func:`undefined_name_feedback`: "`name` is not defined: run the cell that defines it", with the spelling the learner
  may have meant, the imports cell for a module alias, or (in the grader, :class:`UndefinedName`) why the grader does
  not have the name;
* :func:`newer_cell_that_does_not_parse` and :func:`syntax_error_feedback`: "your cell has a syntax error at line N",
  for a kernel whose latest cell defining the function did not run, and for a submitted cell that does not parse.
"""

from __future__ import annotations

import ast
import builtins
import difflib
import re
import traceback
from collections.abc import Callable

from mha.core.validation import check_type

__all__ = ["UndefinedName", "newer_cell_that_does_not_parse", "syntax_error_feedback", "undefined_name_feedback",
           "where_it_failed"]


class UndefinedName(NameError):
    """A name the learner's function reads is not defined where it ran; ``why`` says why, where that is known.

    Raised by the grader's stand-in for a function run in another process (:mod:`mha.exercises.grading.sandbox`), where
    a name can be missing for a reason the notebook does not show (a line the grader does not run)."""

    def __init__(self, name: str, why: str | None = None, where: str = ""):
        super().__init__(f"name {name!r} is not defined", name=name)
        self.why, self.where = why, where


def where_it_failed(error: BaseException, function: Callable) -> str:
    """' (line 3: return 1 / 0)': the last line of the learner's own file in the error's traceback, or ''."""
    check_type("error", error, BaseException, "the exception raised by the learner's function")
    if getattr(error, "where", ""):
        return error.where
    code = getattr(function, "__code__", None)
    if code is None:
        return ""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if frame.filename == code.co_filename]
    if not frames:
        return ""
    text = f": {frames[-1].line.strip()}" if frames[-1].line else ""
    return f" (line {frames[-1].lineno}{text})"


def syntax_error_feedback(function_name: str, line: int, what: str, text: str = "") -> str:
    """The feedback for a cell that defines ``function_name`` and does not parse: its ``line``, Python's ``what``
    and, when given, the ``text`` of that line. Shared by the notebook's checks and the grader."""
    check_type("text", text, str, "the line that does not parse, as text (or '')")
    shown = f" (`{text.strip()[:80]}`)" if text.strip() else ""
    return (f"✗ Your cell has a syntax error at line {line}{shown}: {what}. Python could not run the cell that "
            f"defines {function_name}, so nothing in it was checked: fix that line and run the cell again.")


def newer_cell_that_does_not_parse(function_name: str) -> str | None:
    """In an IPython kernel: the feedback for the latest cell that defines ``def function_name(`` when that cell
    does not parse (the function the check was handed is then an older version), else None."""
    shell = getattr(builtins, "get_ipython", lambda: None)()  # IPython puts get_ipython in builtins
    history = getattr(shell, "history_manager", None)
    parsed, raw = getattr(history, "input_hist_parsed", None), getattr(history, "input_hist_raw", None)
    if not parsed or not isinstance(function_name, str) or not function_name.isidentifier():
        return None
    definition = re.compile(rf"^\s*def\s+{function_name}\s*\(", re.MULTILINE)
    for index in range(len(parsed) - 1, -1, -1):
        if not isinstance(parsed[index], str) or not definition.search(parsed[index]):
            continue
        try:
            compile(parsed[index], "<cell>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        except (SyntaxError, ValueError) as error:
            lines = (raw[index] if raw and index < len(raw) else parsed[index]).splitlines()
            line = getattr(error, "lineno", None) or 0
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            return syntax_error_feedback(function_name, line, getattr(error, "msg", str(error)), text)
        return None
    return None


def _spelling_it_may_mean(missing: str, function: Callable) -> str | None:
    """The defined name closest to ``missing`` (a typo's intended name), among the function's own names, its
    module's and Python's built-ins; or None."""
    code = getattr(function, "__code__", None)
    known = set(getattr(code, "co_varnames", ())) | set(getattr(function, "__globals__", {})) | set(dir(builtins))
    close = difflib.get_close_matches(missing, sorted(known - {missing}), n=1, cutoff=0.75)
    return close[0] if close else None


_MODULE_ALIASES = {"np": "import numpy as np", "torch": "import torch", "pd": "import pandas as pd",
                   "plt": "import matplotlib.pyplot as plt", "math": "import math"}


def undefined_name_feedback(error: NameError, function: Callable, name: str, count: int, label: str) -> str:
    """What to say when ``function`` read a name that is not defined (``error.name``)."""
    check_type("error", error, NameError, "the NameError raised by the learner's function")
    missing = error.name
    where = where_it_failed(error, function)
    reads = f"{name} reads it on case {count} ({label}){where}"
    why = getattr(error, "why", None)
    if why:
        return f"✗ `{missing}` is not defined where the grader runs {name}: {why} ({reads})."
    if missing in _MODULE_ALIASES:
        return (f"✗ `{missing}` is not defined: run the cell that imports it (`{_MODULE_ALIASES[missing]}`, in the "
                f"notebook's first code cell), then run this cell again ({reads}).")
    meant = _spelling_it_may_mean(missing, function)
    if meant:
        return (f"✗ `{missing}` is not defined (did you mean `{meant}`?): {reads}. Fix the spelling, or run the cell "
                "that defines it, then run this cell again.")
    return (f"✗ `{missing}` is not defined: run the cell that defines it, then run this cell again ({reads}). If "
            "no cell defines it, define it, or check its spelling.")
