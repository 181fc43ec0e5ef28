"""The otter-grader plugin that grades outside the student's kernel (instructors' page, "Grading").

otter runs a submission in a Jupyter kernel and runs the tests there, after the student's own cells, where a cell
could patch anything. With this plugin (``scripts/grading.py`` names it in each autograder's ``otter_config.json``)
the kernel runs none of the student's code: :meth:`IsolatedGrading.before_execution` removes the code cells, and
:meth:`IsolatedGrading.after_grading`, which runs in otter's own process, replaces every test case's result with
:func:`mha.exercises.grading.grade_exercise` on the submitted file. A test case left to the kernel fails, so an
autograder that lost its plugin gives no points rather than free ones.

Its configuration: ``exercises`` (each test's name -> ``module``, ``check``, ``function``), and optionally
``seeds`` (a hidden case's name -> the seed it really uses, drawn when the autograder is written; otherwise the
number in its name), ``seconds`` (each call's time limit), ``exercise_seconds`` and ``submission_seconds`` (the time
budgets of all an exercise's calls and of a whole submission), ``slow_factor`` and ``slow_floor_seconds`` (a case
fails when its calls take longer than that factor times the book's solution, and the floor more) and ``memory_mb``:
:class:`~mha.exercises.grading.sandbox.Limits` holds the defaults.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

from ..checking import CheckResult
from .autograder import grade_exercise, protected_folders
from .sandbox import Limits, Sandbox
from .submission import Submission, read_submission

__all__ = ["IsolatedGrading", "LEFT_TO_THE_KERNEL", "Test", "grade_test", "limits_of", "read_test", "slip_of",
           "withheld"]

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
        """Every test case's result, from the isolated grader, in one sandbox for the whole submission; feedback
        never quotes a test file, nor says more of a hidden case than whether it passed and the kind of slip."""
        config = self.plugin_config or {}
        path = Path(self.submission_path).resolve()
        submission = read_submission(path)
        graded_tests = [(name, test_file) for name, test_file in results.results.items()
                        if name in config.get("exercises", {}) and test_file.test_case_results]
        if not graded_tests:
            return
        tests = Path(graded_tests[0][1].path).resolve().parent
        protected = protected_folders(tests, tests.parent, path.parent, *self._source())
        with Sandbox(protected, limits_of(config)) as sandbox:
            for name, test_file in graded_tests:
                cases = [case for case, _ in read_test(Path(test_file.path).read_text()).cases]
                if len(cases) != len(test_file.test_case_results):
                    continue  # not a test file scripts/grading.py wrote: its kernel results stand (they fail)
                graded = grade_test(submission, name, cases, config, Path(test_file.path).resolve().parent,
                                    also_protected=self._source(), sandbox=sandbox)
                test_file.test_case_results = [
                    dataclasses.replace(kernel, passed=result.passed, message=result.message)
                    for kernel, result in zip(test_file.test_case_results, graded, strict=True)]
                test_file._score = None

    def _source(self) -> list[Path]:
        """The autograder's unpacked zip (its otter_config.json holds the hidden seeds): otter grades a submission
        in ``<autograder>/submission/`` beside ``<autograder>/source/``, on Gradescope as in ``otter run``."""
        source = Path(self.submission_path).resolve().parent.parent / "source"
        return [source] if (source / "otter_config.json").is_file() else []


@dataclass
class Test:
    """One otter test file of an autograder: its name and each case's name (``public``, ``hidden_seed_1``...) and
    points, in order."""

    name: str
    cases: list[tuple[str, float]]

    @property
    def max_points(self) -> float:
        return sum(points for _, points in self.cases)


def read_test(source: str) -> Test:
    """An otter test file's name and cases (``@test_case(points=..., hidden=...)`` functions), read without running
    it. otter itself names the cases by number (``ex-attention - 2``); the hidden seeds go by these names."""
    tree = ast.parse(source)
    name, cases = None, []
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["name"]:
            name = ast.literal_eval(node.value)
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                if isinstance(decorator, ast.Call) and getattr(decorator.func, "id", None) == "test_case":
                    points = {k.arg: ast.literal_eval(k.value) for k in decorator.keywords}.get("points", 0)
                    cases.append((node.name, float(points)))
    if name is None or not cases:
        raise ValueError("an otter test file without a name or test cases: is this a zip from scripts/grading.py?")
    return Test(name, cases)


def limits_of(config: dict) -> Limits:
    """The limits an autograder's configuration states (each default :class:`Limits`' where it states none)."""
    default = Limits()
    return Limits(seconds=float(config.get("seconds", default.seconds)),
                  memory_bytes=int(config.get("memory_mb", default.memory_bytes // 1024**2)) * 1024**2,
                  exercise_seconds=float(config.get("exercise_seconds", default.exercise_seconds)),
                  submission_seconds=float(config.get("submission_seconds", default.submission_seconds)),
                  slow_factor=float(config.get("slow_factor", default.slow_factor)),
                  slow_floor_seconds=float(config.get("slow_floor_seconds", default.slow_floor_seconds)))


def slip_of(message: str) -> str:
    """The kind of slip a failing case's feedback names, in words that quote none of it."""
    kinds = (("Not attempted yet", "the function still raises NotImplementedError"),
             ("did not return within", "a call did not return within the time limit"),
             ("time budget", "the exercise's time budget ran out"),
             ("where the grader allows", "the calls were too slow"),
             ("died", "the process running it died"), ("ran out of memory", "it ran out of memory"),
             ("which the grader does not read", "it returned a kind of value the grader does not read"),
             ("returned None", "it returned None"), (" raised ", "it raised an exception"),
             ("wrong values", "its answer had wrong values"), ("shape", "its answer had the wrong shape or kind"))
    return next((kind for marker, kind in kinds if marker in message), "its answer did not match")


