"""Grading a submission with the book's own checks, for an autograder (instructors' page, "Grading"; issue 13).

``scripts/grading.py`` writes an otter-grader autograder for each notebook: one test file per exercise, whose cases
call :func:`grade` on the submission's function. The public case runs the check as the notebook does; hidden
variants run it on other random inputs, through the check's ``seed=`` argument where it has one. A case that fails
says why in the check's own words (the :class:`~mha.exercises.checking.CheckResult` message), so the grade report
gives the student the feedback the notebook would.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Mapping

__all__ = ["modules_of_checks", "grade", "takes_seed"]


def modules_of_checks() -> dict[str, str]:
    """Each check's name -> the module of :mod:`mha.exercises` that defines it (``check_softmax`` -> ``mechanism``)."""
    import mha.exercises

    found = {}
    for module in pkgutil.iter_modules(mha.exercises.__path__):
        loaded = importlib.import_module(f"mha.exercises.{module.name}")
        found |= {name: module.name for name in dir(loaded) if name.startswith("check_")}
    return found


def takes_seed(check) -> bool:
    """Whether a check draws its test inputs from a ``seed=`` argument (hidden variants need one)."""
    return "seed" in inspect.signature(check).parameters


def grade(submission: Mapping, module: str, check: str, function: str, seed: int | None = None) -> str:
    """Run ``mha.exercises.<module>.<check>`` on the submission's ``function``; ``AssertionError`` with the check's
    feedback if it fails, else the check's success line.

    ``submission`` is the namespace the submitted notebook left behind (otter's ``env``). A function the student
    never defined, or the stub left as it was, fails with a message that says so.
    """
    found = getattr(importlib.import_module(f"mha.exercises.{module}"), check)
    if function not in submission:
        raise AssertionError(f"✗ {function} is not defined: run the exercise's cell, which defines it.")
    result = found(submission[function]) if seed is None else found(submission[function], seed=seed)
    assert result.passed, result.message
    return result.message
