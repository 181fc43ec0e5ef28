"""Automatic checks for the book's exercises: ``check_x(your_function)`` says what differs, or that it passes.

Checks are grouped by chapter: :mod:`~mha.exercises.mechanism` (chapter 1, "The mechanism"; re-exported here),
:mod:`~mha.exercises.geometry` (chapter 2), :mod:`~mha.exercises.head_roles`,
:mod:`~mha.exercises.coreference_and_content`, :mod:`~mha.exercises.emergence` and
:mod:`~mha.exercises.head_count` (chapter 3), :mod:`~mha.exercises.caveats` and
:mod:`~mha.exercises.layers_and_probing` (chapter 4), and
:mod:`~mha.exercises.background` (the two background pages, the transformer primer and the statistics toolkit).
The machinery they share is in :mod:`mha.exercises.checking`, which reports an error in the learner's own code
(a name not defined, a cell that does not parse) through :mod:`mha.exercises.learner_errors`. The subpackage
:mod:`mha.exercises.grading` runs the same checks for an autograder (the instructors' page, "Grading"), on the
function read from the submitted notebook and run in a process of its own, through otter-grader.
"""

from .checking import CheckResult
from .mechanism import (
    check_attention,
    check_causal_mask,
    check_head_contributions,
    check_parameter_count,
    check_softmax,
    check_split_heads,
)

__all__ = [
    "CheckResult",
    "check_attention",
    "check_causal_mask",
    "check_head_contributions",
    "check_parameter_count",
    "check_softmax",
    "check_split_heads",
]
