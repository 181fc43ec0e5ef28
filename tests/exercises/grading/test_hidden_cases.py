"""Every graded exercise has a hidden case that a table of the public inputs fails.

A student who cannot write the function could still record what the public case asks and answer from a table. For
each "Write and check" exercise of every section, the answer key's function (read as the grader reads a submission,
and run here) is called through the check's public case by a recorder; a "table" function then returns the recorded
answer for a recorded input and, for any other input, the first answer recorded. The table must pass the public
case (else the test shows nothing) and fail at least one of the hidden variants, run with the seeds an autograder
would draw (two fixed ones here and one drawn afresh, printed on failure).
"""

from __future__ import annotations

import ast
import importlib
import json
import pickle
import secrets
from pathlib import Path

import pytest
from conftest import load_script

from mha.exercises.grading import takes_seed
from mha.exercises.grading.submission import read_submission
from mha.exercises.grading.tools import tools_of

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = sorted(p for p in (ROOT / "chapters").rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
grading = load_script("grading")


def key_functions(book: dict) -> dict:
    """The answer key's definitions, run here as the grader's sandbox runs a submission's (with the imports of the
    modules its real-model exercises' checks declare, their ``tools``)."""
    namespace: dict = {"__name__": "__key__"}
    tools = tuple(sorted({tool for exercise in grading.exercises_of(book) for tool in tools_of(getattr(
        importlib.import_module(f"mha.exercises.{exercise['module']}"), exercise["check"]))}))
    for filename, source, _ in read_submission(grading.key_submission(book)).setup_for(tools):
        for statement in ast.parse(source, filename).body:  # one at a time, as the sandbox runs them
            try:
                exec(compile(ast.Module([statement], type_ignores=[]), filename, "exec"), namespace)
            except Exception:
                pass
    return namespace


def as_key(args, kwargs) -> bytes:
    try:
        return pickle.dumps((args, sorted(kwargs.items())))
    except Exception:
        return repr((args, kwargs)).encode()


def table_of(function):
    """(a recorder that answers with ``function`` and keeps each input's answer, the table of those answers)"""
    recorded: dict[bytes, object] = {}

    def recorder(*args, **kwargs):
        answer = function(*args, **kwargs)
        recorded.setdefault(as_key(args, kwargs), answer)
        return answer

    def table(*args, **kwargs):
        return recorded.get(as_key(args, kwargs), next(iter(recorded.values())))

    recorder.__name__ = table.__name__ = function.__name__
    return recorder, table


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_table_of_the_public_inputs_fails_a_hidden_case_of_every_graded_exercise(path):
    book = json.loads(path.read_text())
    functions = key_functions(book)
    seeds = (1, 2, 3 + secrets.randbelow(2**31))
    for exercise in grading.exercises_of(book):
        check = getattr(importlib.import_module(f"mha.exercises.{exercise['module']}"), exercise["check"])
        assert takes_seed(check), f"{exercise['label']}: {exercise['check']} has no hidden variants (no seed=)"
        recorder, table = table_of(functions[exercise["function"]])
        assert check(recorder).passed, f"{exercise['label']}: the key fails its own public case"
        assert check(table).passed, f"{exercise['label']}: the table fails the public case it recorded"
        hidden = [check(table, seed=seed).passed for seed in seeds]
        assert not all(hidden), (f"{exercise['label']}: a table of the public inputs passes every hidden case "
                                 f"(seeds {seeds}): {exercise['check']}'s seed does not change what it asks")
