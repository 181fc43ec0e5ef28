"""Small 1.1 submissions for the grading tests (tests/exercises/grading/test_grading_integrity.py and
tests/tools/test_grade_all.py): the section's three "Write and check" exercises, each answered in a notebook file
that imports numpy only, so that each isolated grading process starts in a fraction of a second."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SECTION = ROOT / "chapters" / "1_mechanism" / "1_attention_from_scratch.ipynb"
EXERCISES = {"my_softmax": "check_softmax", "my_attention": "check_attention", "my_causal_mask": "check_causal_mask"}
IMPORTS = ("import numpy as np\nfrom mha.core import attention_numpy\n"
           "from mha.exercises import check_attention, check_causal_mask, check_softmax\n")
RIGHT = {
    "my_softmax": "def my_softmax(scores):\n    e = np.exp(scores - scores.max(axis=-1, keepdims=True))\n"
                  "    return e / e.sum(axis=-1, keepdims=True)\n",
    "my_attention": "def my_attention(q, k, v, mask=None):\n    s = q @ k.T / np.sqrt(q.shape[-1])\n"
                    "    if mask is not None:\n        s = np.where(mask, s, -np.inf)\n    w = my_softmax(s)\n"
                    "    return w @ v, w\n",
    "my_causal_mask": "def my_causal_mask(n):\n    return np.tril(np.ones((n, n), dtype=bool))\n",
}


def notebook(tmp_path: Path, answers: dict[str, str], extra: tuple[str, ...] = (), name: str = "submission") -> Path:
    """A submission: the imports cell, one cell per exercise (its answer and its check call), then ``extra`` cells."""
    cells = [IMPORTS] + [f"{answers[f]}\n\n{check}({f})\n" for f, check in EXERCISES.items()] + list(extra)
    path = tmp_path / f"{name}.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": text, "metadata": {}, "outputs": []}
                                          for text in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    return path