def withheld(cases: list[str], results: list[CheckResult]) -> list[CheckResult]:
    """The results with each failing hidden case's feedback replaced by its kind of slip (:func:`slip_of`): never
    its inputs, its seed or text the submission produced. A message the public case gave too stays as it is."""
    public = {result.message for case, result in zip(cases, results, strict=True) if not case.startswith("hidden")}
    return [result if result.passed or not case.startswith("hidden") or result.message in public else
            CheckResult(False, f"✗ A hidden case (other inputs of the same kind) failed: {slip_of(result.message)}. "
                               "Test your function on inputs of your own, of other sizes and values.")
            for case, result in zip(cases, results, strict=True)]


def grade_test(submission: Submission, name: str, cases: list[str], config: dict, tests: Path,
               also_protected: list[Path] = (), sandbox: Sandbox | None = None) -> list[CheckResult]:
    """The results of one otter test's ``cases`` (their names: ``public``, ``hidden_seed_1``, ...) for a submission, as
    the plugin configured by ``config`` grades them: :func:`~mha.exercises.grading.grade_exercise` with the
    configured seeds and limits in ``sandbox`` (the submission's), the test files' folder ``tests``, the one above it
    and ``also_protected`` unreadable, hidden cases' feedback :func:`withheld`, and a message that quotes a test file
    withheld. scripts/grade_all.py grades a folder of submissions through it."""
    exercise = config["exercises"][name]
    functions = [other["function"] for other in config["exercises"].values()]
    graded = grade_exercise(submission, exercise["module"], exercise["check"], exercise["function"],
                            seeds=[config.get("seeds", {}).get(case, _seed(case)) for case in cases],
                            notebook_functions=functions, limits=limits_of(config),
                            protected=[tests, tests.parent, *also_protected], sandbox=sandbox)
    quoted = [line.strip() for path in tests.glob("*.py") for line in path.read_text().splitlines()
              if len(line.strip()) >= 16]
    graded = [CheckResult(result.passed, "✗ This feedback was withheld: it quoted the grader's own files.")
              if any(line in result.message for line in quoted) else result for result in graded]
    return withheld(cases, graded)
