"""A prediction edited after its measurement was shown is caught (mha.exercises.grading.predictions): the reveal
cell of the student edition prints the prediction's fingerprint and time, and the handed-in notebook keeps it."""

from __future__ import annotations

import json

import pytest
from conftest import load_script
from submissions import SECTION

from mha.exercises.checking import PredictionMissing, require_prediction
from mha.exercises.grading.predictions import prediction_records

student_edition = load_script("student_edition")


def reveal_as_run(notebook: dict, value_source: str, capsys) -> dict:
    """``notebook`` with its first prediction set to ``value_source`` and its reveal cell run (its output kept)."""
    changed = json.loads(json.dumps(notebook))
    cells = changed["cells"]
    guard = next(i for i, cell in enumerate(cells) if "require_prediction(my_prediction)" in "".join(cell["source"]))
    setting = max(i for i in range(guard) if "".join(cells[i]["source"]).startswith("my_prediction = None"))
    cells[setting]["source"] = f"my_prediction = {value_source}  # my reason\n"
    namespace: dict = {}
    exec(f"my_prediction = {value_source}", namespace)
    require_prediction(namespace["my_prediction"])
    cells[guard]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": capsys.readouterr().out}]
    return changed


def test_a_prediction_kept_after_its_reveal_passes_and_one_edited_afterwards_is_flagged(capsys):
    student, _ = student_edition.split_notebook(json.loads(SECTION.read_text()))
    assert [record.status for record in prediction_records(student)][:1] == ["never revealed"]
    revealed = reveal_as_run(student, "0.3", capsys)
    first = prediction_records(revealed)[0]
    assert first.name == "my_prediction" and first.status == "kept" and first.revealed_at.startswith("20")
    edited = json.loads(json.dumps(revealed))
    for cell in edited["cells"]:
        if "".join(cell["source"]).startswith("my_prediction = 0.3"):
            cell["source"] = "my_prediction = 0.9  # changed once the measurement was on screen\n"
    assert prediction_records(edited)[0].status == "edited after the reveal"
    assert prediction_records(reveal_as_run(student, "0.1 + 0.2", capsys))[0].status == "not checkable"


def test_no_prediction_still_refuses_to_reveal():
    with pytest.raises(PredictionMissing, match="No prediction yet"):
        require_prediction(None)
