"""Grading the exercises where a submission cannot reach the grader, for an autograder (instructors' page, "Grading").

The checks are the chapters' modules of :mod:`mha.exercises`; this subpackage runs them on a submitted notebook:

- :mod:`~mha.exercises.grading.autograder`: :func:`grade`, the live feedback of an otter test case, and
  :func:`grade_exercise`, the grade: the check run here, on a stand-in for the submitted function;
- :mod:`~mha.exercises.grading.submission`: how a submitted notebook is read, and what is refused;
- :mod:`~mha.exercises.grading.sandbox`: that stand-in, which runs the submitted function in a process of its own,
  with a time and a memory limit, inside one submission's sandbox;
- :mod:`~mha.exercises.grading.confinement`: how the operating system keeps that sandbox from the grader
  (namespaces, a user id of its own, or a refusal);
- :mod:`~mha.exercises.grading.tools`: what a real-model exercise's function may use of the book's package: a
  read-only copy of only the modules its check declares, and what they import;
- :mod:`~mha.exercises.grading.predictions`: whether each prediction was made before its measurement was shown;
- :mod:`~mha.exercises.grading.sandbox_worker`: the process itself, started as a script, never imported by the grader;
- :mod:`~mha.exercises.grading.otter_plugin`: otter-grader's interface, whose test results the grade replaces.

The grader stands on the checks, never the reverse (``.importlinter``): a check runs the same in a learner's notebook
and here.
"""

from .autograder import grade, grade_exercise, modules_of_checks, protected_folders, takes_seed

__all__ = ["grade", "grade_exercise", "modules_of_checks", "protected_folders", "takes_seed"]
