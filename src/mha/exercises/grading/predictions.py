"""Whether each prediction of a submitted notebook was made before its measurement was shown (instructors' page,
"Grading"; the rubric's "prediction entered before the measurement").

A reveal cell of the student edition shows its measurement only after
:func:`~mha.exercises.checking.require_prediction`, which prints the prediction's fingerprint and the time into that
cell's output. The handed-in notebook keeps that output, so :func:`prediction_records` can compare it with the
prediction the notebook holds now: a prediction edited after the reveal no longer matches its fingerprint. The
prediction is read without running anything (a literal such as ``0.3`` or ``"L2H0"``); one set by an expression is
reported as not checkable.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from ..checking import PREDICTION_RECORD, prediction_fingerprint

__all__ = ["PredictionRecord", "prediction_records"]

_RECORD = re.compile(rf"{re.escape(PREDICTION_RECORD)} (\w+) = ([0-9a-f]{{12}}) at (\S+)")


@dataclass(frozen=True)
class PredictionRecord:
    """One prediction of a notebook: its name, when it was revealed (None: never), and the verdict."""

    name: str
    revealed_at: str | None
    status: str  # "kept" (matches its fingerprint), "edited after the reveal", "never revealed", "not checkable"


def _literal_assignments(source: str) -> dict[str, object]:
    found = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return found
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                found[node.targets[0].id] = _NOT_LITERAL
    return found


_NOT_LITERAL = object()


def prediction_records(notebook: dict | str | Path) -> list[PredictionRecord]:
    """Each prediction a reveal cell of ``notebook`` (a path, its text or its JSON) asks for, in order, with whether
    the value the notebook holds now is the one revealed."""
    from .submission import notebook_json

    notebook = notebook_json(notebook)
    values: dict[str, object] = {}
    records = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = "".join(cell.get("source", ""))
        for name in re.findall(r"require_prediction\((\w+)\)", source):
            printed = "".join("".join(output.get("text", "")) for output in cell.get("outputs", [])
                              if output.get("output_type") == "stream")
            found = [match for match in _RECORD.finditer(printed) if match[1] == name]
            value = values.get(name, _NOT_LITERAL)
            if not found:
                status, when = "never revealed", None
            elif value is _NOT_LITERAL:
                status, when = "not checkable", found[-1][3]
            else:
                when = found[-1][3]
                status = "kept" if prediction_fingerprint(value) == found[-1][2] else "edited after the reveal"
            records.append(PredictionRecord(name, when, status))
        values |= _literal_assignments(source)
    return records
