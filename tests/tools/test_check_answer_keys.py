"""The answer keys graded through the isolated grader (scripts/check_answer_keys.py, which ``.ci/run`` runs on every
section): a check that sends the learner's function an object of the book's package passes in the notebook's kernel
and scores 0 from the grader, whose process cannot import the package; the script must say so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import load_script

import mha.exercises.mechanism as mechanism
from mha.exercises.checking import CheckResult
from mha.lab.tasks import TwoRelationTask

ROOT = Path(__file__).resolve().parents[2]
ATTENTION = ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb"

keys = load_script("check_answer_keys")


def softmax_exercise() -> tuple[str, dict, dict]:
    return next(item for item in keys.graded_exercises([ATTENTION]) if item[1]["function"] == "my_softmax")


@pytest.mark.slow
def test_a_key_that_the_grader_passes_is_not_reported():
    section, exercise, key = softmax_exercise()
    assert keys.grade_key(section, exercise, key, (5,), ["my_softmax"]) is None


@pytest.mark.slow
def test_a_check_that_sends_an_object_of_the_package_is_caught(monkeypatch):
    """The bug this script exists for: the key is right, the check passes in the kernel, the graded run dies."""
    section, exercise, key = softmax_exercise()
    task = TwoRelationTask()

    def sends_a_task(function, seed: int = 0) -> CheckResult:
        answer = function(np.zeros((2, 3)), task)  # unpickling a TwoRelationTask needs the package
        return CheckResult(bool(np.allclose(answer, 1 / 3)), "✓ fine" if answer is not None else "✗ no answer")

    monkeypatch.setattr(mechanism, "check_sends_a_task", sends_a_task, raising=False)
    function = "def my_softmax(scores, task=None):\n    e = np.exp(scores)\n    return e / e.sum(-1, keepdims=True)\n"
    assert sends_a_task(lambda scores, task: np.full_like(scores, 1 / 3)).passed  # in a kernel it passes
    key = {**key, "cells": [*key["cells"], {"cell_type": "code", "metadata": {}, "outputs": [],
                                            "execution_count": None, "source": function}]}
    problem = keys.grade_key(section, {**exercise, "check": "check_sends_a_task"}, key, (5,), ["my_softmax"])
    assert problem is not None and "ex-" in problem and "check_sends_a_task" in problem
    assert "died" in problem or "could not" in problem, problem


def test_bad_seeds_and_notebooks_outside_the_book_are_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        keys.main(["--seeds", "one,two"])
    assert "--seeds 'one,two'" in capsys.readouterr().err
    stray = tmp_path / "mine.ipynb"
    stray.write_text("{}")
    with pytest.raises(SystemExit):
        keys.main([str(stray)])
    assert "not a notebook of the book" in capsys.readouterr().err
