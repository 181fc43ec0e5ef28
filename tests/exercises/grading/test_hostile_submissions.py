"""A hostile notebook handed in is refused as a submission that is not a notebook, before it can exhaust the parser's
stack or the grader's memory (:func:`mha.exercises.grading.submission.notebook_json`)."""

from __future__ import annotations

import json
import os

import pytest

from mha.exercises.grading.predictions import prediction_records
from mha.exercises.grading.submission import SUBMISSION_BYTES, notebook_json, read_submission

NESTED = "[" * 200_000 + "]" * 200_000  # json.loads raises RecursionError on this, which read_submission did not catch


@pytest.mark.parametrize("text", [NESTED, '{"cells": [], "n": ' + "9" * 5000 + "}", '{"cells": [], "x": NaN}'])
def test_a_hostile_notebook_text_is_refused_as_not_a_notebook(text):
    submission = read_submission(text)
    assert submission.problem and "not a Jupyter notebook" in submission.problem
    with pytest.raises(ValueError, match="the submission"):
        notebook_json(text)
    with pytest.raises(ValueError, match="the submission"):
        prediction_records(text)


def test_a_device_or_an_oversized_file_is_refused_before_it_is_read(tmp_path):
    big = tmp_path / "big.ipynb"
    with open(big, "wb") as handle:  # a sparse file: its size is known without writing it
        handle.truncate(SUBMISSION_BYTES + 1)
    for path in (big, "/dev/zero"):
        if not os.path.exists(path):
            continue
        assert "not a Jupyter notebook" in read_submission(path).problem
        with pytest.raises(ValueError, match="the submission"):
            notebook_json(path)


def test_a_real_notebook_still_reads(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "source": "x = 1\n", "metadata": {}, "outputs": []}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path = tmp_path / "ok.ipynb"
    path.write_text(json.dumps(notebook))
    assert notebook_json(path) == notebook == notebook_json(json.dumps(notebook))
    assert read_submission(path).problem in (None, "")
