"""The otter-grader plugin that grades outside the student's kernel (instructors' page, "Grading").

otter runs a submission in a Jupyter kernel and runs the tests there, after the student's own cells, where a cell
could patch anything. With this plugin (``scripts/grading.py`` names it in each autograder's ``otter_config.json``)
the kernel runs none of the student's code: :meth:`IsolatedGrading.before_execution` removes the code cells, and
:meth:`IsolatedGrading.after_grading`, which runs in otter's own process, replaces every test case's result with
:func:`mha.exercises.grading.grade_exercise` on the submitted file. A test case left to the kernel fails, so an
autograder that lost its plugin gives no points rather than free ones.

Its configuration: ``exercises`` (each test's name -> ``module``, ``check``, ``function``), and optionally
``seeds`` (a hidden case's name -> the seed it really uses, drawn when the autograder is written; otherwise the
number in its name), ``seconds`` (each call's time limit, 60) and ``memory_mb`` (2048).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from ..checking import CheckResult
from .autograder import grade_exercise
from .sandbox import Limits
from .submission import Submission, read_submission

__all__ = ["IsolatedGrading", "LEFT_TO_THE_KERNEL", "grade_test"]

LEFT_TO_THE_KERNEL = "graded outside the notebook by mha.exercises.grading.otter_plugin, which did not run"


def _seed(case: str) -> int | None:
    found = re.fullmatch(r"hidden_seed_(\d+)", case)
    return int(found[1]) if found else None


class IsolatedGrading:
    """Grades each exercise in a fresh process instead of the student's kernel (see the module's docstring).

    otter finds a plugin's events by name, so this class needs nothing of otter's (the package does not depend on it).
    """

    def __init__(self, submission_path, submission_metadata, plugin_config):
        self.submission_path = submission_path
        self.submission_metadata = submission_metadata
        self.plugin_config = plugin_config

    def before_execution(self, submission):
        """The submission as the kernel runs it: its markdown only, none of its code."""
        if isinstance(submission, str):
            return ""
        submission.cells = [cell for cell in submission.cells if cell.get("cell_type") != "code"]
        return submission

    def after_grading(self, results):
        """Every test case's result, from the isolated grader; feedback never quotes a test file."""
        config = self.plugin_config or {}
        submission = read_submission(Path(self.submission_path))
        for name, test_file in results.results.items():
            cases = [result.test_case for result in test_file.test_case_results]
            if name not in config.get("exercises", {}) or not cases:
                continue
            graded = grade_test(submission, name, [case.name for case in cases], config,
                                Path(test_file.path).resolve().parent, also_protected=self._source())
            test_file.test_case_results = [dataclasses.replace(kernel, passed=result.passed, message=result.message)
                                           for kernel, result in zip(test_file.test_case_results, graded)]
            test_file._score = None

    def _source(self) -> list[Path]:
        """The autograder's unpacked zip (its otter_config.json holds the hidden seeds): otter grades a submission
        in ``<autograder>/submission/`` beside ``<autograder>/source/``, on Gradescope as in ``otter run``."""
        source = Path(self.submission_path).resolve().parent.parent / "source"
        return [source] if (source / "otter_config.json").is_file() else []


def grade_test(submission: Submission, name: str, cases: list[str], config: dict, tests: Path,
               also_protected: list[Path] = ()) -> list[CheckResult]:
    """The results of one otter test's ``cases`` (their names: ``public``, ``hidden_seed_1``, ...) for a submission, as
    the plugin configured by ``config`` grades them: :func:`~mha.exercises.grading.grade_exercise` with the
    configured seeds and limits, the test files' folder ``tests``, the one above it and ``also_protected`` unreadable,
    and a message that quotes a test file withheld. scripts/grade_all.py grades a folder of submissions through it."""
    exercise = config["exercises"][name]
    limits = Limits(seconds=float(config.get("seconds", 60)),
                    memory_bytes=int(config.get("memory_mb", 2048)) * 1024**2)
    functions = [other["function"] for other in config["exercises"].values()]
    graded = grade_exercise(submission, exercise["module"], exercise["check"], exercise["function"],
                            seeds=[config.get("seeds", {}).get(case, _seed(case)) for case in cases],
                            notebook_functions=functions, limits=limits,
                            protected=[tests, tests.parent, *also_protected])
    quoted = [line.strip() for path in tests.glob("*.py") for line in path.read_text().splitlines()
              if len(line.strip()) >= 16]
    return [CheckResult(result.passed, "✗ This feedback was withheld: it quoted the grader's own files.")
            if any(line in result.message for line in quoted) else result for result in graded]
