"""Grading a submission with the book's own checks, for an autograder (instructors' page, "Grading").

``scripts/grading.py`` writes an otter-grader autograder for each notebook: one test file per exercise, whose cases
call :func:`grade` on the submission's function. The public case runs the check as the notebook does; hidden
variants run it on other random inputs, through the check's ``seed=`` argument where it has one. A case that fails
says why in the check's own words (the :class:`~mha.exercises.checking.CheckResult` message), so the grade report
gives the student the feedback the notebook would.

That is live feedback only. The grade comes from :func:`grade_exercise`, which runs outside the student's kernel:
it reads the submitted notebook by :mod:`~mha.exercises.grading.submission`'s rule, refuses what the rule refuses, and
runs the check here on a stand-in for the function (:class:`~mha.exercises.grading.sandbox.IsolatedFunction`) that
calls the real one in a fresh process, with a time and a memory limit. otter's interface stays:
:mod:`~mha.exercises.grading.otter_plugin` replaces each otter test's result with this one.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import pkgutil
import re
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..checking import CheckResult
from .sandbox import IsolatedFunction, Limits, Sandbox, Stopped
from .submission import Submission, problem_with, read_submission, why_undefined
from .tools import tools_of

__all__ = ["modules_of_checks", "grade", "grade_exercise", "protected_folders", "takes_seed"]

DEFAULT_LIMITS = Limits()  # frozen, so one instance can be every call's default


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


def protected_folders(*more: str | Path) -> list[str]:
    """The folders a submission may not read: the book's package, otter, and ``more`` (the autograder's tests)."""
    import mha

    folders = [Path(mha.__file__).parent, *more]
    otter = importlib.util.find_spec("otter")  # found, not imported: the package does not depend on otter
    if otter is not None and otter.origin:
        folders.append(Path(otter.origin).parent)
    return [str(Path(folder).resolve()) for folder in folders]


def grade_exercise(submission: Submission | dict | str | Path, module: str, check: str, function: str,
                   seeds: Sequence[int | None] = (None,), notebook_functions: Sequence[str] = (),
                   limits: Limits = DEFAULT_LIMITS, protected: Sequence[str] = (),
                   sandbox: Sandbox | None = None) -> list[CheckResult]:
    """Grade one exercise of a submitted notebook outside the student's kernel: one :class:`CheckResult` per seed
    (``None``: the check's public inputs).

    The function runs in its own process (:class:`~mha.exercises.grading.sandbox.IsolatedFunction`), inside
    ``sandbox`` (one submission's confinement; by default one of its own for this exercise), which holds only the
    submission's definitions (and, for a check that declares ``tools``, a copy of those modules of the package alone,
    :mod:`~mha.exercises.grading.tools`); the check computes its expected answers here. A function that is missing,
    is the book's reference or uses it (but its check's tools), or whose process hangs, dies or runs out of memory,
    fails every seed with one message. A case whose calls took longer than ``limits.slow_factor`` times the check's
    own work (the reference's) and ``limits.slow_floor_seconds`` more fails as too slow.
    """
    if not isinstance(submission, Submission):
        submission = read_submission(submission)
    found = getattr(importlib.import_module(f"mha.exercises.{module}"), check)
    tools = tools_of(found)  # a real-model exercise's modules of the package, which its function may use
    problem = problem_with(submission, function, check, list(notebook_functions) or [function], tools)
    if problem:
        return [CheckResult(False, problem)] * len(seeds)
    results: list[CheckResult] = []
    undefined = why_undefined(submission)
    try:
        with IsolatedFunction(function, submission.setup_for(tools), submission.modules,
                              protected_folders(*protected), limits, undefined=undefined, sandbox=sandbox,
                              tools=tools) as stand_in:
            if stand_in.missing:
                missing = re.match(r"NameError: name '(\w+)' is not defined", stand_in.missing)
                why = f" `{missing[1]}`: {undefined[missing[1]]}" if missing and missing[1] in undefined else ""
                return [CheckResult(False,
                                    f"✗ {function} could not be defined: {stand_in.missing}.{why}.")] * len(seeds)
            for seed in seeds:
                started, waited = time.monotonic(), stand_in.seconds_in_calls
                result = found(stand_in) if seed is None else found(stand_in, seed=seed)
                theirs = stand_in.seconds_in_calls - waited
                reference = time.monotonic() - started - theirs
                allowed = limits.slow_floor_seconds + limits.slow_factor * reference
                if result.passed and theirs > allowed:
                    result = CheckResult(False, f"✗ {function} took {theirs:.1f} s over this case's calls, where the "
                                                f"grader allows {allowed:.1f} s ({limits.slow_factor:g} times what "
                                                f"the book's solution takes, and {limits.slow_floor_seconds:g} s "
                                                "more). Look for a sleep, or work that grows too fast with the "
                                                "input's size.")
                results.append(result)
    except Stopped as stopped:
        results += [CheckResult(False, str(stopped))] * (len(seeds) - len(results))
    return results
