"""scripts/grade_all.py: a folder of submissions graded through the otter plugin's path into a gradebook CSV.

The autograder is 1.1's, as scripts/grading.py writes its tests and configuration (points by difficulty), zipped
here without ``otter generate``; the submissions are the small numpy-only notebooks of tests/submissions.py, so
each isolated process starts in a fraction of a second. No submission here runs into the time limit, so it is one
that a right answer meets on a busy machine.
"""

from __future__ import annotations

import csv
import json
import zipfile

from conftest import load_script
from submissions import RIGHT, SECTION, notebook

grading = load_script("grading")
grade_all = load_script("grade_all")

NAIVE_SOFTMAX = "def my_softmax(scores):\n    e = np.exp(scores)\n    return e / e.sum(axis=-1, keepdims=True)\n"


def autograder(tmp_path):
    """1.1's autograder.zip: its test files and its otter_config.json (20 s a call, 512 MB)."""
    exercises = grading.exercises_of(json.loads(SECTION.read_text()))
    config = grading.otter_config(exercises)
    config["plugins"][0]["mha.exercises.grading.otter_plugin.IsolatedGrading"] |= {"seconds": 20, "memory_mb": 512}
    path = tmp_path / "autograder.zip"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("otter_config.json", json.dumps(config))
        for exercise in exercises:
            archive.writestr(f"tests/{exercise['label']}.py",
                             grading.test_file(exercise, grading.points_of(exercise)))
    return path, {e["label"]: grading.points_of(e) for e in exercises}


def test_a_folder_of_submissions_becomes_a_gradebook_with_a_row_for_each_exercise_and_a_bad_file(tmp_path):
    zipped, points = autograder(tmp_path)
    assert points == {"ex-stable-softmax": 2, "ex-attention": 3, "ex-causal-mask": 2}  # ★ 2, ★★ 3
    folder = tmp_path / "submissions"
    folder.mkdir()
    notebook(folder, RIGHT, name="ada")
    notebook(folder, RIGHT | {"my_softmax": NAIVE_SOFTMAX}, name="grace")
    (folder / "linus.ipynb").write_text("{ this is not json")
    gradebook = tmp_path / "gradebook.csv"
    assert grade_all.main([str(folder), "--autograder", str(zipped), "--out", str(gradebook)]) == 0
    with gradebook.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["student", "exercise", "points", "max_points", "message"]
    table = {(row["student"], row["exercise"]): (float(row["points"]), float(row["max_points"]), row["message"])
             for row in rows}
    assert len(rows) == len(table) == 9
    for exercise, top in points.items():
        assert table["ada", exercise][:2] == (top, top) and table["ada", exercise][2].startswith("✓")
    assert table["grace", "ex-stable-softmax"][0] == 0 and "exp overflows" in table["grace", "ex-stable-softmax"][2]
    assert table["grace", "ex-causal-mask"][:2] == (2, 2)
    for exercise, top in points.items():
        got, possible, said = table["linus", exercise]
        assert (got, possible) == (0, top) and "not a Jupyter notebook" in said, said


def test_a_zip_that_is_not_an_autograder_is_refused_with_what_to_pass(tmp_path):
    (tmp_path / "submissions").mkdir()
    notebook(tmp_path / "submissions", RIGHT, name="ada")
    wrong = tmp_path / "not_a.zip"
    wrong.write_text("plain text")
    try:
        grade_all.main([str(tmp_path / "submissions"), "--autograder", str(wrong), "--out", str(tmp_path / "g.csv")])
    except SystemExit as stop:
        assert "is not an autograder.zip" in str(stop) and "scripts/grading.py" in str(stop)
    else:
        raise AssertionError("a zip that is not an autograder was accepted")
